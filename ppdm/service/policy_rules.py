"""The data owner's policy as values: the keys of its schema and their defaults, a rule on
one parameter (:class:`ParamRule`), the effective rules of a job (:class:`JobRules`) and
of a data set (:class:`DataRules`), a validated policy (:class:`Policy`) and a node's
answer to a job (:class:`Decision`). The rules of a job and of its parameters and the
answer are made only for a proposed job (or a policy with ``params`` tables): they are
:mod:`~ppdm.service.policy_decision`'s, imported from here at first use.

The schema is described in :mod:`ppdm.service.policy` and ``docs/governance.md``; a policy
file is read by :mod:`ppdm.service.policy_file`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ppdm.service.policy_decision import Decision as Decision
    from ppdm.service.policy_decision import JobRules as JobRules
    from ppdm.service.policy_decision import ParamRule as ParamRule

#: Keys that bound a job's disclosure statement: in [defaults], [jobs.NAME] and per data
#: set ([data.KEY] / [inputs.KEY]); the data set's value wins for jobs that read it.
STATEMENT_KEYS = (
    "min_aggregate",
    "min_party_records",
    "allow_records",
    "exact_partners",
    "max_epsilon",
    "epsilon_budget",
    "max_set_ratio",
    "max_probes",
    "reveal_size",
)
_DEFAULT_KEYS = {
    "jobs",
    "initiators",
    "co_parties",
    "min_parties",
    "max_parties",
    "consent",
    "consent_timeout_s",
    "results",
    "rate_limit",
    "colluders",
    "audit",
    *STATEMENT_KEYS,
}
#: What the generated policy and a policy without these keys apply.
STATEMENT_DEFAULTS: dict[str, Any] = {
    "min_aggregate": 10,
    "min_party_records": 3,
    "allow_records": False,
    "exact_partners": (),
    "max_epsilon": 1.0,
    "epsilon_budget": 10.0,
    "max_set_ratio": 2.0,
    "max_probes": 20,
    "reveal_size": True,
}
_JOB_KEYS = (_DEFAULT_KEYS - {"jobs"}) | {"allow", "params"}
_DATA_KEYS = {
    "jobs",
    "columns",
    "min_parties",
    "min_cluster_size",
    "min_support",
    "explicit_centres",
    "consent",
    *STATEMENT_KEYS,
}


@dataclass(frozen=True)
class DataRules:
    jobs: tuple[str, ...] = ("*",)
    columns: tuple[str, ...] | None = None
    min_parties: int | None = None
    min_cluster_size: int | None = None
    min_support: float | None = None
    explicit_centres: bool = False
    consent: bool | None = None
    #: Overrides of :data:`STATEMENT_KEYS` for jobs that read this data set.
    statement: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Policy:
    """A validated policy (see the module docstring for the schema)."""

    defaults: Mapping[str, Any]
    jobs: Mapping[str, Mapping[str, Any]]
    data: Mapping[str, DataRules]
    source: str = "<default>"
    #: ``[notify] pending``: the command a node runs for every job awaiting approval
    notify_pending: tuple[str, ...] = ()
    notify_timeout_s: float = 10.0

    def rules(self, job: str) -> JobRules:
        from ppdm.service.policy_decision import JobRules
        from ppdm.service.profiles import get_profile

        d = {**self.defaults, **{k: v for k, v in self.jobs.get(job, {}).items() if k != "params"}}
        listed = self.defaults["jobs"]
        known = get_profile(job) is not None
        allow = d.get("allow", ("*" in listed and known) or job in listed)
        rate = d["rate_limit"]
        params = self.jobs.get(job, {}).get("params", {})
        return JobRules(
            allow=bool(allow),
            initiators=tuple(d["initiators"]),
            co_parties=tuple(d["co_parties"]),
            min_parties=int(d["min_parties"]),
            max_parties=int(d["max_parties"]),
            consent=bool(d["consent"]),
            consent_timeout_s=float(d["consent_timeout_s"]),
            results=str(d["results"]),
            rate_jobs=int(rate["jobs"]),
            rate_per_s=float(rate["per_s"]),
            colluders=int(d["colluders"]),
            audit=bool(d["audit"]),
            params=params,
            statement={k: d[k] for k in STATEMENT_KEYS},
        )

    def data_rules(self, key: str) -> DataRules:
        """Rules of ``"inputs.X"`` or ``"data.X"`` (defaults if the policy has none)."""
        return self.data.get(key, DataRules())


def __getattr__(name: str) -> Any:
    """:class:`ParamRule`, :class:`JobRules` and :class:`Decision`, from
    :mod:`~ppdm.service.policy_decision` at first use (a node's start does not create
    them)."""
    if name in ("Decision", "JobRules", "ParamRule"):
        from ppdm.service import policy_decision

        return getattr(policy_decision, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
