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
    # A changed input (new version) starts a fresh history.
    assert b.check(input_key="inputs.x", version="v2", kind="sum", parties=j2, colluders=0).ok


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
