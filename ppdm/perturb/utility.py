"""Utility measures shared by every perturbation and anonymization method.

A release is judged by what can be reconstructed from it: every method's output is
turned into an estimate of the original contingency table (``P^-1 lambda`` for
randomized response, uniform spreading inside generalized values for l-diversity,
uniform pairing inside groups for anatomy, the released records themselves for RA), and
compared with the original table:

* distribution distances of Guo, Ying & Wu 2011, §V: KL distance and chi-square distance
  between the original distribution ``P`` and the reconstruction ``Q``;
* average relative error ``|act - est| / act`` of count queries: Guo, Ying & Wu's (2011) base
  group-by query (every cell) and CUBE query (every marginal, including the grand
  total), and Yang & Qiao 2010, §7.2's random queries ``Q_1 in R_1 and ... and S in R_s``;
* the uncertainty coefficient ``U(X|Y) = (H(X) - H(X|Y)) / H(X)`` between attribute
  pairs (Guo, Ying & Wu 2011, §V.C.3);
* the recovery rate ``|Asso_D cap Asso_D'| / |Asso_D|`` of quasi-sensitive association
  rules ``q -> s`` mined with Apriori (Yang & Qiao 2010, §7.3; support 8%, confidence 15%).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from ppdm.randomness import RandomSource, make_rng

__all__ = [
    "CountQuery",
    "Rule",
    "answer_count_queries",
    "as_distribution",
    "base_query_error",
    "chi2_distance",
    "cube_query_error",
    "kl_distance",
    "mean_relative_error",
    "pairwise_uncertainty",
    "quasi_sensitive_rules",
    "random_count_queries",
    "rule_recovery_rate",
    "rules_from_table",
    "uncertainty_coefficient",
]


def as_distribution(x: np.ndarray, *, floor: float = 0.0) -> np.ndarray:
    """Clip negative cells of an estimate to 0, add ``floor`` to every cell, normalize.

    Unbiased estimates such as ``P^-1 lambda`` can have negative cells; a distance
    between distributions needs a distribution.

    >>> as_distribution(np.array([3.0, -1.0, 1.0])).tolist()
    [0.75, 0.0, 0.25]
    """
    q = np.clip(np.asarray(x, dtype=np.float64), 0.0, None) + floor
    total = q.sum()
    if total <= 0:
        raise ValueError("the estimate has no positive mass")
    return q / total


def kl_distance(p: np.ndarray, q: np.ndarray) -> float:
    """KL distance ``sum_i p_i ln(p_i / q_i)`` of the reconstruction ``q`` from ``p``.

    Both are normalized first; ``inf`` if ``q`` misses mass where ``p`` has some.

    >>> round(kl_distance(np.array([0.5, 0.5]), np.array([0.25, 0.75])), 4)
    0.1438
    """
    p = as_distribution(p).ravel()
    q = as_distribution(q).ravel()
    on = p > 0
    if np.any(q[on] <= 0):
        return float("inf")
    return float(np.sum(p[on] * np.log(p[on] / q[on])))


def kl_reconstruction(original: np.ndarray, estimate: np.ndarray, *, pseudo: float = 0.5) -> float:
    """KL distance of the other direction, ``KL(q || p)``: how far the reconstructed
    distribution ``q`` strays from the original ``p``, both from counts smoothed by
    ``pseudo`` records per cell (negative estimated cells clipped to 0 first).

    Guo, Ying & Wu 2011 (section V) compares methods by "KL distance" but its formula did not
    survive in the seed's text, so ppdm reports both directions: :func:`kl_distance`
    (``KL(p || q)``, which punishes a reconstruction for cells it leaves empty) and this
    one (which punishes mass placed where the original has little, e.g. anatomy's
    QI x S combinations that never occur). Adding half a record per cell is the usual
    way to keep both finite.

    >>> round(kl_reconstruction(np.array([10.0, 0.0]), np.array([8.0, 2.0])), 4)
    0.2025
    """
    p = np.asarray(original, dtype=np.float64).ravel() + pseudo
    q = np.clip(np.asarray(estimate, dtype=np.float64).ravel(), 0.0, None) + pseudo
    p /= p.sum()
    q /= q.sum()
    return float(np.sum(q * np.log(q / p)))


def chi2_distance(p: np.ndarray, q: np.ndarray) -> float:
    """Chi-square distance ``sum_i (p_i - q_i)^2 / (p_i + q_i)`` (symmetric form).

    The symmetric form stays finite when either distribution has empty cells, which
    sparse contingency tables and clipped estimates always have.

    >>> round(chi2_distance(np.array([0.5, 0.5]), np.array([0.25, 0.75])), 4)
    0.1333
    """
    p = as_distribution(p).ravel()
    q = as_distribution(q).ravel()
    on = (p + q) > 0
    return float(np.sum((p[on] - q[on]) ** 2 / (p[on] + q[on])))


def mean_relative_error(act: np.ndarray, est: np.ndarray) -> float:
    """Average of ``|act - est| / act`` over the answers with ``act > 0`` (Guo, Ying & Wu 2011)."""
    act = np.asarray(act, dtype=np.float64).ravel()
    est = np.asarray(est, dtype=np.float64).ravel()
    on = act > 0
    if not np.any(on):
        raise ValueError("no query has a positive answer")
    return float(np.mean(np.abs(act[on] - est[on]) / act[on]))


def base_query_error(original: np.ndarray, estimate: np.ndarray) -> float:
    """Guo, Ying & Wu's (2011) base group-by query over all attributes: the mean relative error over
    the non-empty cells of the original contingency table (both tables in counts)."""
    return mean_relative_error(original, estimate)


def cube_query_error(original: np.ndarray, estimate: np.ndarray) -> float:
    """Guo, Ying & Wu's (2011) ``GROUP BY CUBE(A_1, ..., A_m, S)``: the mean relative error over all
    groups of all ``2^(m+1)`` groupings (every marginal table and the grand total)."""
    original = np.asarray(original, dtype=np.float64)
    estimate = np.asarray(estimate, dtype=np.float64)
    if original.shape != estimate.shape:
        raise ValueError("tables of different shapes")
    axes = range(original.ndim)
    acts, ests = [], []
    for k in range(original.ndim + 1):
        for keep in combinations(axes, k):
            drop = tuple(a for a in axes if a not in keep)
            acts.append(original.sum(axis=drop).ravel())
            ests.append(estimate.sum(axis=drop).ravel())
    return mean_relative_error(np.concatenate(acts), np.concatenate(ests))


@dataclass(frozen=True)
class CountQuery:
    """``count(*) where A_j in values[j]`` for the constrained axes (``None``: any)."""

    values: tuple[tuple[int, ...] | None, ...]

    def masks(self, dims: Sequence[int]) -> list[np.ndarray | None]:
        out: list[np.ndarray | None] = []
        for d, vals in zip(dims, self.values, strict=True):
            if vals is None:
                out.append(None)
            else:
                m = np.zeros(d)
                m[list(vals)] = 1.0
                out.append(m)
        return out


def random_count_queries(
    dims: Sequence[int],
    count: int,
    *,
    qi_attributes: int,
    rng: int | RandomSource | None = None,
) -> list[CountQuery]:
    """Random queries of Yang & Qiao 2010, §7.2.2: the sensitive attribute (last axis) and
    ``qi_attributes`` QI attributes chosen uniformly, each with a random non-empty set of
    values of random size."""
    dims = tuple(int(d) for d in dims)
    m = len(dims) - 1
    if not 0 <= qi_attributes <= m:
        raise ValueError(f"qi_attributes must be between 0 and {m}")
    r = make_rng(rng)
    out = []
    for _ in range(count):
        chosen = set(r.permutation(m)[:qi_attributes].tolist()) | {m}
        vals: list[tuple[int, ...] | None] = []
        for j, d in enumerate(dims):
            if j not in chosen:
                vals.append(None)
                continue
            size = int(r.integers(1, d + 1, 1)[0])
            vals.append(tuple(sorted(r.permutation(d)[:size].tolist())))
        out.append(CountQuery(tuple(vals)))
    return out


def answer_count_queries(table: np.ndarray, queries: Sequence[CountQuery]) -> np.ndarray:
    """Answers of ``queries`` on a contingency table (counts): one contraction per axis."""
    table = np.asarray(table, dtype=np.float64)
    out = np.empty(len(queries))
    for k, q in enumerate(queries):
        t = table
        for m in reversed(q.masks(table.shape)):
            t = t.sum(axis=-1) if m is None else t @ m
        out[k] = float(t)
    return out


def _entropy(p: np.ndarray) -> float:
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


def uncertainty_coefficient(joint: np.ndarray) -> float:
    """``U(X|Y) = (H(X) - H(X|Y)) / H(X)`` for a 2-D table with ``X`` on the rows.

    The share of ``X``'s entropy explained by ``Y``: 0 for independent attributes, 1
    when ``Y`` determines ``X``. Negative estimated cells are clipped to 0.

    >>> uncertainty_coefficient(np.array([[5.0, 0.0], [0.0, 5.0]]))
    1.0
    >>> uncertainty_coefficient(np.array([[1.0, 1.0], [1.0, 1.0]]))
    0.0
    """
    j = as_distribution(joint)
    if j.ndim != 2:
        raise ValueError("need a 2-D table")
    hx = _entropy(j.sum(axis=1))
    if hx == 0:
        return 0.0
    mi = hx + _entropy(j.sum(axis=0)) - _entropy(j.ravel())
    return float(max(mi, 0.0) / hx)


def pairwise_uncertainty(table: np.ndarray) -> np.ndarray:
    """``U[i, j] = U(A_i | A_j)`` for every pair of axes of a contingency table."""
    table = np.asarray(table, dtype=np.float64)
    s = table.ndim
    out = np.eye(s)
    for i in range(s):
        for j in range(s):
            if i != j:
                drop = tuple(a for a in range(s) if a not in (i, j))
                m = table.sum(axis=drop)
                out[i, j] = uncertainty_coefficient(m if i < j else m.T)
    return out


#: A quasi-sensitive association ``{(axis, value), ...} -> sensitive value``.
Rule = tuple[tuple[tuple[int, int], ...], int]


def _mine(
    marginal: Callable[[tuple[int, ...]], np.ndarray],
    frequent_values: list[np.ndarray],
    total: float,
    *,
    min_support: float,
    min_confidence: float,
    max_length: int | None,
) -> dict[Rule, tuple[float, float]]:
    """Level-wise (Apriori) search over QI attribute subsets; ``marginal(axes)`` returns
    counts over the frequent values of the QI ``axes`` and all sensitive values."""
    m = len(frequent_values)
    rules: dict[Rule, tuple[float, float]] = {}
    alive: set[tuple[int, ...]] = {()}
    top = m if max_length is None else min(m, max_length)
    for size in range(1, top + 1):
        next_alive: set[tuple[int, ...]] = set()
        for axes in combinations(range(m), size):
            if any(sub not in alive for sub in combinations(axes, size - 1)):
                continue
            if any(len(frequent_values[a]) == 0 for a in axes):
                continue
            counts = marginal(axes)  # shape: frequent dims of axes + (d_s,)
            ante = counts.sum(axis=-1)
            hit = np.argwhere(counts >= min_support * total)
            if len(hit) == 0:
                continue
            next_alive.add(axes)
            for cell in hit:
                c = counts[tuple(cell)]
                a = ante[tuple(cell[:-1])]
                conf = c / a if a > 0 else 0.0
                if conf >= min_confidence:
                    items = tuple(
                        (ax, int(frequent_values[ax][v]))
                        for ax, v in zip(axes, cell[:-1], strict=True)
                    )
                    rules[(items, int(cell[-1]))] = (float(c / total), float(conf))
        alive = next_alive
        if not alive:
            break
    return rules


def quasi_sensitive_rules(
    codes: np.ndarray,
    dims: Sequence[int],
    *,
    min_support: float = 0.08,
    min_confidence: float = 0.15,
    max_length: int | None = None,
) -> dict[Rule, tuple[float, float]]:
    """Quasi-sensitive association rules ``q -> s`` of integer-coded records.

    ``codes`` has the QI columns first and the sensitive column last; a rule's
    antecedent is a set of ``(column, value)`` items on distinct QI columns, the
    consequent a sensitive value. Returns ``{rule: (support, confidence)}`` for every
    rule with support ``>= min_support`` and confidence ``>= min_confidence`` (Yang & Qiao 2010
    section 7.3: Apriori, 8% and 15%).
    """
    codes = np.asarray(codes, dtype=np.int64)
    dims = tuple(int(d) for d in dims)
    n = len(codes)
    m = len(dims) - 1
    freq_vals, reduced = [], np.full((n, m), -1, dtype=np.int64)
    for j in range(m):
        c = np.bincount(codes[:, j], minlength=dims[j])
        fv = np.flatnonzero(c >= min_support * n)
        freq_vals.append(fv)
        lut = np.full(dims[j], -1, dtype=np.int64)
        lut[fv] = np.arange(len(fv))
        reduced[:, j] = lut[codes[:, j]]

    def marginal(axes: tuple[int, ...]) -> np.ndarray:
        sub = reduced[:, list(axes)]
        ok = np.all(sub >= 0, axis=1)
        shape = (*(len(freq_vals[a]) for a in axes), dims[-1])
        idx = np.ravel_multi_index((*sub[ok].T, codes[ok, -1]), shape)
        return np.bincount(idx, minlength=int(np.prod(shape))).reshape(shape).astype(np.float64)

    return _mine(
        marginal,
        freq_vals,
        float(n),
        min_support=min_support,
        min_confidence=min_confidence,
        max_length=max_length,
    )


def rules_from_table(
    table: np.ndarray,
    *,
    min_support: float = 0.08,
    min_confidence: float = 0.15,
    max_length: int | None = None,
) -> dict[Rule, tuple[float, float]]:
    """:func:`quasi_sensitive_rules` on a contingency table (e.g. a reconstruction):
    supports are marginal sums; negative estimated cells are clipped to 0."""
    t = np.clip(np.asarray(table, dtype=np.float64), 0.0, None)
    total = float(t.sum())
    m = t.ndim - 1
    freq_vals = []
    for j in range(m):
        marg = t.sum(axis=tuple(a for a in range(t.ndim) if a != j))
        freq_vals.append(np.flatnonzero(marg >= min_support * total))

    def marginal(axes: tuple[int, ...]) -> np.ndarray:
        drop = tuple(a for a in range(m) if a not in axes)
        sub = t.sum(axis=drop)
        return sub[np.ix_(*[freq_vals[a] for a in axes], np.arange(t.shape[-1]))]

    return _mine(
        marginal,
        freq_vals,
        total,
        min_support=min_support,
        min_confidence=min_confidence,
        max_length=max_length,
    )


def rule_recovery_rate(original: Mapping[Rule, object], released: Mapping[Rule, object]) -> float:
    """``|Asso_D cap Asso_D'| / |Asso_D|`` (Yang & Qiao 2010, §7.3)."""
    if not original:
        raise ValueError("the original data has no rules at these thresholds")
    return len(set(original) & set(released)) / len(original)
