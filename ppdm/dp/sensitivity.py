"""Sensitivity of queries (Seidl 2016, "Sensitivity").

Seidl 2016 defines the sensitivity of ``f`` as the largest change ``||f(D2) - f(D1)||`` when
one record is added to or removed from ``D1``; the *local* sensitivity
``LS_f(x) = max_{d(x, x') = 1} ||f(x) - f(x')||_1`` and the *global* sensitivity
``GS_f = max_x LS_f(x)``. Noise is calibrated to the global sensitivity.

The closed forms below are for add/remove-one neighbours; :func:`local_sensitivity` and
:func:`global_sensitivity` compute the definitions by brute force on small domains (they
are the oracles the closed forms are tested against).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = [
    "count_sensitivity",
    "global_sensitivity",
    "histogram_sensitivity",
    "local_sensitivity",
    "median_utility_sensitivity",
    "sum_sensitivity",
]


def count_sensitivity() -> int:
    """A count changes by at most 1 when one record is added or removed.

    >>> count_sensitivity()
    1
    """
    return 1


def sum_sensitivity(lower: float, upper: float) -> float:
    """Sum of values clamped to ``[lower, upper]``: the added/removed record moves it by at
    most ``max(|lower|, |upper|)``.

    >>> sum_sensitivity(-2.0, 5.0)
    5.0
    """
    if lower > upper:
        raise ValueError("lower must not exceed upper")
    return float(max(abs(lower), abs(upper)))


def histogram_sensitivity(norm: str = "l1") -> int:
    """A histogram over a fixed set of bins: one record changes one bin by 1, so both the
    L1 and the L2 sensitivity are 1 (this is why the bins compose in parallel)."""
    if norm not in ("l1", "l2"):
        raise ValueError("norm must be 'l1' or 'l2'")
    return 1


def median_utility_sensitivity() -> int:
    """Utility ``-|2 #{v <= c} - n|`` of candidate ``c`` for the median: adding or removing
    one record changes ``2 #{v <= c} - n`` by exactly 1."""
    return 1


def _norm(a: Any, b: Any, norm: str) -> float:
    d = np.atleast_1d(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64))
    return float(np.abs(d).sum() if norm == "l1" else np.sqrt((d * d).sum()))


def local_sensitivity(
    f: Callable[[list[Any]], Any], data: Sequence[Any], domain: Sequence[Any], *, norm: str = "l1"
) -> float:
    """``LS_f(x)``: the largest change of ``f`` over all add/remove-one neighbours of
    ``data`` whose records come from ``domain`` (brute force).

    >>> local_sensitivity(sum, [1, 2, 3], domain=[0, 1, 2, 3, 4])
    4.0
    """
    base = f(list(data))
    best = 0.0
    for i in range(len(data)):
        best = max(best, _norm(base, f(list(data[:i]) + list(data[i + 1 :])), norm))
    for v in domain:
        best = max(best, _norm(base, f([*data, v]), norm))
    return best


def global_sensitivity(
    f: Callable[[list[Any]], Any], domain: Sequence[Any], *, max_size: int, norm: str = "l1"
) -> float:
    """``GS_f = max_x LS_f(x)`` over every multiset ``x`` of at most ``max_size`` records
    from ``domain`` (brute force; small domains only).

    >>> global_sensitivity(len, ["a", "b"], max_size=3)
    1.0
    """
    best = 0.0
    for size in range(max_size + 1):
        for x in itertools.combinations_with_replacement(domain, size):
            best = max(best, local_sensitivity(f, list(x), domain, norm=norm))
    return best
