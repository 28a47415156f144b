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

This module also holds what the other clustering anonymizers share: the encoding of the
quasi-identifiers (:class:`QISpace`), per-class summaries (ranges and lowest common
ancestors), the generalized ``"[lo-hi]"`` / taxonomy-label release of a clustering, the
NCP utility metric, and the merge step that makes a clustering satisfy l-diversity or
t-closeness after the fact.

A taxonomy tree is a :class:`~ppdm.anonymize.hierarchy.Hierarchy`: level 0 holds the
leaves and ``H(T) = height - 1`` (Adult's native-country, levels country / continent /
``*``: ``H = 2``). A categorical QI without a hierarchy gets the flat tree
``value -> *`` (distance 0 when equal, 1 otherwise). Numeric columns are numeric.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ppdm.anonymize.hierarchy import Hierarchy, as_labels
from ppdm.anonymize.release import Release, make_release
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


# -- encoding of the quasi-identifiers ---------------------------------------------------


def is_numeric_column(series: pd.Series) -> bool:
    """True for numeric (not boolean) columns: these are treated as continuous ranges."""
    return bool(
        pd.api.types.is_numeric_dtype(series.dtype) and not pd.api.types.is_bool_dtype(series)
    )


def flat_hierarchy(values: object, *, attribute: str) -> Hierarchy:
    """The one-level taxonomy ``value -> *`` (equal: distance 0, different: 1)."""
    labels = pd.unique(pd.Series(as_labels(values), dtype=object))
    return Hierarchy.from_rows([[v, "*"] for v in labels], attribute=attribute)


@dataclass
class QISpace:
    """Quasi-identifiers encoded once for distances, IL(e) and class summaries.

    Attributes
    ----------
    numeric : list of str
        Numeric QIs, in ``qi`` order.
    x : numpy.ndarray
        ``(n, p)`` float values of the numeric QIs.
    span : numpy.ndarray
        ``|N_i| = max - min`` of each numeric QI over the whole table (0 for a constant).
    integral : numpy.ndarray
        Whether each numeric QI holds whole numbers only (ranges are printed as ints).
    categorical : list of str
        Categorical QIs, in ``qi`` order.
    hierarchies : list of Hierarchy
        Taxonomy tree of each categorical QI.
    leaf : numpy.ndarray
        ``(n, q)`` leaf codes (rows of the hierarchy's table).
    anc : list of numpy.ndarray
        Per categorical QI, ``(n_leaves, levels)`` code of every leaf's ancestor at each
        level; a root level is appended when the hierarchy's top level has several labels.
    tree_height : numpy.ndarray
        ``H(T)`` of each categorical QI (``levels - 1`` of ``anc``).
    """

    n: int
    numeric: list[str]
    x: np.ndarray
    span: np.ndarray
    integral: np.ndarray
    categorical: list[str]
    hierarchies: list[Hierarchy]
    leaf: np.ndarray
    anc: list[np.ndarray]
    tree_height: np.ndarray

    @property
    def n_attributes(self) -> int:
        return len(self.numeric) + len(self.categorical)

    def record_anc(self, j: int) -> np.ndarray:
        """``(n, levels)`` ancestor codes of every record for categorical QI ``j``."""
        return self.anc[j][self.leaf[:, j]]

    def node_label(self, j: int, level: int, code: int) -> str:
        """Label of the node ``code`` at ``level`` of categorical QI ``j``'s taxonomy."""
        h = self.hierarchies[j]
        if level >= h.height:  # appended root
            return "*"
        return str(h.labels(level)[code])

    def node_leaves(self, j: int, levels: np.ndarray, codes: np.ndarray) -> np.ndarray:
        """Number of leaves under each node ``(levels[i], codes[i])`` of QI ``j``."""
        h = self.hierarchies[j]
        out = np.empty(len(levels), dtype=np.int64)
        for level in np.unique(levels):
            sel = levels == level
            if level >= h.height:
                out[sel] = len(h.values)
            else:
                out[sel] = h.leaf_counts(int(level))[codes[sel]]
        return out


def _ancestors(h: Hierarchy) -> np.ndarray:
    anc = np.stack([h.level_map(level) for level in range(h.height)], axis=1)
    if len(h.labels(h.height - 1)) > 1:
        anc = np.concatenate([anc, np.zeros((anc.shape[0], 1), dtype=np.int64)], axis=1)
    return anc.astype(np.int64)


