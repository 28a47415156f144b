"""From a clustering to a release: the privacy model on classes, and generalized values.

What the clustering anonymizers (:mod:`ppdm.anonymize.kmember`, Mondrian,
microaggregation, condensation) do once they have classes: check a privacy model on each
class's sensitive values (:class:`ModelCheck`), merge the classes that violate it until
every class passes (l-diversity and t-closeness after the fact), generalize each
quasi-identifier to its class's ``"[lo-hi]"`` range, mean or lowest common ancestor, and
build the shuffled :class:`~ppdm.anonymize.release.Release` with its metrics.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ppdm.anonymize.hierarchy import Hierarchy, as_labels
from ppdm.anonymize.qi_space import ClassSummary, QISpace, clustering_metrics, summarize_classes
from ppdm.anonymize.release import Release, make_release
from ppdm.errors import ConfigError
from ppdm.randomness import RandomSource

__all__ = [
    "ModelCheck",
    "build_release",
    "canonical_labels",
    "check_release_classes",
    "finish_release",
    "generalized_frame",
    "merge_until_valid",
    "prepare_model",
]


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
