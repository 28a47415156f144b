"""Differential privacy: exact samplers, mechanisms, a budget accountant and DP queries.

Seidl 2016 ("Differential Privacy": sensitivity, Laplace noise, exponential mechanism,
sequential and parallel composition) defines what is computed; the samplers follow
Canonne, Kamath and Steinke (2020) and Mironov (2012) so that no floating-point
Laplace is ever sampled (diffprivlib issues #19 and #94 show why). See
``docs/differential-privacy.md``.

Layers, bottom-up: :mod:`._exact` (exact Bernoulli trials) -> :mod:`.samplers`
(geometric, discrete Laplace, discrete Gaussian, exponential mechanism, full-precision
uniforms) -> :mod:`.mechanisms` -> :mod:`.accountant` (-> :mod:`.budget`, the persistent
budget of a data set) -> :mod:`.queries`.
"""

from ppdm.dp.accountant import BudgetAccountant, BudgetExceededError, ParallelGroup
from ppdm.dp.budget import BudgetFile
from ppdm.dp.mechanisms import (
    DiscreteGaussianMechanism,
    DiscreteLaplaceMechanism,
    ExponentialMechanism,
    SnappingMechanism,
    calibrate_discrete_gaussian,
    discrete_gaussian_delta,
)
from ppdm.dp.queries import dp_count, dp_histogram, dp_mean, dp_median, dp_sum
from ppdm.dp.samplers import (
    sample_discrete_gaussian,
    sample_discrete_laplace,
    sample_exponential_mechanism,
    sample_geometric,
    sample_uniform_float,
)
from ppdm.dp.sensitivity import (
    count_sensitivity,
    global_sensitivity,
    histogram_sensitivity,
    local_sensitivity,
    sum_sensitivity,
)

__all__ = [
    "BudgetAccountant",
    "BudgetExceededError",
    "BudgetFile",
    "DiscreteGaussianMechanism",
    "DiscreteLaplaceMechanism",
    "ExponentialMechanism",
    "ParallelGroup",
    "SnappingMechanism",
    "calibrate_discrete_gaussian",
    "count_sensitivity",
    "discrete_gaussian_delta",
    "dp_count",
    "dp_histogram",
    "dp_mean",
    "dp_median",
    "dp_sum",
    "global_sensitivity",
    "histogram_sensitivity",
    "local_sensitivity",
    "sample_discrete_gaussian",
    "sample_discrete_laplace",
    "sample_exponential_mechanism",
    "sample_geometric",
    "sample_uniform_float",
    "sum_sensitivity",
]
