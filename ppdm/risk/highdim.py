"""Re-identification from a few known attributes in high-dimensional data.

Aggarwal 2015, §20.3.4 (the curse of dimensionality; the Netflix prize attack) and
exercises 14-16 of section 20.8:

* **Exercise 14** -- a friend's transaction contains a known pattern on ``B`` items;
  every item is bought independently with probability 1/2. The probability that at
  least one of ``n`` other customers has exactly the same pattern is
  ``1 - (1 - 2**-B)**n``, which is *at most* ``n / 2**B`` (union bound). For
  ``n = 10**4`` and ``B = 20`` the bound is 0.00954 (exactly 0.00949): with more than 99 %
  probability the pattern is unique, so her whole basket -- every other item she bought
  -- is exposed.
* **Exercise 15** -- ratings with ``R`` equally likely values: ``1 - (1 - R**-B)**n <=
  n / R**B``.
* **Exercise 16** -- a program that re-identifies the subject of a database from ``B``
  known attribute values: :func:`reidentify` (tabular) and
  :func:`reidentify_transactions` (market baskets), and :func:`simulate_reidentification`,
  which builds random databases, runs the program on them and puts the measured rate
  beside the closed form and the bound.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

from ppdm.extras import require
from ppdm.randomness import RandomSource, make_rng

__all__ = [
    "ReidentificationSimulation",
    "collision_bound",
    "collision_probability",
    "reidentify",
    "reidentify_transactions",
    "simulate_reidentification",
    "transaction_uniqueness",
]


def collision_probability(n: int, known: int, values: int = 2) -> float:
    """``1 - (1 - values**-known)**n``: some other individual shares the known pattern.

    >>> round(collision_probability(10_000, 20), 6)  # exercise 14
    0.009491
    """
    _check(n, known, values)
    q = float(values) ** (-known)
    return float(-math.expm1(n * math.log1p(-q))) if q < 1 else 1.0 if n else 0.0


def collision_bound(n: int, known: int, values: int = 2) -> float:
    """The union bound ``n / values**known`` of exercises 14 and 15.

    >>> collision_bound(10_000, 20)
    0.0095367431640625
    """
    _check(n, known, values)
    return n / float(values) ** known


def _check(n: int, known: int, values: int) -> None:
    if n < 0 or known < 0 or values < 2:
        raise ValueError("need n >= 0, known >= 0 and values >= 2")


def reidentify(database: pd.DataFrame | np.ndarray, known: Mapping[Any, object]) -> np.ndarray:
    """Exercise 16: positions of the rows that agree with every known attribute value.

    One row means the subject is re-identified (and all their other attributes are
    disclosed); several mean the attacker is left with that many candidates.

    >>> db = pd.DataFrame({"m1": [5, 3, 5, 1], "m2": [4, 4, 2, 4], "m3": [1, 2, 3, 4]})
    >>> reidentify(db, {"m1": 5, "m2": 4}).tolist()
    [0]
    """
    if isinstance(database, pd.DataFrame):
        ok = np.ones(len(database), dtype=bool)
        for col, val in known.items():
            if col not in database.columns:
                raise KeyError(f"unknown attribute {col!r}")
            ok &= (database[col] == val).to_numpy()
        return np.flatnonzero(ok)
    arr = np.asarray(database)
    if arr.ndim != 2:
        raise ValueError("database must be 2-dimensional")
    ok = np.ones(arr.shape[0], dtype=bool)
    for col, val in known.items():
        ok &= arr[:, int(col)] == val  # type: ignore[call-overload,index]
    return np.flatnonzero(ok)


def reidentify_transactions(
    transactions: Sequence[Iterable[int]] | Mapping[int, np.ndarray],
    known_items: Iterable[int],
) -> np.ndarray:
    """Transactions containing every known item (tid-list intersection).

    ``transactions`` is a list of baskets or a prebuilt ``{item: sorted tid array}``
    index (see :func:`_tid_index`).

    >>> reidentify_transactions([[1, 2, 3], [1, 3], [2, 3, 4]], [1, 3]).tolist()
    [0, 1]
    """
    index = transactions if isinstance(transactions, Mapping) else _tid_index(transactions)
    items = list(dict.fromkeys(known_items))
    if not items:
        raise ValueError("know at least one item")
    lists = sorted((index.get(i, np.empty(0, dtype=np.int64)) for i in items), key=len)
    out = lists[0]
    for tids in lists[1:]:
        if out.size == 0:
            break
        out = np.intersect1d(out, tids, assume_unique=True)
    return out


def _tid_index(transactions: Sequence[Iterable[int]]) -> dict[int, np.ndarray]:
    tids: list[int] = []
    items: list[int] = []
    for t, basket in enumerate(transactions):
        b = list(dict.fromkeys(basket))
        items.extend(b)
        tids.extend([t] * len(b))
    if not items:
        return {}
    it = np.asarray(items, dtype=np.int64)
    td = np.asarray(tids, dtype=np.int64)
    order = np.lexsort((td, it))
    it, td = it[order], td[order]
    cuts = np.flatnonzero(np.diff(it)) + 1
    return {int(i): t for i, t in zip(it[np.r_[0, cuts]], np.split(td, cuts), strict=True)}


def transaction_uniqueness(
    transactions: Sequence[Iterable[int]],
    known: int,
    *,
    targets: int = 1000,
    rng: int | RandomSource | None = None,
) -> float:
    """Share of sampled customers whose ``known`` random purchased items are contained in
    no other transaction (positive knowledge on real baskets, exercise 14's setting).

    Customers with fewer than ``known`` distinct items are not sampled.
    """
    rng = make_rng(rng)
    baskets = [np.unique(np.fromiter(t, dtype=np.int64)) for t in transactions]
    eligible = np.flatnonzero(np.array([len(b) >= known for b in baskets]))
    if eligible.size == 0:
        raise ValueError(f"no transaction has {known} items")
    index = _tid_index(baskets)
    picks = eligible[rng.integers(0, eligible.size, min(targets, eligible.size))]
    unique = 0
    for t in picks.tolist():
        basket = baskets[t]
        chosen = basket[rng.permutation(len(basket))[:known]]
        if len(reidentify_transactions(index, chosen.tolist())) == 1:
            unique += 1
    return unique / len(picks)


@dataclass(frozen=True)
class ReidentificationSimulation:
    """Measured and closed-form collision probabilities (exercise 16 vs 14/15)."""

    n: int
    known: int
    values: int
    trials: int
    measured_collision: float
    ci_low: float
    ci_high: float
    closed_form: float
    union_bound: float

    @property
    def reidentified(self) -> float:
        """Measured share of targets with a unique pattern."""
        return 1.0 - self.measured_collision

    def to_dict(self) -> dict[str, float | int]:
        out = asdict(self)
        out["reidentified"] = self.reidentified
        return out


def simulate_reidentification(
    n: int,
    known: int,
    values: int = 2,
    *,
    trials: int = 200,
    rng: int | RandomSource | None = None,
    max_cells: int = 1 << 24,
) -> ReidentificationSimulation:
    """Run :func:`reidentify` on ``trials`` random databases of ``n + 1`` individuals.

    Each database has ``known`` attributes with ``values`` equally likely values (the
    other attributes do not change who matches); row 0 is the target. A trial counts a
    collision when the program returns more than the target. The 95 % Clopper-Pearson
    interval of the measured rate is reported beside the closed form and the bound.
    """
    _check(n, known, values)
    if trials <= 0:
        raise ValueError("trials must be positive")
    rng = make_rng(rng)
    per_trial = (n + 1) * max(known, 1)
    batch = max(1, max_cells // per_trial)
    collisions = 0
    done = 0
    while done < trials:
        b = min(batch, trials - done)
        cells = _uniform_cells(rng, values, b * per_trial)
        dbs = cells.reshape(b, n + 1, max(known, 1))[:, :, :known]
        for db in dbs:
            target = {j: db[0, j] for j in range(known)}
            if len(reidentify(db, target)) > 1:
                collisions += 1
        done += b
    lo, hi = _clopper_pearson(collisions, trials)
    return ReidentificationSimulation(
        n=n,
        known=known,
        values=values,
        trials=trials,
        measured_collision=collisions / trials,
        ci_low=lo,
        ci_high=hi,
        closed_form=collision_probability(n, known, values),
        union_bound=collision_bound(n, known, values),
    )


def _uniform_cells(rng: RandomSource, values: int, size: int) -> np.ndarray:
    """``size`` values uniform on ``range(values)``; a masked byte when ``values`` is a
    power of two up to 256 (exactly uniform and 8x cheaper), else ``rng.integers``."""
    if values <= 256 and values & (values - 1) == 0:
        raw = np.frombuffer(rng.bytes(size), dtype=np.uint8)
        return (raw & np.uint8(values - 1)).astype(np.int16)
    return rng.integers(0, values, size).astype(np.int32)


def _clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    # scipy.stats on first use: importing it costs every ``ppdm risk`` start a second
    stats = require("scipy.stats", "stats", "ppdm.risk")
    a = (1 - level) / 2
    lo = 0.0 if k == 0 else float(stats.beta.ppf(a, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1 - a, k + 1, n - k))
    return lo, hi
