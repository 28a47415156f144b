"""The data owner's policy as values: the keys of its schema and their defaults, a rule on
one parameter (:class:`ParamRule`), the effective rules of a job (:class:`JobRules`) and
of a data set (:class:`DataRules`), a validated policy (:class:`Policy`) and a node's
answer to a job (:class:`Decision`).

The schema is described in :mod:`ppdm.service.policy` and ``docs/governance.md``; a policy
file is read by :mod:`ppdm.service.policy_file`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ppdm.service.profiles import get_profile

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
class ParamRule:
    """Allowed values of one job parameter: a list of ``values``, a numeric range
    ``[min, max]``, or ``any``."""

    values: tuple[Any, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None
    any: bool = False

    def allows(self, value: Any) -> bool:
        if self.any:
            return True
        if self.values is not None:
            return any(_same(value, v) for v in self.values)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if isinstance(value, float) and not math.isfinite(value):
            return False
        if self.minimum is not None and value < self.minimum:
            return False
        return not (self.maximum is not None and value > self.maximum)

    def describe(self) -> str:
        if self.any:
            return "any value"
        if self.values is not None:
            return "one of " + ", ".join(_show(v) for v in self.values)
        lo = "" if self.minimum is None else f">= {self.minimum:g}"
        hi = "" if self.maximum is None else f"<= {self.maximum:g}"
        return " and ".join(x for x in (lo, hi) if x) or "a number"


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return bool(a == b)


def _show(v: Any) -> str:
    return "null" if v is None else repr(v).lower() if isinstance(v, bool) else repr(v)


@dataclass(frozen=True)
class JobRules:
    """The effective rules of one job (defaults overlaid with its ``[jobs.NAME]`` table)."""

    allow: bool
    initiators: tuple[str, ...]
    co_parties: tuple[str, ...]
    min_parties: int
    max_parties: int
    consent: bool
    consent_timeout_s: float
    results: str
    rate_jobs: int
    rate_per_s: float
    colluders: int
    audit: bool = True
    params: Mapping[str, ParamRule] = field(default_factory=dict)
    #: The bounds on the disclosure statement (:data:`STATEMENT_KEYS`).
    statement: Mapping[str, Any] = field(default_factory=dict)


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


@dataclass(frozen=True)
class Decision:
    """A node's answer to a job: ``accept``, ``pending`` (owner approval needed) or
    ``refuse``; ``rule`` names the deciding rule and ``reason`` explains it without data."""

    outcome: Literal["accept", "pending", "refuse"]
    rule: str = ""
    reason: str = ""
    expires_s: float = 0.0
    results: str = "members"
    colluders: int = 1
    audit: bool = True
    #: The audit's bounds for the data set the job reads (``epsilon_budget``,
    #: ``max_probes``), after the data set's own rules.
    limits: Mapping[str, Any] = field(default_factory=dict)
    #: The local cause of a data-dependent refusal (a typo in ``[data]``, a database that
    #: is down): shown to this node's own owner only, never sent to a peer.
    cause: str = ""

    @property
    def refused(self) -> bool:
        return self.outcome == "refuse"
