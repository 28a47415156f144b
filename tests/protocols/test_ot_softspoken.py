"""SoftSpoken 1-out-of-16 OT extension (issue 25, item 4: the comparison's leaves for 7.5
bytes of ``u`` instead of KK13's 30): the code, the keys against KK13's definition, the
compiled AES-NI kernels against numpy, the punctured PRF, the correlated OT of the
multiplexer, bad peer messages, and the sender's view from the attacker's side."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from ppdm.errors import ProtocolError
from ppdm.parties.local import simulate
from ppdm.protocols.ot import bits, softspoken
from ppdm.protocols.ot.bits import unpack
from ppdm.protocols.ot.crhash import FIXED_KEY, aes_permute, make_tweaks, tccr_hash
from ppdm.protocols.ot.extension import OTSession
from ppdm.protocols.ot.kk13 import (
    CHOICES,
    CODE_BITS,
    TWEAK_BLOCK,
    KK13Receiver,
    KK13Sender,
    compiled_keys,
    kk13_hash,
)
from ppdm.protocols.ot.softspoken import (
    BLOCKS,
    TREE_KEYS,
    TWEAK_BLOCK_SS16,
    SS16Receiver,
    SS16Sender,
    codewords,
    correlated_both,
    planes,
)

PREFIX = "ot/ss16/alice>bob"


def _choices(seed: int, n: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, CHOICES, n)


def _run(choices, *, length=16, chunk=1 << 18):
    def party(net, _):
        if net.me == "alice":
            sender = SS16Sender.setup(net, "bob", chunk=chunk)
            return sender.random(len(choices), length=length), sender
        receiver = SS16Receiver.setup(net, "alice", chunk=chunk)
        return receiver.random(choices, length=length), receiver

    sim = simulate(party, {"alice": None, "bob": None}, timeout=60)
    keys, sender = sim.results["alice"]
    got, receiver = sim.results["bob"]
    return keys, got, sender, receiver, sim


def test_code_has_kk13s_distance_in_each_half():
    """Every two codewords differ in 128 columns, 64 in each hashed half (KK13's
    distance, module docstring), the four columns of a block alike; 16 columns dead."""
    c = unpack(codewords(), CODE_BITS).astype(int)
    for a in range(CHOICES):
        for b in range(a):
            diff = c[a] ^ c[b]
            assert diff.sum() == 128 and diff[:128].sum() == diff[128:].sum() == 64
    blocks = c[:, np.r_[0:120, 128:248]].reshape(CHOICES, BLOCKS, 4)
    assert (blocks == blocks[:, :, :1]).all()
    assert not c[:, np.r_[120:128, 248:256]].any()


def test_keys_against_the_definition(monkeypatch):
    """KK13's keys ``H(j, q_j XOR (C(v) AND s))`` with ``q_j = t_j XOR (C(r_j) AND s)``,
    over several chunks; the receiver holds the key of its choice, the 15 others differ;
    ``u`` is 60 rows (7.5 bytes an OT)."""
    m = 1000
    r = _choices(3, m)
    seen: dict[str, list] = {"q": [], "t": []}
    q_rows, t_rows = SS16Sender._q_rows, SS16Receiver._t_rows

    def record_q(self, n):
        start, q = q_rows(self, n)
        seen["q"].append(q.copy())
        return start, q

    def record_t(self, choices):
        start, t = t_rows(self, choices)
        seen["t"].append(t.copy())
        return start, t

    monkeypatch.setattr(SS16Sender, "_q_rows", record_q)
    monkeypatch.setattr(SS16Receiver, "_t_rows", record_t)
    keys, got, sender, _, sim = _run(r, chunk=256)
    assert np.array_equal(keys[np.arange(m), r], got)
    assert (keys != got[:, None, :]).any(axis=-1).sum() == (CHOICES - 1) * m
    s = np.packbits(sender._s_bits.astype(np.uint8), bitorder="little")
    code = codewords()
    q, t = np.concatenate(seen["q"]), np.concatenate(seen["t"])
    assert np.array_equal(q, t ^ (code[r] & s))
    for v in (0, 5, 15):
        x = q ^ (code[v] & s)
        inner = tccr_hash(x[:, :16], make_tweaks(0, m, sender._session, TWEAK_BLOCK_SS16))
        t1 = make_tweaks(0, m, sender._session, TWEAK_BLOCK_SS16 + 1)
        assert np.array_equal(keys[:, v], tccr_hash(x[:, 16:] ^ inner, t1))
        # KK13's tweak blocks give other keys for the same inputs and session tag.
        kk13 = kk13_hash(x, start=0, session=sender._session)
        assert not (kk13 == keys[:, v]).all(axis=1).any()
    sent = {x["step"]: x["bytes_sent"] for x in sim.metrics["bob"]}
    assert 7.5 * 1024 <= sent[f"{PREFIX}/u"] <= 7.5 * 1024 + 4 * 128  # 4 chunks of 256


def test_sender_knows_every_leaf_but_its_punctured_one():
    """The GGM set-up: the sender's row ``y`` of block ``b`` is the receiver's leaf ``y
    XOR Delta_b``; row 0, the leaf at ``Delta_b``, stays unknown (zero)."""
    _, _, sender, receiver, _ = _run(_choices(1, 10))
    delta = sender._delta
    for b in range(BLOCKS):
        want = receiver._leaves[b, np.arange(16) ^ delta[b]]
        assert np.array_equal(sender._leaves[b, 1:], want[1:])
        assert not sender._leaves[b, 0].any()


def test_hash_tweaks_are_separated_from_kk13s_by_construction():
    """SS16 hashes under tweak blocks of its own (KK13's ``TWEAK_BLOCK`` and ``+ 1``
    never), in both classes and in the correlated OT's compiled path."""
    ss16 = {TWEAK_BLOCK_SS16, TWEAK_BLOCK_SS16 + 1}
    assert ss16.isdisjoint({TWEAK_BLOCK, TWEAK_BLOCK + 1}) and len(ss16) == 2
    assert SS16Sender.tweak_block == SS16Receiver.tweak_block == TWEAK_BLOCK_SS16
    assert KK13Sender.tweak_block == KK13Receiver.tweak_block == TWEAK_BLOCK
    q = np.random.default_rng(8).integers(0, 256, (40, 32), dtype=np.uint8)
    masks = codewords()[:2]
    ours = compiled_keys(q, masks, 9, 77, 16, block=TWEAK_BLOCK_SS16)
    if ours is not None:
        x = q[:, None, :] ^ masks[None]
        want = kk13_hash(x, start=9, session=77, block=TWEAK_BLOCK_SS16)
        assert np.array_equal(ours, want)
        assert not np.array_equal(ours, compiled_keys(q, masks, 9, 77, 16))


