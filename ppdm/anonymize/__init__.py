"""Local anonymization of microdata before it is published or shared (Aggarwal 2015, §20.3; Xiong n.d.).

Layers, bottom-up:

* :mod:`~ppdm.anonymize.hierarchy` — value generalization hierarchies (ARX CSV format,
  numeric interval hierarchies);
* :mod:`~ppdm.anonymize.data` — loading tables, attribute roles;
* :mod:`~ppdm.anonymize.models` — k-anonymity, l-diversity (distinct, entropy, recursive),
  t-closeness (variational, KL, EMD), checked on sensitive-value counts per class;
* :mod:`~ppdm.anonymize.lattice` — full-domain generalization: Samarati, Incognito, an
  optimal Flash-style search and an exhaustive scan;
* :mod:`~ppdm.anonymize.metrics` — utility metrics of a release;
* :mod:`~ppdm.anonymize.release` — the :class:`Release` every algorithm returns;
* :mod:`~ppdm.anonymize.api` — :func:`anonymize`, the one entry point behind
  ``ppdm anonymize``.
"""

from ppdm.anonymize.api import anonymize, build_model
from ppdm.anonymize.data import AttributeRoles, load_table
from ppdm.anonymize.hierarchy import Hierarchy, load_hierarchies
from ppdm.anonymize.models import (
    DistinctLDiversity,
    EntropyLDiversity,
    KAnonymity,
    ModelSet,
    PrivacyModel,
    RecursiveCLDiversity,
    TCloseness,
    make_models,
)
from ppdm.anonymize.release import Release, make_release

__all__ = [
    "AttributeRoles",
    "DistinctLDiversity",
    "EntropyLDiversity",
    "Hierarchy",
    "KAnonymity",
    "ModelSet",
    "PrivacyModel",
    "RecursiveCLDiversity",
    "Release",
    "TCloseness",
    "anonymize",
    "build_model",
    "load_hierarchies",
    "load_table",
    "make_models",
    "make_release",
]
