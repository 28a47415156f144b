"""Perturbation-based privacy: randomization at collection, randomized response / PRAM,
RA, anatomy, and the utility measures that compare them (docs/perturbation.md).

Modules, bottom-up: ``_table`` (coding, contingency tables) -> ``randomization``
(additive noise, Bayes / EM reconstruction, naive Bayes; Aggarwal 2015, §20.2),
``randomized_response`` (Guo, Ying & Wu 2011), ``ra`` (Yang & Qiao 2010), ``anatomy`` (Xiao & Tao 2006;
Yang & Qiao 2010, eq. 12-13) -> ``utility`` (Guo, Ying & Wu 2011, §V, Yang & Qiao 2010, §7) -> ``evaluate``.
"""

from ppdm.perturb.anatomy import anatomy, permute_within_groups
from ppdm.perturb.ra import enhanced_ra, ra, random_anonymization
from ppdm.perturb.randomization import (
    Noise,
    RandomizedNaiveBayes,
    add_noise,
    bayes_reconstruct,
    em_reconstruct,
)
from ppdm.perturb.randomized_response import (
    disclosure_risk,
    em_estimate_table,
    estimate_table,
    optimal_parameters,
    randomized_response,
    warner_estimate,
    warner_randomize,
)

__all__ = [
    "Noise",
    "RandomizedNaiveBayes",
    "add_noise",
    "anatomy",
    "bayes_reconstruct",
    "disclosure_risk",
    "em_estimate_table",
    "em_reconstruct",
    "enhanced_ra",
    "estimate_table",
    "optimal_parameters",
    "permute_within_groups",
    "ra",
    "random_anonymization",
    "randomized_response",
    "warner_estimate",
    "warner_randomize",
]
