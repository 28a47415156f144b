"""What the policy makes of one proposed job: the rule on one of its parameters
(:class:`ParamRule`, from a ``[jobs.NAME.params]`` table), its effective rules
(:class:`JobRules`, from :meth:`ppdm.service.policy_rules.Policy.rules`) and the node's
answer (:class:`Decision`).

These values exist only once a job is proposed (the parameter rules: when the policy
has ``params`` tables), so they live apart from the policy's own
(:mod:`~ppdm.service.policy_rules`): a node parses its policy and serves without creating
these classes (each frozen dataclass costs its module's import about a millisecond;
issue 25, item 5). The names are importable from :mod:`ppdm.service.policy` and
:mod:`ppdm.service.policy_rules` as before.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Decision", "JobRules", "ParamRule"]


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
    #: The bounds on the disclosure statement (:data:`~ppdm.service.policy_rules.STATEMENT_KEYS`).
    statement: Mapping[str, Any] = field(default_factory=dict)


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
