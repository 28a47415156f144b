"""Vertical k-means' secure argmin makes the AND triples of every tournament level in one
round trip (issue 25, item 4: fewer rounds per iteration), with the same result."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from ppdm.parties.local import simulate
from ppdm.protocols import comparison
from ppdm.protocols.comparison import secure_argmin


def _shares(d: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    r = np.random.default_rng(seed).integers(0, 2**63, d.shape, dtype=np.uint64) * np.uint64(2)
    return d - r, r


@pytest.mark.parametrize(("n", "k"), [(1, 2), (40, 3), (57, 10), (33, 16), (20, 1)])
def test_one_triple_batch_per_argmin(monkeypatch, n, k):
    rng = np.random.default_rng(n * 100 + k)
    d = rng.integers(0, 2**40, (n, k), dtype=np.uint64)
    d[::3, -1] = d[::3, 0]  # ties: the lowest index wins
    alice, bob = _shares(d, k)
    calls: dict[str, int] = {}
    lock = threading.Lock()
    original = comparison._rot_triples

    def counted(session, *args, **kwargs):
        with lock:
            calls[session.net.me] = calls.get(session.net.me, 0) + 1
        return original(session, *args, **kwargs)

    monkeypatch.setattr(comparison, "_rot_triples", counted)

    def party(net, mine):
        peer = "bob" if net.me == "alice" else "alice"
        return secure_argmin(net, mine, peer=peer, value_bits=41)

    sim = simulate(party, {"alice": alice, "bob": bob}, timeout=120)
    want = np.argmin(d, axis=1)
    assert sim.results["alice"].tolist() == want.tolist() == sim.results["bob"].tolist()
    batches = 1 if k > 1 else 0
    assert calls.get("alice", 0) == batches and calls.get("bob", 0) == batches


@pytest.mark.parametrize(("bits", "rounds"), [(8, 0), (16, 1), (32, 2), (56, 3)])
def test_first_tree_level_rides_in_the_leaf_tables(monkeypatch, bits, rounds):
    """Issue 25, item 4: the first AND level of the comparison tree costs no triple and
    no round (its cross terms are extra leaf-table bits), so ``q = bits / 4`` leaves
    take ``ceil(log2 q) - 1`` AND rounds, with the same result."""
    calls: dict[str, int] = {}
    lock = threading.Lock()

    def counting(name):
        original = getattr(comparison._BitEngine, name)

        def method(self, *args, **kwargs):
            with lock:
                calls[self.net.me] = calls.get(self.net.me, 0) + 1
            return original(self, *args, **kwargs)

        return method

    monkeypatch.setattr(comparison._BitEngine, "and_", counting("and_"))
    monkeypatch.setattr(comparison._BitEngine, "and_pair", counting("and_pair"))
    rng = np.random.default_rng(bits)
    x = rng.integers(0, 2**bits, 300, dtype=np.uint64)
    y = rng.integers(0, 2**bits, 300, dtype=np.uint64)
    y[::4] = x[::4]

    def party(net, mine):
        return comparison.secure_ge(net, mine, x_party="alice", y_party="bob", bits=bits)

    sim = simulate(party, {"alice": x, "bob": y}, timeout=120)
    assert sim.results["alice"].tolist() == sim.results["bob"].tolist() == (x >= y).tolist()
    assert calls.get("alice", 0) == calls.get("bob", 0) == rounds
