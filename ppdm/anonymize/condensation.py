"""Condensation: synthetic data from group statistics, static and streaming
(Aggarwal 2015, §20.3.1.4, equations 20.6-20.9; Aggarwal and Yu, EDBT 2004).

Static condensation:

1. partition the records into groups of at least ``k`` (here with MDAV-generic on the
   standardized attributes, :func:`ppdm.anonymize.microaggregation.mdav_generic`; the
   seed allows "any clustering approach");
2. keep each group's size ``r``, first-order sums ``Sum(i)`` and second-order sums
   ``Sum(i, j)``, so that its mean is ``Sum(i) / r`` and its covariance (eq. 20.7)
   ``Covariance(i, j) = Sum(i, j) / r - Sum(i) Sum(j) / r^2``;
3. diagonalize each covariance matrix, ``C = P diag(lambda) P^T``;
4. generate ``r`` synthetic records per group, independently along each eigenvector
   with a uniform distribution of variance ``lambda`` (range ``sqrt(12 lambda)``), around
   the group's mean. The draws along each eigenvector are centred, so that "the number
   and mean of the synthetic records matches its base group" exactly.

Streaming condensation keeps only those statistics. The stream starts from a static
condensation of its first records; every new record joins the group with the nearest
mean (attributes scaled by the initial records' standard deviations) and updates the
additive sums. When a group reaches ``2k`` records it is split into two groups of ``k``
along its longest eigenvector: under the model of uniform data along each eigenvector,
the range along it is ``R = sqrt(12 lambda_max)`` (eq. 20.8), the two new means lie at
``R / 4`` on either side of the old mean, ``lambda_max`` becomes ``lambda_max / 4`` and
both children get the covariance ``C = P Sigma P^T`` (eq. 20.9); their second-order sums
are back-calculated with eq. 20.6, ``Sum(i, j) = r (Covariance(i, j) + Mean(i) Mean(j))``.
A split keeps the parent's first- and second-order sums exactly.

Statistics are kept relative to a fixed centre (the initial records' mean), which
changes no covariance or eigenvector but avoids cancellation in eq. 20.7.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import pandas as pd

from ppdm.anonymize.cluster_release import build_release
from ppdm.anonymize.microaggregation import MixedSpace, il_measures, mdav_generic
from ppdm.anonymize.qi_space import is_numeric_column
from ppdm.anonymize.release import Release
from ppdm.errors import ConfigError
from ppdm.progress import Progress, progress_task
from ppdm.randomness import RandomSource, make_rng

__all__ = [
    "CondensationStream",
    "GroupStatistics",
    "condensation",
    "split_group",
    "synthesize",
]


class GroupStatistics:
    """Sizes ``r``, first-order sums ``Sum(i)`` and second-order sums ``Sum(i, j)`` of
    a set of groups (arrays of shape ``(G,)``, ``(G, d)``, ``(G, d, d)``)."""

    def __init__(self, sizes: np.ndarray, sums: np.ndarray, products: np.ndarray) -> None:
        self.sizes = np.asarray(sizes, dtype=np.int64)
        self.sums = np.asarray(sums, dtype=float)
        self.products = np.asarray(products, dtype=float)

    @classmethod
    def from_records(cls, x: np.ndarray, labels: np.ndarray) -> GroupStatistics:
        """Statistics of the groups ``labels`` (``0..G-1``) of the records ``x``."""
        x = np.asarray(x, dtype=float)
        labels = np.asarray(labels, dtype=np.int64)
        g = int(labels.max()) + 1 if len(labels) else 0
        order = np.argsort(labels, kind="stable")
        sizes = np.bincount(labels, minlength=g)
        starts = np.r_[0, np.cumsum(sizes)[:-1]]
        xs = x[order]
        sums = np.add.reduceat(xs, starts, axis=0) if g else np.zeros((0, x.shape[1]))
        outer = xs[:, :, None] * xs[:, None, :]
        products = np.add.reduceat(outer, starts, axis=0) if g else np.zeros((0, *outer.shape[1:]))
        return cls(sizes, sums, products)

    @property
    def means(self) -> np.ndarray:
        """``Mean(i) = Sum(i) / r`` of every group."""
        return self.sums / self.sizes[:, None]

    @property
    def covariances(self) -> np.ndarray:
        """Eq. (20.7): ``Sum(i, j) / r - Sum(i) Sum(j) / r^2`` of every group."""
        r = self.sizes[:, None, None].astype(float)
        return self.products / r - self.sums[:, :, None] * self.sums[:, None, :] / r**2


def split_group(
    size: int, sums: np.ndarray, products: np.ndarray
) -> tuple[tuple[int, np.ndarray, np.ndarray], tuple[int, np.ndarray, np.ndarray], np.ndarray]:
    """Split a group of ``2k`` records into two groups of ``k`` along its longest
    eigenvector (Aggarwal 2015, eqs. 20.6-20.9).

    Returns the two children's ``(size, Sum(i), Sum(i, j))`` (the first at
    ``mean - R/4 e``, the second at ``mean + R/4 e``) and the unit eigenvector ``e``.

    Four records on the diagonal: variance 2.5 along ``e = (1, 1) / sqrt(2)``, so
    ``R = sqrt(30)`` and the children's means lie ``sqrt(30) / 4`` from ``(1.5, 1.5)``
    (the model's uniform spread; the actual halves have means 0.5 and 2.5):

    >>> x = np.array([[0.0, 0.0], [1.0, 1.0], [2.0, 2.0], [3.0, 3.0]])
    >>> (n1, s1, _), (n2, s2, _), e = split_group(4, x.sum(0), x.T @ x)
    >>> n1, n2, np.round(s1 / n1, 3).tolist(), np.round(s2 / n2, 3).tolist()
    (2, 2, [0.532, 0.532], [2.468, 2.468])
    """
    if size < 2 or size % 2:
        raise ValueError(f"only groups of an even size 2k >= 2 are split, not {size}")
    r = float(size)
    mean = sums / r
    cov = products / r - np.outer(sums, sums) / r**2  # eq. 20.7
    lam, vec = np.linalg.eigh(cov)
    lam = np.clip(lam, 0.0, None)
    e = vec[:, -1]
    lam_max = lam[-1]
    half_range = np.sqrt(12.0 * lam_max) / 4.0  # R / 4 with R from eq. 20.8
    new_lam = lam.copy()
    new_lam[-1] = lam_max / 4.0
    child_cov = (vec * new_lam) @ vec.T  # eq. 20.9
    k = size // 2
    children = []
    for sign in (-1.0, 1.0):
        mu = mean + sign * half_range * e
        children.append((k, k * mu, k * (child_cov + np.outer(mu, mu))))  # eq. 20.6
    return children[0], children[1], e


def synthesize(
    stats: GroupStatistics, rng: RandomSource, *, exact_mean: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """Generate ``r`` synthetic records per group: uniform along each eigenvector of the
    group's covariance with variance equal to its eigenvalue (Aggarwal 2015, §20.3.1.4 step 4).

    Returns the records ``(sum r, d)`` and their group ids. With ``exact_mean`` the
    draws along each eigenvector are centred per group so that each group's synthetic
    mean equals its mean.
    """
    sizes = stats.sizes
    g = len(sizes)
    d = stats.sums.shape[1]
    labels = np.repeat(np.arange(g), sizes)
    total = int(sizes.sum())
    if total == 0:
        return np.zeros((0, d)), labels
    lam, vec = np.linalg.eigh(stats.covariances)  # batched over groups
    lam = np.clip(lam, 0.0, None)
    half = np.sqrt(3.0 * lam)  # uniform on [-sqrt(3 lam), sqrt(3 lam)] has variance lam
    u = (rng.random(total * d).reshape(total, d) * 2.0 - 1.0) * half[labels]
    if exact_mean:
        sums = np.stack([np.bincount(labels, weights=u[:, j], minlength=g) for j in range(d)], 1)
        u -= (sums / sizes[:, None])[labels]
    x = stats.means[labels] + np.einsum("nij,nj->ni", vec[labels], u)
    return x, labels


class CondensationStream:
    """Streaming condensation (Aggarwal 2015, §20.3.1.4): group statistics maintained
    incrementally, groups of ``k`` to ``2k - 1`` records split at ``2k``.

    Parameters
    ----------
    k : int
    initial : numpy.ndarray
        ``(m, d)`` first records, condensed statically (``m >= k``) to start the stream.
    track : bool
        Also keep which input records each group stands for (row numbers counted from 0
        over ``initial`` then every :meth:`add`), for releases that carry other columns
        along. A split then sends the ``k`` records with the smaller projection on the
        split eigenvector to the lower child. The statistics never use the records.

    >>> rng = np.random.default_rng(0)
    >>> s = CondensationStream(5, rng.normal(size=(20, 2)))
    >>> for row in rng.normal(size=(200, 2)):
    ...     _ = s.add(row)
    >>> int(s.sizes.sum()), bool(s.sizes.min() >= 5), bool(s.sizes.max() <= 9)
    (220, True, True)
    """

    def __init__(self, k: int, initial: np.ndarray, *, track: bool = False) -> None:
        initial = np.asarray(initial, dtype=float)
        if initial.ndim != 2:
            raise ValueError("initial records must be a (m, d) array")
        if k < 1:
            raise ConfigError(f"k must be >= 1, not {k}")
        if len(initial) < k:
            raise ConfigError(f"the stream needs at least k = {k} initial records")
        self.k = int(k)
        self.d = initial.shape[1]
        self.center = initial.mean(axis=0)
        sd = initial.std(axis=0)
        self.scale = np.where(sd > 0, sd, 1.0)
        z = (initial - self.center) / self.scale
        space = MixedSpace(z, np.zeros(self.d, dtype=bool), np.zeros((len(z), 0), int), [])
        labels = mdav_generic(space, self.k)
        stats = GroupStatistics.from_records(initial - self.center, labels)
        self._sizes = list(stats.sizes)
        self._sums = list(stats.sums)
        self._products = list(stats.products)
        self._means = stats.means.copy()
        self.n_seen = len(initial)
        self.splits = 0
        self.track = track
        self.members: list[list[int]] = []
        self._rows: list[np.ndarray] = []
        if track:
            self.members = [[] for _ in range(len(self._sizes))]
            for i, g in enumerate(labels):
                self.members[int(g)].append(i)
            self._rows = list(initial - self.center)

    @property
    def n_groups(self) -> int:
        return len(self._sizes)

    @property
    def sizes(self) -> np.ndarray:
        return np.array(self._sizes, dtype=np.int64)

    def statistics(self) -> GroupStatistics:
        """The groups' statistics in the data's own coordinates."""
        sizes = self.sizes
        sums_c = np.array(self._sums).reshape(len(sizes), self.d)
        prods_c = np.array(self._products).reshape(len(sizes), self.d, self.d)
        # undo the centring: x = c + y
        c = self.center
        sums = sums_c + sizes[:, None] * c
        prods = (
            prods_c
            + sums_c[:, :, None] * c[None, None, :]
            + c[None, :, None] * sums_c[:, None, :]
            + sizes[:, None, None] * np.outer(c, c)[None]
        )
        return GroupStatistics(sizes, sums, prods)

    def add(self, record: np.ndarray) -> int:
        """Add one record to the group with the nearest mean; split it at ``2k``.
        Returns the group the record joined (before any split)."""
        y = np.asarray(record, dtype=float) - self.center
        if y.shape != (self.d,):
            raise ValueError(f"a record has {self.d} attributes, got shape {y.shape}")
        dist = (((self._means - y) / self.scale) ** 2).sum(axis=1)
        g = int(np.argmin(dist))
        self._sizes[g] += 1
        self._sums[g] = self._sums[g] + y
        self._products[g] = self._products[g] + np.outer(y, y)
        self._means[g] = self._sums[g] / self._sizes[g]
        row = self.n_seen
        self.n_seen += 1
        if self.track:
            self.members[g].append(row)
            self._rows.append(y)
        if self._sizes[g] >= 2 * self.k:
            self._split(g)
        return g

    def _split(self, g: int) -> None:
        lo, hi, e = split_group(self._sizes[g], self._sums[g], self._products[g])
        self._sizes[g], self._sums[g], self._products[g] = lo
        self._sizes.append(hi[0])
        self._sums.append(hi[1])
        self._products.append(hi[2])
        self._means[g] = lo[1] / lo[0]
        self._means = np.vstack([self._means, hi[1] / hi[0]])
        self.splits += 1
        if self.track:
            self._split_members(g, e)

    def _split_members(self, g: int, e: np.ndarray) -> None:
        rows = np.array(self.members[g], dtype=np.int64)
        proj = np.array([self._rows[i] for i in rows]) @ e
        order = np.argsort(proj, kind="stable")
        k = self.k
        self.members[g] = rows[order[:k]].tolist()
        self.members.append(rows[order[k:]].tolist())

    def synthesize(
        self, rng: RandomSource, *, exact_mean: bool = True
    ) -> tuple[np.ndarray, np.ndarray]:
        """Synthetic records of every group (see :func:`synthesize`)."""
        return synthesize(self.statistics(), rng, exact_mean=exact_mean)


def condensation(
    table: pd.DataFrame,
    *,
    qi: Sequence[str],
    k: int,
    rng: int | RandomSource | None = None,
    progress: Progress | None = None,
    streaming: bool = False,
    initial: int | None = None,
) -> Release:
    """Replace the numeric columns ``qi`` of ``table`` by condensed synthetic records
    (Aggarwal 2015, §20.3.1.4).

    Parameters
    ----------
    table : pandas.DataFrame
    qi : list of str
        Numeric columns to condense (the seed condenses every attribute it is given;
        columns not listed are released as they are).
    k : int
        Minimum group size.
    rng : int or RandomSource, optional
        Randomness of the synthetic draws and the output shuffle.
    progress : Progress, optional
    streaming : bool
        ``False``: static condensation of the whole table. ``True``: the rows arrive in
        table order; the first ``initial`` rows (default ``min(n, 10 k)``) are condensed
        statically, every further row updates the statistics of its nearest group, and
        groups split at ``2k`` (eqs. 20.6-20.9).
    initial : int, optional
        Size of the streaming start-up batch.

    Returns
    -------
    Release
        One synthetic record per input row; each input row's other columns are kept
        and its QIs replaced by a synthetic record drawn from its group (in the
        streaming case, the group its membership was tracked to). ``class_ids`` are the
        groups. ``metrics``: ``il1``-``il5``, ``il`` (IL1 pairs every row with a
        synthetic record of its own group), ``suppression_rate`` (0), ``n_classes``;
        ``info``: ``runtime_s``, ``n_groups``, ``k``, ``streaming``, group size range,
        ``splits`` and ``initial`` (streaming).
    """
    t0 = time.perf_counter()
    source = make_rng(rng)
    qi = list(qi)
    if not qi:
        raise ConfigError("give at least one numeric column to condense")
    missing = [c for c in qi if c not in table.columns]
    if missing:
        raise ConfigError(f"column(s) not in the table: {missing}")
    bad = [c for c in qi if not is_numeric_column(table[c])]
    if bad:
        raise ConfigError(f"condensation needs numeric columns; not numeric: {bad}")
    if int(k) != k or k < 1:
        raise ConfigError(f"k must be a positive integer, not {k!r}")
    k = int(k)
    x = table[qi].to_numpy(dtype=float)
    if np.isnan(x).any():
        raise ConfigError("condensed columns have missing values")
    n, d = x.shape
    if n < k:
        raise ConfigError(f"the table has {n} rows, fewer than k = {k}")
    info: dict[str, object] = {"k": k, "streaming": bool(streaming)}
    if not streaming:
        sd = x.std(axis=0)
        z = (x - x.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
        space = MixedSpace(z, np.zeros(d, dtype=bool), np.zeros((n, 0), dtype=int), [])
        labels = mdav_generic(space, k, progress=progress)
        stats = GroupStatistics.from_records(x, labels)
        synth, synth_labels = synthesize(stats, source)
        order = np.argsort(labels, kind="stable")
        members = list(np.split(order, np.cumsum(stats.sizes)[:-1]))
    else:
        m0 = min(n, 10 * k) if initial is None else int(initial)
        if not k <= m0 <= n:
            raise ConfigError(f"initial must be between k = {k} and the table's {n} rows")
        stream = CondensationStream(k, x[:m0], track=True)
        with progress_task(progress, "streaming condensation", total=n - m0) as bar:
            for i in range(m0, n):
                stream.add(x[i])
                if (i - m0) % 1024 == 1023:
                    bar.advance(1024)
            bar.advance((n - m0) % 1024)
        stats = stream.statistics()
        synth, synth_labels = stream.synthesize(source)
        members = [np.array(m, dtype=np.int64) for m in stream.members]
        info.update({"splits": stream.splits, "initial": m0})
    # Each input row gets a synthetic record of its own group, in random order.
    sizes = np.array([len(m) for m in members], dtype=np.int64)
    if not np.array_equal(sizes, stats.sizes):  # pragma: no cover - a bug guard
        raise RuntimeError("condensation: group membership and statistics disagree")
    rows = np.concatenate(members) if members else np.zeros(0, dtype=np.int64)
    shuffle = np.lexsort((source.random(n), synth_labels))  # random order within groups
    released = np.empty_like(x)
    released[rows[shuffle]] = synth
    labels_out = np.empty(n, dtype=np.int64)
    labels_out[rows] = synth_labels
    metrics: dict[str, float] = {}
    if n >= 2:
        metrics.update(il_measures(x, released))
    metrics["suppression_rate"] = 0.0
    metrics["n_classes"] = float(len(stats.sizes))
    info.update(
        {
            "n_groups": len(stats.sizes),
            "min_group_size": int(stats.sizes.min()),
            "max_group_size": int(stats.sizes.max()),
        }
    )
    return build_release(
        table,
        {c: released[:, j] for j, c in enumerate(qi)},
        labels_out,
        algorithm="condensation-streaming" if streaming else "condensation",
        qi=qi,
        sensitive=None,
        rng=source,
        t0=t0,
        info=info,
        metrics=metrics,
    )
