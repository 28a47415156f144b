"""Byun's information loss IL(e) and greedy k-member clustering (Xiong n.d.).

Xiong n.d. ("Anonymization methods", slides *Cost Function - Information loss (IL)* and
*Greedy k-member clustering algorithm*, after Byun et al., DASFAA 2007) turns
k-anonymization into the k-member clustering problem: find clusters of at least ``k``
records that minimize the total information loss, where every record of a cluster ``e``
is generalized to one value covering the whole cluster and

    IL(e) = |e| * D(e),
    D(e)  = sum_i (MAX_Ni - MIN_Ni) / |N_i|  +  sum_j H(Lambda(U_Cj)) / H(T_Cj)

(``|N_i|`` the size of numeric domain ``N_i`` in the whole table, ``Lambda(U_Cj)`` the
subtree rooted at the lowest common ancestor of the cluster's values of categorical
attribute ``C_j`` in its taxonomy tree ``T_Cj``, ``H`` a height). The distance between
two records is the same quantity for a two-record cluster (Xiong n.d., *Distance between
two categorical values*: ``delta_C(v1, v2) = H(Lambda(v1, v2)) / H(T_D)``).

What the other clustering anonymizers share is in :mod:`ppdm.anonymize.qi_space` (the
encoding of the quasi-identifiers, :class:`QISpace`; per-class summaries, ranges and
lowest common ancestors; the NCP utility metric) and :mod:`ppdm.anonymize.cluster_release`
(the generalized ``"[lo-hi]"`` / taxonomy-label release of a clustering, and the merge
step that makes a clustering satisfy l-diversity or t-closeness after the fact).

A taxonomy tree is a :class:`~ppdm.anonymize.hierarchy.Hierarchy`: level 0 holds the
leaves and ``H(T) = height - 1`` (Adult's native-country, levels country / continent /
``*``: ``H = 2``). A categorical QI without a hierarchy gets the flat tree
``value -> *`` (distance 0 when equal, 1 otherwise). Numeric columns are numeric.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ppdm.anonymize.cluster_release import ModelCheck as ModelCheck
from ppdm.anonymize.cluster_release import build_release as build_release
from ppdm.anonymize.cluster_release import canonical_labels as canonical_labels
from ppdm.anonymize.cluster_release import (
    check_release_classes,
    finish_release,
    generalized_frame,
    merge_until_valid,
    prepare_model,
)
from ppdm.anonymize.hierarchy import Hierarchy
from ppdm.anonymize.qi_space import (
    ClassSummary,
    QISpace,
    _class_d,
    encode_qi,
    encode_subset,
    ncp,
    summarize_classes,
)
from ppdm.anonymize.qi_space import is_numeric_column as is_numeric_column
from ppdm.anonymize.release import Release
from ppdm.errors import ConfigError
from ppdm.progress import Progress, progress_task
from ppdm.randomness import RandomSource, make_rng

__all__ = [
    "ByunInformationLoss",
    "ClassSummary",
    "QISpace",
    "encode_qi",
    "generalized_frame",
    "k_member",
    "ncp",
    "summarize_classes",
]

log = logging.getLogger(__name__)


class ByunInformationLoss:
    """Byun et al.'s information loss ``IL(e) = |e| * D(e)`` over a table (Xiong n.d.).

    The numeric domain sizes ``|N_i|`` are taken over the whole ``table``.

    Examples
    --------
    The worked example of Xiong n.d. (*Cost Function - Information loss (IL)*), with the
    taxonomy trees of Country (height 3) and Occupation (height 2):

    >>> records = pd.DataFrame({
    ...     "age": [41, 57, 40, 38, 24, 45],
    ...     "country": ["USA", "India", "Canada", "Iran", "Brazil", "Greece"],
    ...     "occupation": ["Armed-Forces", "Tech-support", "Teacher", "Tech-support",
    ...                    "Doctor", "Salesman"]})
    >>> country = Hierarchy.from_rows([
    ...     ["USA", "North America", "America", "*"],
    ...     ["Canada", "North America", "America", "*"],
    ...     ["Brazil", "South America", "America", "*"],
    ...     ["India", "South Asia", "Asia", "*"],
    ...     ["Iran", "West Asia", "Asia", "*"],
    ...     ["Greece", "Southern Europe", "Europe", "*"]], attribute="country")
    >>> occupation = Hierarchy.from_rows([
    ...     ["Armed-Forces", "Government", "*"],
    ...     ["Teacher", "Professional", "*"],
    ...     ["Doctor", "Professional", "*"],
    ...     ["Salesman", "Technical", "*"],
    ...     ["Tech-support", "Technical", "*"]], attribute="occupation")
    >>> il = ByunInformationLoss(records, qi=["age", "country", "occupation"],
    ...                          hierarchies={"country": country, "occupation": occupation})
    >>> round(il.distance(1, 3), 4)  # India, Iran: 19/33 + 2/3 (Asia) + 0 (same job)
    1.2424
    >>> round(il.cluster_loss([0, 2, 4]), 4)  # e1 = {r1, r3, r5}
    6.5455
    >>> il.cluster_loss([0, 1, 4])  # e2 = {r1, r2, r5}
    9.0
    """

    def __init__(
        self,
        table: pd.DataFrame,
        *,
        qi: Sequence[str],
        hierarchies: Mapping[str, Hierarchy] | None = None,
    ) -> None:
        self.space = encode_qi(table, qi, hierarchies)

    def cluster_loss(self, members: Sequence[int] | np.ndarray) -> float:
        """IL(e) of the cluster of rows ``members`` (positions in the table)."""
        members = np.asarray(members, dtype=np.int64)
        if members.size == 0:
            return 0.0
        sp = self.space
        d = 0.0
        if sp.x.shape[1]:
            x = sp.x[members]
            span = np.where(sp.span > 0, sp.span, 1.0)
            d += float(((x.max(axis=0) - x.min(axis=0)) / span).sum())
        for j in range(len(sp.categorical)):
            a = sp.anc[j][sp.leaf[members, j]]
            lv = int(np.argmax(a.min(axis=0) == a.max(axis=0)))
            d += lv / sp.tree_height[j]
        return float(len(members) * d)

    def class_losses(self, labels: np.ndarray) -> np.ndarray:
        """IL(e) of every class of a clustering (labels ``0..g-1``)."""
        s = summarize_classes(self.space, labels)
        return s.sizes * _class_d(self.space, s)

    def total(self, labels: np.ndarray) -> float:
        """Total information loss ``sum_e IL(e)`` of a clustering."""
        return float(self.class_losses(labels).sum())

    def distance(self, i: int, j: int) -> float:
        """Byun's distance between records ``i`` and ``j`` (D of the pair)."""
        return float(_record_distances(self.space, int(i), np.array([int(j)]))[0])