def encode_qi(
    table: pd.DataFrame,
    qi: Sequence[str],
    hierarchies: Mapping[str, Hierarchy] | None = None,
) -> QISpace:
    """Encode the quasi-identifiers of ``table``: numeric columns as floats, the others
    as leaf codes of their taxonomy (``hierarchies[col]``, else the flat one).

    Raises :class:`ConfigError` for unknown columns, missing values, or values missing
    from a hierarchy.
    """
    qi = list(qi)
    if not qi:
        raise ConfigError("give at least one quasi-identifier")
    missing = [c for c in qi if c not in table.columns]
    if missing:
        raise ConfigError(f"quasi-identifier column(s) not in the table: {missing}")
    if len(set(qi)) != len(qi):
        raise ConfigError(f"quasi-identifiers listed twice: {qi}")
    hierarchies = dict(hierarchies or {})
    n = len(table)
    numeric: list[str] = []
    cols: list[np.ndarray] = []
    categorical: list[str] = []
    hs: list[Hierarchy] = []
    leaves: list[np.ndarray] = []
    for c in qi:
        s = table[c]
        if s.isna().any():
            raise ConfigError(f"quasi-identifier {c!r} has missing values")
        if is_numeric_column(s):
            numeric.append(c)
            cols.append(s.to_numpy(dtype=float))
        else:
            h = hierarchies.get(c)
            if h is None:
                h = flat_hierarchy(s, attribute=c)
            categorical.append(c)
            hs.append(h)
            codes, uniques = pd.factorize(s, sort=False)  # look up distinct values only
            leaves.append(h.leaf_codes(pd.Series(uniques))[codes])
    x = np.stack(cols, axis=1) if cols else np.zeros((n, 0))
    span = x.max(axis=0) - x.min(axis=0) if (n and cols) else np.zeros(len(cols))
    integral = np.array([bool(np.all(col == np.round(col))) for col in cols], dtype=bool)
    leaf = np.stack(leaves, axis=1) if leaves else np.zeros((n, 0), dtype=np.int64)
    anc = [_ancestors(h) for h in hs]
    tree_height = np.array([a.shape[1] - 1 for a in anc], dtype=np.int64)
    return QISpace(
        n=n,
        numeric=numeric,
        x=x,
        span=span.astype(float),
        integral=integral,
        categorical=categorical,
        hierarchies=hs,
        leaf=leaf,
        anc=anc,
        tree_height=tree_height,
    )


# -- per-class summaries ----------------------------------------------------------------


@dataclass
class ClassSummary:
    """Per-class statistics of a clustering (classes numbered ``0..g-1``).

    ``lo``, ``hi``, ``mean``: ``(g, p)`` numeric ranges and means; ``level``, ``code``:
    ``(g, q)`` lowest common ancestor of each class's values in each taxonomy.
    """

    sizes: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    mean: np.ndarray
    level: np.ndarray
    code: np.ndarray


def summarize_classes(space: QISpace, labels: np.ndarray) -> ClassSummary:
    """Ranges, means and lowest common ancestors of every class, vectorized."""
    labels = np.asarray(labels, dtype=np.int64)
    order = np.argsort(labels, kind="stable")
    sl = labels[order]
    starts = np.flatnonzero(np.r_[True, sl[1:] != sl[:-1]]) if len(sl) else np.zeros(0, int)
    g = len(starts)
    if g and not np.array_equal(sl[starts], np.arange(g)):
        raise ValueError("class labels must be 0..g-1 with every class non-empty")
    sizes = np.diff(np.r_[starts, len(sl)])
    if space.x.shape[1] and g:
        xs = space.x[order]
        lo = np.minimum.reduceat(xs, starts, axis=0)
        hi = np.maximum.reduceat(xs, starts, axis=0)
        mean = np.add.reduceat(xs, starts, axis=0) / sizes[:, None]
    else:
        lo = hi = mean = np.zeros((g, space.x.shape[1]))
    q = len(space.categorical)
    level = np.zeros((g, q), dtype=np.int64)
    code = np.zeros((g, q), dtype=np.int64)
    for j in range(q):
        a = space.record_anc(j)[order]
        if not g:
            continue
        same = np.minimum.reduceat(a, starts, axis=0) == np.maximum.reduceat(a, starts, axis=0)
        lv = np.argmax(same, axis=1)  # the top level is always a single root
        level[:, j] = lv
        code[:, j] = a[starts, lv]
    return ClassSummary(sizes=sizes, lo=lo, hi=hi, mean=mean, level=level, code=code)


