"""The cross-job disclosure audit against a brute-force oracle (numpy rank test)."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ppdm.service.disclosure import DisclosureAuditor, determined_with_colluders

ROSTER = ["alice", "bob", "carol", "dave", "mallory"]


def oracle(me: str, queries: list[set[str]], colluders: int) -> bool:
    """Independent check: e_me lies in the row space of the query rows plus the unit rows
    of some coalition of ``colluders`` other parties (float rank, small integer matrices)."""
    names = sorted(set().union(*queries) | {me})
    idx = {p: i for i, p in enumerate(names)}
    others = [p for p in names if p != me]
    for coalition in itertools.combinations(others, min(colluders, len(others))):
        rows = [[1.0 if p in q else 0.0 for p in names] for q in queries]
        rows += [[1.0 if p == c else 0.0 for p in names] for c in coalition]
        a = np.array(rows) if rows else np.zeros((0, len(names)))
        e = np.zeros(len(names))
        e[idx[me]] = 1.0
        r = np.linalg.matrix_rank(a) if len(a) else 0
        if np.linalg.matrix_rank(np.vstack([a, e])) == r:
            return True
    return False


def test_the_attacks_of_the_issue():
    # Two-party sum: mallory knows her own input.
    assert determined_with_colluders("bob", [{"bob", "mallory"}], 1)
    # Differencing by one party.
    assert determined_with_colluders(
        "bob", [set(ROSTER[:3]) | {"mallory"}, {"alice", "carol", "mallory"}], 0
    )
    # Differencing by a combination of several jobs:
    # (a+b+c) + (b+d) - (a+c+d) = 2b.
    assert determined_with_colluders(
        "bob", [{"alice", "bob", "carol"}, {"bob", "dave"}, {"alice", "carol", "dave"}], 0
    )
    # A plain repeated three-party sum does not.
    assert not determined_with_colluders("bob", [{"alice", "bob", "carol"}] * 3, 1)


@settings(max_examples=300, deadline=None)
@given(
    queries=st.lists(
        st.sets(st.sampled_from(ROSTER), min_size=1, max_size=5), min_size=0, max_size=6
    ),
    colluders=st.integers(0, 2),
)
def test_matches_the_rank_oracle(queries, colluders):
    assert determined_with_colluders("bob", queries, colluders) == oracle("bob", queries, colluders)


class MemoryStore:
    def __init__(self):
        self.state = {}

    def save_state(self, key, value):
        self.state[key] = dict(value)

    def load_state(self, key):
        return self.state.get(key)


def test_auditor_reserves_records_releases_and_persists():
    store = MemoryStore()
    a = DisclosureAuditor("bob", store)
    full = ["alice", "bob", "carol", "mallory"]
    assert a.check(input_key="inputs.x", version="v1", kind="sum", parties=full, colluders=0).ok
    a.reserve("j1", input_key="inputs.x", version="v1", kind="sum", parties=full)
    # While j1 is reserved, its difference with j2 already counts.
    j2 = ["alice", "carol", "mallory"]
    assert not a.check(input_key="inputs.x", version="v1", kind="sum", parties=j2, colluders=0).ok
    a.release("j1")
    assert a.check(input_key="inputs.x", version="v1", kind="sum", parties=j2, colluders=0).ok
    a.reserve("j1", input_key="inputs.x", version="v1", kind="sum", parties=full)
    a.record("j1")
    # A fresh auditor on the same store remembers (a node restart).
    b = DisclosureAuditor("bob", store)
    verdict = b.check(input_key="inputs.x", version="v1", kind="sum", parties=j2, colluders=0)
    assert not verdict.ok and "determine" in verdict.reason
    # A changed input (new version) keeps the answers on its earlier versions: the sum
    # before the change and the one after difference out bob's input all the same.
    assert not b.check(input_key="inputs.x", version="v2", kind="sum", parties=j2, colluders=0).ok
    # The same data under another name (same content digest) keeps its history too.
    assert not b.check(
        input_key="inputs.renamed", version="v1", kind="sum", parties=j2, colluders=0
    ).ok
    # Unrelated data (another name and content) has a history of its own.
    assert b.check(input_key="inputs.other", version="w", kind="sum", parties=j2, colluders=0).ok


def test_dot_products_are_limited_by_the_vector_length():
    a = DisclosureAuditor("bob")
    for i in range(2):
        assert a.check(
            input_key="inputs.d",
            version="v",
            kind="dot",
            parties=["bob", "m"],
            colluders=1,
            length=3,
        ).ok
        a.reserve(f"d{i}", input_key="inputs.d", version="v", kind="dot", parties=["bob", "m"])
        a.record(f"d{i}")
    assert not a.check(
        input_key="inputs.d", version="v", kind="dot", parties=["bob", "m"], colluders=1, length=3
    ).ok


def test_union_differencing_is_refused_by_isolation():
    """The union over {alice, bob, carol, mallory} minus the union over {alice, carol,
    mallory} is bob's exclusive items: the second union is refused, at any node that saw
    the first (alice here), though bob is not in it."""
    a = DisclosureAuditor("alice")
    full = ["alice", "bob", "carol", "mallory"]
    a.reserve("u1", input_key="inputs.s", version="v", kind="union", parties=full)
    a.record("u1")
    verdict = a.check(
        input_key="inputs.s",
        version="v",
        kind="union",
        parties=["alice", "carol", "mallory"],
        colluders=1,
    )
    assert not verdict.ok and "single out" in verdict.reason
    # A variant no sum auditor sees: {a, b, m} against {a, c, m}: b's and c's own items.
    b = DisclosureAuditor("alice")
    b.reserve("u1", input_key="inputs.s", version="v", kind="union", parties=["alice", "bob", "m"])
    b.record("u1")
    assert not b.check(
        input_key="inputs.s",
        version="v",
        kind="union",
        parties=["alice", "carol", "m"],
        colluders=1,
    ).ok
    # Repeating the same party set adds nothing.
    assert a.check(input_key="inputs.s", version="v", kind="union", parties=full, colluders=1).ok


def test_membership_tests_and_privacy_budget_are_bounded_across_versions():
    a = DisclosureAuditor("bob")
    for i in range(3):
        assert a.check(
            input_key="data.ids",
            version=f"v{i}",
            identity="file:/x",
            kind="probe",
            parties=["alice", "bob", "carol"],
            colluders=1,
            max_probes=3,
        ).ok
        a.reserve(
            f"p{i}",
            input_key="data.ids",
            version=f"v{i}",
            identity="file:/x",
            kind="probe",
            parties=["alice", "bob", "carol"],
        )
        a.record(f"p{i}")
    # A fourth test of the same file is refused, whatever its content is now ...
    assert not a.check(
        input_key="data.ids",
        version="v9",
        identity="file:/x",
        kind="probe",
        parties=["alice", "bob", "carol"],
        colluders=1,
        max_probes=3,
    ).ok
    # ... and so is a copy of an earlier version under another path and name.
    assert not a.check(
        input_key="data.copy",
        version="v1",
        identity="file:/y",
        kind="probe",
        parties=["alice", "bob", "carol"],
        colluders=1,
        max_probes=3,
    ).ok
    budget = DisclosureAuditor("bob")
    for i in range(4):
        ok = budget.check(
            input_key="data.t",
            version="t",
            kind="dp",
            parties=["a", "bob", "c"],
            colluders=1,
            epsilon=1.0,
            epsilon_budget=3.0,
        ).ok
        assert ok == (i < 3)
        if ok:
            budget.reserve(
                f"d{i}",
                input_key="data.t",
                version="t",
                kind="dp",
                parties=["a", "bob", "c"],
                epsilon=1.0,
            )
            budget.record(f"d{i}")
    assert budget.spent("key:data.t", "t") == 3.0


def test_the_change_of_an_input_is_protected_like_the_input():
    """Two sums over the same parties, before and after bob's input changed, difference
    out the change: bob's node refuses the second (a fresh history per version would not)."""
    bob = DisclosureAuditor("bob")
    full = ["alice", "bob", "carol", "mallory"]
    bob.reserve("s1", input_key="inputs.x", version="v1", kind="sum", parties=full)
    bob.record("s1")
    same = bob.check(input_key="inputs.x", version="v1", kind="sum", parties=full, colluders=1)
    assert same.ok  # the same query again on the same data reveals nothing new
    changed = bob.check(input_key="inputs.x", version="v2", kind="sum", parties=full, colluders=1)
    assert not changed.ok and "change" in changed.reason
