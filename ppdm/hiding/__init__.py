"""Output privacy (Aggarwal 2015, §20.4): association-rule hiding and query auditing.

Modules, bottom-up: :mod:`~ppdm.hiding.problem` (sensitive rules, the working copy),
:mod:`~ppdm.hiding.heuristics` (Verykios et al. 1.a-2.c, SWA, transaction removal),
:mod:`~ppdm.hiding.border` (Sun & Yu, Max-Min), :mod:`~ppdm.hiding.solvers` and
:mod:`~ppdm.hiding.exact` (integer programming), :mod:`~ppdm.hiding.metrics` (side effects),
:mod:`~ppdm.hiding.api` (:func:`hide_rules`), and :mod:`~ppdm.hiding.audit` (query
auditing). See ``docs/hiding.md``.
"""

from __future__ import annotations

import importlib
from typing import Any

# Names are imported on first use (PEP 562), so that ``ppdm.hiding.audit`` -- which every
# node's disclosure audit uses -- does not pull in the MILP solver and scipy.
_WHERE = {
    "METHODS": "methods",
    "HidingResult": "api",
    "hide_rules": "api",
    "MaxAuditor": "audit",
    "SumAuditor": "audit",
    "audit_log": "audit",
    "SideEffects": "metrics",
    "side_effects": "metrics",
    "HidingError": "problem",
    "SensitiveRule": "problem",
    "load_sensitive_rules": "problem",
    "parse_sensitive_rules": "problem",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'ppdm.hiding' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"ppdm.hiding.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])


__all__ = [
    "METHODS",
    "HidingError",
    "HidingResult",
    "MaxAuditor",
    "SensitiveRule",
    "SideEffects",
    "SumAuditor",
    "audit_log",
    "hide_rules",
    "load_sensitive_rules",
    "parse_sensitive_rules",
    "side_effects",
]