def test_leaf_streams_are_aes_ctr_keyed_by_the_leaf():
    """The leaves' PRG is AES-128 keyed by the leaf on 128-bit big-endian counter blocks
    (not fixed-key AES on seed-dependent inputs)."""
    rng = np.random.default_rng(12)
    seeds = rng.integers(0, 256, (3, 16), dtype=np.uint8)
    start = 2**33 + 5
    got = softspoken.prg(seeds, start, 4)
    ctr = np.array([list((start + c).to_bytes(16, "big")) for c in range(4)], dtype=np.uint8)
    for i, k in enumerate(seeds):
        assert np.array_equal(got[i], aes_permute(ctr, key=k.tobytes()).reshape(-1))


def test_ggm_tree_uses_its_own_fixed_keys_left_and_right():
    """A node's children are ``pi_L(k) XOR k`` and ``pi_R(k) XOR k`` under two fixed keys
    of their own (neither the hash's); no stream of the node gives them."""
    assert len(set(TREE_KEYS)) == 2 and FIXED_KEY not in TREE_KEYS
    nodes = np.random.default_rng(13).integers(0, 256, (2, 3, 16), dtype=np.uint8)
    kids = softspoken._expand(nodes)
    flat = nodes.reshape(-1, 16)
    for side, key in enumerate(TREE_KEYS):
        want = aes_permute(flat, key=key) ^ flat
        assert np.array_equal(kids.reshape(-1, 2, 16)[:, side], want)
    streams = softspoken.prg(nodes, 0, 4).reshape(-1, 4, 16)
    assert not (streams[:, :, None] == kids.reshape(-1, 1, 2, 16)).all(axis=-1).any()


