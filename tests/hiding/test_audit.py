"""Query auditing against brute-force solvers on small tables."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ppdm.errors import ConfigError
from ppdm.hiding.audit import MaxAuditor, SumAuditor, audit_log, sum_determined

# -- SUM: brute force via numerical rank on tiny 0/1 matrices ------------------------------


def _rank_determined(queries: list[frozenset], n: int) -> set[int]:
    """Records i with e_i in the row space of the query matrix (numpy rank test)."""
    if not queries:
        return set()
    a = np.zeros((len(queries), n))
    for k, q in enumerate(queries):
        a[k, sorted(q)] = 1
    r = np.linalg.matrix_rank(a)
    out = set()
    for i in range(n):
        e = np.zeros((1, n))
        e[0, i] = 1
        if np.linalg.matrix_rank(np.vstack([a, e])) == r:
            out.add(i)
    return out


query_lists = st.integers(2, 6).flatmap(
    lambda n: st.tuples(
        st.just(n),
        st.lists(st.frozensets(st.integers(0, n - 1), min_size=1), min_size=1, max_size=12),
    )
)


@given(query_lists)
def test_sum_auditor_denies_exactly_the_disclosing_queries(case) -> None:
    n, queries = case
    values = np.arange(1.0, n + 1.0) * 1.5
    aud = SumAuditor(values)
    answered: list[frozenset] = []
    for q in queries:
        disclose = bool(_rank_determined([*answered, q], n))
        ans = aud.ask(q)
        if disclose:
            assert ans is None
        else:
            assert ans == pytest.approx(values[sorted(q)].sum())
            answered.append(q)
        # Invariant: the answered set never determines a value.
        assert not _rank_determined(answered, n)
    assert aud.answered == answered


@given(query_lists)
def test_sum_determined_matches_rank_test(case) -> None:
    n, queries = case
    assert sum_determined(queries, n) == _rank_determined(list(queries), n)


def test_sum_offline_audit_recovers_values() -> None:
    x = [3.0, 5.0, 7.0, 11.0]
    log = [{0, 1, 2, 3}, {0, 1}, {2, 3}, {1, 2, 3}]
    answers = [sum(x[i] for i in q) for q in log]
    out = audit_log(log, answers, n=4)
    # x_0 = q0 - q3; then x_1 = q1 - x_0.
    assert {d.record: d.value for d in out} == {0: 3.0, 1: 5.0}
    assert out[0].at == out[1].at == 3
    assert set(out[0].by) == {0, 3} and set(out[1].by) == {0, 1, 3}
    log.append({3})
    answers.append(11.0)
    out = audit_log(log, answers, n=4)
    assert {d.record: d.value for d in out} == {0: 3.0, 1: 5.0, 2: 7.0, 3: 11.0}
    assert [d.at for d in out] == [3, 3, 4, 4]


# -- MAX: brute force over all assignments from a fine grid --------------------------------

GRID = np.arange(1, 15) / 2.0  # 0.5 .. 7.0: half-integers around integer true values


def _assignments(n: int) -> np.ndarray:
    return np.array(list(itertools.permutations(GRID.tolist(), n)))


def _consistent(assign: np.ndarray, hist: list[tuple[frozenset, float]]) -> np.ndarray:
    ok = np.ones(len(assign), dtype=bool)
    for q, m in hist:
        ok &= assign[:, sorted(q)].max(axis=1) == m
    return ok


def _determined(assign: np.ndarray) -> bool:
    return bool(len(assign)) and bool(np.any(np.all(assign == assign[:1], axis=0)))


@pytest.mark.parametrize("seed", range(6))
def test_max_auditor_against_brute_force(seed: int) -> None:
    n = 4
    rng = np.random.default_rng(seed)
    values = rng.permutation(np.arange(1.0, 7.0))[:n]  # distinct integers
    assign = _assignments(n)
    aud = MaxAuditor(values)
    hist: list[tuple[frozenset, float]] = []
    for _ in range(8):
        q = frozenset(np.flatnonzero(rng.random(n) < 0.6).tolist()) or frozenset({0})
        cons = assign[_consistent(assign, hist)]
        # Simulatable denial: some consistent answer would pin down a record.
        answers = np.unique(cons[:, sorted(q)].max(axis=1))
        deny = any(_determined(cons[cons[:, sorted(q)].max(axis=1) == a]) for a in answers)
        ans = aud.ask(q)
        if deny:
            assert ans is None
        else:
            assert ans == values[sorted(q)].max()
            hist.append((q, ans))
        assert not _determined(assign[_consistent(assign, hist)])


def test_min_auditor_and_offline_max_audit() -> None:
    aud = MaxAuditor([4.0, 9.0, 1.0, 6.0], kind="min")
    assert aud.ask({0, 1, 2, 3}) == 1.0
    assert aud.ask({0, 1, 3}) is None  # any larger min would leave record 2 alone at 1
    log = [{0, 1, 2}, {0, 2}]
    out = audit_log(log, [9.0, 4.0], n=3, kind="max")
    assert [(d.record, d.at, d.value) for d in out] == [(1, 1, 9.0)]
    assert out[0].by == (0, 1)
    with pytest.raises(ConfigError):
        MaxAuditor([1.0, 1.0])
    with pytest.raises(ConfigError):
        audit_log(log, None, n=3, kind="max")
    with pytest.raises(ConfigError):
        SumAuditor([1.0, 2.0]).ask({5})
