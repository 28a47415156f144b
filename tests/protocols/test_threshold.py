"""The secure 'is the sum non-negative' test against the plain sum."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppdm.errors import ProtocolError
from ppdm.parties.local import LocalNetwork, run_local
from ppdm.protocols.threshold import secure_sum_nonnegative

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