@pytest.mark.skipif(not bits.COMPILED, reason="the compiled kernels are not built")
@pytest.mark.parametrize("punctured", [False, True])
def test_compiled_planes_equal_numpy(monkeypatch, punctured):
    leaves = np.random.default_rng(2).integers(0, 256, (BLOCKS, 16, 16), dtype=np.uint8)
    if punctured:
        leaves[:, 0] = 0  # the sender's unknown leaf
    for start in (77, 2**40 + 3):  # counters past 32 bits: the big-endian blocks
        fast = planes(leaves, start, 9, punctured=punctured)
        monkeypatch.setattr(bits, "_bits", None)
        slow = planes(leaves, start, 9, punctured=punctured)
        monkeypatch.undo()
        assert np.array_equal(fast[:, 1:], slow[:, 1:])
        if not punctured:
            assert np.array_equal(fast[:, 0], slow[:, 0])


@pytest.mark.skipif(not bits.COMPILED, reason="the compiled kernels are not built")
def test_compiled_sender_columns_equal_numpy(monkeypatch):
    """The sender's side: the punctured planes XORed with ``c`` where ``Delta`` has a 1,
    into the code's column rows."""
    rng = np.random.default_rng(4)
    leaves = rng.integers(0, 256, (BLOCKS, 16, 16), dtype=np.uint8)
    corr = rng.integers(0, 256, (BLOCKS, 48), dtype=np.uint8)
    dmask = rng.integers(0, 16, BLOCKS).astype(np.uint8)
    rows = rng.permutation(256)[: 4 * BLOCKS]
    out = [np.zeros((256, 48), dtype=np.uint8) for _ in range(2)]
    keys = softspoken.LeafKeys(leaves)  # once a session, as the parties do
    softspoken.columns(leaves, 5, 3, out[0], rows, corr=corr, dmask=dmask, keys=keys)
    monkeypatch.setattr(bits, "_bits", None)
    softspoken.columns(leaves, 5, 3, out[1], rows, corr=corr, dmask=dmask, keys=keys)
    assert np.array_equal(out[0], out[1]) and out[0][rows].any()


@pytest.mark.skipif(not bits.COMPILED, reason="the compiled kernels are not built")
@pytest.mark.parametrize(("w", "length"), [(16, 1), (16, 16), (1, 16), (2, 5)])
def test_compiled_keys_equal_the_chained_hash(w, length):
    rng = np.random.default_rng(w * 100 + length)
    q = rng.integers(0, 256, (333, 32), dtype=np.uint8)
    masks = rng.integers(0, 256, (w, 32), dtype=np.uint8)
    got = compiled_keys(q, masks, 1000, 77, length)
    if got is None:
        pytest.skip("no AES instructions on this CPU")
    x = q[:, None, :] ^ masks[None, :, :]
    assert np.array_equal(got, kk13_hash(x, start=1000, session=77)[..., :length])


def test_numpy_fallback_gives_the_same_keys(monkeypatch):
    """Without the compiled kernels the parties get the same kind of keys (a party with
    them and one without interoperate: same bytes)."""
    r = _choices(9, 300)
    monkeypatch.setattr(bits, "_bits", None)
    keys, got, _, _, _ = _run(r)
    assert np.array_equal(keys[np.arange(300), r], got)


@pytest.mark.parametrize("n", [0, 5, 700])
def test_correlated_both(n):
    """The multiplexer's correlated OT (choices 0/1): ``x0 + b delta`` each way."""
    rng = np.random.default_rng(n)
    delta = {p: rng.integers(0, 2**64, (n, 2), dtype=np.uint64) for p in ("alice", "bob")}
    b = {p: rng.integers(0, 2, n).astype(np.uint8) for p in ("alice", "bob")}

    def party(net, _):
        peer = "bob" if net.me == "alice" else "alice"
        return correlated_both(OTSession(net, peer), delta[net.me], b[net.me])

    sim = simulate(party, {"alice": None, "bob": None}, timeout=60)
    for me, peer in (("alice", "bob"), ("bob", "alice")):
        x0 = sim.results[me][0]
        got = sim.results[peer][1]
        assert np.array_equal(got, x0 + b[peer][:, None].astype(np.uint64) * delta[me])


