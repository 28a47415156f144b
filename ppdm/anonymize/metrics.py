"""Utility metrics of generalized and partitioned releases (Xiong n.d., "Information
Metrics"; Aggarwal 2015, §20.3.1.1 for the generalization height).

All metrics are always reported together with the suppression rate. Suppressed rows
count as fully generalized (every QI at the root of its hierarchy) in the per-value
metrics, as in ARX.

* ``generalization_height`` — sum of the node's levels (Aggarwal 2015, §20.3.1.1).
* ``precision`` — Sweeney's Prec (2002): ``1 - sum_(rows, attrs) level/(H_a - 1) /
  (rows * attrs)``; 1 means no generalization ("minimal distortion" family).
* ``iloss`` — ILoss (Xiao and Tao 2006): a value generalized to ``v*`` costs
  ``(|v*| - 1) / |D_A|`` (``|v*|`` leaves covered; for numeric ranges ``(hi - lo) /
  (max - min)``), averaged over rows and attributes.
* ``ncp`` — normalized certainty penalty (Xu et al. 2006): numeric ranges ``(hi - lo) /
  (max - min)``; a categorical label covering ``u > 1`` leaves costs ``u / |D_A|``, a leaf
  0; averaged over rows and attributes.
* ``discernibility`` — DM (Bayardo and Agrawal 2005): ``sum |E|^2`` over released classes
  plus ``n`` for every suppressed row.
* ``avg_class_size`` — C_avg (LeFevre et al. 2006): ``(released rows / classes) / k``.
* ``classification_metric`` — CM (Iyengar 2002): fraction of rows that are suppressed or
  whose class label differs from the majority label of their equivalence class.

Examples
--------
>>> discernibility(np.array([3, 3]), suppressed=0, n=6)
18
>>> classification_metric(np.array([0, 0, 0, 1, 1, 1]), np.array(list("aabbbc")))
0.3333333333333333
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ppdm.anonymize.hierarchy import Hierarchy, as_labels
from ppdm.errors import ConfigError

if TYPE_CHECKING:
    from ppdm.anonymize.lattice.core import FrequencySet, FullDomainProblem
    from ppdm.anonymize.release import Release

__all__ = [
    "OBJECTIVES",
    "LevelLoss",
    "average_class_size",
    "classification_metric",
    "discernibility",
    "generalization_metrics",
    "objective",
    "objective_lower_bound",
    "partition_metrics",
    "release_class_metrics",
]

#: Metrics the optimal search can minimize.
OBJECTIVES = ("loss", "precision", "ncp", "dm", "cavg", "height")


def discernibility(sizes: np.ndarray, *, suppressed: int, n: int) -> int:
    """DM: ``sum |E|^2`` over released classes plus ``n`` per suppressed row."""
    sizes = np.asarray(sizes, dtype=np.int64)
    return int((sizes**2).sum() + int(n) * int(suppressed))


def average_class_size(released: int, classes: int, k: int) -> float:
    """C_avg = (released rows / number of classes) / k (0 when nothing is released)."""
    if classes == 0:
        return 0.0
    return released / classes / max(int(k), 1)


def classification_metric(
    class_ids: np.ndarray, labels: np.ndarray, *, keep: np.ndarray | None = None
) -> float:
    """CM (Iyengar 2002): penalty 1 for each suppressed row and each row whose label is
    not its class's majority label, divided by the number of rows."""
    class_ids = np.asarray(class_ids)
    n = len(class_ids)
    if n == 0:
        return 0.0
    keep = np.ones(n, dtype=bool) if keep is None else np.asarray(keep, dtype=bool)
    cls, _ = pd.factorize(class_ids[keep])
    lab, _ = pd.factorize(pd.Series(np.asarray(labels)[keep], dtype=object))
    if len(cls) == 0:
        return 1.0
    n_lab = int(lab.max()) + 1
    counts = np.bincount(cls * n_lab + lab, minlength=(int(cls.max()) + 1) * n_lab)
    majority = counts.reshape(-1, n_lab).max(axis=1).sum()
    penalties = (n - int(keep.sum())) + (len(cls) - int(majority))
    return penalties / n


class LevelLoss:
    """Per-label costs of each level of a hierarchy: ILoss, precision and NCP."""

    def __init__(self, hierarchy: Hierarchy) -> None:
        self.hierarchy = hierarchy
        top = hierarchy.height - 1
        domain = len(hierarchy.values)
        nums = hierarchy.numeric_values()
        span = float(nums.max() - nums.min()) if nums is not None and len(nums) else 0.0
        self.iloss: list[np.ndarray] = []
        self.precision: list[np.ndarray] = []
        self.ncp: list[np.ndarray] = []
        for lv in range(hierarchy.height):
            leaves = hierarchy.leaf_counts(lv).astype(np.float64)
            self.iloss.append((leaves - 1.0) / domain)
            self.precision.append(np.full(len(leaves), lv / top if top else 0.0))
            ranges = hierarchy.label_ranges(lv)
            if ranges is not None and span > 0:
                lo, hi = ranges
                ncp = (hi - lo) / span
                ncp[hierarchy.labels(lv) == "*"] = 1.0
            else:
                ncp = np.where(leaves > 1, leaves / domain, 0.0)
            self.ncp.append(ncp)
        self.root = {
            "iloss": float(self.iloss[top].max()),
            "precision": 1.0,
            "ncp": float(self.ncp[top].max()) if top else 0.0,
        }

    def table(self, kind: str, level: int) -> np.ndarray:
        return {"iloss": self.iloss, "precision": self.precision, "ncp": self.ncp}[kind][level]


