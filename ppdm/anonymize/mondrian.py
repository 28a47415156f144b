"""Mondrian multidimensional partitioning (Aggarwal 2015, §20.3.1.3; LeFevre et al. 2006).

Mondrian starts from one box holding every record and repeatedly cuts a box in two with
an axis-parallel cut, as long as both halves satisfy the privacy model::

    B = {all records}
    while some region R in B has a valid split:
        choose a dimension (the widest one, normalized), split R at its median
        B <- B U {R1, R2} - {R}

The regions left are the equivalence classes. They are released as the bounding box of
their records (``"[lo-hi]"`` per numeric attribute) or as the averages along each
dimension (section 20.3.1.3, "approaches ... for reporting").

* **Numeric attributes** are cut at the median (found with ``np.partition``). In *strict*
  Mondrian the regions do not overlap: records equal to the median all go to one side
  (``x <= median`` or ``x < median``, whichever is more balanced and allowed). In
  *relaxed* Mondrian the records are sorted and cut at the middle position, so records
  equal to the median may land on both sides; the halves then have ``floor(m/2)`` and
  ``ceil(m/2)`` records, which bounds every region by ``2k - 1`` records for
  k-anonymity.
* **Categorical attributes** follow their generalization hierarchy ("by designing
  appropriate split rules", section 20.3.1.3): a region whose values have the lowest
  common ancestor ``u`` is split into one region per child of ``u`` that occurs in it,
  allowed only if every child region satisfies the model (in both modes). A categorical
  QI without a hierarchy uses the flat tree ``value -> *``.
* **Privacy models**: a split is allowed only if all parts satisfy the model, so
  l-diversity and t-closeness work exactly like k-anonymity; since only allowed splits
  are taken, every released class satisfies the model and nothing is suppressed.
* **Dimension choice**: dimensions are tried widest first; the width is the range over
  the table's range for a numeric QI and the share of the domain's leaves under the
  lowest common ancestor for a categorical one. If no cut on a dimension is allowed the
  next one is tried; a region with no allowed cut is final.

Work is ``O(n log n)`` numpy operations over index arrays (a region is only examined
when it has at least twice the minimum class size).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ppdm.anonymize.cluster_release import ModelCheck, finish_release, prepare_model
from ppdm.anonymize.hierarchy import Hierarchy
from ppdm.anonymize.qi_space import QISpace, encode_qi
from ppdm.anonymize.release import Release
from ppdm.errors import ConfigError
from ppdm.progress import Progress, progress_task
from ppdm.randomness import RandomSource, make_rng

__all__ = ["mondrian", "mondrian_partition"]


class _Partitioner:
    """The recursion of Mondrian over index arrays of the encoded table."""

    def __init__(self, space: QISpace, check: ModelCheck, *, strict: bool) -> None:
        self.space = space
        self.check = check
        self.strict = strict
        self.min_size = check.min_size
        self.size_only = not bool(getattr(check.model, "needs_sensitive", False))
        self.x = space.x
        self.span = np.where(space.span > 0, space.span, np.inf)
        # Categorical: the ancestor code of every record at every level below the root,
        # all attributes side by side, so one gather serves every attribute of a region.
        blocks: list[np.ndarray] = []
        self.offsets: list[int] = []
        self.top: list[int] = []
        self.share_tables: list[list[np.ndarray]] = []
        self.n_labels: list[list[int]] = []
        width = 0
        for j in range(len(space.categorical)):
            ra = space.record_anc(j)
            top = ra.shape[1] - 1  # the root level: one node, never split further up
            blocks.append(ra[:, :top])
            self.offsets.append(width)
            self.top.append(top)
            width += top
            self.n_labels.append([int(space.anc[j][:, lv].max()) + 1 for lv in range(top)])
            h = space.hierarchies[j]
            domain = len(h.values)
            self.share_tables.append([h.leaf_counts(lv) / domain for lv in range(top)])
        self.codes = (
            np.ascontiguousarray(np.concatenate(blocks, axis=1))
            if blocks
            else np.zeros((space.n, 0), dtype=np.int64)
        )
        self.sens = check.codes
        self.d = check.d

    # -- model checks -------------------------------------------------------------------

    def _allowed(self, parts: list[np.ndarray]) -> bool:
        """Whether every part (array of row indices) satisfies the model."""
        for p in parts:
            if len(p) < self.min_size:
                return False
        if self.size_only:
            return True
        counts = np.stack([np.bincount(self.sens[p], minlength=self.d) for p in parts])
        return bool(np.all(self.check.ok(counts)))

    # -- splits ---------------------------------------------------------------------------

    def _split_numeric(self, idx: np.ndarray, x: np.ndarray) -> list[np.ndarray] | None:
        m = len(idx)
        if not self.strict:
            order = np.argsort(x, kind="stable")
            parts = [idx[order[: m // 2]], idx[order[m // 2 :]]]
            return parts if self._allowed(parts) else None
        mid = (m - 1) // 2
        med = np.partition(x, mid)[mid]
        options = []
        le = x <= med
        n_le = int(le.sum())
        if n_le < m:
            options.append((abs(n_le - m / 2), le))
        lt = x < med
        n_lt = int(lt.sum())
        if n_lt > 0:
            options.append((abs(n_lt - m / 2), lt))
        options.sort(key=lambda o: o[0])
        for _, mask in options:
            parts = [idx[mask], idx[~mask]]
            if self._allowed(parts):
                return parts
        return None

    def _split_categorical(
        self, idx: np.ndarray, child: np.ndarray, n_labels: int
    ) -> list[np.ndarray] | None:
        """Split into one part per child node (``child``: each record's child code)."""
        sizes = np.bincount(child, minlength=n_labels)
        present = np.flatnonzero(sizes)
        if sizes[present].min() < self.min_size:
            return None
        if not self.size_only:
            counts = np.bincount(child * self.d + self.sens[idx], minlength=n_labels * self.d)
            counts = counts.reshape(n_labels, self.d)[present]
            if not np.all(self.check.ok(counts)):
                return None
        order = np.argsort(child, kind="stable")
        return list(np.split(idx[order], np.cumsum(sizes[present])[:-1]))

    # -- the recursion ---------------------------------------------------------------------

    def run(self, progress: Progress | None = None) -> tuple[np.ndarray, int]:
        space = self.space
        n = space.n
        q = len(space.categorical)
        p = self.x.shape[1]
        labels = np.full(n, -1, dtype=np.int64)
        # Per region: its rows and, per categorical QI, an upper bound of the level of the
        # lowest common ancestor of its values (refined when the region is examined).
        stack: list[tuple[np.ndarray, list[int]]] = [(np.arange(n, dtype=np.int64), self.top)]
        n_parts = 0
        with progress_task(progress, "Mondrian partitioning", total=n) as bar:
            while stack:
                idx, lv = stack.pop()
                m = len(idx)
                split: list[np.ndarray] | None = None
                child_lv = lv
                if m >= 2 * self.min_size:
                    lv = list(lv)
                    widths: list[tuple[float, int]] = []  # (-normalized width, dimension)
                    if q:
                        sub = self.codes[idx]
                        const = (sub.min(axis=0) == sub.max(axis=0)).tolist()
                        first = sub[0].tolist()
                        for j in range(q):
                            off, level = self.offsets[j], lv[j]
                            while level > 0 and const[off + level - 1]:
                                level -= 1
                            lv[j] = level
                            if level == self.top[j]:
                                widths.append((-1.0, p + j))
                            elif level > 0:
                                share = self.share_tables[j][level][first[off + level]]
                                widths.append((-float(share), p + j))
                    if p:
                        xs = self.x[idx]
                        w = ((xs.max(axis=0) - xs.min(axis=0)) / self.span).tolist()
                        widths.extend((-wa, a) for a, wa in enumerate(w) if wa > 0)
                    widths.sort()
                    for _, dim in widths:
                        if dim < p:
                            split = self._split_numeric(idx, xs[:, dim])
                            child_lv = lv
                        else:
                            j = dim - p
                            level = lv[j]
                            child = sub[:, self.offsets[j] + level - 1]
                            split = self._split_categorical(idx, child, self.n_labels[j][level - 1])
                            if split is not None:
                                child_lv = list(lv)
                                child_lv[j] = level - 1
                        if split is not None:
                            break
                if split is None:
                    labels[idx] = n_parts
                    n_parts += 1
                    bar.advance(m)
                else:
                    for part in split:
                        stack.append((part, child_lv))
        return labels, n_parts


def mondrian_partition(
    space: QISpace,
    check: ModelCheck,
    *,
    strict: bool = True,
    progress: Progress | None = None,
) -> tuple[np.ndarray, int]:
    """Mondrian's regions of an encoded table: a region label per row and their number."""
    return _Partitioner(space, check, strict=strict).run(progress)


def mondrian(
    table: pd.DataFrame,
    *,
    qi: Sequence[str],
    model: Any,
    sensitive: str | None = None,
    hierarchies: Mapping[str, Hierarchy] | None = None,
    strict: bool = True,
    report: str = "ranges",
    rng: int | RandomSource | None = None,
    progress: Progress | None = None,
) -> Release:
    """Anonymize ``table`` by Mondrian multidimensional partitioning (Aggarwal 2015, §20.3.1.3).

    Parameters
    ----------
    table : pandas.DataFrame
    qi : list of str
        Quasi-identifiers. Numeric columns are split at medians; the others along their
        hierarchy (``hierarchies[col]``, else the flat tree ``value -> *``).
    model : PrivacyModel or ModelSet
        A split is taken only if every part satisfies the model (k-anonymity,
        l-diversity, t-closeness or several at once).
    sensitive : str, optional
        The sensitive column (needed by l-diversity and t-closeness).
    hierarchies : dict of str to Hierarchy, optional
    strict : bool
        Strict (non-overlapping regions) or relaxed (median ties split between the
        halves) Mondrian; see the module docstring.
    report : {'ranges', 'averages'}
        Numeric QIs released as ``"[lo-hi]"`` of the region's records or as their mean.
        Categorical QIs are released as the label of the lowest common ancestor of the
        region's values.
    rng : int or RandomSource, optional
        Only used to shuffle the output rows (``None``: the OS CSPRNG).
    progress : Progress, optional

    Returns
    -------
    Release
        ``metrics``: ``ncp``, ``byun_il``, ``byun_il_per_record_attribute``,
        ``suppression_rate`` (always 0), ``n_classes``; ``info``: ``runtime_s``,
        ``n_groups`` and ``partitions`` (regions), ``strict``, ``report``.

    Examples
    --------
    >>> t = pd.DataFrame({"age": [21, 22, 23, 24, 51, 52, 53, 54],
    ...                   "disease": ["flu", "hiv", "flu", "hiv", "flu", "hiv", "flu", "hiv"]})
    >>> from ppdm.anonymize.models import KAnonymity
    >>> r = mondrian(t, qi=["age"], model=KAnonymity(2), sensitive="disease", rng=0)
    >>> sorted(set(r.data["age"]))
    ['[21-22]', '[23-24]', '[51-52]', '[53-54]']
    """
    t0 = time.perf_counter()
    if report not in ("ranges", "averages"):
        raise ConfigError(f"report must be 'ranges' or 'averages', not {report!r}")
    source = make_rng(rng)
    check = prepare_model(model, table, sensitive=sensitive, hierarchies=hierarchies)
    space = encode_qi(table, qi, hierarchies)
    labels, n_parts = mondrian_partition(space, check, strict=strict, progress=progress)
    return finish_release(
        table,
        space,
        labels,
        check,
        algorithm="mondrian",
        qi=qi,
        sensitive=sensitive,
        rng=source,
        t0=t0,
        report=report,
        info={"partitions": n_parts, "strict": bool(strict), "report": report},
    )