@pytest.mark.parametrize(
    ("liar", "step", "bad"),
    [
        ("bob", f"{PREFIX}/u", np.zeros((240, 16), dtype=np.uint8)),  # KK13's 240 rows
        ("bob", f"{PREFIX}/u", np.zeros((60, 8), dtype=np.uint8)),
        ("bob", f"{PREFIX}/ggm", np.zeros((60, 4, 16), dtype=np.uint8)),
        ("bob", f"{PREFIX}/ggm", np.zeros((60, 4, 2, 16), dtype=np.int8)),
    ],
)
def test_bad_messages_raise_naming_party_and_step(liar, step, bad):
    def party(net, _):
        if net.me == liar:
            original = net.send

            def send(to, tag, value):
                original(to, tag, bad if tag == step else value)

            net.send = send
        if net.me == "alice":
            return SS16Sender.setup(net, "bob").random(100)
        return SS16Receiver.setup(net, "alice").random(_choices(2, 100))

    with pytest.raises(ProtocolError) as info:
        simulate(party, {"alice": None, "bob": None}, timeout=10)
    assert info.value.party == liar and info.value.step == step


def _predict_rate(monkeypatch, unmasked: bool) -> float:
    """Attacker's side: alice (sender) guesses bit ``C_b(r_j)`` of bob's choices as the
    ``c_b`` bit it received; the hit rate over every block and OT."""
    r = _choices(6, 4096)
    got: list = []
    if unmasked:  # the mutant: no PRG mask on c (u_b, the XOR of all streams, zero)
        real = softspoken.columns

        def no_mask(*args, u=None, **kwargs):
            real(*args, u=u, **kwargs)
            if u is not None:
                u[:] = 0

        monkeypatch.setattr(softspoken, "columns", no_mask)

    def party(net, _):
        if net.me == "alice":
            original = net.receive

            def receive(frm, step, **kw):
                value = original(frm, step, **kw)
                if step == f"{PREFIX}/u":
                    got.append(value)
                return value

            net.receive = receive
            return SS16Sender.setup(net, "bob").random(len(r), length=1)
        return SS16Receiver.setup(net, "alice").random(r, length=1)

    simulate(party, {"alice": None, "bob": None}, timeout=60)
    (c,) = got
    c_bits = unpack(c, len(r))  # (60, m)
    pos = np.arange(BLOCKS) % 15 + 1
    truth = np.unpackbits((r[None, :] & pos[:, None]).astype(np.uint8)[..., None], axis=-1)
    truth = truth.sum(axis=-1) & 1
    return float((c_bits == truth).mean())


def test_sender_view_predicts_choices_at_chance(monkeypatch):
    assert abs(_predict_rate(monkeypatch, unmasked=False) - 0.5) < 0.01


def test_the_predictor_wins_without_the_masks(monkeypatch):
    assert _predict_rate(monkeypatch, unmasked=True) == 1.0


def test_ot_session_sets_ot16_up_once_per_direction():
    def party(net, _):
        peer = "bob" if net.me == "alice" else "alice"
        session = OTSession(net, peer)
        session.ot16.setup_both()
        first = (session.ot16.sender, session.ot16.receiver)
        session.ot16.setup_both()
        return first == (session.ot16.sender, session.ot16.receiver)

    sim = simulate(party, {"alice": None, "bob": None}, timeout=60)
    assert sim.results == {"alice": True, "bob": True}
    ggm = [
        s
        for p in ("alice", "bob")
        for s in sim.metrics[p]
        if s["step"].endswith("/ggm") and s["bytes_sent"]
    ]
    assert len(ggm) == 2 and all(s["messages_sent"] == 1 for s in ggm)


def test_correlated_both_of_no_ots():
    """``m = 0`` (review N4): empty lanes of the right shapes and dtypes, no messages;
    the corrections' layout has explicit widths (no ``reshape(0, -1)``)."""
    lanes = (np.zeros((0, 1), np.uint64), np.zeros(0, np.uint16))

    def party(net, _):
        peer = "bob" if net.me == "alice" else "alice"
        return correlated_both(OTSession(net, peer), lanes, np.zeros(0, np.uint8))

    sim = simulate(party, {"alice": None, "bob": None}, timeout=60)
    for p in ("alice", "bob"):
        for side in sim.results[p]:
            assert [(a.dtype, a.shape) for a in side] == [(a.dtype, a.shape) for a in lanes]
        assert not any(s["bytes_sent"] for s in sim.metrics[p])
    layout, nbytes = softspoken._layout(lanes)
    assert softspoken._join(list(lanes), layout).shape == (0, nbytes) == (0, 10)


