"""Output privacy (seed 000 section 20.4): association-rule hiding and query auditing.

Modules, bottom-up: :mod:`~ppdm.hiding.problem` (sensitive rules, the working copy),
:mod:`~ppdm.hiding.heuristics` (Verykios et al. 1.a-2.c, SWA, transaction removal),
:mod:`~ppdm.hiding.border` (Sun & Yu, Max-Min), :mod:`~ppdm.hiding.solvers` and
:mod:`~ppdm.hiding.exact` (integer programming), :mod:`~ppdm.hiding.metrics` (side effects),
:mod:`~ppdm.hiding.api` (:func:`hide_rules`), and :mod:`~ppdm.hiding.audit` (query
auditing). See ``docs/hiding.md``.
"""

from ppdm.hiding.api import METHODS, HidingResult, hide_rules
from ppdm.hiding.audit import MaxAuditor, SumAuditor, audit_log
from ppdm.hiding.metrics import SideEffects, side_effects
from ppdm.hiding.problem import (
    HidingError,
    SensitiveRule,
    load_sensitive_rules,
    parse_sensitive_rules,
)

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
