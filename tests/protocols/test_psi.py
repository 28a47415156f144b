"""Private set intersection (KKRT16 OPRF over IKNP, and the EC path) and record alignment.

Exactness against Python's set intersection (hypothesis), cuckoo hashing edge cases,
refused inputs, malformed peer messages (ProtocolError naming the peer and step), and the
views: the receiver cannot compute the sender's tags of items outside the intersection,
and the sender cannot read the receiver's codewords from the ``u`` matrix.
"""

from __future__ import annotations

import math
from functools import partial

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ppdm.errors import ProtocolError
from ppdm.parties.codec import ByteStrings
from ppdm.parties.local import run_local, simulate
from ppdm.protocols.ot.bits import pack, transpose_bits
from ppdm.protocols.ot.crhash import AESCTRStream, tccr_hash
from ppdm.protocols.psi import IdSet, align, opening, private_intersection, tagset
from ppdm.protocols.psi import kkrt as kkrt_module
from ppdm.protocols.psi.cuckoo import (
    CuckooFailure,
    cuckoo_bins,
    cuckoo_failure_log2,
    cuckoo_insert,
)
from ppdm.protocols.psi.kkrt import (
    _codes,
    _Keys,
    _positions,
    code_bits,
    kkrt_receive,
    kkrt_send,
    oprf_hash,
    tag_bits,
    tag_bytes,
)

PSI_SETTINGS = settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
#: For the tests of exactness on arbitrary sets (the size bounds have their own tests in
#: test_psi_bounds.py): no ratio check, no minimum.
UNBOUNDED = {"max_set_ratio": math.inf, "min_set_size": 0}


def _run(sets: dict, method: str = "oprf") -> dict:
    return run_local(partial(align, method=method, **UNBOUNDED), sets, timeout=30)


@pytest.fixture
def first_leads(monkeypatch):
    """The first party of the group leads (the coin toss is tested in
    test_psi_bounds.py): tests of one role's messages need to know the roles."""
    monkeypatch.setattr(opening, "leader_index", lambda coins, n: 0)


def _check(sets: dict, out: dict) -> None:
    want = sorted(set.intersection(*(set(v) for v in sets.values())))
    for p, ids in sets.items():
        assert out[p].ids == want
        assert [ids[i] for i in out[p].rows.tolist()] == want


# Exactness ----------------------------------------------------------------------------

ints = st.lists(st.integers(-(2**63), 2**63 - 1), unique=True, max_size=60)


@PSI_SETTINGS
@given(a=ints, b=ints, common=ints)
def test_two_party_oprf_equals_set_intersection(a, b, common):
    sets = {"alice": list(dict.fromkeys(a + common)), "bob": list(dict.fromkeys(common + b))}
    _check(sets, _run(sets))


@PSI_SETTINGS
@given(
    sets=st.lists(st.lists(st.text(max_size=6), unique=True, max_size=30), min_size=3, max_size=3),
    common=st.lists(st.text(min_size=1, max_size=6), unique=True, max_size=10),
)
def test_three_party_strings_equal_set_intersection(sets, common):
    parties = {
        name: list(dict.fromkeys(s + common))
        for name, s in zip(["alice", "bob", "carol"], sets, strict=True)
    }
    _check(parties, _run(parties))


def test_ec_path_equals_oprf_path():
    rng = np.random.default_rng(4)
    sets = {
        p: [bytes(x) for x in rng.integers(0, 6, size=(40, 2), dtype=np.uint8)]
        for p in ("alice", "bob", "carol")
    }
    sets = {p: list(dict.fromkeys(v)) for p, v in sets.items()}
    ec = _run(sets, "ec")
    _check(sets, ec)
    assert _run(sets)["alice"].ids == ec["alice"].ids