def _class_d(space: QISpace, s: ClassSummary) -> np.ndarray:
    """Byun's D(e) of every class."""
    d = np.zeros(len(s.sizes))
    if space.x.shape[1]:
        span = np.where(space.span > 0, space.span, 1.0)
        d += ((s.hi - s.lo) / span).sum(axis=1)
    if len(space.categorical):
        d += (s.level / space.tree_height).sum(axis=1)
    return d


def ncp(space: QISpace, labels: np.ndarray, *, summary: ClassSummary | None = None) -> float:
    """Normalized certainty penalty of a clustering whose classes are generalized to
    their ranges / lowest common ancestors, in [0, 1].

    NCP (Xu et al. 2006) charges a record ``(hi - lo) / |N_i|`` on a numeric attribute and
    ``|leaves(u)| / |D|`` on a categorical one generalized to node ``u`` (0 when ``u``
    covers a single value), averaged over records and attributes.
    """
    s = summary if summary is not None else summarize_classes(space, labels)
    total = 0.0
    if space.x.shape[1]:
        span = np.where(space.span > 0, space.span, 1.0)
        total += float((s.sizes[:, None] * (s.hi - s.lo) / span).sum())
    for j in range(len(space.categorical)):
        cnt = space.node_leaves(j, s.level[:, j], s.code[:, j])
        domain = len(space.hierarchies[j].values)
        pen = np.where(cnt > 1, cnt / domain, 0.0)
        total += float((s.sizes * pen).sum())
    denom = space.n * space.n_attributes
    return total / denom if denom else 0.0


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


# -- the generalized release ------------------------------------------------------------


def _fmt_number(v: float, integral: bool) -> str:
    if integral:
        return str(round(float(v)))
    return repr(float(v))


def generalized_frame(
    table: pd.DataFrame,
    space: QISpace,
    labels: np.ndarray,
    summary: ClassSummary,
    *,
    report: str = "ranges",
) -> pd.DataFrame:
    """``table`` with each QI replaced by its class's generalization.

    Numeric QIs become ``"[lo-hi]"`` (``report='ranges'``) or the class mean
    (``report='averages'``, Aggarwal 2015, §20.3.1.3); categorical QIs become the label
    of the lowest common ancestor of the class's values in their taxonomy.
    """
    if report not in ("ranges", "averages"):
        raise ConfigError(f"report must be 'ranges' or 'averages', not {report!r}")
    out = table.copy()
    g = len(summary.sizes)
    for i, c in enumerate(space.numeric):
        if report == "averages":
            out[c] = summary.mean[labels, i]
        else:
            integral = bool(space.integral[i])
            text = np.array(
                [
                    f"[{_fmt_number(lo, integral)}-{_fmt_number(hi, integral)}]"
                    for lo, hi in zip(summary.lo[:, i], summary.hi[:, i], strict=True)
                ],
                dtype=object,
            )
            out[c] = text[labels] if g else np.zeros(0, dtype=object)
    for j, c in enumerate(space.categorical):
        h = space.hierarchies[j]
        levels, codes = summary.level[:, j], summary.code[:, j]
        text = np.empty(g, dtype=object)
        for level in np.unique(levels):
            sel = levels == level
            text[sel] = "*" if level >= h.height else h.labels(int(level))[codes[sel]]
        out[c] = text[labels] if g else np.zeros(0, dtype=object)
    return out


def canonical_labels(frame: pd.DataFrame, qi: Sequence[str]) -> np.ndarray:
    """Class id of every row of a released table: one class per distinct QI tuple
    (two clusters released with identical values form one equivalence class)."""
    if len(frame) == 0:
        return np.zeros(0, dtype=np.int64)
    codes = frame.groupby(list(qi), sort=True, dropna=False).ngroup()
    return codes.to_numpy(dtype=np.int64)


# -- privacy models ---------------------------------------------------------------------


