"""Full-domain generalization with tuple suppression (Aggarwal 2015, §20.3.1.1-20.3.1.2).

Every algorithm works on a :class:`FullDomainProblem` (the table encoded once) and
returns a :class:`LatticeResult` holding the anonymity status of the lattice nodes it
determined, the set of minimal anonymous nodes, and the number of nodes it checked
against the data:

* :func:`samarati` — binary search over lattice heights;
* :func:`incognito` — attribute-subset closure, join/prune and roll-up;
* :func:`optimal_search` — Flash-style predictive tagging, then the node minimizing a
  utility metric;
* :func:`exhaustive_scan` — every node (the test oracle).

:func:`search` runs one by name and picks the released node.
"""

from __future__ import annotations

from ppdm.anonymize.lattice.core import (
    FrequencySet,
    FullDomainProblem,
    Lattice,
    LatticeResult,
    group_rows,
)
from ppdm.anonymize.lattice.exhaustive import exhaustive_scan
from ppdm.anonymize.lattice.flash import best_node, classify_lattice, optimal_search
from ppdm.anonymize.lattice.incognito import incognito, join_step, prune_step
from ppdm.anonymize.lattice.samarati import samarati
from ppdm.errors import ConfigError
from ppdm.progress import Progress

__all__ = [
    "ALGORITHMS",
    "FrequencySet",
    "FullDomainProblem",
    "Lattice",
    "LatticeResult",
    "best_node",
    "classify_lattice",
    "exhaustive_scan",
    "group_rows",
    "incognito",
    "join_step",
    "optimal_search",
    "prune_step",
    "samarati",
    "search",
]

ALGORITHMS = ("samarati", "incognito", "optimal", "exhaustive")


def search(
    problem: FullDomainProblem,
    *,
    algorithm: str = "optimal",
    metric: str = "loss",
    progress: Progress | None = None,
) -> LatticeResult:
    """Run a full-domain search and choose the node to release.

    Samarati releases the best (by ``metric``) of the nodes at the minimal height, as
    Aggarwal 2015 says "all the corresponding domain generalizations are reported, and any of
    these can be used"; Incognito likewise among the lowest nodes of its anonymous
    sublattice; the optimal search and the exhaustive scan release the anonymous node
    minimizing ``metric``.
    """
    if algorithm == "samarati":
        result = samarati(problem, progress=progress)
        pool = [tuple(n) for n in result.extra["minimal_height_nodes"]]
    elif algorithm == "incognito":
        result = incognito(problem, progress=progress)
        lowest = min((sum(n) for n in result.minimal_nodes), default=None)
        pool = [n for n in result.minimal_nodes if sum(n) == lowest]
    elif algorithm == "optimal":
        return optimal_search(problem, metric=metric, progress=progress)
    elif algorithm == "exhaustive":
        result = exhaustive_scan(problem, progress=progress)
        result.extra.pop("violating_rows", None)
        pool = result.minimal_nodes if problem.max_suppressed == 0 else result.anonymous_nodes
    else:
        raise ConfigError(
            f"unknown full-domain algorithm {algorithm!r} (choose from {', '.join(ALGORITHMS)})"
        )
    chosen, value, evaluated = best_node(problem, pool, metric)
    result.chosen = chosen
    result.extra.update(
        {
            "metric": metric,
            "metric_value": None if chosen is None else value,
            "nodes_evaluated": evaluated,
        }
    )
    return result