def _record_distances(space: QISpace, i: int, others: np.ndarray) -> np.ndarray:
    """Byun's distance from record ``i`` to each record in ``others``."""
    d = np.zeros(len(others))
    if space.x.shape[1]:
        span = np.where(space.span > 0, space.span, 1.0)
        d += (np.abs(space.x[others] - space.x[i]) / span).sum(axis=1)
    for j in range(len(space.categorical)):
        anc = space.anc[j]
        lca = (anc != anc[space.leaf[i, j]]).sum(axis=1)  # first common level, per leaf
        d += lca[space.leaf[others, j]] / space.tree_height[j]
    return d


# -- greedy k-member clustering ---------------------------------------------------------


class _ClusterState:
    """Running min/max and lowest common ancestors of one growing cluster."""

    def __init__(self, space: QISpace, first: int) -> None:
        self.space = space
        self.size = 1
        self.lo = space.x[first].copy()
        self.hi = space.x[first].copy()
        self.rep = space.leaf[first].copy()  # a member's leaf per categorical QI
        self.level = np.zeros(len(space.categorical), dtype=np.int64)
        self._lca_tables()

    def _lca_tables(self) -> None:
        # For each categorical QI: leaf -> level of LCA(cluster node, leaf). Ancestors
        # coincide from some level up, so that level is the count of unequal levels.
        sp = self.space
        self.tables = [
            np.maximum(self.level[j], (sp.anc[j] != sp.anc[j][self.rep[j]]).sum(axis=1))
            for j in range(len(sp.categorical))
        ]

    def d_with(self, rows: np.ndarray) -> np.ndarray:
        """D(c U {r}) for each candidate record ``r`` in ``rows``."""
        sp = self.space
        d = np.zeros(len(rows))
        if sp.x.shape[1]:
            span = np.where(sp.span > 0, sp.span, 1.0)
            x = sp.x[rows]
            d += ((np.maximum(x, self.hi) - np.minimum(x, self.lo)) / span).sum(axis=1)
        for j in range(len(sp.categorical)):
            d += self.tables[j][sp.leaf[rows, j]] / sp.tree_height[j]
        return d

    def add(self, r: int) -> None:
        sp = self.space
        self.size += 1
        np.minimum(self.lo, sp.x[r], out=self.lo)
        np.maximum(self.hi, sp.x[r], out=self.hi)
        changed = False
        for j in range(len(sp.categorical)):
            new = int(self.tables[j][sp.leaf[r, j]])
            if new != self.level[j]:
                self.level[j] = new
                changed = True
        if changed:
            self._lca_tables()


