"""The quasi-identifiers as the clustering anonymizers see them, and a clustering's loss.

What k-member clustering (:mod:`ppdm.anonymize.kmember`), Mondrian, microaggregation and
condensation share: the quasi-identifiers encoded once (:class:`QISpace`: numeric values
and their domain sizes, taxonomy leaf and ancestor codes), per-class summaries (ranges,
means and lowest common ancestors, :class:`ClassSummary`), Byun's ``D(e)`` of each class
and the NCP utility metric (Xu et al. 2006) of a clustering.

A taxonomy tree is a :class:`~ppdm.anonymize.hierarchy.Hierarchy`: level 0 holds the
leaves and ``H(T) = height - 1`` (Adult's native-country, levels country / continent /
``*``: ``H = 2``). A categorical QI without a hierarchy gets the flat tree
``value -> *`` (distance 0 when equal, 1 otherwise). Numeric columns are numeric.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ppdm.anonymize.hierarchy import Hierarchy, as_labels
from ppdm.errors import ConfigError

__all__ = [
    "ClassSummary",
    "QISpace",
    "clustering_metrics",
    "encode_qi",
    "encode_subset",
    "flat_hierarchy",
    "is_numeric_column",
    "ncp",
    "summarize_classes",
]


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
