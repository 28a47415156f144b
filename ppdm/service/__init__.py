"""The job service: what runs on a party's node above the jobs it runs.

``ppdm.parties`` moves bytes and authenticates peers; this layer decides what runs and
keeps the record of it:

- :mod:`~ppdm.service.profiles`: each job's declared leakage (what it reads, who learns
  what, which parameters change that), as statements of :mod:`~ppdm.service.statement`;
  :mod:`~ppdm.service.input_versions`: what the audit follows an input by;
- :mod:`~ppdm.service.policy`: the data owner's policy and its evaluation; the policy as
  values in :mod:`~ppdm.service.policy_rules`, its file in :mod:`~ppdm.service.policy_file`,
  a job's rules and the decision in :mod:`~ppdm.service.policy_decision` (loaded with the
  first job, not at start);
- :mod:`~ppdm.service.disclosure`: the cross-job disclosure audit (the SUM auditor of
  :mod:`ppdm.hiding.audit` over party sets);
- :mod:`~ppdm.service.ledger`: the tamper-evident, hash-chained ledger and the job table
  that survives restarts (its file format :mod:`~ppdm.service.ledger_chain`, signed heads
  :mod:`~ppdm.service.ledger_heads`, the checks :mod:`~ppdm.service.ledger_verify`);
- :mod:`~ppdm.service.node`: the gRPC node (propose, approve, start, cancel, status),
  the node process built from :mod:`~ppdm.service.lifecycle` (the job lifecycle) and
  :mod:`~ppdm.service.peers` (channels, roster, certificates), served by
  :mod:`~ppdm.service.servicer`; :mod:`~ppdm.service.decision` is its decision on a job;
- :mod:`~ppdm.service.client`: the initiator's and the owner's calls (``ppdm job ...``).

Test beds (whole consortia on 127.0.0.1, network namespaces) are :mod:`ppdm.testbed`,
above this layer. See ``docs/governance.md``.
"""