def _cluster_pair_d(
    space: QISpace, s: ClassSummary, rep: np.ndarray, i: int
) -> tuple[np.ndarray, np.ndarray]:
    """D(c_i U c_j) for every class j, and D(c_j) (for IL-increase merge costs)."""
    g = len(s.sizes)
    d_union = np.zeros(g)
    if space.x.shape[1]:
        span = np.where(space.span > 0, space.span, 1.0)
        d_union += ((np.maximum(s.hi, s.hi[i]) - np.minimum(s.lo, s.lo[i])) / span).sum(axis=1)
    for j in range(len(space.categorical)):
        anc = space.anc[j]
        first_eq = (anc[rep[:, j]] != anc[rep[i, j]]).sum(axis=1)
        lv = np.maximum(np.maximum(s.level[:, j], s.level[i, j]), first_eq)
        d_union += lv / space.tree_height[j]
    return d_union, _class_d(space, s)


def greedy_k_member_clustering(
    space: QISpace,
    k: int,
    *,
    rng: RandomSource,
    progress: Progress | None = None,
) -> np.ndarray:
    """Byun's greedy k-member clustering (Xiong n.d.), returning a class label per row.

    Clusters are grown one at a time: start from the record furthest from the previous
    one (the first from a random record), then repeatedly add the record ``r`` that
    minimizes ``IL(c U {r}) - IL(c)`` (``find_best_record``) until ``|c| = k``. The fewer
    than ``k`` records left over are added one by one, in random order, to the cluster
    minimizing the increase of IL (``find_best_cluster``). Ties go to the lowest row.
    Cost: ``O(n^2 / k)`` vectorized steps over the remaining records.
    """
    n = space.n
    if k < 1:
        raise ConfigError(f"k must be >= 1, not {k}")
    if n < k:
        raise ConfigError(f"the table has {n} rows, fewer than k = {k}")
    labels = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return labels
    remaining = np.arange(n, dtype=np.int64)
    r = int(remaining[rng.integers(0, n, 1)[0]])
    clusters = 0
    n_full = n // k
    with progress_task(progress, "k-member clustering", total=n_full) as bar:
        while len(remaining) >= k:
            dist = _record_distances(space, r, remaining)
            pos = int(np.argmax(dist))
            r = int(remaining[pos])
            alive = np.ones(len(remaining), dtype=bool)
            alive[pos] = False
            state = _ClusterState(space, r)
            labels[r] = clusters
            while state.size < k:
                d = state.d_with(remaining)
                d[~alive] = np.inf
                pos = int(np.argmin(d))
                r = int(remaining[pos])
                alive[pos] = False
                state.add(r)
                labels[r] = clusters
            remaining = remaining[alive]
            clusters += 1
            bar.advance(1)
    if len(remaining):
        # find_best_cluster for the leftover records, one at a time in random order
        idx = np.flatnonzero(labels >= 0)
        summ = summarize_classes(encode_subset(space, idx), labels[idx])
        first = idx[np.unique(labels[idx], return_index=True)[1]]
        rep = space.leaf[first]
        span = np.where(space.span > 0, space.span, 1.0)
        order = remaining[rng.permutation(len(remaining))]
        for r in order:
            r = int(r)
            d_new = np.zeros(clusters)
            if space.x.shape[1]:
                d_new += (
                    (np.maximum(summ.hi, space.x[r]) - np.minimum(summ.lo, space.x[r])) / span
                ).sum(axis=1)
            for j in range(len(space.categorical)):
                anc = space.anc[j]
                first_eq = (anc[rep[:, j]] != anc[space.leaf[r, j]]).sum(axis=1)
                lv = np.maximum(summ.level[:, j], first_eq)
                d_new += lv / space.tree_height[j]
            d_old = _class_d(space, summ)
            inc = (summ.sizes + 1) * d_new - summ.sizes * d_old
            c = int(np.argmin(inc))
            labels[r] = c
            summ.sizes[c] += 1
            if space.x.shape[1]:
                summ.lo[c] = np.minimum(summ.lo[c], space.x[r])
                summ.hi[c] = np.maximum(summ.hi[c], space.x[r])
            for j in range(len(space.categorical)):
                anc = space.anc[j]
                first_eq = int((anc[rep[c, j]] != anc[space.leaf[r, j]]).sum())
                new_level = max(int(summ.level[c, j]), first_eq)
                summ.level[c, j] = new_level
                summ.code[c, j] = anc[rep[c, j], new_level]
    return labels