def test_larger_sets_and_several_u_chunks():
    n = 200_000  # 307,264 bins: three u messages of 2^17 bins
    a = np.arange(0, n, dtype=np.int64) * 3
    b = np.arange(n // 2, n + n // 2, dtype=np.int64) * 3 + (np.arange(n) % 2)
    got = run_local(private_intersection, {"alice": a, "bob": b}, timeout=60)  # 1:1, 50%
    want = sorted(set(a.tolist()) & set(b.tolist()))
    assert got["alice"] == want and got["bob"] == want


def test_empty_sets():
    for sets in ({"a": [], "b": []}, {"a": [], "b": [1, 2]}, {"a": ["x"], "b": []}):
        out = _run(sets)
        assert out["a"].ids == [] and out["b"].ids == []
        assert out["a"].rows.shape == (0,)


def test_disjoint_kinds_do_not_match():
    out = _run({"a": [1, 2, 3], "b": ["1", "2", "3"]})
    assert out["a"].ids == [] == out["b"].ids


def test_single_party_group_and_subgroup():
    out = run_local(
        partial(private_intersection, parties=["bob", "carol"], **UNBOUNDED),
        {"bob": [1, 2, 3], "carol": [3, 2, 9]},
    )
    assert out == {"bob": [2, 3], "carol": [2, 3]}
    alone = run_local(partial(align, parties=["bob"], **UNBOUNDED), {"bob": [4, 1]})
    assert alone["bob"].ids == [1, 4] and alone["bob"].leader == "bob"


@pytest.mark.parametrize(
    "bad",
    [[1, 1, 2], ["a", "b", "a"], [1, "1"], [True, 2], [2**63], [1.5]],
)
def test_bad_id_sets_are_refused_locally(bad):
    with pytest.raises((ValueError, TypeError)):
        IdSet.of(bad)


def test_duplicate_ids_refused_before_anything_is_sent():
    # Only "a"'s set is wrong; "b"'s is valid and above the minimum, so the refusal the
    # test sees is "a"'s own check and not whichever of two local refusals came first.
    sets = {"a": [1, 1, *range(2, 30)], "b": list(range(30))}
    with pytest.raises(ValueError, match="duplicate"):
        run_local(private_intersection, sets, timeout=5)


# Cuckoo hashing -------------------------------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 2, 63, 1000, 4096, 65_536, 1 << 20, 1 << 24])
def test_cuckoo_parameters_reach_40_bits(n):
    bins = cuckoo_bins(n)
    assert bins % 64 == 0 and bins >= n
    assert cuckoo_failure_log2(n, bins) <= -40


@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 3000), seed=st.integers(0, 2**32 - 1))
def test_cuckoo_places_every_item_once(n, seed):
    bins = cuckoo_bins(n)
    pos = np.random.default_rng(seed).integers(0, bins, size=(n, 3))
    table, which = cuckoo_insert(pos, bins)
    placed = table[table >= 0]
    assert sorted(placed.tolist()) == list(range(n))
    assert np.array_equal(pos[placed, which[placed]], np.flatnonzero(table >= 0))


def test_cuckoo_failure_is_an_error_not_a_dropped_item():
    four_in_three = np.array([[0, 1, 2]] * 4)
    with pytest.raises(CuckooFailure):
        cuckoo_insert(four_in_three, 3)
    with pytest.raises(CuckooFailure):
        cuckoo_insert(four_in_three, 8, max_rounds=50)  # 5 free bins it can never reach
    table, _which = cuckoo_insert(np.array([[5, 5, 5]]), 8)  # all three choices the same
    assert table[5] == 0


# Malformed peer messages ------------------------------------------------------------------


def _unsorted(data: bytes, count: int, bits: int) -> bytes:
    """The tag set ``data`` with two tags of one high part swapped: well formed but
    out of order (the sender's tag sets must be sorted)."""
    tags = tagset.decode(data, count, bits, party="s", step="tags")
    high = tagset.sort_keys(tags) >> np.uint64(64 - tagset.high_bits(count, bits))
    i = int(np.flatnonzero(high[1:] == high[:-1])[0])
    tags[[i, i + 1]] = tags[[i + 1, i]]
    return tagset._pack(tags, bits)


def _tamper(net, suffix, fn):
    original = net.send

    def send(to, step, value):
        original(to, step, fn(value) if step.endswith(suffix) else value)

    net.send = send


