"""Optimal full-domain search in the style of Flash (Kohlmayer, Prasser, Eckert, Kemper
and Kuhn 2012), used by ARX.

Phase 1 classifies every node of the lattice with as few checks as possible. Nodes are
visited level by level (by height); from every node whose status is still unknown a
path is walked upwards through unknown nodes (greedy, in a fixed order that prefers
attributes generalized least relative to their hierarchy), and the path is searched
*binarily*: an anonymous node tags all its generalizations anonymous, a non-anonymous
one tags all its specializations non-anonymous (*predictive tagging*, which needs the
monotonicity of Aggarwal 2015, §20.3.1.1 / Lemmas 20.3.1-20.3.4). Frequency sets of
checked nodes are kept and later nodes are rolled up from the smallest kept
specialization (section 20.3.1.2).

Phase 2 returns the anonymous node minimizing the chosen metric. Without suppression
every metric offered is monotone under generalization, so only the minimal anonymous
nodes are candidates. With suppression the metrics are not monotone (generalizing can
bring suppressed rows back), so every anonymous node is a candidate; for ``loss``,
``precision``, ``ncp`` and ``height`` the candidates are visited in order of a lower
bound that ignores suppression (branch and bound), which keeps the search exact.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ppdm.anonymize.lattice.core import (
    FullDomainProblem,
    LatticeResult,
    Node,
    Tagger,
    minimal_nodes,
    timer,
)
from ppdm.anonymize.metrics import OBJECTIVES, objective, objective_lower_bound
from ppdm.errors import ConfigError
from ppdm.progress import Progress, progress_task

__all__ = ["best_node", "classify_lattice", "optimal_search"]


def _order_key(problem: FullDomainProblem) -> np.ndarray:
    """Visiting order inside a height: nodes generalizing attributes least relative to
    their hierarchy first (ties by index)."""
    lat = problem.lattice
    rel = lat.levels / np.maximum(np.array(lat.heights) - 1, 1)[None, :]
    return rel.max(axis=1) if rel.shape[1] else np.zeros(lat.size)


def classify_lattice(
    problem: FullDomainProblem,
    *,
    tagger: Tagger | None = None,
    progress: Progress | None = None,
) -> tuple[np.ndarray, int]:
    """Flash phase 1: the status (1/0) of every node and the number of checks.

    An existing ``tagger`` (with nodes already tagged) can be completed."""
    lattice = problem.lattice
    checks0 = problem.checks
    key = _order_key(problem)
    with progress_task(progress, "optimal search (Flash)", lattice.size) as prog:
        if tagger is None:
            tagger = Tagger(problem, progress=prog)
        if not problem.monotone:
            for h in range(lattice.max_height + 1):
                for i in lattice.at_height(h):
                    tagger.check(int(i), keep=True)
            return tagger.status.copy(), problem.checks - checks0
        for h in range(lattice.max_height + 1):
            nodes = lattice.at_height(h)
            for i in nodes[np.lexsort((nodes, key[nodes]))]:
                if tagger.status[i] >= 0:
                    continue
                path = [int(i)]
                while True:
                    succ = [s for s in lattice.successors(path[-1]) if tagger.status[s] < 0]
                    if not succ:
                        break
                    path.append(min(succ, key=lambda s: (key[s], s)))
                low, high = 0, len(path) - 1
                while low <= high:
                    mid = (low + high) // 2
                    if tagger.status[path[mid]] >= 0:
                        anon = bool(tagger.status[path[mid]] == 1)
                    else:
                        anon = tagger.check(path[mid], keep=True)
                    if anon:
                        high = mid - 1
                    else:
                        low = mid + 1
    return tagger.status.copy(), problem.checks - checks0


def best_node(
    problem: FullDomainProblem, candidates: Sequence[Node], metric: str
) -> tuple[Node | None, float, int]:
    """The candidate with the smallest metric (ties: lower height, then lexicographic);
    returns ``(node, value, nodes evaluated)``. Uses the lower bound of
    :func:`objective_lower_bound` to skip candidates that cannot win."""
    if metric not in OBJECTIVES:
        raise ConfigError(f"unknown metric {metric!r} (choose from {', '.join(OBJECTIVES)})")
    if not candidates:
        return None, math.inf, 0
    bounds = [(objective_lower_bound(problem, n, metric), sum(n), n) for n in candidates]
    bounds.sort()
    best: Node | None = None
    best_key: tuple[float, float, tuple[int, ...]] = (math.inf, math.inf, ())
    evaluated = 0
    for lb, height, node in bounds:
        if lb > best_key[0] + 1e-12:
            break
        value = objective(problem, problem.node_frequency_set(node), metric)
        evaluated += 1
        cand_key = (value, height, node)
        if cand_key < best_key:
            best, best_key = node, cand_key
    return best, float(best_key[0]), evaluated


def optimal_search(
    problem: FullDomainProblem,
    *,
    metric: str = "loss",
    progress: Progress | None = None,
) -> LatticeResult:
    """Classify the lattice Flash-style and return the anonymous node minimizing
    ``metric`` (one of :data:`~ppdm.anonymize.metrics.OBJECTIVES`)."""
    if metric not in OBJECTIVES:
        raise ConfigError(f"unknown metric {metric!r} (choose from {', '.join(OBJECTIVES)})")
    start = timer()
    status, checks = classify_lattice(problem, progress=progress)
    minimal = minimal_nodes(problem.lattice, status)
    if problem.max_suppressed == 0:
        candidates = minimal
    else:
        candidates = [problem.lattice.node(int(i)) for i in np.flatnonzero(status == 1)]
    chosen, value, evaluated = best_node(problem, candidates, metric)
    return LatticeResult(
        algorithm="optimal",
        lattice=problem.lattice,
        status=status,
        minimal_nodes=minimal,
        chosen=chosen,
        nodes_checked=checks,
        runtime_s=timer() - start,
        extra={
            "metric": metric,
            "metric_value": None if chosen is None else value,
            "nodes_evaluated": evaluated,
            "monotone": problem.monotone,
        },
    )