def k_member(
    table: pd.DataFrame,
    *,
    qi: Sequence[str],
    model: Any,
    sensitive: str | None = None,
    hierarchies: Mapping[str, Hierarchy] | None = None,
    rng: int | RandomSource | None = None,
    progress: Progress | None = None,
) -> Release:
    """k-anonymize ``table`` by Byun et al.'s greedy k-member clustering (Xiong n.d.).

    Each cluster's records are generalized to one value per QI: numeric QIs to the
    cluster's range ``"[lo-hi]"``, categorical QIs to the lowest common ancestor of the
    cluster's values in their taxonomy (``hierarchies[col]``; the flat tree ``value ->
    *`` when none is given). Distances and costs are Byun's IL(e) (see
    :class:`ByunInformationLoss`).

    Parameters
    ----------
    table : pandas.DataFrame
    qi : list of str
        Quasi-identifiers; numeric columns are ranges, the others taxonomy values.
    model : PrivacyModel or ModelSet
        ``k`` is ``model.min_class_size``. If the model also needs the sensitive
        attribute (l-diversity, t-closeness), clusters that violate it are merged with
        the cluster whose union with them has the smallest IL increase until every
        cluster passes (the models are monotone under union, Aggarwal 2015, §20.3.2-20.3.3).
    sensitive : str, optional
        The sensitive column (required by l-diversity and t-closeness).
    hierarchies : dict of str to Hierarchy, optional
        Taxonomy trees of categorical QIs (and of the sensitive attribute for a
        hierarchical EMD ground distance).
    rng : int or RandomSource, optional
        Randomness for the first record, the leftover order and the output shuffle
        (``None``: the OS CSPRNG; an int for reproducible experiments).
    progress : Progress, optional

    Returns
    -------
    Release
        ``metrics``: ``byun_il`` (total IL), ``byun_il_per_record_attribute``, ``ncp``,
        ``suppression_rate`` (always 0: nothing is suppressed), ``n_classes``;
        ``info``: ``runtime_s``, ``n_groups``, ``k``, ``merges``.
    """
    t0 = time.perf_counter()
    source = make_rng(rng)
    check = prepare_model(model, table, sensitive=sensitive, hierarchies=hierarchies)
    space = encode_qi(table, qi, hierarchies)
    k = check.min_size
    labels = greedy_k_member_clustering(space, k, rng=source, progress=progress)
    merges = 0
    if not check_release_classes(check, labels):
        summ = summarize_classes(space, labels)
        rep = space.leaf[np.unique(labels, return_index=True)[1]]

        def cost(i: int, alive: np.ndarray) -> np.ndarray:
            d_union, d_own = _cluster_pair_d(space, summ, rep, i)
            sizes = summ.sizes
            return (sizes + sizes[i]) * d_union - sizes * d_own - sizes[i] * d_own[i]

        def merge(i: int, j: int) -> None:
            summ.sizes[j] += summ.sizes[i]
            if space.x.shape[1]:
                summ.lo[j] = np.minimum(summ.lo[j], summ.lo[i])
                summ.hi[j] = np.maximum(summ.hi[j], summ.hi[i])
            for q in range(len(space.categorical)):
                anc = space.anc[q]
                first_eq = int((anc[rep[j, q]] != anc[rep[i, q]]).sum())
                lv = max(int(summ.level[i, q]), int(summ.level[j, q]), first_eq)
                summ.level[j, q] = lv
                summ.code[j, q] = anc[rep[j, q], lv]

        labels, merges = merge_until_valid(labels, check, cost, merge)
    return finish_release(
        table,
        space,
        labels,
        check,
        algorithm="k-member",
        qi=qi,
        sensitive=sensitive,
        rng=source,
        t0=t0,
        info={"k": k, "merges": merges},
    )