_KIND = {"loss": "iloss", "precision": "precision", "ncp": "ncp"}


def _losses(problem: FullDomainProblem) -> list[LevelLoss]:
    cached = getattr(problem, "_level_losses", None)
    if cached is None:
        cached = [LevelLoss(h) for h in problem.hierarchies]
        problem._level_losses = cached  # type: ignore[attr-defined]
    return cached


def _leaf_histograms(problem: FullDomainProblem) -> list[np.ndarray]:
    cached = getattr(problem, "_leaf_hist", None)
    if cached is None:
        cached = [
            np.bincount(problem.row_codes[:, a], minlength=len(h.values))
            for a, h in enumerate(problem.hierarchies)
        ]
        problem._leaf_hist = cached  # type: ignore[attr-defined]
    return cached


def objective_lower_bound(problem: FullDomainProblem, node: Sequence[int], metric: str) -> float:
    """A lower bound of :func:`objective` at ``node`` that ignores suppression, computed
    from the attributes' marginal histograms (exact when nothing is suppressed, for
    ``loss``, ``precision``, ``ncp`` and ``height``; ``-inf`` for ``dm`` and ``cavg``)."""
    if metric == "height":
        return float(sum(node))
    kind = _KIND.get(metric)
    if kind is None:
        return float("-inf")
    total = 0.0
    for a, (ll, hist) in enumerate(zip(_losses(problem), _leaf_histograms(problem), strict=True)):
        lv = int(node[a])
        total += float(hist @ ll.table(kind, lv)[ll.hierarchy.level_map(lv)])
    return total / (problem.n * len(problem.qi))


def objective(problem: FullDomainProblem, fs: FrequencySet, metric: str) -> float:
    """The value (lower is better) of a search objective at a node's frequency set,
    with the node's MaxSup suppression applied."""
    if metric not in OBJECTIVES:
        raise ConfigError(f"unknown metric {metric!r} (choose from {', '.join(OBJECTIVES)})")
    ok = problem.class_ok(fs)
    sizes = fs.sizes
    suppressed = int(sizes[~ok].sum())
    if metric == "height":
        return float(sum(fs.levels))
    if metric == "dm":
        return float(discernibility(sizes[ok], suppressed=suppressed, n=problem.n))
    if metric == "cavg":
        return average_class_size(
            problem.n - suppressed, int(ok.sum()), problem.model.min_class_size
        )
    kind = _KIND[metric]
    per_class = np.zeros(len(fs))
    root = 0.0
    for j, a in enumerate(fs.attrs):
        ll = _losses(problem)[a]
        per_class += ll.table(kind, fs.levels[j])[fs.keys[:, j]]
        root += ll.root[kind]
    total = float(sizes[ok] @ per_class[ok]) + suppressed * root
    return total / (problem.n * len(fs.attrs))


def generalization_metrics(
    problem: FullDomainProblem,
    node: Sequence[int],
    *,
    target: np.ndarray | None = None,
) -> dict[str, Any]:
    """Every metric of the release of ``node`` (full-domain generalization + MaxSup).

    ``target`` (one label per input row) enables the classification metric.
    """
    node = tuple(int(v) for v in node)
    fs = problem.node_frequency_set(node)
    ok = problem.class_ok(fs)
    sizes = fs.sizes
    suppressed = int(sizes[~ok].sum())
    released_classes = int(ok.sum())
    k = problem.model.min_class_size
    out: dict[str, Any] = {
        "generalization_height": int(sum(node)),
        "precision": 1.0 - objective(problem, fs, "precision"),
        "iloss": objective(problem, fs, "loss"),
        "ncp": objective(problem, fs, "ncp"),
        "discernibility": discernibility(sizes[ok], suppressed=suppressed, n=problem.n),
        "avg_class_size": average_class_size(problem.n - suppressed, released_classes, k),
        "classes": released_classes,
        "suppressed": suppressed,
        "suppression_rate": suppressed / problem.n,
    }
    if target is not None:
        class_ids, keep = problem.row_classes(node)
        out["classification_metric"] = classification_metric(class_ids, target, keep=keep)
    return out


