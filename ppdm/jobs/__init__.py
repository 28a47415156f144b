"""Jobs: named, parameterized runs of a protocol or mining task at every party.

A job is what ``ppdm job run NAME`` starts on the gRPC network and ``ppdm simulate NAME``
runs in process: each party runs the same :class:`JobSpec` function on its own network
endpoint, its own private inputs (from its :class:`PartyContext`) and the shared public
parameters. See :mod:`ppdm.jobs.registry`.
"""

from ppdm.jobs.registry import JobSpec, PartyContext, get_job, job_names, register_job

__all__ = ["JobSpec", "PartyContext", "get_job", "job_names", "register_job"]
