"""The job service: what runs on a party's node above the jobs it runs.

``ppdm.parties`` moves bytes and authenticates peers; this layer decides what runs and
keeps the record of it:

- :mod:`~ppdm.service.profiles`: each job's declared leakage (what it reads, who learns
  what, which parameters change that);
- :mod:`~ppdm.service.policy`: the data owner's policy file and its evaluation;
- :mod:`~ppdm.service.disclosure`: the cross-job disclosure audit (the SUM auditor of
  :mod:`ppdm.hiding.audit` over party sets);
- :mod:`~ppdm.service.ledger`: the tamper-evident, hash-chained ledger and the job table
  that survives restarts;
- :mod:`~ppdm.service.node`: the gRPC node (propose, approve, start, cancel, status);
- :mod:`~ppdm.service.client`: the initiator's and the owner's calls (``ppdm job ...``).

Test beds (whole consortia on 127.0.0.1, network namespaces) are :mod:`ppdm.testbed`,
above this layer. See ``docs/governance.md``.
"""
