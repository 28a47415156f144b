"""Vertical k-means' secure argmin makes the AND triples of every tournament level in one
round trip (issue 25, item 4: fewer rounds per iteration), with the same result."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from ppdm.parties.local import simulate
from ppdm.protocols import bit_triples, comparison
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

    def counted(name):
        original = getattr(bit_triples, name)

        def make(session, *args, **kwargs):
            with lock:
                calls[session.net.me] = calls.get(session.net.me, 0) + 1
            return original(session, *args, **kwargs)

        return make

    # Either kind of batch counts (57 x 10 uses KK13: 285 comparisons x 7 triples).
    monkeypatch.setattr(bit_triples, "_rot_triples", counted("_rot_triples"))
    monkeypatch.setattr(bit_triples, "_kk13_triples", counted("_kk13_triples"))

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


@pytest.mark.parametrize(
    ("block_bits", "u_per_leaf", "table_per_leaf", "triples"), [(4, 7.5, 8, 7), (3, 48, 4, 9)]
)
def test_leaf_and_triple_bytes(block_bits, u_per_leaf, table_per_leaf, triples):
    """Issue 25, item 4: a 4-bit leaf is one SoftSpoken 1-out-of-16 OT
    (ppdm.protocols.ot.softspoken: KK13's keys, its 240 code columns in 60 blocks of four
    from punctured PRFs), 7.5 bytes of ``u`` (one bit a block; KK13 sent 30, one bit a
    column, and four IKNP OTs 64), plus its packed table of 16 4-bit entries (8 bytes). Other block sizes keep Naor-Pinkas: ``m`` IKNP OTs of 16 bytes
    (3-bit blocks: 48 bytes) and 8 4-bit entries (4 bytes). 57-bit values: ``q = 15``
    (``19``) leaves, the 4-bit ones in a multiple of 64 OTs (no padding).

    The tree's triples (_tree_triples: after the first level 8 nodes for 15 leaves,
    4 + 2 + 1 ANDs; 10 for 19, 5 + 2 + 1 + 1) need one cross term each way per triple.
    With 4-bit blocks they come from these 1-out-of-16 OTs, four cross terms an OT
    (ppdm.protocols.bit_triples): 7 x 640 = 4,480 a direction, 1,120 OTs (1,152 after
    padding to 64) of 7.5 bytes of ``u`` plus 15 table bytes (cmp/triples), against
    16 bytes of IKNP ``u`` a cross term before (7 x 32 = 224 bytes a comparison, with
    KK13's 30-byte ``u`` 2 x 7/4 x 30 = 105, now 2 x 7/4 x 7.5 = 26.25 of ``u``, and
    2 x 7/4 x 15 = 52.5 of tables). Both directions are set up from 240 random IKNP OTs
    each (16 bytes of ``u`` apiece, 256 after padding) and 7.5 KiB of GGM sums.
    With 3-bit blocks the triples stay on IKNP, a 16-byte random OT each way, in the
    same direction as the 3 IKNP OTs of every leaf."""
    n = 640
    rng = np.random.default_rng(block_bits)
    x = rng.integers(0, 2**57, n, dtype=np.uint64)
    y = rng.integers(0, 2**57, n, dtype=np.uint64)
    y[::5] = x[::5]

    def party(net, mine):
        return comparison.secure_ge(
            net, mine, x_party="alice", y_party="bob", bits=57, block_bits=block_bits
        )

    sim = simulate(party, {"alice": x, "bob": y}, timeout=120)
    assert sim.results["alice"].tolist() == (x >= y).tolist()
    leaves = n * -(-57 // block_bits)
    sent = {(p, s["step"]): s for p in ("alice", "bob") for s in sim.metrics[p] if s["bytes_sent"]}

    def payload(party: str, step: str, want: float) -> None:
        got = sent[party, step]
        # The protobuf envelope adds at most ~100 bytes a message.
        assert want <= got["bytes_sent"] <= want + 128 * got["messages_sent"], step

    payload("alice", "cmp/leaves", table_per_leaf * leaves)
    triples *= n
    if block_bits == 4:
        ots = -(-triples // 4)
        padded = -(-ots // 64) * 64
        payload("bob", "ot/ss16/alice>bob/u", u_per_leaf * leaves + 7.5 * padded)
        payload("alice", "ot/ss16/bob>alice/u", 7.5 * padded)
        payload("bob", "ot/ss16/alice>bob/ggm", 60 * 4 * 32)
        payload("alice", "ot/ss16/bob>alice/ggm", 60 * 4 * 32)
        payload("alice", "cmp/triples", 15 * ots)
        payload("bob", "cmp/triples", 15 * ots)
        payload("bob", "ot/iknp/alice>bob/u", 16 * 256)
        # Alice's u also carries the 128 random OTs (16 bytes each) that are the base OTs
        # of the second IKNP direction (alice>bob), instead of 128 Chou-Orlandi OTs.
        payload("alice", "ot/iknp/bob>alice/u", 16 * 256 + 16 * 128)
    else:
        assert not any(step.startswith("ot/ss16/") for _, step in sent)
        assert not any(step == "cmp/triples" for _, step in sent)
        # + the 128 random OTs that are the base OTs of the bob>alice direction.
        payload("bob", "ot/iknp/alice>bob/u", u_per_leaf * leaves + 16 * triples + 16 * 128)
        payload("alice", "ot/iknp/bob>alice/u", 16 * triples)


@pytest.mark.parametrize(("n", "kk13"), [(17, False), (18, True)])
def test_kk13_from_256_leaves(n, kk13):
    """The 1-out-of-16 leaves' set-up (240 random IKNP OTs and 7.5 KiB of GGM sums) pays
    from 256 leaves up (56.5 bytes saved a leaf): 17 comparisons of 57 bits have 255
    leaves and keep Naor-Pinkas, 18 have 270.
    Same result either way."""
    rng = np.random.default_rng(n)
    x = rng.integers(0, 2**57, n, dtype=np.uint64)
    y = rng.integers(0, 2**57, n, dtype=np.uint64)

    def party(net, mine):
        return comparison.secure_ge(net, mine, x_party="alice", y_party="bob", bits=57)

    sim = simulate(party, {"alice": x, "bob": y}, timeout=120)
    assert sim.results["alice"].tolist() == sim.results["bob"].tolist() == (x >= y).tolist()
    steps = {s["step"] for p in ("alice", "bob") for s in sim.metrics[p]}
    assert ("ot/ss16/alice>bob/u" in steps) == kk13


@pytest.mark.parametrize("bits", [4, 6, 9, 64])
def test_kk13_leaves_at_every_table_width(bits):
    """KK13 leaves with 2-bit entries (one block: ``bits = 4``), 4-bit entries, a short
    top block and 16 blocks, against plain comparisons (equal values and the extremes)."""
    rng = np.random.default_rng(bits)
    n = 300
    x = rng.integers(0, 2**bits, n, dtype=np.uint64)
    y = rng.integers(0, 2**bits, n, dtype=np.uint64)
    y[::3] = x[::3]
    x[:2], y[:2] = [0, 2**bits - 1], [2**bits - 1, 0]

    def party(net, mine):
        return comparison.secure_ge(net, mine, x_party="alice", y_party="bob", bits=bits)

    sim = simulate(party, {"alice": x, "bob": y}, timeout=120)
    assert sim.results["alice"].tolist() == sim.results["bob"].tolist() == (x >= y).tolist()
    assert any(s["step"] == "ot/ss16/alice>bob/u" for s in sim.metrics["bob"])


def test_kk13_leaf_batches_take_one_round_trip(monkeypatch):
    """The receiver sends the ``u`` of up to 8 KK13 leaf batches before it reads their
    tables: 4 batches take as many sequential hops as one; 30 take more (a bounded
    window: the peer never holds more than 8 unread), with the same result."""
    n = 200  # 57 bits: 3,000 leaves
    rng = np.random.default_rng(4)
    x = rng.integers(0, 2**57, n, dtype=np.uint64)
    y = rng.integers(0, 2**57, n, dtype=np.uint64)

    def party(net, mine):
        return comparison.secure_ge_shares(net, mine, x_party="alice", y_party="bob", bits=57)

    def run() -> tuple[int, int]:
        sim = simulate(party, {"alice": x, "bob": y}, timeout=120)
        assert (sim.results["alice"] ^ sim.results["bob"]).tolist() == (x >= y).tolist()
        u = [s for s in sim.metrics["bob"] if s["step"] == "ot/ss16/alice>bob/u"]
        return u[0]["messages_sent"], max(t["sequential_hops"] for t in sim.totals.values())

    one, hops = run()
    monkeypatch.setattr(comparison, "_LEAF_BATCH", 32 * 800)  # 800 leaves a batch
    four, hops_four = run()
    monkeypatch.setattr(comparison, "_LEAF_BATCH", 32 * 100)  # 100 leaves a batch
    thirty, hops_thirty = run()
    # One more u message each: the tree's triples (200 x 7 = 1,400 cross terms, on KK13).
    assert (one, four, thirty) == (2, 5, 31)
    assert hops_four == hops < hops_thirty


def test_sessions_checked_against_a_malicious_receiver_keep_iknp_leaves():
    """KK13 has no consistency check here: a session with ``malicious_receiver=True``
    (KOS15 on every IKNP chunk) keeps its leaves on the checked IKNP OTs."""
    from ppdm.protocols.ot.extension import OTSession

    rng = np.random.default_rng(8)
    x = rng.integers(0, 2**32, 300, dtype=np.uint64)
    y = rng.integers(0, 2**32, 300, dtype=np.uint64)

    def party(net, mine):
        peer = "bob" if net.me == "alice" else "alice"
        session = OTSession(net, peer, malicious_receiver=True)
        return comparison.secure_ge(
            net, mine, x_party="alice", y_party="bob", bits=32, session=session
        )

    sim = simulate(party, {"alice": x, "bob": y}, timeout=120)
    assert sim.results["alice"].tolist() == (x >= y).tolist()
    steps = {s["step"] for p in ("alice", "bob") for s in sim.metrics[p]}
    assert not any(step.startswith("ot/ss16/") for step in steps)
    assert "ot/iknp/alice>bob/kos-check" in steps
