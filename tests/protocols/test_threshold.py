"""The secure 'is the sum non-negative' test against the plain sum."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppdm.errors import ProtocolError
from ppdm.parties.local import LocalNetwork, run_local
from ppdm.protocols.threshold import (
    compare_session,
    secure_all_nonnegative,
    secure_sum_nonnegative,
)

NAMES = ["p0", "p1", "p2", "p3", "p4"]


@settings(max_examples=10)
@given(
    st.integers(1, 5),
    st.lists(st.integers(-(2**45), 2**45), min_size=0, max_size=12),
    st.integers(0, 2**32),
)
def test_matches_plain_sum_sign(n_parties, first, seed):
    gen = np.random.default_rng(seed)
    vals = {p: gen.integers(-(2**45), 2**45, size=len(first)) for p in NAMES[:n_parties]}
    vals["p0"] = np.array(first, dtype=np.int64)
    out = run_local(secure_sum_nonnegative, vals)
    expected = np.sum(list(vals.values()), axis=0) >= 0
    for v in out.values():
        np.testing.assert_array_equal(v, expected)


def test_edges_zero_minus_one_and_extremes():
    big = (1 << 61) - 1
    a = np.array([0, -1, 1, big, -big, 0, 5])
    b = np.array([0, 0, -1, 0, 0, -1, -5])
    out = run_local(secure_sum_nonnegative, {"a": a, "b": b})
    np.testing.assert_array_equal(out["a"], (a + b) >= 0)


@settings(max_examples=10)
@given(st.integers(2, 5), st.integers(1, 5000), st.integers(0, 2**32))
def test_a_public_bound_gives_the_same_signs_with_fewer_bytes(n_parties, bound, seed):
    """With ``bound`` the comparison runs on ``bit_length(n * bound) + 1`` bits: the
    same answers at the edges of the bound (sums of ``+-n * bound``, 0, -1), and fewer
    bytes than the 63-bit default."""
    from ppdm.parties.local import simulate

    gen = np.random.default_rng(seed)
    vals = {p: gen.integers(-bound, bound + 1, size=16) for p in NAMES[:n_parties]}
    for j, v in enumerate([bound, -bound, 0]):
        for p in vals:
            vals[p][j] = v
    vals["p0"][3], vals["p0"][4] = -1, 0
    for p in NAMES[1:n_parties]:
        vals[p][3] = vals[p][4] = 0
    expected = np.sum(list(vals.values()), axis=0) >= 0
    sims = {
        b: simulate(lambda net, v, _b=b: secure_sum_nonnegative(net, v, bound=_b), vals)
        for b in (None, bound)
    }
    for sim in sims.values():
        for v in sim.results.values():
            np.testing.assert_array_equal(v, expected)
    sent = {b: sum(t["bytes_sent"] for t in sim.totals.values()) for b, sim in sims.items()}
    assert sent[bound] < sent[None]
    rows = np.stack([vals[p] for p in vals], axis=0)  # as one column of an all-test too
    both = run_local(
        lambda net, v: secure_all_nonnegative(net, np.stack([v, v], axis=1), bound=bound),
        {p: rows[i] for i, p in enumerate(vals)},
    )
    for v in both.values():
        np.testing.assert_array_equal(v, expected)


def test_values_beyond_the_bound_are_refused():
    with pytest.raises(ValueError, match="bound 5"):
        run_local(
            lambda net, v: secure_sum_nonnegative(net, v, bound=5),
            {"a": np.array([6]), "b": np.array([0])},
        )
    for bad in (0, -1, True, 2.5):
        with pytest.raises(ValueError, match="bound must be"):
            run_local(
                lambda net, v, _b=bad: secure_sum_nonnegative(net, v, bound=_b),
                {"a": np.array([1]), "b": np.array([0])},
            )


def test_values_too_large_are_refused():
    with pytest.raises(ValueError, match="too large"):
        run_local(secure_sum_nonnegative, {"a": np.array([1 << 62]), "b": np.array([0])})


def test_wrong_partial_sum_from_peer_is_protocol_error():
    net = LocalNetwork(["a", "b", "c"])
    net["a"].send("b", "threshold/ring", np.zeros(2, dtype=np.int64))  # wrong dtype
    with pytest.raises(ProtocolError) as info:
        secure_sum_nonnegative(net["b"], np.array([1, 2]))
    assert info.value.party == "a" and info.value.step == "threshold/ring"


def test_wrong_result_length_is_protocol_error():
    net = LocalNetwork(["a", "b", "c"])
    net["a"].send("b", "threshold/ring", np.zeros(3, dtype=np.uint64))
    with pytest.raises(ProtocolError, match="partial sums"):
        secure_sum_nonnegative(net["b"], np.array([1, 2]))


# -- secure_all_nonnegative: only the conjunction of a row is learned ----------------------


@settings(max_examples=10)
@given(
    st.integers(1, 4),
    st.integers(0, 9),
    st.integers(1, 5),
    st.integers(0, 2**32),
)
def test_all_nonnegative_matches_plain_rows(n_parties, rows, tests, seed):
    gen = np.random.default_rng(seed)
    # Small values: many sums sit at 0 and -1, where a sign error would show.
    vals = {p: gen.integers(-3, 4, size=(rows, tests)) for p in NAMES[:n_parties]}
    out = run_local(secure_all_nonnegative, vals)
    expected = np.all(np.sum(list(vals.values()), axis=0) >= 0, axis=1)
    for v in out.values():
        np.testing.assert_array_equal(v, expected)


def test_all_nonnegative_with_a_reused_session():
    """Two calls on one OT session (as a job's levels do) give the plain answers."""

    def run(net, ab):
        a, b = ab
        session = compare_session(net, "t/compare")
        return (
            secure_all_nonnegative(net, a, session=session),
            secure_all_nonnegative(net, b, session=session),
        )

    a = {p: np.array([[1, -1, 0], [0, 0, 0]]) for p in ("x", "y", "z")}
    b = {p: np.array([[2, 1, 1, -3]]) for p in ("x", "y", "z")}
    out = run_local(run, {p: (a[p], b[p]) for p in a})
    for first, second in out.values():
        assert first.tolist() == [False, True] and second.tolist() == [False]


def test_threshold_sessions_stay_off_kk13_even_for_large_batches():
    """A threshold test compares few values per call; its sessions opt out of KK13
    (its set-up and sender hashing cost more CPU than its bytes save there), however
    large the batch: no KK13 step runs, and the answers are the plain ones."""
    from ppdm.parties.local import simulate

    gen = np.random.default_rng(5)
    vals = {p: gen.integers(-(2**40), 2**40, size=400) for p in ("x", "y")}

    def run(net, mine):
        return secure_sum_nonnegative(net, mine, session=compare_session(net, "t/compare"))

    sim = simulate(run, vals, timeout=120)
    want = (vals["x"] + vals["y"]) >= 0
    assert sim.results["x"].tolist() == want.tolist()
    assert compare_session(LocalNetwork(["x", "y"]).endpoint("x"), "s").kk13 is False
    steps = {s["step"] for p in ("x", "y") for s in sim.metrics[p]}
    assert steps and not any("kk13" in s for s in steps)


def test_middle_party_receives_row_results_only():
    """The attacker's side: a party between the first and the last sees the masked ring
    message and the opened row results -- ``ceil(m / 8)`` bytes, never the ``m g`` single
    tests. Which test of a row fails leaves its view's size and its output unchanged;
    revealing the tests (as ``secure_sum_nonnegative`` on the flattened table does) would
    hand it one bit per test."""
    from ppdm.parties.local import simulate

    m, g = 64, 4
    views = []
    for failing in range(g):
        mine = np.ones((m, g), dtype=np.int64)
        mine[:, failing] = -5  # every row fails, each time in another column
        inputs = {"a": mine, "b": np.zeros((m, g), np.int64), "c": np.zeros((m, g), np.int64)}
        sim = simulate(lambda net, v: secure_all_nonnegative(net, v), inputs, timeout=60)
        assert not sim.results["b"].any()
        received = {r["step"]: r["bytes_received"] for r in sim.metrics["b"]}
        views.append(received)
    assert all(v == views[0] for v in views)

    def result_bytes(received: dict) -> int:
        return sum(n for step, n in received.items() if step.endswith("threshold/result"))

    # The same table decided test by test: the middle party gets m g bits, 3 x 64 more.
    flat = simulate(lambda net, v: secure_sum_nonnegative(net, v.reshape(-1)), inputs, timeout=60)
    flat_received = {r["step"]: r["bytes_received"] for r in flat.metrics["b"]}
    assert result_bytes(views[0]) > 0
    assert result_bytes(flat_received) - result_bytes(views[0]) == (m * g - m) // 8


def test_all_nonnegative_rejects_bad_shapes():
    with pytest.raises(ValueError, match="2-D"):
        run_local(secure_all_nonnegative, {"a": np.array([1]), "b": np.array([0])})
    with pytest.raises(ValueError, match="at least one test"):
        run_local(secure_all_nonnegative, {"a": np.zeros((2, 0), int), "b": np.zeros((2, 0), int)})


def test_all_nonnegative_wrong_ring_length_is_protocol_error():
    net = LocalNetwork(["a", "b", "c"])
    net["a"].send("b", "threshold/ring", np.zeros(5, dtype=np.uint64))  # 2 x 3 expected
    with pytest.raises(ProtocolError) as info:
        secure_all_nonnegative(net["b"], np.ones((2, 3), dtype=np.int64))
    assert info.value.party == "a" and info.value.step == "threshold/ring"
