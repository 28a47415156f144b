"""Incognito (LeFevre, DeWitt and Ramakrishnan 2005; Aggarwal 2015, §20.3.1.2).

Level-wise over attribute subsets, like Apriori over itemsets:

1. ``F_1``: for every quasi-identifier, the anonymous top portion of its hierarchy path.
2. :func:`join_step`: candidate sublattices ``C_(i+1)`` join pairs of subsets in ``F_i``
   that share ``i - 1`` attributes; nodes are joined when the common attributes have the
   same levels.
3. :func:`prune_step`: a candidate node is dropped when its projection on any ``i``-subset
   is not anonymous in ``F_i`` (*attribute subset closure*).
4. The remaining nodes are checked bottom-up (breadth-first by height), each frequency
   set *rolled up* from a checked direct specialization; generalizations of an anonymous
   node are marked anonymous without a check.

``F_d`` is the anonymous part of the full lattice; its minimal nodes are reported.

Subset closure and the marking of generalizations both rely on monotonicity; when the
model is not monotone under suppression, every node of the full lattice is checked
instead (and ``info['monotone']`` is False).
"""

from __future__ import annotations

import itertools
import logging

import numpy as np

from ppdm.anonymize.lattice.core import (
    FrequencySet,
    FullDomainProblem,
    Lattice,
    LatticeResult,
    Tagger,
    minimal_nodes,
    timer,
)
from ppdm.progress import Progress, progress_task

__all__ = ["incognito", "join_step", "prune_step"]

log = logging.getLogger(__name__)

Subset = tuple[int, ...]


def join_step(
    frequent: dict[Subset, np.ndarray], heights: tuple[int, ...]
) -> dict[Subset, np.ndarray]:
    """Candidate sublattices on ``i + 1`` attributes from ``F_i``.

    ``frequent`` maps each ``i``-subset (sorted attribute indices) to a boolean array over
    its sublattice (``Lattice([heights[a] for a in subset])``) marking anonymous nodes.
    Two subsets with the same first ``i - 1`` attributes are joined; a node of the joined
    sublattice is a candidate when both projections are anonymous.
    """
    out: dict[Subset, np.ndarray] = {}
    subsets = sorted(frequent)
    for s1, s2 in itertools.combinations(subsets, 2):
        if s1[:-1] != s2[:-1] or s1[-1] == s2[-1]:
            continue
        joined = tuple(sorted(set(s1) | set(s2)))
        lat = Lattice([heights[a] for a in joined])
        ok = _projection_member(lat, joined, s1, frequent[s1], heights)
        ok &= _projection_member(lat, joined, s2, frequent[s2], heights)
        out[joined] = ok
    return out


def prune_step(
    candidates: dict[Subset, np.ndarray],
    frequent: dict[Subset, np.ndarray],
    heights: tuple[int, ...],
) -> dict[Subset, np.ndarray]:
    """Drop candidate nodes with a non-anonymous projection on any ``i``-subset
    (attribute subset closure); subsets with a missing ``i``-subset are dropped whole."""
    out: dict[Subset, np.ndarray] = {}
    for subset, ok in candidates.items():
        lat = Lattice([heights[a] for a in subset])
        keep = ok.copy()
        for sub in itertools.combinations(subset, len(subset) - 1):
            if sub not in frequent:
                keep[:] = False
                break
            keep &= _projection_member(lat, subset, sub, frequent[sub], heights)
        if keep.any():
            out[subset] = keep
    return out


def _projection_member(
    lat: Lattice,
    subset: Subset,
    sub: Subset,
    member: np.ndarray,
    heights: tuple[int, ...],
) -> np.ndarray:
    """For every node of ``lat`` (over ``subset``), whether its projection on ``sub`` is
    marked in ``member`` (over the sublattice of ``sub``)."""
    pos = [subset.index(a) for a in sub]
    strides = np.array(
        [int(np.prod([heights[b] for b in sub[j + 1 :]])) for j in range(len(sub))],
        dtype=np.int64,
    )
    idx = lat.levels[:, pos] @ strides if len(sub) else np.zeros(lat.size, dtype=np.int64)
    return member[idx]


def _check_sublattice(
    problem: FullDomainProblem,
    subset: Subset,
    candidates: np.ndarray,
    prog: Progress,
) -> np.ndarray:
    """Breadth-first check of the candidate nodes of one sublattice with roll-up."""
    heights = tuple(problem.heights[a] for a in subset)
    lat = Lattice(heights)
    anonymous = np.zeros(lat.size, dtype=bool)
    known = ~candidates  # pruned nodes are known to be non-anonymous
    cache: dict[int, FrequencySet] = {}
    base: FrequencySet | None = None
    for h in range(lat.max_height + 1):
        for i in lat.at_height(h):
            i = int(i)
            if known[i]:
                continue
            src = None
            for j in lat.predecessors(i):
                fs = cache.get(j)
                if fs is not None and (src is None or len(fs) < len(src)):
                    src = fs
            if src is None:
                if base is None:
                    base = problem.project(subset)
                src = base
            fs = problem.roll_up(src, lat.node(i))
            cache[i] = fs
            result = problem.evaluate(fs)
            prog.advance(1)
            known[i] = True
            if result.anonymous:
                up = lat.generalizations_mask(i) & candidates
                anonymous |= up
                known |= up
        # Frequency sets two heights down are no longer needed as roll-up sources.
        for j in [j for j in cache if lat.node_heights[j] < h]:
            del cache[j]
    return anonymous


def incognito(problem: FullDomainProblem, *, progress: Progress | None = None) -> LatticeResult:
    """Run Incognito; ``status`` of the result is the anonymous part of the full lattice
    (every node determined)."""
    start = timer()
    lattice = problem.lattice
    checks0 = problem.checks
    n_attrs = len(problem.qi)
    heights = problem.heights
    subsets_checked = 0
    if not problem.monotone:
        log.warning("model is not monotone with suppression: Incognito checks every node")
        with progress_task(progress, "Incognito (every node)", lattice.size) as prog:
            tagger = Tagger(problem, progress=prog)
            for h in range(lattice.max_height + 1):
                for i in lattice.at_height(h):
                    tagger.check(int(i), keep=True)
        status = tagger.status.copy()
    else:
        with progress_task(progress, "Incognito", None) as prog:
            frequent: dict[Subset, np.ndarray] = {}
            for a in range(n_attrs):
                cand = np.ones(heights[a], dtype=bool)
                frequent[(a,)] = _check_sublattice(problem, (a,), cand, prog)
                subsets_checked += 1
            for _size in range(2, n_attrs + 1):
                candidates = prune_step(join_step(frequent, heights), frequent, heights)
                nxt: dict[Subset, np.ndarray] = {}
                for subset, cand in candidates.items():
                    found = _check_sublattice(problem, subset, cand, prog)
                    subsets_checked += 1
                    if found.any():
                        nxt[subset] = found
                frequent = nxt
                if not frequent:
                    break
            full = tuple(range(n_attrs))
            anon = frequent.get(full, np.zeros(lattice.size, dtype=bool))
            if n_attrs == 1:
                anon = frequent.get((0,), anon)
            status = anon.astype(np.int8)
    return LatticeResult(
        algorithm="incognito",
        lattice=lattice,
        status=status,
        minimal_nodes=minimal_nodes(lattice, status),
        chosen=None,
        nodes_checked=problem.checks - checks0,
        runtime_s=timer() - start,
        extra={"subsets_checked": subsets_checked, "monotone": problem.monotone},
    )