def partition_metrics(
    table: pd.DataFrame,
    *,
    qi: Sequence[str],
    class_ids: np.ndarray,
    keep: np.ndarray | None = None,
    hierarchies: Mapping[str, Hierarchy] | None = None,
    k: int = 1,
    target: str | None = None,
) -> dict[str, Any]:
    """Metrics of a partition-based (local recoding) release, e.g. Mondrian or clustering.

    Each class publishes, per QI, the tightest generalization of its rows: the range
    ``[min, max]`` of a numeric attribute without hierarchy, the lowest common ancestor in
    the hierarchy of a categorical attribute with one, else the set of its values. ILoss
    and NCP are charged on that (Xiong n.d.: ILoss; NCP as Byun's IL per value).

    Parameters
    ----------
    table : pandas.DataFrame
        The original rows (all of them, input order).
    class_ids : numpy.ndarray
        Class of every input row.
    keep : numpy.ndarray of bool, optional
        Released rows (default all).
    """
    n = len(table)
    class_ids = np.asarray(class_ids)
    keep = np.ones(n, dtype=bool) if keep is None else np.asarray(keep, dtype=bool)
    hierarchies = dict(hierarchies or {})
    cls, _ = pd.factorize(class_ids[keep])
    n_cls = int(cls.max()) + 1 if len(cls) else 0
    sizes = np.bincount(cls, minlength=n_cls)
    suppressed = int(n - keep.sum())
    il_total = 0.0
    ncp_total = 0.0
    for name in qi:
        col = table[name].to_numpy()[keep]
        h = hierarchies.get(name)
        if h is None and pd.api.types.is_numeric_dtype(table[name].dtype):
            values = pd.to_numeric(table[name]).to_numpy(dtype=float)
            span = float(values.max() - values.min()) if n else 0.0
            frame = pd.DataFrame({"c": cls, "v": col.astype(float)})
            g = frame.groupby("c")["v"]
            width = (g.max() - g.min()).to_numpy() / span if span > 0 else np.zeros(n_cls)
            il = ncp = width
            root_il = root_ncp = 1.0
        elif h is not None:
            leaves = h.leaf_codes(col)
            level = np.full(n_cls, h.height - 1)
            for lv in range(h.height - 1, -1, -1):
                lab = h.level_map(lv)[leaves]
                single = pd.Series(lab).groupby(cls).nunique().to_numpy() == 1
                level = np.where(single, lv, level)
            rep = pd.Series(leaves).groupby(cls).first().to_numpy()
            ll = LevelLoss(h)
            il = np.array(
                [ll.iloss[lv][h.level_map(lv)[r]] for lv, r in zip(level, rep, strict=True)]
            )
            ncp = np.array(
                [ll.ncp[lv][h.level_map(lv)[r]] for lv, r in zip(level, rep, strict=True)]
            )
            root_il, root_ncp = ll.root["iloss"], ll.root["ncp"]
        else:
            labels = as_labels(table[name])
            domain = len(pd.unique(labels))
            distinct = pd.Series(labels[keep]).groupby(cls).nunique().to_numpy().astype(float)
            il = (distinct - 1.0) / domain
            ncp = np.where(distinct > 1, distinct / domain, 0.0)
            root_il, root_ncp = (domain - 1.0) / domain, 1.0
        il_total += float(sizes @ il) + suppressed * root_il
        ncp_total += float(sizes @ ncp) + suppressed * root_ncp
    denom = max(n * len(qi), 1)
    out: dict[str, Any] = {
        "iloss": il_total / denom,
        "ncp": ncp_total / denom,
        "discernibility": discernibility(sizes, suppressed=suppressed, n=n),
        "avg_class_size": average_class_size(int(keep.sum()), n_cls, k),
        "classes": n_cls,
        "suppressed": suppressed,
        "suppression_rate": suppressed / n if n else 0.0,
    }
    if target is not None:
        out["classification_metric"] = classification_metric(
            class_ids, table[target].to_numpy(), keep=keep
        )
    return out


def release_class_metrics(
    release: Release, *, k: int = 1, target: str | None = None
) -> dict[str, Any]:
    """Metrics computable from a :class:`Release` alone: DM, C_avg, CM (on released
    rows, suppressed rows penalized), classes and the suppression rate."""
    sizes = release.class_sizes()
    n = release.n_input or len(release.data)
    out: dict[str, Any] = {
        "discernibility": discernibility(sizes, suppressed=release.suppressed, n=n),
        "avg_class_size": average_class_size(len(release.data), release.n_classes, k),
        "classes": release.n_classes,
        "suppressed": release.suppressed,
        "suppression_rate": release.suppressed / n if n else 0.0,
    }
    if target is not None and target in release.data.columns and len(release.data):
        cm_released = classification_metric(release.class_ids, release.data[target].to_numpy())
        out["classification_metric"] = (cm_released * len(release.data) + release.suppressed) / n
    return out
