"""Samarati's binary search over lattice heights (Aggarwal 2015, §20.3.1.1).

"Let [0, h_max] represent the range of heights of the lattice. It is then checked whether
any of the generalizations at level h_max/2 satisfies the k-anonymity constraint. If this
is indeed the case, then the height h_max/4 is checked. Otherwise, the height
3 h_max/4 is checked. This approach is repeated, until the lowest height at which a
k-anonymous solution exists, is found. All the corresponding domain generalizations are
reported."

The binary search is sound because the model is monotone: an anonymous node at height
``h < h_max`` has an anonymous direct generalization at height ``h + 1``. After the
search, ppdm completes the anonymity classification of the lattice (bottom-up, with
Flash-style paths with predictive tagging) so that the set of all minimal anonymous nodes can be reported too;
``nodes_checked_search`` counts the checks of the binary search alone. When the model is
not monotone under suppression (entropy/recursive l-diversity or t-closeness with
MaxSup > 0) the binary search premise fails, so every height is scanned from the bottom
and every node is checked.
"""

from __future__ import annotations

import logging

import numpy as np

from ppdm.anonymize.lattice.core import (
    FullDomainProblem,
    LatticeResult,
    Tagger,
    minimal_nodes,
    timer,
)
from ppdm.anonymize.lattice.flash import classify_lattice
from ppdm.progress import Progress, progress_task

__all__ = ["samarati"]

log = logging.getLogger(__name__)


def _any_anonymous_at(tagger: Tagger, height: int) -> bool:
    nodes = tagger.lattice.at_height(height)
    # Already-known anonymous nodes first, then unknown ones; known failures are skipped.
    for i in nodes:
        if tagger.status[i] == 1:
            return True
    return any(tagger.status[i] < 0 and tagger.check(int(i), keep=True) for i in nodes)


def samarati(problem: FullDomainProblem, *, progress: Progress | None = None) -> LatticeResult:
    """Run Samarati's binary search; returns all nodes at the minimal height and the
    complete set of minimal anonymous nodes.

    The returned :attr:`LatticeResult.chosen` is ``None``; the caller picks one of
    ``extra['minimal_height_nodes']`` by a utility metric.
    """
    start = timer()
    lattice = problem.lattice
    checks0 = problem.checks
    with progress_task(progress, "Samarati binary search", lattice.size) as prog:
        tagger = Tagger(problem, progress=prog)
        found: int | None = None
        if problem.monotone:
            low, high = 0, lattice.max_height
            while low <= high:
                mid = (low + high) // 2
                if _any_anonymous_at(tagger, mid):
                    found, high = mid, mid - 1
                else:
                    low = mid + 1
        else:
            log.warning("model is not monotone with suppression: Samarati scans every height")
            for h in range(lattice.max_height + 1):
                for i in lattice.at_height(h):
                    tagger.check(int(i))
                if found is None and np.any(tagger.status[lattice.at_height(h)] == 1):
                    found = h
        search_checks = problem.checks - checks0
        # Complete the classification (Flash-style paths) to enumerate every minimal node.
        classify_lattice(problem, tagger=tagger)
    status = tagger.status.copy()
    at_min: list[tuple[int, ...]] = []
    if found is not None:
        at_min = [lattice.node(int(i)) for i in lattice.at_height(found) if status[i] == 1]
    return LatticeResult(
        algorithm="samarati",
        lattice=lattice,
        status=status,
        minimal_nodes=minimal_nodes(lattice, status),
        chosen=None,
        nodes_checked=problem.checks - checks0,
        runtime_s=timer() - start,
        extra={
            "minimal_height": found,
            "minimal_height_nodes": [list(n) for n in at_min],
            "nodes_checked_search": search_checks,
            "monotone": problem.monotone,
        },
    )
