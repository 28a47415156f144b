"""Differentially private count, sum, mean, histogram and median queries.

Each query takes ``epsilon`` (and ``delta`` for the Gaussian mechanism), an optional
:class:`~ppdm.dp.accountant.BudgetAccountant` which is charged *before* the data
are touched (an over-budget query raises and computes nothing), and ``rng``
(``None`` = ``os.urandom``). Neighbouring databases differ by adding or removing one
record (Seidl 2016). Domains -- histogram categories or bin edges, clamping bounds, median
candidates -- must be public: deriving them from the data would leak.

Mechanisms (``mechanism=``):

``"laplace"``
    counts and histograms: exact discrete Laplace; sums and means of real values:
    Mironov's snapping mechanism.
``"discrete_laplace"``
    sums and means: values rounded to a power-of-two grid, exact discrete Laplace on the
    integer sum (exactly ``epsilon``-DP, no floating-point caveat).
``"gaussian"``
    exact discrete Gaussian (on the grid for sums and means), ``(epsilon, delta)``-DP.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ppdm.dp.accountant import BudgetAccountant
from ppdm.dp.mechanisms import (
    DiscreteGaussianMechanism,
    DiscreteLaplaceMechanism,
    ExponentialMechanism,
    SnappingMechanism,
)
from ppdm.dp.samplers import RngLike
from ppdm.dp.sensitivity import sum_sensitivity
from ppdm.randomness import make_rng

__all__ = ["dp_count", "dp_histogram", "dp_mean", "dp_median", "dp_sum"]

_MECHANISMS = ("laplace", "discrete_laplace", "gaussian")


def _check_mechanism(mechanism: str, delta: float) -> None:
    if mechanism not in _MECHANISMS:
        raise ValueError(f"mechanism must be one of {_MECHANISMS}, not {mechanism!r}")
    if mechanism == "gaussian" and not 0 < delta < 1:
        raise ValueError("the Gaussian mechanism needs 0 < delta < 1")
    if mechanism != "gaussian" and delta:
        raise ValueError("delta is only used by the Gaussian mechanism")


def _integer_mechanism(
    mechanism: str, epsilon: float, delta: float, sensitivity: int
) -> DiscreteLaplaceMechanism | DiscreteGaussianMechanism:
    if mechanism == "gaussian":
        return DiscreteGaussianMechanism.from_privacy(
            epsilon=epsilon, delta=delta, sensitivity=sensitivity
        )
    return DiscreteLaplaceMechanism(epsilon=epsilon, sensitivity=sensitivity)


def _values(values: Any) -> np.ndarray:
    if isinstance(values, pd.DataFrame):
        raise ValueError("pass one column (a Series), not a DataFrame")
    return np.asarray(values)


def dp_count(
    data: Any,
    *,
    epsilon: float,
    delta: float = 0.0,
    mechanism: str = "laplace",
    accountant: BudgetAccountant | None = None,
    rng: RngLike = None,
    label: str = "count",
) -> int:
    """Noisy number of records (or of ``True`` entries when ``data`` is a boolean mask).

    Sensitivity 1. ``mechanism`` is ``"laplace"`` (exact discrete Laplace, the default)
    or ``"gaussian"`` (exact discrete Gaussian with ``delta``).

    >>> dp_count(np.arange(1000) % 3 == 0, epsilon=1.0, rng=0) in range(300, 370)
    True
    """
    _check_mechanism(mechanism, delta)
    if mechanism == "discrete_laplace":
        mechanism = "laplace"
    if accountant is not None:
        accountant.spend(epsilon, delta, label=label)
    arr = data if isinstance(data, pd.DataFrame) else _values(data)
    is_mask = not isinstance(arr, pd.DataFrame) and arr.dtype.kind == "b"
    true = int(np.count_nonzero(arr)) if is_mask else len(arr)
    return int(_integer_mechanism(mechanism, epsilon, delta, 1).randomise(true, rng=rng))


def dp_histogram(
    values: Any,
    *,
    epsilon: float,
    categories: Sequence[Any] | None = None,
    bins: Sequence[float] | None = None,
    delta: float = 0.0,
    mechanism: str = "laplace",
    non_negative: bool = False,
    accountant: BudgetAccountant | None = None,
    rng: RngLike = None,
    label: str = "histogram",
) -> pd.Series:
    """Noisy counts over public ``categories`` or numeric ``bins`` (edges).

    One record lands in one bin, so the bins are disjoint partitions and the whole
    histogram costs ``epsilon`` once (parallel composition, Seidl 2016); the accountant is
    charged through a :class:`~ppdm.dp.accountant.ParallelGroup`. Values outside
    the domain are not counted. Bins follow :func:`numpy.histogram` (``[e_i, e_i+1)``,
    the last bin closed). ``non_negative`` clips noisy counts at 0 (post-processing).

    >>> h = dp_histogram(["a", "b", "a", "c"] * 100, epsilon=1.0, categories=["a", "b", "c"], rng=0)
    >>> list(h.index), int(h.sum()) in range(380, 420)
    (['a', 'b', 'c'], True)
    """
    _check_mechanism(mechanism, delta)
    if mechanism == "discrete_laplace":
        mechanism = "laplace"
    if (categories is None) == (bins is None):
        raise ValueError("give exactly one of categories (public) and bins (public edges)")
    arr = _values(values)
    if categories is not None:
        cats = list(categories)
        if len(set(cats)) != len(cats):
            raise ValueError("categories must be distinct")
        counts = pd.Categorical(arr, categories=cats).value_counts().reindex(cats).to_numpy()
        index: pd.Index = pd.Index(cats)
    else:
        edges = np.asarray(bins, dtype=np.float64)
        if edges.ndim != 1 or edges.size < 2 or np.any(np.diff(edges) <= 0):
            raise ValueError("bins must be at least two increasing edges")
        counts, _ = np.histogram(arr.astype(np.float64), bins=edges)
        index = pd.IntervalIndex.from_breaks(edges, closed="left")
    if accountant is not None:
        with accountant.parallel(label=label) as group:
            for key in range(len(index)):
                group.spend(epsilon, delta, partition=key)
    mech = _integer_mechanism(mechanism, epsilon, delta, 1)
    noisy = mech.randomise(counts.astype(np.int64), rng=rng)
    if non_negative:
        noisy = np.maximum(noisy, 0)
    return pd.Series(noisy, index=index, name="count")


def _grid(lower: float, upper: float, granularity: float | None) -> float:
    if granularity is None:
        top = max(abs(lower), abs(upper), 2.0**-30)
        return 2.0 ** (math.ceil(math.log2(top)) - 20)
    m, _ = math.frexp(granularity)
    if granularity <= 0 or m != 0.5:
        raise ValueError("granularity must be a positive power of two (exact rounding)")
    return float(granularity)


def _clamped(values: Any, lower: float, upper: float) -> np.ndarray:
    if not lower <= upper:
        raise ValueError("need lower <= upper")
    arr = _values(values).astype(np.float64)
    if np.any(np.isnan(arr)):
        raise ValueError("values contain NaN")
    return np.clip(arr, lower, upper)


def _noisy_sum(
    clamped: np.ndarray,
    lower: float,
    upper: float,
    *,
    epsilon: float,
    delta: float,
    mechanism: str,
    bound: float | None,
    granularity: float | None,
    rng: RngLike,
) -> float:
    if mechanism == "laplace":
        sens = sum_sensitivity(lower, upper)
        if sens == 0:
            return 0.0
        snap = SnappingMechanism(
            epsilon=epsilon, sensitivity=sens, bound=bound if bound is not None else sens * 2.0**32
        )
        return float(snap.randomise(math.fsum(clamped.tolist()), rng=rng))
    g = _grid(lower, upper, granularity)
    q = np.rint(clamped / g).astype(np.int64)
    sens_q = int(max(abs(np.rint(lower / g)), abs(np.rint(upper / g)), 1))
    mech = _integer_mechanism(mechanism, epsilon, delta, sens_q)
    return float(mech.randomise(int(q.sum()), rng=rng)) * g


def dp_sum(
    values: Any,
    *,
    epsilon: float,
    lower: float,
    upper: float,
    delta: float = 0.0,
    mechanism: str = "laplace",
    bound: float | None = None,
    granularity: float | None = None,
    accountant: BudgetAccountant | None = None,
    rng: RngLike = None,
    label: str = "sum",
) -> float:
    """Noisy sum of values clamped to the public range ``[lower, upper]``.

    Sensitivity ``max(|lower|, |upper|)``. ``"laplace"`` uses the snapping mechanism with
    clamping bound ``bound`` (default ``2**32`` times the sensitivity: room for four
    billion records); ``"discrete_laplace"`` and ``"gaussian"`` round each value to a
    multiple of ``granularity`` (a power of two; default ``2**-20`` of the range) and add
    exact integer noise to the integer sum.

    >>> x = np.linspace(0, 10, 1001)
    >>> bool(abs(dp_sum(x, epsilon=1.0, lower=0, upper=10, rng=0) - x.sum()) < 200)
    True
    """
    _check_mechanism(mechanism, delta)
    clamped = _clamped(values, lower, upper)
    if accountant is not None:
        accountant.spend(epsilon, delta, label=label)
    return _noisy_sum(
        clamped,
        lower,
        upper,
        epsilon=epsilon,
        delta=delta,
        mechanism=mechanism,
        bound=bound,
        granularity=granularity,
        rng=rng,
    )


def dp_mean(
    values: Any,
    *,
    epsilon: float,
    lower: float,
    upper: float,
    delta: float = 0.0,
    mechanism: str = "laplace",
    granularity: float | None = None,
    accountant: BudgetAccountant | None = None,
    rng: RngLike = None,
    label: str = "mean",
) -> float:
    """Noisy mean: a noisy sum and a noisy count with ``epsilon / 2`` (and ``delta / 2``)
    each -- sequential composition -- divided, then clamped to ``[lower, upper]``.

    >>> x = np.full(10_000, 3.0)
    >>> abs(dp_mean(x, epsilon=1.0, lower=0, upper=10, rng=0) - 3.0) < 0.1
    True
    """
    _check_mechanism(mechanism, delta)
    clamped = _clamped(values, lower, upper)
    half_e, half_d = epsilon / 2, delta / 2
    if accountant is not None:
        if not accountant.can_spend(epsilon, delta):
            accountant.spend(epsilon, delta, label=label)  # raises with the message
        accountant.spend(half_e, half_d, label=f"{label}:sum")
        accountant.spend(half_e, half_d, label=f"{label}:count")
    rng = make_rng(rng)
    total = _noisy_sum(
        clamped,
        lower,
        upper,
        epsilon=half_e,
        delta=half_d,
        mechanism=mechanism,
        bound=None,
        granularity=granularity,
        rng=rng,
    )
    count_mech = "gaussian" if mechanism == "gaussian" else "laplace"
    count = dp_count(clamped, epsilon=half_e, delta=half_d, mechanism=count_mech, rng=rng)
    if count <= 0:
        return (lower + upper) / 2
    return float(np.clip(total / count, lower, upper))


def dp_median(
    values: Any,
    *,
    epsilon: float,
    candidates: Sequence[float],
    accountant: BudgetAccountant | None = None,
    rng: RngLike = None,
    label: str = "median",
) -> float:
    """Median by the exponential mechanism over public ``candidates``.

    Utility of candidate ``c``: ``-|2 #{v <= c} - n|`` (sensitivity 1), the classic
    example of the exponential mechanism for a non-numeric-noise answer (Seidl 2016).

    >>> dp_median(np.arange(1, 1000), epsilon=1.0, candidates=np.arange(0, 1001, 10), rng=0)
    500.0
    """
    cand = np.sort(np.asarray(candidates, dtype=np.float64))
    if cand.size == 0:
        raise ValueError("need at least one candidate")
    arr = np.sort(_values(values).astype(np.float64))
    if accountant is not None:
        accountant.spend(epsilon, 0, label=label)
    below = np.searchsorted(arr, cand, side="right")
    utility = -np.abs(2 * below - arr.size).astype(np.float64)
    idx = ExponentialMechanism(epsilon=epsilon, sensitivity=1).select(utility, rng=rng)
    return float(cand[idx])
