"""Test beds: whole consortia of real nodes on 127.0.0.1 (:mod:`~ppdm.testbed.consortia`)
and nodes in network namespaces behind a delaying relay (:mod:`~ppdm.testbed.netns`).

Used by tests, benchmarks and examples, never by a node: this package sits above the
service layer it starts.
"""