def _psi_with(bad_party, suffix, fn, *, sets=None):
    sets = sets or {"alice": list(range(100)), "bob": list(range(50, 150))}

    def party(net, ids):
        if net.me == bad_party:
            _tamper(net, suffix, fn)
        return private_intersection(net, ids)

    with pytest.raises(ProtocolError) as info:
        simulate(party, sets, timeout=10)
    assert info.value.party == bad_party
    return info.value


@pytest.mark.parametrize(
    "suffix, fn",
    [
        ("/hello-reply", lambda v: {"nonce": b"short", "size": v["size"]}),
        ("/hello-reply", lambda v: {"nonce": v["nonce"], "size": -1}),
        ("/hello-reply", lambda v: {"nonce": v["nonce"], "size": 2**40}),
        ("/hello-reply", lambda v: [v["nonce"]]),
        ("/tags", lambda v: v[:-1]),
        ("/tags", lambda v: v + b"\x00"),
        ("/tags", lambda v: np.frombuffer(v, dtype=np.uint8)),  # not a byte string
        ("/tags", lambda v: _unsorted(v, 100, tag_bits(100, 100))),
        ("/tags", lambda v: b"junk"),
    ],
)
def test_bad_sender_messages(suffix, fn, first_leads):
    err = _psi_with("bob", suffix, fn)
    assert err.step.endswith(suffix.lstrip("/")) or err.step.endswith(suffix)


@pytest.mark.parametrize(
    "suffix, fn",
    [
        ("kkrt/alice>bob/hello", lambda v: {"nonce": v["nonce"], "size": "many"}),
        ("kkrt/alice>bob/hello", lambda v: {"nonce": v["nonce"], "size": True}),
        ("kkrt/alice>bob/u", lambda v: v[:, :-8]),
        ("kkrt/alice>bob/u", lambda v: v[:-1]),
        ("psi/result", lambda v: {"kind": "int", "ids": np.array([1, 2, 999], np.int64)}),
        ("psi/result", lambda v: {"kind": "int", "ids": np.array([60, 60], np.int64)}),
        ("psi/result", lambda v: {"kind": "str", "ids": ByteStrings([b"60"])}),
        ("psi/result", lambda v: {"kind": "int", "ids": np.array([60], np.int32)}),
        ("psi/result", lambda v: {"kind": "float", "ids": v["ids"]}),
        ("psi/result", lambda v: v["ids"]),
    ],
)
def test_bad_receiver_messages(suffix, fn, first_leads):
    _psi_with("alice", suffix, fn)


def _not_points(v):
    out = np.full_like(v, 0xFF)  # x = 2^256 - 1 is above the field prime
    out[..., 0] = 2
    return out


def test_bad_ec_messages(first_leads):
    def party(net, ids):
        if net.me == "bob":
            _tamper(net, "/back", lambda v: v[:-1])
        return private_intersection(net, ids, method="ec", **UNBOUNDED)

    with pytest.raises(ProtocolError) as info:
        simulate(party, {"alice": [1, 2, 3], "bob": [2, 3]}, timeout=10)
    assert info.value.party == "bob" and info.value.step.endswith("back")

    def party2(net, ids):
        if net.me == "bob":
            _tamper(net, "/theirs", _not_points)
        return private_intersection(net, ids, method="ec", **UNBOUNDED)

    with pytest.raises(ProtocolError) as info:
        simulate(party2, {"alice": [1, 2, 3], "bob": [2, 3]}, timeout=10)
    assert info.value.party == "bob"


# Views --------------------------------------------------------------------------------------


class _Recorder:
    """Records what one party of a KKRT run sees: its base-OT outputs, and the messages
    it sends and receives."""

    def __init__(self, monkeypatch):
        self.ot: dict[str, object] = {}
        self.received: dict[str, list] = {}
        self.sent: dict[str, list] = {}
        recorder = self

        class Session(kkrt_module.OTSession):
            @property
            def sender(self):
                s = super().sender
                original = s.random

                def random(m, **kw):
                    out = original(m, **kw)
                    recorder.ot[self.net.me] = out
                    return out

                s.random = random
                return s

            @property
            def receiver(self):
                r = super().receiver
                original = r.random

                def random(choices, **kw):
                    out = original(choices, **kw)
                    recorder.ot[self.net.me] = (np.array(choices), out)
                    return out

                r.random = random
                return r

        monkeypatch.setattr(kkrt_module, "OTSession", Session)

    def watch(self, net):
        send, receive = net.send, net.receive

        def logged_send(to, step, value):
            self.sent.setdefault(step.rsplit("/", 1)[-1], []).append(value)
            send(to, step, value)

        def logged_receive(frm, step, **kw):
            value = receive(frm, step, **kw)
            self.received.setdefault(step.rsplit("/", 1)[-1], []).append(value)
            return value

        net.send, net.receive = logged_send, logged_receive


