"""Random anonymization (RA) and enhanced RA (Yang & Qiao 2010: Yang & Qiao 2010).

RA (Yang & Qiao 2010, algorithm 1) breaks the link between a record's quasi-identifier and its
sensitive value without generalizing anything: for every record one QI attribute ``Q_k``
is chosen with probability ``p_k`` and its value is replaced by a fresh draw from that
attribute's own distribution ``Dist_k`` in the original data. Enhanced RA (algorithm 2)
replaces ``lambda`` attributes per record, chosen uniformly. Marginal distributions are
preserved exactly in expectation; joint supports are biased, more so for longer
combinations (proposition 12).

Privacy measures:

* probabilistic anonymity ``Pa(D')`` (definition 6, equation 1 of the proof of
  proposition 7): ``ln Pa = sum_i p_i (Entropy(Q_i) - ln p_i)``, maximal when
  ``p_i ~ e^{Entropy(Q_i)}`` (proposition 7), where it equals ``sum_i e^{Entropy(Q_i)}``;
* gamma-amplification of a released combination ``q'`` (definition 8, section 4.2.2) and
  the largest probability of inferring the original combination (equation 6, bounded
  by proposition 10);
* relative difference ``R(q)`` and relative bias ``B(q) = |E R(q)|`` of supports
  (section 5.2, equation 10).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import pandas as pd

from ppdm.errors import ConfigError
from ppdm.perturb._table import encode
from ppdm.randomness import RandomSource, make_rng

__all__ = [
    "RARelease",
    "attribute_distributions",
    "enhanced_ra",
    "entropy",
    "expected_relative_bias",
    "expected_support",
    "gamma_amplification",
    "inference_probability",
    "optimal_selection_probabilities",
    "probabilistic_anonymity",
    "ra",
    "random_anonymization",
    "relative_difference",
]


def entropy(freq: np.ndarray) -> float:
    """Shannon entropy (natural log) of a frequency vector.

    >>> round(entropy(np.array([0.5, 0.5])), 6) == round(math.log(2), 6)
    True
    """
    f = np.asarray(freq, dtype=np.float64)
    f = f[f > 0] / f.sum()
    return float(-(f * np.log(f)).sum())


def attribute_distributions(codes: np.ndarray, dims: Sequence[int]) -> list[np.ndarray]:
    """``Dist_i``: the frequency of every value of every column (Yang & Qiao 2010, algorithm 1)."""
    codes = np.asarray(codes, dtype=np.int64)
    return [np.bincount(codes[:, j], minlength=d) / len(codes) for j, d in enumerate(dims)]


def optimal_selection_probabilities(dists: Sequence[np.ndarray]) -> np.ndarray:
    """``p_i = e^{Entropy(Q_i)} / sum_j e^{Entropy(Q_j)}`` (Yang & Qiao 2010, proposition 7).

    >>> optimal_selection_probabilities([np.array([0.5, 0.5]), np.array([1.0])]).tolist()
    [0.6666666666666666, 0.3333333333333333]
    """
    h = np.array([entropy(d) for d in dists])
    w = np.exp(h - h.max())
    return w / w.sum()


def probabilistic_anonymity(dists: Sequence[np.ndarray], p: Sequence[float] | np.ndarray) -> float:
    """``Pa(D')`` with ``ln Pa = sum_i p_i (Entropy(Q_i) - ln p_i)`` (Yang & Qiao 2010, eq. 1).

    Yang & Qiao 2010, §6: the data of its Fig. 1 (Age, Job, Country) with ``p_i = 1/3``
    has probabilistic anonymity "about 11":

    >>> dists = [np.array([1, 4, 1, 3, 1]) / 10, np.array([1, 4, 2, 1, 2]) / 10,
    ...          np.array([6, 1, 2, 1]) / 10]
    >>> round(probabilistic_anonymity(dists, [1 / 3] * 3), 2)
    11.3
    >>> round(probabilistic_anonymity(dists, optimal_selection_probabilities(dists)), 2)
    11.45
    """
    pv = np.asarray(p, dtype=np.float64)
    if len(pv) != len(dists):
        raise ValueError("one selection probability per attribute")
    if np.any(pv < 0) or not math.isclose(float(pv.sum()), 1.0, rel_tol=1e-9):
        raise ValueError("selection probabilities must be non-negative and sum to 1")
    h = np.array([entropy(d) for d in dists])
    nz = pv > 0
    return float(math.exp(np.sum(pv[nz] * (h[nz] - np.log(pv[nz])))))


def _choice(r: RandomSource, n: int, size: int, p: np.ndarray) -> np.ndarray:
    """``size`` draws from ``range(n)`` with probabilities ``p`` (inverse CDF)."""
    cdf = np.cumsum(np.asarray(p, dtype=np.float64))
    idx = np.searchsorted(cdf / cdf[-1], r.random(size), side="right")
    return np.minimum(idx, n - 1).astype(np.int64)


def _replace(
    codes: np.ndarray, selected: np.ndarray, dists: Sequence[np.ndarray], r: RandomSource
) -> np.ndarray:
    out = codes.copy()
    for j, dist in enumerate(dists):
        rows = np.flatnonzero(selected[:, j])
        if rows.size:
            out[rows, j] = _choice(r, len(dist), rows.size, dist)
    return out


def ra(
    codes: np.ndarray,
    dims: Sequence[int],
    *,
    p: Sequence[float] | np.ndarray | None = None,
    rng: int | RandomSource | None = None,
) -> np.ndarray:
    """The RA algorithm (Yang & Qiao 2010, algorithm 1) on integer-coded QI columns.

    Every record gets one QI attribute ``k`` chosen with probability ``p[k]`` (default:
    proposition 7's optimum) and a new value for it drawn from ``Dist_k``.
    """
    codes = np.asarray(codes, dtype=np.int64)
    n, m = codes.shape
    dists = attribute_distributions(codes, dims)
    probs = optimal_selection_probabilities(dists) if p is None else np.asarray(p, float)
    if len(probs) != m or np.any(probs < 0) or not math.isclose(float(probs.sum()), 1.0):
        raise ConfigError("p must give one non-negative probability per QI attribute, sum 1")
    r = make_rng(rng)
    k = _choice(r, m, n, probs)
    selected = np.zeros((n, m), dtype=bool)
    selected[np.arange(n), k] = True
    return _replace(codes, selected, dists, r)


def enhanced_ra(
    codes: np.ndarray,
    dims: Sequence[int],
    *,
    lam: int,
    rng: int | RandomSource | None = None,
) -> np.ndarray:
    """Enhanced RA (Yang & Qiao 2010, algorithm 2): ``lam`` QI attributes per record, chosen
    uniformly without replacement, get new values drawn from their ``Dist``."""
    codes = np.asarray(codes, dtype=np.int64)
    n, m = codes.shape
    if not 1 <= lam <= m:
        raise ConfigError(f"lambda must be between 1 and the number of QI attributes ({m})")
    dists = attribute_distributions(codes, dims)
    r = make_rng(rng)
    keys = r.random(n * m).reshape(n, m)
    rank = np.argsort(np.argsort(keys, axis=1), axis=1)
    return _replace(codes, rank < lam, dists, r)


@dataclass
class RARelease:
    """An RA-anonymized table: QI values re-drawn, other columns unchanged."""

    data: pd.DataFrame
    qi: tuple[str, ...]
    lam: int
    p: tuple[float, ...] | None
    anonymity: float | None


def random_anonymization(
    table: pd.DataFrame,
    *,
    qi: Sequence[str],
    lam: int = 1,
    p: Sequence[float] | None = None,
    rng: int | RandomSource | None = None,
) -> RARelease:
    """RA (``lam = 1``, selection probabilities ``p`` or proposition 7's) or enhanced RA
    (``lam > 1``, uniform selection) of the ``qi`` columns of ``table``."""
    qi = tuple(qi)
    enc = encode(table, qi)
    if lam == 1:
        dists = attribute_distributions(enc.codes, enc.dims)
        probs = optimal_selection_probabilities(dists) if p is None else np.asarray(p, float)
        new = ra(enc.codes, enc.dims, p=probs, rng=rng)
        pa: float | None = probabilistic_anonymity(dists, probs)
        p_out: tuple[float, ...] | None = tuple(float(x) for x in probs)
    else:
        if p is not None:
            raise ConfigError("enhanced RA (lambda > 1) selects attributes uniformly; drop p")
        new = enhanced_ra(enc.codes, enc.dims, lam=lam, rng=rng)
        pa, p_out = None, None
    out = table.copy()
    decoded = enc.decode(new)
    for col in qi:
        out[col] = decoded[col].to_numpy()
    return RARelease(out, qi, lam, p_out, pa)


def _matches(codes: np.ndarray, attrs: Sequence[int], values: Sequence[int]) -> np.ndarray:
    mask = np.ones(len(codes), dtype=bool)
    for a, v in zip(attrs, values, strict=True):
        mask &= codes[:, a] == v
    return mask


def expected_support(
    codes: np.ndarray,
    dims: Sequence[int],
    attrs: Sequence[int],
    values: Sequence[int],
    *,
    p: Sequence[float] | None = None,
    lam: int | None = None,
    fixed: np.ndarray | None = None,
) -> float:
    """Exact expected support (fraction) of ``q = {attrs = values}`` after RA.

    ``p``: algorithm 1 with selection probabilities ``p``; ``lam``: algorithm 2.
    ``fixed`` restricts to records that satisfy further conditions on unperturbed
    columns (e.g. the sensitive value of a quasi-sensitive association). For algorithm 2
    the chosen set ``T`` meets the ``L = |q|`` attributes of ``q`` in a set ``S`` with
    probability ``C(m - L, lam - |S|) / C(m, lam)``; a record then matches ``q`` with
    probability ``prod_{i in S} Pr(Q_i = q_i)`` if it matches ``q`` outside ``S``.
    """
    codes = np.asarray(codes, dtype=np.int64)
    n, m = codes.shape
    dists = attribute_distributions(codes, dims)
    base = np.ones(n, dtype=bool) if fixed is None else np.asarray(fixed, dtype=bool)
    attrs = list(attrs)
    values = list(values)
    pv = [float(dists[a][v]) for a, v in zip(attrs, values, strict=True)]
    total = 0.0
    if (p is None) == (lam is None):
        raise ValueError("give exactly one of p (algorithm 1) or lam (algorithm 2)")
    if p is not None:
        probs = np.asarray(p, float)
        stay = 1.0 - sum(probs[a] for a in attrs)
        total += stay * np.count_nonzero(base & _matches(codes, attrs, values))
        for k, a in enumerate(attrs):
            rest = [x for x in range(len(attrs)) if x != k]
            cnt = np.count_nonzero(
                base & _matches(codes, [attrs[x] for x in rest], [values[x] for x in rest])
            )
            total += probs[a] * pv[k] * cnt
        return total / n
    big_l = len(attrs)
    if lam is None or not 1 <= lam <= m:
        raise ValueError("lam must be between 1 and the number of columns")
    denom = math.comb(m, lam)
    for size in range(0, min(lam, big_l) + 1):
        w = math.comb(m - big_l, lam - size) / denom
        if w == 0:
            continue
        for chosen in combinations(range(big_l), size):
            rest = [x for x in range(big_l) if x not in chosen]
            cnt = np.count_nonzero(
                base & _matches(codes, [attrs[x] for x in rest], [values[x] for x in rest])
            )
            total += w * math.prod(pv[x] for x in chosen) * cnt
    return total / n


def expected_relative_bias(
    codes: np.ndarray,
    dims: Sequence[int],
    attrs: Sequence[int],
    values: Sequence[int],
    *,
    p: Sequence[float] | None = None,
    lam: int | None = None,
    fixed: np.ndarray | None = None,
) -> float:
    """Relative bias ``B(q) = |E R(q)|`` (Yang & Qiao 2010, §5.2).

    For algorithm 1 this equals ``|sum_i p_i (1 / lift(q_i, q - q_i) - 1)|`` (equation 10
    with ``p_i`` in place of ``1/m``).
    """
    codes = np.asarray(codes, dtype=np.int64)
    base = np.ones(len(codes), bool) if fixed is None else np.asarray(fixed, bool)
    supp = np.count_nonzero(base & _matches(codes, attrs, values)) / len(codes)
    if supp == 0:
        raise ValueError("q does not occur in the original data")
    e = expected_support(codes, dims, attrs, values, p=p, lam=lam, fixed=fixed)
    return abs(e / supp - 1.0)


def relative_difference(
    original: np.ndarray, anonymized: np.ndarray, attrs: Sequence[int], values: Sequence[int]
) -> float:
    """``R(q) = (supp_D'(q) - supp_D(q)) / supp_D(q)`` (Yang & Qiao 2010, §5.2), a fraction."""
    s = np.count_nonzero(_matches(np.asarray(original), attrs, values))
    if s == 0:
        raise ValueError("q does not occur in the original data")
    s2 = np.count_nonzero(_matches(np.asarray(anonymized), attrs, values))
    return (s2 - s) / s


def _neighbours(codes: np.ndarray, qprime: Sequence[int]) -> list[tuple[int, np.ndarray]]:
    """For every attribute ``w``: the supports (counts) of the combinations in ``D``
    that differ from ``q'`` exactly in attribute ``w``."""
    m = codes.shape[1]
    eq = codes == np.asarray(qprime)[None, :]
    n_eq = eq.sum(axis=1)
    out = []
    for w in range(m):
        rows = (n_eq == m - 1) & ~eq[:, w]
        _, counts = np.unique(codes[rows, w], return_counts=True)
        out.append((w, counts.astype(np.float64)))
    return out


def _ra_terms(
    codes: np.ndarray, dims: Sequence[int], qprime: Sequence[int], p: Sequence[float] | None
) -> tuple[float, list[tuple[int, np.ndarray, float]]]:
    codes = np.asarray(codes, dtype=np.int64)
    n, m = codes.shape
    dists = attribute_distributions(codes, dims)
    probs = np.full(m, 1.0 / m) if p is None else np.asarray(p, float)
    pq = np.array([dists[i][qprime[i]] for i in range(m)])
    self_supp = np.count_nonzero(np.all(codes == np.asarray(qprime)[None, :], axis=1)) / n
    own = self_supp * float(np.sum(probs * pq))
    terms = [(w, counts / n, float(probs[w] * pq[w])) for w, counts in _neighbours(codes, qprime)]
    return own, terms


def gamma_amplification(
    codes: np.ndarray,
    dims: Sequence[int],
    qprime: Sequence[int],
    *,
    p: Sequence[float] | None = None,
) -> float:
    """gamma-amplification of the released QI combination ``q'`` (Yang & Qiao 2010, §4.2.2).

    ``gamma_q' = max_q supp_D(q') sum_i p_i Pr(Q_i = q'_i) / (supp_D(q) p_w Pr(Q_w = q'_w))``
    over the combinations ``q`` of ``D`` that differ from ``q'`` in one attribute ``w``
    (the seed's formula, with ``p_i = 1/m`` by default); ratios below 1 are inverted.
    Returns ``inf`` when ``q'`` can only come from one of the two kinds of records.
    """
    own, terms = _ra_terms(codes, dims, qprime, p)
    ratios = [own / (s * c) for _, supps, c in terms for s in supps if s * c > 0]
    if not ratios or own == 0:
        return math.inf
    return float(max(max(r, 1.0 / r) for r in ratios))


def inference_probability(
    codes: np.ndarray,
    dims: Sequence[int],
    qprime: Sequence[int],
    *,
    p: Sequence[float] | None = None,
) -> float:
    """Largest probability of guessing the original of ``q'`` (Yang & Qiao 2010 equation 6):
    ``maxSupp / (sum_q supp_D(q) p_w Pr(Q_w = q'_w) + supp_D(q') sum_i p_i Pr(Q_i = q'_i))``
    with ``p_i = 1/m`` by default; bounded by proposition 10."""
    own, terms = _ra_terms(codes, dims, qprime, p)
    parts = [own] + [float(s * c) for _, supps, c in terms for s in supps]
    total = sum(parts)
    return max(parts) / total if total > 0 else 0.0