def test_chunks_are_whole_prg_blocks():
    """Chunks round down to 128 OTs (a PRG block a column), so only a call's last chunk
    is padded: 384 OTs in chunks of 192 -> 128 cost 384 OTs of ``c``, not 512."""
    with pytest.raises(ValueError):
        SS16Sender(
            None,
            "bob",
            np.zeros(BLOCKS, np.uint8),
            np.zeros((BLOCKS, 16, 16), np.uint8),
            0,
            chunk=64,
        )  # type: ignore[arg-type]
    keys, got, sender, receiver, sim = _run(_choices(4, 384), chunk=192)
    assert sender.chunk == receiver.chunk == 128 and sender.count == receiver.count == 384
    assert np.array_equal(keys[np.arange(384), _choices(4, 384)], got)
    sent = sum(x["bytes_sent"] for x in sim.metrics["bob"] if x["step"] == f"{PREFIX}/u")
    assert sent < 384 * 7.5 + 3 * 200  # three messages' framing, no padded chunk


_HUGE = """
import numpy as np
from ppdm.protocols.ot import _bits
empty, one = np.zeros(0, np.uint8), np.zeros(16, np.uint8)
rows = np.zeros(240, np.int32)
cases = {
    # nblocks * 16 wraps to 16: the kernel would write 2^60 blocks into 16 bytes.
    "ss_columns": lambda: _bits.ss_columns(
        np.zeros(60 * 2816, np.uint8), 60, 0, 2**60 + 1, True, rows, empty,
        np.zeros(60, np.uint8), one, empty),
    # n * 32 and n * w * length wrap to 32.
    "kk13_keys": lambda: _bits.kk13_keys(
        np.zeros(32, np.uint8), np.zeros(64, np.uint8), 2, bytes(16), 0, 0, 1, 2**59 + 1, 16,
        np.zeros(32, np.uint8)),
    # rows * (cols / 8) and cols * (rows / 8) wrap to 0.
    "transpose": lambda: _bits.transpose(b"", 2**60, 128, bytearray()),
    "aes_schedules": lambda: _bits.aes_schedules(b"", 2**60, bytearray()),
    # rows of 8-byte items (their count matches 4 bytes an item).
    "rows_int64": lambda: _bits.ss_columns(
        np.zeros(2816, np.uint8), 1, 0, 1, True, np.zeros(2, np.int64), empty,
        np.zeros(1, np.uint8), np.zeros((4, 16), np.uint8), empty),
}
for name, call in cases.items():
    try:
        call()
    except (ValueError, OverflowError) as exc:
        print(name, type(exc).__name__)
    else:
        print(name, "accepted")
"""


@pytest.mark.skipif(not bits.COMPILED, reason="the compiled kernels are not built")
def test_compiled_wrappers_refuse_overflowing_sizes():
    """Review N1: size products that wrap around (crafted so that the wrapped sizes match
    the buffers) raise instead of running the kernels out of bounds; rows must be int32.
    In a subprocess: the unfixed wrappers crash the interpreter."""
    done = subprocess.run([sys.executable, "-c", _HUGE], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    got = dict(line.split() for line in done.stdout.splitlines())
    assert got == {
        "ss_columns": "OverflowError",
        "kk13_keys": "OverflowError",
        "transpose": "OverflowError",
        "aes_schedules": "OverflowError",
        "rows_int64": "ValueError",
    }


def test_every_session_draws_a_fresh_delta_and_fresh_trees():
    """What one session's secrets tell about the next: nothing. A receiver that learned
    (or guessed) the sender's ``Delta`` once could compute every unchosen key of a later
    session if ``Delta`` repeated; a sender that saw one session's GGM roots could unmask
    every later ``c`` if the roots repeated. Two sessions between the same parties must
    share neither (60 blocks of 4 bits, 960 leaves of 128 bits: a repeat by chance has
    probability 2^-240)."""

    def party(net, _):
        if net.me == "alice":
            s = SS16Sender.setup(net, "bob")
            return s._delta.copy()
        r = SS16Receiver.setup(net, "alice")
        return r._leaves.copy()

    one = simulate(party, {"alice": None, "bob": None}, timeout=60).results
    two = simulate(party, {"alice": None, "bob": None}, timeout=60).results
    assert not np.array_equal(one["alice"], two["alice"])
    # no leaf of the second session's trees equals any leaf of the first's
    first = {bytes(x) for x in one["bob"].reshape(-1, 16)}
    assert not any(bytes(x) in first for x in two["bob"].reshape(-1, 16))