@dataclass
class ModelCheck:
    """A privacy model prepared on the table's sensitive column, checking classes."""

    model: Any
    codes: np.ndarray  # sensitive code of every row (zeros without a sensitive attribute)
    d: int
    min_size: int

    def counts(self, labels: np.ndarray, g: int) -> np.ndarray:
        """``(g, d)`` counts of each sensitive code in each class."""
        flat = np.bincount(labels * self.d + self.codes, minlength=g * self.d)
        return flat.reshape(g, self.d)

    def ok(self, counts: np.ndarray) -> np.ndarray:
        """Which classes (rows of ``counts``) satisfy the model."""
        counts = np.atleast_2d(counts)
        return np.asarray(self.model.check_classes(counts), dtype=bool)

    def ok_rows(self, rows: np.ndarray) -> bool:
        """Whether the class made of table rows ``rows`` satisfies the model."""
        if len(rows) < self.min_size:
            return False
        cnt = np.bincount(self.codes[rows], minlength=self.d)
        return bool(self.ok(cnt[None, :])[0])


def prepare_model(
    model: Any,
    table: pd.DataFrame,
    *,
    sensitive: str | None,
    hierarchies: Mapping[str, Hierarchy] | None = None,
) -> ModelCheck:
    """Prepare ``model`` (a ``PrivacyModel`` or ``ModelSet``) on the sensitive column and
    check that the whole table satisfies it (else no partition can)."""
    needs = bool(getattr(model, "needs_sensitive", False))
    if sensitive is None:
        if needs:
            raise ConfigError("this privacy model needs a sensitive attribute (sensitive=...)")
        codes = np.zeros(len(table), dtype=np.int64)
        d = 1
        domain: list[str] = []
    else:
        if sensitive not in table.columns:
            raise ConfigError(f"sensitive column {sensitive!r} not in the table")
        s = table[sensitive]
        if s.isna().any():
            raise ConfigError(f"sensitive attribute {sensitive!r} has missing values")
        raw, uniques = pd.factorize(s, sort=True)
        codes = raw.astype(np.int64)
        d = max(len(uniques), 1)
        domain = [str(u) for u in as_labels(pd.Series(uniques))]
    h = (hierarchies or {}).get(sensitive) if sensitive is not None else None
    prepared = model.prepare(codes, domain, hierarchy=h) if hasattr(model, "prepare") else None
    if prepared is not None and hasattr(prepared, "check_classes"):
        model = prepared
    check = ModelCheck(
        model=model, codes=codes, d=d, min_size=max(int(getattr(model, "min_class_size", 1)), 1)
    )
    if len(table) == 0:
        raise ConfigError("the table is empty")
    if not check.ok_rows(np.arange(len(table))):
        raise ConfigError(
            "the whole table does not satisfy the privacy model, so no grouping can "
            f"(rows: {len(table)}, minimum class size: {check.min_size})"
        )
    return check


def merge_until_valid(
    labels: np.ndarray,
    check: ModelCheck,
    cost: Callable[[int, np.ndarray], np.ndarray],
    merge: Callable[[int, int], None],
) -> tuple[np.ndarray, int]:
    """Merge every class that violates the model into its cheapest neighbour until all
    classes pass (l-diversity and t-closeness for clustering anonymizers).

    ``cost(i, alive)`` gives the cost of merging class ``i`` into each class (an array
    over all class ids; entries for dead classes are ignored); ``merge(i, j)`` tells the
    caller that ``j`` absorbed ``i``. The smallest violating class is merged first. By
    the monotonicity lemmas of Aggarwal 2015 (20.3.1-20.3.4) a union of classes keeps the
    properties its parts had, and the whole table passes (checked up front), so the loop
    ends. Returns the new labels (``0..g'-1``) and the number of merges.
    """
    labels = np.asarray(labels, dtype=np.int64)
    g = int(labels.max()) + 1 if len(labels) else 0
    counts = check.counts(labels, g)
    ok = check.ok(counts) & (counts.sum(axis=1) >= check.min_size)
    alive = np.ones(g, dtype=bool)
    parent = np.arange(g)
    merges = 0
    while True:
        bad = np.flatnonzero(alive & ~ok)
        if bad.size == 0:
            break
        if alive.sum() <= 1:
            raise ConfigError("the whole table does not satisfy the privacy model")
        i = int(bad[np.argmin(counts[bad].sum(axis=1))])
        c = np.asarray(cost(i, alive), dtype=float).copy()
        c[~alive] = np.inf
        c[i] = np.inf
        j = int(np.argmin(c))
        merge(i, j)
        counts[j] += counts[i]
        alive[i] = False
        parent[i] = j
        ok[j] = bool(check.ok(counts[j : j + 1])[0]) and counts[j].sum() >= check.min_size
        merges += 1
    # resolve chains i -> j -> ... to the surviving class
    while True:
        nxt = parent[parent]
        if np.array_equal(nxt, parent):
            break
        parent = nxt
    _, new = np.unique(parent[labels], return_inverse=True)
    return new.astype(np.int64), merges


