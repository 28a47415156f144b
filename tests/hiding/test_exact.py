"""Exact hiding: optimal against brute force on tiny instances, never worse than the
deletion heuristics, the solver interface, and the size limit with its fallback."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from ppdm.errors import ConfigError
from ppdm.hiding.api import hide_rules
from ppdm.hiding.exact import ExactTooLarge, build_program, hide_exact
from ppdm.hiding.metrics import mine
from ppdm.hiding.problem import SensitiveRule, Workspace
from ppdm.hiding.solvers import HighspySolver, MilpProblem, ScipyMilpSolver, get_solver
from ppdm.mining.itemsets import min_count
from ppdm.mining.readers import from_transactions
from ppdm.randomness import make_rng

DELETION_METHODS = ["1.b", "2.a", "2.b", "2.c", "swa", "border", "maxmin"]


def _random_db(rng, n: int, n_items: int, p: float) -> list[list[int]]:
    m = rng.random(n * n_items).reshape(n, n_items) < p
    return [list(np.flatnonzero(row).tolist()) or [0] for row in m]


def _instances(count: int, n: int, n_items: int, seed: int):
    """Seeded random instances with 1-2 sensitive rules drawn among the mined ones."""
    rng = make_rng(seed)
    out = []
    while len(out) < count:
        tx = _random_db(rng, n, n_items, 0.55)
        s, c = 0.3, 0.6
        db = from_transactions(tx)
        before = mine(db, min_support=s, min_confidence=c)
        if not before.rules:
            continue
        k = 1 + int(rng.integers(0, 2, 1)[0])
        pick = rng.permutation(len(before.rules))[:k]
        out.append((tx, db, before, [SensitiveRule.of(before.rules[i]) for i in pick], s, c))
    return out


def _brute_min_lost(tx, sens, s, c, frequent) -> int:
    """Fewest lost non-sensitive frequent itemsets over every set of deletions of
    sensitive items from transactions supporting a sensitive itemset."""
    items = sorted({x for r in sens for x in r.itemset})
    gens = [r.itemset for r in sens]
    mod = [t for t, row in enumerate(tx) if any(g <= set(row) for g in gens)]
    slots = [(t, x) for t in mod for x in items if x in tx[t]]
    n = len(tx)
    minc = min_count(s, n)
    keep = [f for f in frequent if not any(g <= f for g in gens)]
    best = None
    for mask in range(1 << len(slots)):
        rows = [set(r) for r in tx]
        for b, (t, x) in enumerate(slots):
            if mask >> b & 1:
                rows[t].discard(x)

        def cnt(x, rows=rows):
            return sum(1 for r in rows if x <= r)

        hidden = all(
            cnt(r.itemset) < minc or cnt(r.itemset) / max(cnt(r.antecedent), 1) < c for r in sens
        )
        if not hidden:
            continue
        lost = sum(1 for f in keep if cnt(f) < minc)
        best = lost if best is None else min(best, lost)
    return best


def test_exact_is_optimal_on_tiny_instances() -> None:
    checked = 0
    for tx, db, before, sens, s, c in _instances(40, 7, 4, seed=11):
        items = {x for r in sens for x in r.itemset}
        gens = [r.itemset for r in sens]
        n_slots = sum(len(items & set(t)) for t in tx if any(g <= set(t) for g in gens))
        if n_slots > 11:
            continue
        res = hide_rules(
            db, sens, min_support=s, min_confidence=c, method="exact", before=before, fallback=None
        )
        want = _brute_min_lost(tx, sens, s, c, before.itemsets)
        assert res.side_effects.lost_itemsets == want
        assert res.side_effects.ghost_itemsets == 0
        checked += 1
    assert checked >= 10


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_exact_never_loses_more_itemsets_than_deletion_heuristics(seed: int) -> None:
    for _tx, db, before, sens, s, c in _instances(6, 24, 7, seed=seed):
        ex = hide_rules(
            db, sens, min_support=s, min_confidence=c, method="exact", before=before, fallback=None
        )
        assert ex.side_effects.hiding_failure == 0
        for m in DELETION_METHODS:
            h = hide_rules(db, sens, min_support=s, min_confidence=c, method=m, before=before)
            assert ex.side_effects.lost_itemsets <= h.side_effects.lost_itemsets, m


def test_both_solvers_agree_and_support_only_mode() -> None:
    for _tx, db, before, sens, s, c in _instances(4, 20, 6, seed=5):
        objs = []
        for solver in ("scipy", "highspy"):
            ws = Workspace(db, sens, min_support=s, min_confidence=c)
            prog = build_program(ws, before.itemsets)
            sol = get_solver(solver).solve(prog.problem, time_limit=30)
            assert sol.status == "optimal"
            objs.append(sol.objective)
            hide_exact(
                Workspace(db, sens, min_support=s, min_confidence=c), before.itemsets, solver=solver
            )
        assert objs[0] == pytest.approx(objs[1])
        ws = Workspace(db, sens, min_support=s, min_confidence=c)
        hide_exact(ws, before.itemsets, confidence=False)
        assert all(ws.support_hidden(r) for r in range(len(sens)))


def test_solver_interface_on_a_known_program() -> None:
    # max x + y  s.t. x + 2y <= 3.5, x, y integer in [0, 3]  ->  x = 3, y = 0, obj -3
    prob = MilpProblem(
        c=np.array([-1.0, -1.0]),
        A=sp.csr_matrix(np.array([[1.0, 2.0]])),
        row_lower=np.array([-np.inf]),
        row_upper=np.array([3.5]),
        col_lower=np.zeros(2),
        col_upper=np.full(2, 3.0),
        integrality=np.ones(2, dtype=np.int64),
    )
    for solver in (ScipyMilpSolver(), HighspySolver()):
        sol = solver.solve(prob)
        assert sol.status == "optimal"
        assert sol.objective == pytest.approx(-3.0)
    prob.row_lower = np.array([10.0])
    prob.row_upper = np.array([11.0])
    for solver in (ScipyMilpSolver(), HighspySolver()):
        assert solver.solve(prob).status == "infeasible"
    with pytest.raises(ConfigError):
        get_solver("cplex")


def test_too_large_raises_or_falls_back() -> None:
    _tx, db, before, sens, s, c = _instances(1, 30, 6, seed=8)[0]
    ws = Workspace(db, sens, min_support=s, min_confidence=c)
    with pytest.raises(ExactTooLarge, match="max_vars"):
        build_program(ws, before.itemsets, max_vars=3)
    with pytest.raises(ExactTooLarge):
        hide_rules(
            db, sens, min_support=s, min_confidence=c, method="exact", max_vars=3, fallback=None
        )
    res = hide_rules(
        db, sens, min_support=s, min_confidence=c, method="exact", max_vars=3, fallback="2.b"
    )
    assert res.method == "2.b" and res.requested_method == "exact"
    assert "max_vars" in res.info["fallback_reason"]
    assert res.side_effects.hiding_failure == 0


def test_brute_force_oracle_sanity() -> None:
    # The oracle itself: hiding {0} -> {1} in four copies of [0, 1] at 50% support needs
    # deletions from three rows; nothing else is frequent except {0} and {1}.
    tx = [[0, 1]] * 4
    sens = [SensitiveRule(frozenset({0}), frozenset({1}))]
    frequent = {frozenset({0}): 4, frozenset({1}): 4, frozenset({0, 1}): 4}
    assert _brute_min_lost(tx, sens, 0.5, 0.9, frequent) == 0
    # With only two supporting rows, any deletion loses {0} or {1}.
    tx = [[0, 1], [0, 1], [2], [2]]
    frequent = {frozenset({0}): 2, frozenset({1}): 2, frozenset({2}): 2, frozenset({0, 1}): 2}
    assert _brute_min_lost(tx, sens, 0.5, 0.5, frequent) == 1
    res = hide_rules(
        from_transactions(tx),
        sens,
        min_support=0.5,
        min_confidence=0.5,
        method="exact",
        fallback=None,
    )
    assert res.side_effects.lost_itemsets == 1
