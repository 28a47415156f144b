"""Perturbation-based privacy: randomization at collection, randomized response / PRAM,
RA, anatomy, and the utility measures that compare them (docs/perturbation.md).

Modules, bottom-up: ``_table`` (coding, contingency tables) -> ``randomization``
(additive noise, Bayes / EM reconstruction, naive Bayes; seed 000 20.2),
``randomized_response`` (seed 004), ``ra`` (seed 002), ``anatomy`` (Xiao & Tao 2006;
seed 002 eq. 12-13) -> ``utility`` (seed 004 V, seed 002 7) -> ``evaluate``.
"""

from ppdm.anonymize.perturbation.anatomy import anatomy, permute_within_groups
from ppdm.anonymize.perturbation.ra import enhanced_ra, ra, random_anonymization
from ppdm.anonymize.perturbation.randomization import (
    Noise,
    RandomizedNaiveBayes,
    add_noise,
    bayes_reconstruct,
    em_reconstruct,
)
from ppdm.anonymize.perturbation.randomized_response import (
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