def check_release_classes(check: ModelCheck, labels: np.ndarray) -> bool:
    """Whether every class of ``labels`` satisfies the model (used as a final guard)."""
    if len(labels) == 0:
        return True
    g = int(labels.max()) + 1
    counts = check.counts(labels, g)
    return bool(np.all(check.ok(counts) & (counts.sum(axis=1) >= check.min_size)))


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


def encode_subset(space: QISpace, rows: np.ndarray) -> QISpace:
    """The rows ``rows`` of ``space`` (same domains, spans and taxonomies)."""
    return QISpace(
        n=len(rows),
        numeric=space.numeric,
        x=space.x[rows],
        span=space.span,
        integral=space.integral,
        categorical=space.categorical,
        hierarchies=space.hierarchies,
        leaf=space.leaf[rows],
        anc=space.anc,
        tree_height=space.tree_height,
    )


def clustering_metrics(
    space: QISpace, labels: np.ndarray, summary: ClassSummary
) -> dict[str, float]:
    """Byun's total IL, its per-record-per-attribute average and NCP of a clustering."""
    il = float((summary.sizes * _class_d(space, summary)).sum())
    denom = max(space.n * space.n_attributes, 1)
    return {
        "byun_il": il,
        "byun_il_per_record_attribute": il / denom,
        "ncp": ncp(space, labels, summary=summary),
    }


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


def finish_release(
    table: pd.DataFrame,
    space: QISpace,
    labels: np.ndarray,
    check: ModelCheck,
    *,
    algorithm: str,
    qi: Sequence[str],
    sensitive: str | None,
    rng: RandomSource,
    t0: float,
    report: str = "ranges",
    info: dict[str, Any] | None = None,
    extra_metrics: dict[str, float] | None = None,
) -> Release:
    """Generalize ``table`` by the clustering ``labels``, verify the model on the
    released classes, compute the metrics and build the shuffled :class:`Release`."""
    summary = summarize_classes(space, labels)
    out = generalized_frame(table, space, labels, summary, report=report)
    released = canonical_labels(out, qi)
    if not check_release_classes(check, released):  # pragma: no cover - a bug guard
        raise RuntimeError(f"{algorithm}: released classes violate the privacy model")
    metrics = clustering_metrics(space, labels, summary)
    metrics.update(extra_metrics or {})
    metrics["suppression_rate"] = 0.0
    metrics["n_classes"] = float(released.max() + 1 if len(released) else 0)
    full_info: dict[str, Any] = {"n_groups": len(summary.sizes)}
    full_info.update(info or {})
    return build_release(
        table,
        {c: out[c].to_numpy() for c in qi},
        released,
        algorithm=algorithm,
        qi=qi,
        sensitive=sensitive,
        rng=rng,
        t0=t0,
        info=full_info,
        metrics=metrics,
    )


def build_release(
    table: pd.DataFrame,
    released_values: Mapping[str, np.ndarray],
    class_ids: np.ndarray,
    *,
    algorithm: str,
    qi: Sequence[str],
    sensitive: str | None,
    rng: RandomSource,
    t0: float,
    info: dict[str, Any],
    metrics: dict[str, float],
) -> Release:
    """Shuffle the released rows into a :class:`~ppdm.anonymize.release.Release` and
    record the runtime (``info['runtime_s']``, measured from ``t0``)."""
    release = make_release(
        table,
        qi=qi,
        released_values=released_values,
        class_ids=class_ids,
        algorithm=algorithm,
        sensitive=sensitive,
        info=info,
        metrics=metrics,
        rng=rng,
    )
    release.info["runtime_s"] = time.perf_counter() - t0
    return release
