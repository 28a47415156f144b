"""Anatomy (Xiao & Tao, VLDB 2006) and permutation of sensitive values within groups.

Anatomy partitions the records into l-diverse QI-groups and publishes two tables: the
quasi-identifier table (QIT: every record's exact QI values and its group id) and the
sensitive table (ST: per group, each sensitive value and its count). The link between a
record and its sensitive value inside a group is lost, so an attacker who knows a
target's QI values learns his sensitive value with probability at most ``1/l``.

The group-creation step of Xiao & Tao: hash the records into buckets by sensitive value;
while at least ``l`` buckets are non-empty, take one record from each of the ``l``
largest buckets to form a group; then every residual record (at most ``l - 1``, from
distinct buckets) joins a group that does not yet contain its sensitive value. A table is
eligible iff no sensitive value occurs in more than ``n / l`` records. Every group then
has ``l`` (or ``l + 1``) distinct sensitive values, each once: frequency l-diversity.

The permutation method (Yang & Qiao 2010, Fig. 4) keeps one table but shuffles the sensitive
values within every group.

Count queries ``select count(*) where Q_1 in R_1 and ... and S in R_s`` are estimated as
in Yang & Qiao 2010, §7.2.1: equation 13 on anatomized / permuted tables
(:func:`count_query_permuted`), equation 12 on generalized tables
(:func:`count_query_generalized`).
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ppdm.errors import ConfigError
from ppdm.extras import require
from ppdm.perturb._table import MAX_CELLS, encode
from ppdm.randomness import RandomSource, make_rng

sparse = require("scipy.sparse", "stats", "ppdm.perturb")

__all__ = [
    "AnatomyRelease",
    "anatomize",
    "anatomy",
    "count_query_generalized",
    "count_query_permuted",
    "generalized_table_estimate",
    "grouped_table_estimate",
    "permute_within_groups",
]


def anatomize(
    sensitive: np.ndarray,
    *,
    l: int,  # noqa: E741 - the literature's name
    rng: int | RandomSource | None = None,
) -> np.ndarray:
    """Group ids from Xiao & Tao's group-creation step (l-diverse groups).

    Parameters
    ----------
    sensitive : numpy.ndarray
        Integer codes of the sensitive value of every record.
    l : int
        Diversity: every group gets at least ``l`` records, all with distinct sensitive
        values.

    Raises
    ------
    ConfigError
        If a sensitive value occurs in more than ``n / l`` records (no l-diverse
        partition exists).

    >>> g = anatomize(np.array([0, 0, 1, 1, 2, 2]), l=2, rng=1)
    >>> sorted(np.bincount(g).tolist())
    [2, 2, 2]
    """
    s = np.asarray(sensitive, dtype=np.int64)
    n = len(s)
    if l < 1:
        raise ConfigError(f"l must be at least 1, not {l}")
    if n == 0:
        return np.empty(0, dtype=np.int64)
    values, inv, counts = np.unique(s, return_inverse=True, return_counts=True)
    if counts.max() * l > n:
        raise ConfigError(
            f"anatomy with l = {l} is impossible: a sensitive value occurs in "
            f"{counts.max()} of {n} records (more than n/l)"
        )
    r = make_rng(rng)
    order = r.permutation(n)
    # bucket b: its records in random order, consumed from the front
    by_bucket = order[np.argsort(inv[order], kind="stable")]
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    taken = np.zeros(len(values), dtype=np.int64)
    groups = np.full(n, -1, dtype=np.int64)
    heap = [(-int(c), int(b)) for b, c in enumerate(counts)]
    heapq.heapify(heap)
    gid = 0
    while len(heap) >= l:
        chosen = [heapq.heappop(heap) for _ in range(l)]
        for neg, b in chosen:
            groups[by_bucket[starts[b] + taken[b]]] = gid
            taken[b] += 1
            if neg + 1 < 0:
                heapq.heappush(heap, (neg + 1, b))
        gid += 1
    # residue: at most l - 1 records, one per remaining bucket
    if heap:
        group_values = np.zeros((gid, len(values)), dtype=bool)
        assigned = groups >= 0
        group_values[groups[assigned], inv[assigned]] = True
        for _neg, b in heap:
            rec = by_bucket[starts[b] + taken[b]]
            candidates = np.flatnonzero(~group_values[:, b])
            if candidates.size == 0:  # pragma: no cover - impossible when eligible
                raise ConfigError("anatomy residue cannot be placed")
            g = int(candidates[r.integers(0, candidates.size, 1)[0]])
            groups[rec] = g
            group_values[g, b] = True
    return groups


def permute_within_groups(
    values: np.ndarray, groups: np.ndarray, *, rng: int | RandomSource | None = None
) -> np.ndarray:
    """Shuffle ``values`` uniformly within every group (Yang & Qiao 2010, Fig. 4)."""
    values = np.asarray(values)
    groups = np.asarray(groups)
    r = make_rng(rng)
    keys = r.random(len(values))
    order = np.lexsort((keys, groups))  # records grouped, random order inside
    sorted_pos = np.lexsort((np.arange(len(values)), groups))  # records grouped, original order
    out = values.copy()
    out[sorted_pos] = values[order]
    return out


@dataclass
class AnatomyRelease:
    """The two published tables of anatomy, and the permuted single-table form.

    ``qit``: QI columns and ``group``; ``st``: ``group``, the sensitive column, ``count``;
    ``permuted``: the original table with the sensitive values shuffled within groups.
    """

    qit: pd.DataFrame
    st: pd.DataFrame
    permuted: pd.DataFrame
    groups: np.ndarray
    l: int  # noqa: E741 - the literature's name


def anatomy(
    table: pd.DataFrame,
    *,
    qi: Sequence[str],
    sensitive: str,
    l: int,  # noqa: E741 - the literature's name
    rng: int | RandomSource | None = None,
) -> AnatomyRelease:
    """Anatomize ``table`` into l-diverse groups (Xiao & Tao 2006)."""
    enc = encode(table, [sensitive])
    r = make_rng(rng)
    groups = anatomize(enc.codes[:, 0], l=l, rng=r)
    qit = table[list(qi)].copy()
    qit["group"] = groups
    st = (
        pd.DataFrame({"group": groups, sensitive: table[sensitive].to_numpy()})
        .groupby(["group", sensitive], sort=True)
        .size()
        .rename("count")
        .reset_index()
    )
    permuted = table.copy()
    permuted[sensitive] = permute_within_groups(table[sensitive].to_numpy(), groups, rng=r)
    return AnatomyRelease(qit, st, permuted, groups, l)


def _group_index(groups: np.ndarray) -> tuple[np.ndarray, int]:
    uniq, inv = np.unique(np.asarray(groups), return_inverse=True)
    return inv, len(uniq)


def grouped_table_estimate(
    qi_codes: np.ndarray, s_codes: np.ndarray, groups: np.ndarray, dims: Sequence[int]
) -> np.ndarray:
    """Contingency estimate from an anatomized or permuted table (counts).

    Within a group every QI combination is paired with the group's sensitive values
    uniformly: ``est[alpha, s] = sum_g #_g(alpha) #_g(s) / |g|``, the tensor form of seed
    002 equation 13. ``dims`` are the QI dims followed by the sensitive dim.
    """
    qi_codes = np.asarray(qi_codes, dtype=np.int64)
    dims = tuple(int(d) for d in dims)
    if int(np.prod(dims, dtype=np.float64)) > MAX_CELLS:
        raise ConfigError("contingency table too large")
    gi, ng = _group_index(groups)
    n = len(gi)
    qcell = np.ravel_multi_index(tuple(qi_codes.T), dims[:-1])
    d_qi = int(np.prod(dims[:-1]))
    a = sparse.csr_matrix((np.ones(n), (gi, qcell)), shape=(ng, d_qi))
    size = np.bincount(gi, minlength=ng).astype(np.float64)
    b = np.zeros((ng, dims[-1]))
    np.add.at(b, (gi, np.asarray(s_codes, dtype=np.int64)), 1.0)
    b /= size[:, None]
    return np.asarray(a.T @ b).reshape(dims)


def generalized_table_estimate(
    original_qi: np.ndarray,
    released_qi: pd.DataFrame,
    s_codes: np.ndarray,
    dims: Sequence[int],
) -> np.ndarray:
    """Contingency estimate from a generalized table, uniform inside generalized values.

    ``released_qi`` holds the generalized QI labels of every record, aligned with
    ``original_qi`` (the original codes, used only to learn which original values a label
    covers: all the values that were generalized to it). A QI-group (equal generalized
    labels) spreads each of its sensitive values' counts uniformly over the product of
    the covered value sets; Yang & Qiao 2010 equation 12 in tensor form.
    """
    original_qi = np.asarray(original_qi, dtype=np.int64)
    dims = tuple(int(d) for d in dims)
    m = len(dims) - 1
    if released_qi.shape[1] != m:
        raise ValueError("released_qi must have one column per QI attribute")
    labels = released_qi.astype(str)
    group_key = pd.MultiIndex.from_frame(labels) if m > 1 else pd.Index(labels.iloc[:, 0])
    gi, ng = _group_index(np.asarray(pd.factorize(group_key)[0]))
    counts_s = np.zeros((ng, dims[-1]))
    np.add.at(counts_s, (gi, np.asarray(s_codes, dtype=np.int64)), 1.0)
    covers = []
    for j in range(m):
        lab_codes, lab_uniq = pd.factorize(labels.iloc[:, j])
        cover = np.zeros((len(lab_uniq), dims[j]), dtype=bool)
        cover[lab_codes, original_qi[:, j]] = True
        u = cover / cover.sum(axis=1, keepdims=True)
        first = np.zeros(ng, dtype=np.int64)
        first[gi] = lab_codes  # every record of a group has the same label
        covers.append(u[first])  # (groups, d_j)
    out = np.zeros(dims)
    chunk = max(1, int(5_000_000 // max(1, int(np.prod(dims)))))
    for start in range(0, ng, chunk):
        sl = slice(start, min(ng, start + chunk))
        t = counts_s[sl]
        for j in reversed(range(m)):
            t = covers[j][sl][:, :, None] * t.reshape(t.shape[0], 1, -1)
        out += t.sum(axis=0).reshape(dims)
    return out


def count_query_permuted(
    qi_codes: np.ndarray,
    s_codes: np.ndarray,
    groups: np.ndarray,
    query: Mapping[int, Sequence[int]],
    s_values: Sequence[int],
) -> float:
    """Yang & Qiao 2010 equation 13: ``sum_p #_p(R_s) #_p(records matching the QI conditions) /
    #_p(records)`` for an anatomized or permuted table.

    ``query`` maps a QI column index to its accepted codes ``R_i``; ``s_values`` is
    ``R_s``.
    """
    qi_codes = np.asarray(qi_codes, dtype=np.int64)
    gi, ng = _group_index(groups)
    match = np.ones(len(gi), dtype=bool)
    for j, vals in query.items():
        match &= np.isin(qi_codes[:, j], list(vals))
    s_match = np.isin(np.asarray(s_codes), list(s_values))
    size = np.bincount(gi, minlength=ng).astype(np.float64)
    return float(np.sum(np.bincount(gi, s_match, ng) * np.bincount(gi, match, ng) / size))


def count_query_generalized(
    original_qi: np.ndarray,
    released_qi: pd.DataFrame,
    s_codes: np.ndarray,
    query: Mapping[int, Sequence[int]],
    s_values: Sequence[int],
) -> float:
    """Yang & Qiao 2010 equation 12 on a generalized table: ``sum_p #_p(R_s) prod_i
    |R_i cap Values_p(Q_i)| / |Values_p(Q_i)|``, where ``Values_p(Q_i)`` is the set of
    original values covered by the group's generalized value (learned as in
    :func:`generalized_table_estimate`)."""
    original_qi = np.asarray(original_qi, dtype=np.int64)
    labels = released_qi.astype(str)
    m = labels.shape[1]
    key = pd.MultiIndex.from_frame(labels) if m > 1 else pd.Index(labels.iloc[:, 0])
    gi, ng = _group_index(np.asarray(pd.factorize(key)[0]))
    s_match = np.isin(np.asarray(s_codes), list(s_values)).astype(np.float64)
    est = np.bincount(gi, s_match, ng)
    for j, vals in query.items():
        lab_codes, lab_uniq = pd.factorize(labels.iloc[:, j])
        d = int(original_qi[:, j].max()) + 1
        cover = np.zeros((len(lab_uniq), max(d, max(vals) + 1)), dtype=bool)
        cover[lab_codes, original_qi[:, j]] = True
        frac = cover[:, list(vals)].sum(axis=1) / cover.sum(axis=1)
        first = np.zeros(ng, dtype=np.int64)
        first[gi] = lab_codes
        est = est * frac[first]
    return float(est.sum())
