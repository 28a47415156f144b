"""Attacks on releases and re-identification risk.

Aggarwal 2015, §20.3 (linkage through quasi-identifiers, tables 20.1-20.3; homogeneity
in 20.3.2; the curse of dimensionality in 20.3.4 and exercises 14-16) and Seidl 2016
(linkage, unsorted, homogeneity and background-knowledge attacks) define the attacks;
the prosecutor, journalist and marketer risk measures follow El Emam and Dankar (2008)
and Dankar and El Emam (2010). See ``docs/risk.md``.

Modules, bottom-up: :mod:`.matching` (does a generalized label cover a value?) ->
:mod:`.linkage` -> :mod:`.reidentification`, :mod:`.attribute`, :mod:`.highdim` ->
:mod:`.report`.
"""

from ppdm.risk.attribute import (
    background_knowledge_attack,
    background_knowledge_check,
    equivalence_class_table,
    homogeneity_attack,
)
from ppdm.risk.highdim import (
    ReidentificationSimulation,
    collision_bound,
    collision_probability,
    reidentify,
    reidentify_transactions,
    simulate_reidentification,
    transaction_uniqueness,
)
from ppdm.risk.linkage import LinkageResult, linkage_attack
from ppdm.risk.matching import cover_matrix, covers, load_hierarchy
from ppdm.risk.reidentification import (
    ReidentificationRisk,
    journalist_risk,
    marketer_risk,
    prosecutor_risk,
    reidentification_risk,
)
from ppdm.risk.report import risk_report

__all__ = [
    "LinkageResult",
    "ReidentificationRisk",
    "ReidentificationSimulation",
    "background_knowledge_attack",
    "background_knowledge_check",
    "collision_bound",
    "collision_probability",
    "cover_matrix",
    "covers",
    "equivalence_class_table",
    "homogeneity_attack",
    "journalist_risk",
    "linkage_attack",
    "load_hierarchy",
    "marketer_risk",
    "prosecutor_risk",
    "reidentification_risk",
    "reidentify",
    "reidentify_transactions",
    "risk_report",
    "simulate_reidentification",
    "transaction_uniqueness",
]
