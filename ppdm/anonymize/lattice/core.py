"""The generalization lattice and the node check shared by every full-domain search.

Aggarwal 2015, §20.3.1.1: a node of the lattice gives one generalization level per
quasi-identifier; its height is the sum of the levels; a node is a direct specialization
of another when one attribute is one level lower. Section 20.3.1.2: checking a node needs
its *frequency set* (the count of every combination of generalized values), and the
frequency set of a generalization can be *rolled up* from that of a specialization
without scanning the table.

Here the table is encoded once: each quasi-identifier becomes integer leaf codes of its
hierarchy, and the rows are collapsed into a base frequency set (distinct QI
combinations x sensitive-value counts). A level of an attribute is a lookup array
(label code at one level -> label code at a higher one), so rolling up is a gather and a
hash grouping (:func:`pandas.factorize`), and a check is a vectorized
:meth:`PrivacyModel.check_classes` on the class x sensitive-value count matrix.

MaxSup (section 20.3.1.1): a node is *anonymous* when the rows of the classes that
violate the model number at most ``max_suppressed``; those rows are then suppressed.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ppdm.anonymize.hierarchy import Hierarchy, as_labels
from ppdm.anonymize.models import KAnonymity, ModelSet, PrivacyModel
from ppdm.errors import ConfigError
from ppdm.progress import Progress, progress_or_null

__all__ = [
    "FrequencySet",
    "FullDomainProblem",
    "Lattice",
    "LatticeResult",
    "NodeCheck",
    "group_rows",
]

Node = tuple[int, ...]

_KEY_LIMIT = 1 << 62


def group_rows(keys: np.ndarray, radices: Sequence[int]) -> tuple[np.ndarray, int]:
    """Group the rows of an integer matrix: ``(group id of each row, number of groups)``.

    Group ids are numbered in order of first appearance. Columns are combined into one
    int64 key in mixed radix (re-coding whenever the key space would overflow) and
    grouped by hashing, in time linear in the number of rows.
    """
    m = keys.shape[0]
    if keys.shape[1] == 0 or m == 0:
        return np.zeros(m, dtype=np.int64), 1 if m else 0
    key = keys[:, 0].astype(np.int64, copy=True)
    bound = int(radices[0])
    for j in range(1, keys.shape[1]):
        r = int(radices[j])
        if bound * r >= _KEY_LIMIT:
            key, uniques = pd.factorize(key)
            bound = len(uniques)
        key = key * r + keys[:, j]
        bound *= r
    codes, uniques = pd.factorize(key)
    return codes.astype(np.int64, copy=False), len(uniques)


def _first_occurrences(inverse: np.ndarray) -> np.ndarray:
    """Index of the first row of each group (groups numbered by first appearance)."""
    if len(inverse) == 0:
        return np.zeros(0, dtype=np.int64)
    running = np.maximum.accumulate(inverse)
    first = np.empty(len(inverse), dtype=bool)
    first[0] = True
    first[1:] = running[1:] > running[:-1]
    return np.flatnonzero(first)


@dataclass
class FrequencySet:
    """The frequency set of a (sub)lattice node: distinct generalized QI combinations and
    the count of each sensitive value in each (Aggarwal 2015, §20.3.1.2)."""

    attrs: tuple[int, ...]
    levels: tuple[int, ...]
    keys: np.ndarray  # (classes, len(attrs)) label codes at ``levels``
    counts: np.ndarray  # (classes, d) sensitive-value counts (d = 1 without one)

    @property
    def sizes(self) -> np.ndarray:
        return self.counts.sum(axis=1)

    def __len__(self) -> int:
        return self.keys.shape[0]


@dataclass
class NodeCheck:
    """Outcome of checking one node."""

    node: Node
    anonymous: bool
    suppressed: int
    classes: int


class Lattice:
    """All level vectors ``0 <= levels[a] < heights[a]`` (a full-domain lattice).

    >>> lat = Lattice([2, 3])
    >>> lat.size, lat.max_height
    (6, 3)
    >>> [lat.node(i) for i in lat.at_height(1)]
    [(0, 1), (1, 0)]
    """

    def __init__(self, heights: Sequence[int]) -> None:
        self.heights = tuple(int(h) for h in heights)
        if any(h < 1 for h in self.heights):
            raise ValueError("every hierarchy needs at least one level")
        grids = np.meshgrid(*[np.arange(h) for h in self.heights], indexing="ij")
        self.levels = (
            np.stack([g.ravel() for g in grids], axis=1).astype(np.int64)
            if self.heights
            else np.zeros((1, 0), dtype=np.int64)
        )
        self.size = self.levels.shape[0]
        self.node_heights = self.levels.sum(axis=1)
        self.max_height = int(sum(h - 1 for h in self.heights))
        self._strides = np.array(
            [int(np.prod(self.heights[a + 1 :])) for a in range(len(self.heights))],
            dtype=np.int64,
        )
        self._by_height = [
            np.flatnonzero(self.node_heights == h) for h in range(self.max_height + 1)
        ]

    def index(self, node: Sequence[int]) -> int:
        return int(np.dot(np.asarray(node, dtype=np.int64), self._strides))

    def node(self, index: int) -> Node:
        return tuple(int(v) for v in self.levels[index])

    def at_height(self, height: int) -> np.ndarray:
        """Indices of the nodes at ``height``."""
        if not 0 <= height <= self.max_height:
            return np.zeros(0, dtype=np.int64)
        return self._by_height[height]

    def successors(self, index: int) -> list[int]:
        """Direct generalizations of a node."""
        lv = self.levels[index]
        return [
            index + int(self._strides[a])
            for a in range(len(self.heights))
            if lv[a] + 1 < self.heights[a]
        ]

    def predecessors(self, index: int) -> list[int]:
        """Direct specializations of a node."""
        lv = self.levels[index]
        return [index - int(self._strides[a]) for a in range(len(self.heights)) if lv[a] > 0]

    def generalizations_mask(self, index: int) -> np.ndarray:
        """All nodes >= the node (itself included)."""
        return np.all(self.levels >= self.levels[index], axis=1)

    def specializations_mask(self, index: int) -> np.ndarray:
        """All nodes <= the node (itself included)."""
        return np.all(self.levels <= self.levels[index], axis=1)

    def minimal(self, member: np.ndarray) -> np.ndarray:
        """Indices of members with no other member below them (componentwise)."""
        idx = np.flatnonzero(member)
        if len(idx) == 0:
            return idx
        lv = self.levels[idx]
        # Sort by height: a node can only be dominated by a lower one.
        order = np.argsort(self.node_heights[idx], kind="stable")
        idx, lv = idx[order], lv[order]
        keep: list[int] = []
        kept_levels = np.zeros((0, lv.shape[1]), dtype=np.int64)
        for i in range(len(idx)):
            if kept_levels.shape[0] and np.any(np.all(kept_levels <= lv[i], axis=1)):
                continue
            keep.append(int(idx[i]))
            kept_levels = np.vstack([kept_levels, lv[i][None, :]])
        return np.array(sorted(keep), dtype=np.int64)


class FullDomainProblem:
    """A table encoded for full-domain generalization under a privacy model with MaxSup.

    Parameters
    ----------
    table : pandas.DataFrame
    qi : sequence of str
        Quasi-identifiers, each with a hierarchy in ``hierarchies``.
    hierarchies : mapping of str to Hierarchy
    model : PrivacyModel
    sensitive : str, optional
        Required when the model needs it.
    suppression : float
        MaxSup as a fraction of the rows (0 <= suppression < 1).
    sensitive_hierarchy : Hierarchy, optional
        Passed to :meth:`PrivacyModel.prepare` (hierarchical EMD).
    """

    def __init__(
        self,
        table: pd.DataFrame,
        *,
        qi: Sequence[str],
        hierarchies: dict[str, Hierarchy],
        model: PrivacyModel,
        sensitive: str | None = None,
        suppression: float = 0.0,
        sensitive_hierarchy: Hierarchy | None = None,
    ) -> None:
        if not 0.0 <= suppression < 1.0:
            raise ConfigError(f"suppression must be in [0, 1), got {suppression!r}")
        missing = [a for a in qi if a not in hierarchies]
        if missing:
            raise ConfigError(
                f"full-domain generalization needs a hierarchy for every quasi-identifier; "
                f"missing: {', '.join(missing)}"
            )
        if model.needs_sensitive and sensitive is None:
            raise ConfigError(f"{model.describe()['model']} needs a sensitive attribute")
        self.qi = list(qi)
        self.hierarchies = [hierarchies[a] for a in self.qi]
        self.model = model
        self.n = len(table)
        if self.n == 0:
            raise ConfigError("the table is empty")
        self.suppression = float(suppression)
        self.max_suppressed = math.floor(self.suppression * self.n + 1e-9)
        self.lattice = Lattice([h.height for h in self.hierarchies])
        self.heights = self.lattice.heights
        self.checks = 0
        self.rollups = 0
        # Lookups: up[a][i][j] maps label codes of level i to level j (i <= j).
        self._up: list[list[list[np.ndarray | None]]] = []
        self._n_labels: list[list[int]] = []
        for h in self.hierarchies:
            n_lab = [len(h.labels(lv)) for lv in range(h.height)]
            maps: list[list[np.ndarray | None]] = [[None] * h.height for _ in range(h.height)]
            for i in range(h.height):
                cur = np.arange(n_lab[i], dtype=np.int64)
                maps[i][i] = cur
                for j in range(i + 1, h.height):
                    cur = h.parent_map(j - 1)[cur]
                    maps[i][j] = cur
            self._up.append(maps)
            self._n_labels.append(n_lab)
        # Encode the table.
        codes = np.empty((self.n, len(self.qi)), dtype=np.int64)
        for a, (name, h) in enumerate(zip(self.qi, self.hierarchies, strict=True)):
            col = table[name]
            if col.isna().any():
                raise ConfigError(
                    f"quasi-identifier {name!r} has {int(col.isna().sum())} missing values; "
                    "fill or drop them first"
                )
            codes[:, a] = h.leaf_codes(col)
        self.row_codes = codes
        self.sensitive = sensitive
        if sensitive is not None and (model.needs_sensitive or sensitive in table.columns):
            s_labels = as_labels(table[sensitive])
            if pd.isna(pd.Series(s_labels)).any():
                raise ConfigError(f"sensitive attribute {sensitive!r} has missing values")
            s_codes, domain = pd.factorize(pd.Series(s_labels, dtype=object), sort=True)
            self.sensitive_codes = s_codes.astype(np.int64)
            self.sensitive_domain = [str(v) for v in domain]
        else:
            self.sensitive_codes = np.zeros(self.n, dtype=np.int64)
            self.sensitive_domain = []
        model.prepare(self.sensitive_codes, self.sensitive_domain, hierarchy=sensitive_hierarchy)
        self._sizes_only = _sizes_only(model)
        d = 1 if self._sizes_only else max(len(self.sensitive_domain), 1)
        self.d = d
        s = np.zeros(self.n, dtype=np.int64) if self._sizes_only else self.sensitive_codes
        all_attrs = tuple(range(len(self.qi)))
        inverse, g = group_rows(codes, [self._n_labels[a][0] for a in all_attrs])
        counts = np.bincount(inverse * d + s, minlength=g * d).reshape(g, d)
        first = _first_occurrences(inverse)
        self.row_class_at_base = inverse
        self.base = FrequencySet(all_attrs, (0,) * len(all_attrs), codes[first], counts)

    def _lookup(self, attr: int, src: int, dst: int) -> np.ndarray:
        lookup = self._up[attr][src][dst]
        if lookup is None:
            raise ValueError(f"cannot roll up attribute {attr} from level {src} to {dst}")
        return lookup

    # -- frequency sets -----------------------------------------------------------------

    def project(self, attrs: Sequence[int]) -> FrequencySet:
        """The base frequency set restricted to a subset of attributes (level 0)."""
        attrs = tuple(attrs)
        pos = [self.base.attrs.index(a) for a in attrs]
        return self._regroup(attrs, (0,) * len(attrs), self.base.keys[:, pos], self.base.counts)

    def roll_up(self, fs: FrequencySet, levels: Sequence[int]) -> FrequencySet:
        """The frequency set at ``levels`` (each >= ``fs.levels``) from ``fs``."""
        levels = tuple(int(v) for v in levels)
        keys = np.empty_like(fs.keys)
        for j, a in enumerate(fs.attrs):
            keys[:, j] = self._lookup(a, fs.levels[j], levels[j])[fs.keys[:, j]]
        self.rollups += 1
        return self._regroup(fs.attrs, levels, keys, fs.counts)

    def _regroup(
        self, attrs: tuple[int, ...], levels: tuple[int, ...], keys: np.ndarray, counts: np.ndarray
    ) -> FrequencySet:
        radices = [self._n_labels[a][lv] for a, lv in zip(attrs, levels, strict=True)]
        inverse, g = group_rows(keys, radices)
        d = counts.shape[1]
        if d == 1:
            new_counts = np.bincount(inverse, weights=counts[:, 0], minlength=g)[:, None]
        else:
            flat = (inverse[:, None] * d + np.arange(d)[None, :]).ravel()
            new_counts = np.bincount(flat, weights=counts.ravel(), minlength=g * d).reshape(g, d)
        first = _first_occurrences(inverse)
        return FrequencySet(attrs, levels, keys[first], new_counts.astype(np.int64))

    # -- the check ----------------------------------------------------------------------

    def class_ok(self, fs: FrequencySet) -> np.ndarray:
        """Which classes of a frequency set satisfy the model."""
        if self._sizes_only:
            return fs.counts[:, 0] >= self.model.min_class_size
        return self.model.check_classes(fs.counts)

    def evaluate(self, fs: FrequencySet) -> NodeCheck:
        """Check a frequency set against the model with MaxSup."""
        ok = self.class_ok(fs)
        violating = int(fs.sizes[~ok].sum())
        self.checks += 1
        return NodeCheck(
            node=fs.levels,
            anonymous=violating <= self.max_suppressed and violating < self.n,
            suppressed=violating,
            classes=int(ok.sum()),
        )

    @property
    def monotone(self) -> bool:
        """Whether predictive tagging is sound: the model is monotone under
        generalization (always without suppression; with it only for k-anonymity and
        distinct l-diversity)."""
        return self.max_suppressed == 0 or self.model.monotone_with_suppression

    def node_frequency_set(self, node: Sequence[int]) -> FrequencySet:
        """Frequency set of a full node, rolled up from the base."""
        return self.roll_up(self.base, node)

    def row_labels(self, node: Sequence[int]) -> dict[str, np.ndarray]:
        """The generalized value of every input row at ``node`` (by QI name)."""
        out: dict[str, np.ndarray] = {}
        for a, (name, h) in enumerate(zip(self.qi, self.hierarchies, strict=True)):
            out[name] = h.labels(node[a])[h.level_map(node[a])[self.row_codes[:, a]]]
        return out

    def row_classes(self, node: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """(class id of every row, whether the row is kept) at ``node``."""
        keys = np.empty_like(self.row_codes)
        for a in range(len(self.qi)):
            keys[:, a] = self._lookup(a, 0, node[a])[self.row_codes[:, a]]
        radices = [self._n_labels[a][node[a]] for a in range(len(self.qi))]
        inverse, g = group_rows(keys, radices)
        d = self.d
        s = np.zeros(self.n, dtype=np.int64) if self._sizes_only else self.sensitive_codes
        counts = np.bincount(inverse * d + s, minlength=g * d).reshape(g, d)
        fs = FrequencySet(tuple(range(len(self.qi))), tuple(node), keys[:0], counts)
        ok = self.class_ok(fs)
        return inverse, ok[inverse]


def _sizes_only(model: PrivacyModel) -> bool:
    if isinstance(model, KAnonymity):
        return True
    return isinstance(model, ModelSet) and all(isinstance(m, KAnonymity) for m in model.models)


@dataclass
class LatticeResult:
    """What a full-domain search found.

    ``status`` holds, for every lattice node (by index), 1 = anonymous, 0 = not
    anonymous, -1 = not determined (only when the algorithm could stop early).
    """

    algorithm: str
    lattice: Lattice
    status: np.ndarray
    minimal_nodes: list[Node]
    chosen: Node | None
    nodes_checked: int
    runtime_s: float
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def anonymous_nodes(self) -> list[Node]:
        return [self.lattice.node(int(i)) for i in np.flatnonzero(self.status == 1)]

    def info(self, qi: Sequence[str]) -> dict[str, Any]:
        """JSON-ready summary for :attr:`Release.info`."""
        named = lambda node: dict(zip(qi, node, strict=True))  # noqa: E731
        out: dict[str, Any] = {
            "node": None if self.chosen is None else named(self.chosen),
            "node_levels": None if self.chosen is None else list(self.chosen),
            "height": None if self.chosen is None else int(sum(self.chosen)),
            "minimal_nodes": [list(n) for n in self.minimal_nodes],
            "lattice_size": self.lattice.size,
            "nodes_checked": self.nodes_checked,
            "runtime_s": self.runtime_s,
        }
        out.update(self.extra)
        return out


class Tagger:
    """Predictive tagging over a lattice (Flash, Kohlmayer et al. 2012): an anonymous
    node makes all its generalizations anonymous, a non-anonymous node makes all its
    specializations non-anonymous. Without monotonicity only the checked node is tagged.
    """

    def __init__(
        self,
        problem: FullDomainProblem,
        *,
        progress: Progress | None = None,
    ) -> None:
        self.problem = problem
        self.lattice = problem.lattice
        self.status = np.full(self.lattice.size, -1, dtype=np.int8)
        self.checked: dict[int, NodeCheck] = {}
        self.monotone = problem.monotone
        self.progress = progress_or_null(progress)
        self._cache: dict[int, FrequencySet] = {}
        self.max_cache = 256

    def frequency_set(self, index: int) -> FrequencySet:
        """Roll up from the smallest cached specialization (else from the base)."""
        src = self.problem.base
        if self._cache:
            cached = np.fromiter(self._cache.keys(), dtype=np.int64, count=len(self._cache))
            below = cached[
                np.all(self.lattice.levels[cached] <= self.lattice.levels[index], axis=1)
            ]
            for j in below.tolist():
                if len(self._cache[j]) < len(src):
                    src = self._cache[j]
        return self.problem.roll_up(src, self.lattice.node(index))

    def check(self, index: int, *, keep: bool = False) -> bool:
        """Check a node against the data and tag; returns whether it is anonymous."""
        if index in self.checked:
            return self.checked[index].anonymous
        fs = self.frequency_set(index)
        if keep:
            if len(self._cache) >= self.max_cache:
                del self._cache[next(iter(self._cache))]
            self._cache[index] = fs
        result = self.problem.evaluate(fs)
        self.checked[index] = result
        before = int((self.status >= 0).sum())
        if self.monotone:
            if result.anonymous:
                mask = self.lattice.generalizations_mask(index)
            else:
                mask = self.lattice.specializations_mask(index)
            self.status[mask & (self.status < 0)] = 1 if result.anonymous else 0
        self.status[index] = 1 if result.anonymous else 0
        self.progress.advance(int((self.status >= 0).sum()) - before)
        return result.anonymous

    def is_anonymous(self, index: int) -> bool:
        """Tagged status, checking the node if it is not yet known."""
        if self.status[index] >= 0:
            return bool(self.status[index] == 1)
        return self.check(index)


def minimal_nodes(lattice: Lattice, status: np.ndarray) -> list[Node]:
    """Anonymous nodes without an anonymous specialization, lowest first."""
    idx = lattice.minimal(status == 1)
    nodes = [lattice.node(i) for i in idx]
    return sorted(nodes, key=lambda n: (sum(n), n))


def timer() -> float:
    return time.perf_counter()


def as_nodes(items: Iterable[Sequence[int]]) -> list[Node]:
    return [tuple(int(v) for v in n) for n in items]


def all_nodes(heights: Sequence[int]) -> Iterable[Node]:
    return itertools.product(*[range(h) for h in heights])