def _kkrt_run(monkeypatch, x, y, watched):
    rec = _Recorder(monkeypatch)
    bx, by = IdSet.of(x).blocks(), IdSet.of(y).blocks()

    def party(net, blocks):
        if net.me == watched:
            rec.watch(net)
        if net.me == "r":
            return kkrt_receive(net, "s", blocks)
        kkrt_send(net, "r", blocks)
        return None

    found = simulate(party, {"r": bx, "s": by}, timeout=30).results["r"]
    return rec, bx, by, found


def test_receiver_cannot_compute_tags_outside_the_intersection(monkeypatch):
    """The receiver knows its base-OT pairs, so every ``t_b``; the sender's tag of ``y``
    is ``H(b, t_b XOR ((c_b XOR C(y)) AND s))`` with the sender's secret ``s``. The
    receiver's best guesses (``s`` all zeros: ``H(b, t_b)``; all ones) must hit exactly
    its own intersection items. A weakened OPRF key (``s`` = 0 or 1...1) or a tag
    without the bin in the hash tweak fails this test."""
    x = list(range(0, 3000))
    y = list(range(2000, 5000))
    rec, _bx, by, found = _kkrt_run(monkeypatch, x, y, "r")
    assert found.sum() == 1000
    nonce_r = rec.sent["hello"][0]["nonce"]
    nonce_s = rec.received["hello-reply"][0]["nonce"]
    keys = _Keys(nonce_r, nonce_s)
    bins = cuckoo_bins(len(x))
    length, bits = tag_bytes(len(x), len(y)), tag_bits(len(x), len(y))
    k0, _k1 = rec.ot["r"]
    t_cols = np.stack([AESCTRStream(bytes(k)).read(bins // 8) for k in k0])
    t_rows = transpose_bits(t_cols)
    tags = [tagset.decode(v, len(y), bits, party="s", step="tags") for v in rec.received["tags"]]
    assert len(tags) == 3 and all(t.shape == (len(y), length) for t in tags)
    received = {bytes(r) for t in tags for r in t}
    assert len(received) == 3 * len(y)  # no two tags collide: (y, k) and bin in the hash
    every_bin = np.arange(bins)
    zero = tagset.truncate(oprf_hash(t_rows, every_bin, keys.session, length), bits)
    guess_zero = {bytes(r) for r in zero}
    hits_zero = received & guess_zero
    assert len(hits_zero) == 1000  # exactly one tag per common item (its placement)
    pos = _positions(by, keys, bins)
    for k in range(3):
        b = pos[:, k]
        ones = t_rows[b] ^ _codes(by, k, keys, t_rows.shape[1])
        guess = tagset.truncate(oprf_hash(ones, b, keys.session, length), bits)
        guess_ones = {bytes(r) for r in guess}
        assert not (received & guess_ones)
    # The tags of items outside the intersection look uniform: balanced bits.
    outside = np.concatenate([t for t in tags])
    outside = np.array([r for r in outside if bytes(r) not in hits_zero])
    means = np.unpackbits(outside, axis=1)[:, :bits].mean(axis=0)
    sd = 0.5 / np.sqrt(len(outside))
    assert np.all(np.abs(means - 0.5) < 6 * sd)


def test_sender_cannot_read_codewords_from_u(monkeypatch):
    """The sender knows ``G(k_j^{s_j})``; in a column with ``s_j = 0`` that is ``t^j``, so
    ``u^j XOR t^j = G(k_j^1) XOR c^j``: without the PRG mask ``G(k_j^1)`` it would show
    the receiver's codewords. Compare those columns with the true codewords of the
    receiver's items at all three of their bins: agreement must stay at chance (1/2)."""
    x = list(range(10_000, 10_400))
    y = list(range(10_300, 10_700))
    rec, bx, _by, found = _kkrt_run(monkeypatch, x, y, "s")
    assert found.sum() == 100
    choices, seeds = rec.ot["s"]
    keys = _Keys(rec.received["hello"][0]["nonce"], rec.sent["hello-reply"][0]["nonce"])
    bins = cuckoo_bins(len(x))
    (u,) = rec.received["u"]
    assert u.shape == (code_bits(len(y)), bins // 8)
    zero = np.flatnonzero(choices == 0)
    g = np.stack([AESCTRStream(bytes(k)).read(bins // 8) for k in seeds])
    seen = transpose_bits(u ^ g)  # rows: G(k^1) ^ c at the s_j = 0 columns
    mask = pack((choices == 0).astype(np.uint8))
    pos = _positions(bx, keys, bins)
    best = 0.0
    for k in range(3):
        code = _codes(bx, k, keys, u.shape[0] // 8)
        diff = np.unpackbits((seen[pos[:, k]] ^ code) & mask, axis=1).sum(axis=1)
        agreement = 1 - diff / len(zero)
        best = max(best, float(agreement.max()))
    assert best < 0.75  # about 0.5 + 4 standard deviations of 256 fair bits at most
    # And the u matrix itself is balanced.
    assert abs(np.unpackbits(u).mean() - 0.5) < 0.01


def test_hash_tweaks_separate_bins():
    rows = np.zeros((4, 64), dtype=np.uint8)
    out = oprf_hash(rows, np.array([0, 1, 2, 3]), session=5, nbytes=16)
    assert len({bytes(r) for r in out}) == 4
    other = oprf_hash(rows, np.array([0, 1, 2, 3]), session=6, nbytes=16)
    assert not ({bytes(r) for r in out} & {bytes(r) for r in other})


def test_hash_chains_its_blocks():
    """``H(b, z)`` is the TCCR hash chained over the blocks (the definition, recomputed),
    and its blocks do not separate: with a hash XOR-ed block by block, the tags of
    ``(a, b)``, ``(a', b)``, ``(a, b')`` and ``(a', b')`` XOR to zero, which is what lets
    a receiver guess ``s`` half by half (2^64 work instead of 2^128)."""
    rng = np.random.default_rng(7)
    rows = rng.integers(0, 256, (4, 64), dtype=np.uint8)
    bins = np.arange(4, dtype=np.uint64)
    want = np.zeros((4, 16), dtype=np.uint8)
    for j in range(4):
        want = tccr_hash(
            rows[:, 16 * j : 16 * (j + 1)] ^ want,
            kkrt_module._tweaks(bins, 9, kkrt_module._TWEAK_BLOCK + j),
        )
    assert np.array_equal(oprf_hash(rows, bins, session=9, nbytes=16), want)
    a, a2, b, b2 = (rng.integers(0, 256, 32, dtype=np.uint8) for _ in range(4))
    quad = np.stack([np.concatenate(p) for p in ((a, b), (a2, b), (a, b2), (a2, b2))])
    tags = oprf_hash(quad, np.zeros(4, dtype=np.uint64), session=9, nbytes=16)
    assert np.bitwise_xor.reduce(tags, axis=0).any()


def test_tags_sharing_their_first_eight_bytes_are_told_apart(monkeypatch):
    """The receiver searches on the first 8 bytes of a tag and compares the rest; with
    search keys cut to 3 bits almost every lookup finds several candidates, and the
    result must still be the exact intersection."""

    def coarse(tags):  # the top 3 bits: the order of the full keys, few distinct values
        return tagset.sort_keys(tags) >> np.uint64(61)

    monkeypatch.setattr(kkrt_module, "_keys64", coarse)
    sets = {"alice": list(range(0, 300)), "bob": list(range(150, 450))}
    out = run_local(private_intersection, sets, timeout=30)
    assert out["alice"] == list(range(150, 300)) == out["bob"]
