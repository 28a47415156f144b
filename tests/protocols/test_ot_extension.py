"""IKNP OT extension: the building blocks (transpose, hash, PRG), random / chosen /
correlated OT for every choice pattern and in chunks, both networks, malicious peers,
and the OT jobs between real party processes."""

from __future__ import annotations

import os
import secrets

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ppdm.errors import ProtocolError
from ppdm.parties.local import simulate
from ppdm.protocols.ot import bits
from ppdm.protocols.ot.base import STEP_A
from ppdm.protocols.ot.bits import pack, transpose_bits, unpack
from ppdm.protocols.ot.crhash import (
    AESCTRStream,
    AESCTRStreams,
    aes_permute,
    make_tweaks,
    tccr_expand,
    tccr_hash,
)
from ppdm.protocols.ot.extension import IKNPReceiver, IKNPSender, OTSession
from ppdm.testbed.consortia import LoopbackConsortium

PARTIES = ("alice", "bob")
U_STEP = "ot/iknp/alice>bob/u"
D_STEP = "ot/iknp/alice>bob/d"


def _bits(seed: int, n: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 2, n).astype(np.uint8)


def _run(fn_sender, fn_receiver, *, timeout=30, bed=None):
    def party(net, _):
        if net.me == "alice":
            return fn_sender(IKNPSender.setup(net, "bob", chunk=chunk_of(fn_sender)))
        return fn_receiver(IKNPReceiver.setup(net, "alice", chunk=chunk_of(fn_receiver)))

    inputs = {"alice": None, "bob": None}
    sim = (
        bed.simulate(party, inputs, timeout=timeout)
        if bed
        else simulate(party, inputs, timeout=timeout)
    )
    return sim.results["alice"], sim.results["bob"]


def chunk_of(fn) -> int:
    return getattr(fn, "chunk", 1 << 19)


def with_chunk(chunk):
    def deco(fn):
        fn.chunk = chunk
        return fn

    return deco


# Building blocks ------------------------------------------------------------------------


@given(st.integers(1, 10), st.integers(1, 20), st.integers(0, 2**32))
def test_transpose_matches_reference(row_blocks, col_words, seed):
    """Both transposes (the compiled one when built, and numpy's) against unpack-T-pack,
    over shapes that cross the compiled one's tiles (512 rows, 64 bytes)."""
    rng = np.random.default_rng(seed)
    m = rng.integers(0, 256, (64 * row_blocks, 8 * col_words), dtype=np.uint8)
    ref = pack(unpack(m, 64 * col_words).T)
    for compiled in [False, True] if bits.COMPILED else [False]:
        assert np.array_equal(transpose_bits(m, compiled=compiled), ref)
        assert np.array_equal(transpose_bits(transpose_bits(m, compiled=compiled)), m)
    # A strided view is transposed as its values.
    wide = rng.integers(0, 256, (64 * row_blocks, 16 * col_words), dtype=np.uint8)
    view = wide[:, ::2]
    assert np.array_equal(transpose_bits(view), pack(unpack(view, 64 * col_words).T))


def test_compiled_transpose_is_built_in_ci():
    """CI installs the package with its C extensions (``setup.py``); a build that silently
    fell back to numpy would hide a broken extension. On a workstation without a compiler
    the numpy transpose runs instead."""
    if not bits.COMPILED:
        if os.environ.get("CI", "").strip().lower() in {"1", "true", "yes", "on"}:
            pytest.fail("ppdm.protocols.ot._bits is not built under CI=true")
        pytest.skip("the compiled transpose is not built here")
    with pytest.raises(ValueError):
        bits._bits.transpose(b"\0" * 16, 16, 8, bytearray(15))


def test_without_the_extension_the_numpy_transpose_runs():
    """A wheel built without a compiler: the import of the extension fails and OT
    extension still works (numpy transpose), with the same output."""
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['ppdm.protocols.ot._bits'] = None\n"
        "import numpy as np\n"
        "from ppdm.protocols.ot import bits\n"
        "assert not bits.COMPILED\n"
        "m = np.arange(128 * 16, dtype=np.uint64).astype(np.uint8).reshape(128, 16)\n"
        "assert (bits.transpose_bits(m) == bits.pack(bits.unpack(m, 128).T)).all()\n"
        "print('numpy transpose ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "numpy transpose ok" in out.stdout


def test_transpose_rejects_bad_shapes():
    with pytest.raises(ValueError):
        transpose_bits(np.zeros((100, 8), np.uint8))
    with pytest.raises(ValueError):
        transpose_bits(np.zeros((128, 7), np.uint8))


def test_fixed_key_aes_is_aes():
    # FIPS-197 appendix C.1 test vector through the vectorized permutation.
    key = bytes.fromhex("000102030405060708090a0b0c0d0e0f")
    pt = np.frombuffer(bytes.fromhex("00112233445566778899aabbccddeeff"), np.uint8)
    ct = aes_permute(pt.reshape(1, 16), key=key)
    assert ct.tobytes().hex() == "69c4e0d86a7b0430d8cdb78070b4c55a"


def test_tccr_depends_on_tweak_and_input():
    x = np.random.default_rng(1).integers(0, 256, (1000, 16), dtype=np.uint8)
    h = tccr_hash(x, make_tweaks(0, 1000, 5))
    assert len({r.tobytes() for r in h}) == 1000
    assert not np.array_equal(h, tccr_hash(x, make_tweaks(1, 1000, 5)))
    assert not np.array_equal(h, tccr_hash(x, make_tweaks(0, 1000, 6)))
    long = tccr_expand(x, start=0, session=5, nbytes=40)
    assert np.array_equal(long[:, :16], h) and long.shape == (1000, 40)
    # every output block b is H((i, s, b), x), the definition, block by block
    for start, nbytes in ((0, 40), (77, 16 * 9), (3, 5)):
        got = tccr_expand(x, start=start, session=9, nbytes=nbytes)
        blocks = -(-nbytes // 16)
        want = np.hstack([tccr_hash(x, make_tweaks(start, len(x), 9, b)) for b in range(blocks)])[
            :, :nbytes
        ]
        assert np.array_equal(got, want)


def test_prg_stream_is_consistent():
    seed = bytes(range(16))
    a = AESCTRStream(seed)
    b = AESCTRStream(seed)
    whole = b.read(1000)
    assert np.array_equal(np.concatenate([a.read(7), a.read(500), a.read(493)]), whole)


# Random OT ------------------------------------------------------------------------------


@given(st.lists(st.integers(0, 1), max_size=300), st.sampled_from([64, 128, 1 << 19]))
def test_random_ot_every_choice_pattern(choices, chunk):
    r = np.array(choices, dtype=np.uint8)
    (x0, x1), got = _run(
        with_chunk(chunk)(lambda s: s.random(len(r))),
        with_chunk(chunk)(lambda rc: rc.random(r)),
    )
    assert np.array_equal(got, np.where(r[:, None] == 1, x1, x0))
    assert (x0 != x1).any(axis=1).all()


def test_millions_of_random_ots_in_chunks():
    m = 1 << 21
    r = _bits(7, m)

    def party(net, _):
        if net.me == "alice":
            s = IKNPSender.setup(net, "bob", chunk=1 << 18)
            x0, x1 = s.random(m)
            return x0, x1
        return IKNPReceiver.setup(net, "alice", chunk=1 << 18).random(r)

    out = simulate(party, {"alice": None, "bob": None}, timeout=60).results
    x0, x1 = out["alice"]
    got = out["bob"]
    assert np.array_equal(got, np.where(r[:, None] == 1, x1, x0))
    # Fresh outputs across chunks: no two of the m first words are equal (sorted and
    # compared with their neighbours; numpy 2's np.unique takes seconds on 2**21 words).
    first = np.sort(x0[:, :8].view("<u8").ravel())
    assert len(first) == m and (first[1:] != first[:-1]).all()


# Chosen and correlated OT --------------------------------------------------------------


@given(st.lists(st.integers(0, 1), min_size=1, max_size=200), st.integers(1, 40))
def test_chosen_message_ot(choices, length):
    r = np.array(choices, dtype=np.uint8)
    rng = np.random.default_rng(len(r) + 1000 * length)
    m0 = rng.integers(0, 256, (len(r), length), dtype=np.uint8)
    m1 = rng.integers(0, 256, (len(r), length), dtype=np.uint8)
    _, got = _run(
        with_chunk(64)(lambda s: s.send(m0, m1)),
        with_chunk(64)(lambda rc: rc.receive(r, length=length)),
    )
    assert np.array_equal(got, np.where(r[:, None] == 1, m1, m0))


def test_chosen_ot_unchosen_message_not_in_receiver_view():
    n, length = 500, 16
    r = _bits(3, n)
    rng = np.random.default_rng(4)
    m0 = rng.integers(0, 256, (n, length), dtype=np.uint8)
    m1 = rng.integers(0, 256, (n, length), dtype=np.uint8)
    seen = []

    def party(net, _):
        if net.me == "alice":
            return IKNPSender.setup(net, "bob", chunk=128).send(m0, m1)
        original = net.receive

        def receive(frm, step, **kw):
            v = original(frm, step, **kw)
            seen.append(v.tobytes() if hasattr(v, "tobytes") else repr(v).encode())
            return v

        net.receive = receive
        return IKNPReceiver.setup(net, "alice", chunk=128).receive(r, length=length)

    got = simulate(party, {"alice": None, "bob": None}, timeout=30).results["bob"]
    assert np.array_equal(got, np.where(r[:, None] == 1, m1, m0))
    view = b"".join(seen) + got.tobytes()
    unchosen = np.where(r[:, None] == 1, m0, m1)
    assert not any(row.tobytes() in view for row in unchosen)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64])
@pytest.mark.parametrize("width", [None, 3])
def test_correlated_ot(dtype, width):
    n = 1000
    r = _bits(11, n)
    shape = (n,) if width is None else (n, width)
    info = np.iinfo(dtype)
    delta = np.random.default_rng(12).integers(0, int(info.max), shape, dtype=dtype, endpoint=True)
    x0, got = _run(
        with_chunk(256)(lambda s: s.correlated(delta)),
        with_chunk(256)(lambda rc: rc.correlated(r, dtype=dtype, width=width)),
    )
    rr = r.astype(dtype) if width is None else r.astype(dtype)[:, None]
    assert got.dtype == x0.dtype == np.dtype(dtype) and got.shape == shape
    assert np.array_equal(got, x0 + rr * delta)


def test_millions_of_correlated_ots_in_chunks():
    m = 1 << 21
    r = _bits(5, m)
    delta = np.random.default_rng(6).integers(0, 2**63, m, dtype=np.uint64)
    x0, got = _run(
        with_chunk(1 << 18)(lambda s: s.correlated(delta)),
        with_chunk(1 << 18)(lambda rc: rc.correlated(r, dtype=np.uint64)),
        timeout=60,
    )
    assert np.array_equal(got, x0 + r.astype(np.uint64) * delta)


@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 1)), max_size=300))
def test_bit_correlated_ot(pairs):
    r = np.array([p[0] for p in pairs], dtype=np.uint8)
    d = np.array([p[1] for p in pairs], dtype=np.uint8)
    x0, got = _run(
        with_chunk(64)(lambda s: s.correlated_bits(d)),
        with_chunk(64)(lambda rc: rc.correlated_bits(r)),
    )
    assert np.array_equal(got, x0 ^ (r & d))


def test_session_both_directions():
    n = 700
    bits = {"alice": _bits(1, n), "bob": _bits(2, n)}
    deltas = {
        p: np.random.default_rng(i).integers(0, 2**40, (n, 2)).astype(np.uint64)
        for i, p in enumerate(PARTIES)
    }

    def party(net, _):
        peer = "bob" if net.me == "alice" else "alice"
        sess = OTSession(net, peer, chunk=256)
        a = sess.correlated_both(deltas[net.me], bits[net.me])
        b = sess.correlated_bits_both(bits[net.me], bits[peer] ^ 1)
        c = sess.sender.random(10) if net.me == "alice" else sess.receiver.random(bits[net.me][:10])
        return a, b, c

    out = simulate(party, {"alice": None, "bob": None}, timeout=30).results
    for me, peer in (("alice", "bob"), ("bob", "alice")):
        x0 = out[me][0][0]
        got = out[peer][0][1]
        assert np.array_equal(got, x0 + bits[peer].astype(np.uint64)[:, None] * deltas[me])
        b0 = out[me][1][0]
        bgot = out[peer][1][1]
        assert np.array_equal(bgot, b0 ^ ((bits[me] ^ 1) & bits[me]))
    (k0, k1), kb = out["alice"][2], out["bob"][2]
    assert np.array_equal(kb, np.where(bits["bob"][:10, None] == 1, k1, k0))


@pytest.fixture(scope="module")
def loopback(tmp_path_factory):
    with LoopbackConsortium(PARTIES, tmp_path_factory.mktemp("ot-loopback")) as bed:
        yield bed


@settings(max_examples=10, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(0, 1), max_size=200))
def test_random_ot_every_choice_pattern_on_grpc(loopback, choices):
    r = np.array(choices, dtype=np.uint8)
    (x0, x1), got = _run(
        with_chunk(64)(lambda s: s.random(len(r))),
        with_chunk(64)(lambda rc: rc.random(r)),
        bed=loopback,
    )
    assert np.array_equal(got, np.where(r[:, None] == 1, x1, x0))


def test_on_grpc_loopback(tmp_path):
    n = 5000
    r = _bits(9, n)
    delta = np.arange(n, dtype=np.uint32)
    with LoopbackConsortium(PARTIES, tmp_path, max_message_bytes=64 * 1024) as bed:
        (x0, x1), got = _run(
            with_chunk(1024)(lambda s: s.random(n)),
            with_chunk(1024)(lambda rc: rc.random(r)),
            bed=bed,
        )
        assert np.array_equal(got, np.where(r[:, None] == 1, x1, x0))
        c0, cgot = _run(
            with_chunk(1024)(lambda s: s.correlated(delta)),
            with_chunk(1024)(lambda rc: rc.correlated(r, dtype=np.uint32)),
            bed=bed,
        )
        assert np.array_equal(cgot, c0 + r.astype(np.uint32) * delta)


# Malicious peers -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad_u",
    [
        np.zeros((128, 16), dtype=np.uint8),  # too short for 256 OTs
        np.zeros((127, 32), dtype=np.uint8),  # wrong number of rows
        np.zeros((128, 32), dtype=np.uint16),  # wrong dtype
    ],
)
def test_bad_u_matrix_raises(bad_u):
    def party(net, _):
        if net.me == "alice":
            return IKNPSender.setup(net, "bob").random(256)
        IKNPReceiver.setup(net, "alice")
        net.send("alice", U_STEP, bad_u)
        net.receive("alice", "never", timeout=5)
        return None

    with pytest.raises(ProtocolError) as info:
        simulate(party, {"alice": None, "bob": None}, timeout=10)
    assert info.value.party == "bob" and info.value.step == U_STEP


@pytest.mark.parametrize(
    "bad_d", [np.zeros(100, dtype=np.uint32), np.zeros(99, dtype=np.uint64), b"junk"]
)
def test_bad_corrections_raise(bad_d):
    def party(net, _):
        if net.me == "alice":
            s = IKNPSender.setup(net, "bob")
            s._q_rows(100)  # consume u without answering properly
            net.send("bob", D_STEP, bad_d)
            net.receive("bob", "never", timeout=5)
            return None
        return IKNPReceiver.setup(net, "alice").correlated(_bits(1, 100), dtype=np.uint64)

    with pytest.raises(ProtocolError) as info:
        simulate(party, {"alice": None, "bob": None}, timeout=10)
    assert info.value.party == "alice" and info.value.step == D_STEP


def test_invalid_base_point_raises():
    def party(net, _):
        if net.me == "alice":
            return IKNPSender.setup(net, "bob")
        scoped = net.scoped("ot/iknp/alice>bob")
        scoped.send("alice", "session", bytes(16))
        scoped.send("alice", STEP_A, b"\x03" + b"\xff" * 32)
        net.receive("alice", "never", timeout=5)
        return None

    with pytest.raises(ProtocolError) as info:
        simulate(party, {"alice": None, "bob": None}, timeout=10)
    assert info.value.party == "bob" and info.value.step == "ot/iknp/alice>bob/" + STEP_A


def test_bad_session_tag_raises():
    def party(net, _):
        if net.me == "alice":
            return IKNPSender.setup(net, "bob")
        net.scoped("ot/iknp/alice>bob").send("alice", "session", -3)
        net.receive("alice", "never", timeout=5)
        return None

    with pytest.raises(ProtocolError) as info:
        simulate(party, {"alice": None, "bob": None}, timeout=10)
    assert info.value.party == "bob"


# Real party processes ---------------------------------------------------------------------


@pytest.mark.grpc
@pytest.mark.timeout(120)
def test_ot_jobs_between_party_processes(tmp_path):
    from ppdm.jobs.ot import generated_bits, generated_values
    from ppdm.testbed.consortia import GrpcTestbed

    with GrpcTestbed(["alice", "bob"], tmp_path, timeout=60) as bed:
        doc = bed.run_job("base-ot", {"count": 200, "verify": 50})
        assert doc["state"] == "succeeded", doc["error"]
        assert doc["parties"]["bob"]["result"]["verified"] is True

        doc = bed.run_job("ot-extension", {"count": 300_000, "verify": 1000, "chunk": 65536})
        assert doc["state"] == "succeeded", doc["error"]
        assert doc["parties"]["bob"]["result"]["verified"] is True

        doc = bed.run_job("ot-extension", {"count": 5000, "verify": 5000, "kind": "correlated"})
        assert doc["state"] == "succeeded", doc["error"]
        assert doc["parties"]["bob"]["result"]["verified"] is True

        doc = bed.run_job("dot-product-ot", {"length": 20_000, "vectors": 3, "seed": 4})
        assert doc["state"] == "succeeded", doc["error"]
        x = generated_bits("alice", 4, (3, 20_000), 0.5).astype(np.int64)
        y = generated_bits("bob", 4, (3, 20_000), 0.5).astype(np.int64)
        want = [int(v) for v in (x * y).sum(axis=1)]
        assert doc["parties"]["alice"]["result"]["values"] == want
        assert doc["parties"]["bob"]["result"]["values"] == want

        doc = bed.run_job("comparison", {"count": 2000, "bits": 32, "seed": 9})
        assert doc["state"] == "succeeded", doc["error"]
        xv = generated_values("alice", 9, 2000, 32)
        yv = generated_values("bob", 9, 2000, 32)
        assert doc["parties"]["bob"]["result"]["true"] == int((xv >= yv).sum())

        doc = bed.run_job("argmin", {"points": 300, "clusters": 5, "seed": 2})
        assert doc["state"] == "succeeded", doc["error"]
        import hashlib

        d = generated_values("alice", 2, 1500, 31) + generated_values("bob", 2, 1500, 31)
        idx = d.reshape(300, 5).argmin(axis=1).astype("<i8")
        assert (
            doc["parties"]["alice"]["result"]["sha256"] == hashlib.sha256(idx.tobytes()).hexdigest()
        )


def test_long_chosen_messages_use_smaller_chunks():
    # 2 * 40 kB per OT: 8 MiB caps a chunk at 64 OTs, so 130 OTs take two full chunks and
    # a partial one (without the cap they would go in one message of 10.4 MB).
    n, length = 130, 40_000
    r = _bits(21, n)
    rng = np.random.default_rng(22)
    m0 = rng.integers(0, 256, (n, length), dtype=np.uint8)
    m1 = rng.integers(0, 256, (n, length), dtype=np.uint8)

    def party(net, _):
        if net.me == "alice":
            return IKNPSender.setup(net, "bob").send(m0, m1)
        return IKNPReceiver.setup(net, "alice").receive(r, length=length)

    sim = simulate(party, {"alice": None, "bob": None}, timeout=60)
    assert np.array_equal(sim.results["bob"], np.where(r[:, None] == 1, m1, m0))
    d = {s["step"]: s for s in sim.metrics["alice"]}[D_STEP]
    assert d["messages_sent"] == 3 and d["bytes_sent"] / d["messages_sent"] < 9 << 20


# Tweaks, session tags and long outputs (issue 12) ----------------------------------------


def test_long_hash_outputs_never_repeat_a_block():
    """The old tweak layout truncated the block number (session ^ b << 56 in 64 bits):
    blocks b and b + 256 shared a tweak, so every output repeated with a 4 KiB period."""
    from ppdm.protocols.ot.crhash import tccr_expand

    x = np.frombuffer(secrets.token_bytes(16 * 4), np.uint8).reshape(4, 16)
    out = tccr_expand(x, start=0, session=12345, nbytes=64 * 1024)
    for row in out:
        blocks = row.reshape(-1, 16)
        assert len({bytes(b) for b in blocks}) == len(blocks)


def test_tweak_fields_refuse_overflow():
    from ppdm.protocols.ot.crhash import MAX_OUTPUT_BYTES, SESSION_BITS, make_tweaks, tccr_expand

    with pytest.raises(ValueError):
        make_tweaks(0, 1, session=1 << SESSION_BITS)
    with pytest.raises(ValueError):
        make_tweaks((1 << 64) - 1, 2, session=0)
    with pytest.raises(ValueError):
        make_tweaks(0, 1, session=0, block=1 << 24)
    with pytest.raises(ValueError):
        tccr_expand(np.zeros((1, 16), np.uint8), start=0, session=0, nbytes=MAX_OUTPUT_BYTES + 1)
    # Distinct (index, session, block) triples give distinct tweaks.
    seen = set()
    for session in (0, 1, 2):
        for block in (0, 1, 256, 257):
            for t in make_tweaks(0, 3, session=session, block=block):
                seen.add(bytes(t))
    assert len(seen) == 3 * 4 * 3


def test_the_unchosen_long_message_stays_hidden():
    """Chosen-message OT with 8 KiB messages: the receiver's view of the unchosen message
    (its ciphertext) has no relation between blocks b and b + 256 (with the old layout
    y[b] ^ y[b + 256] == m[b] ^ m[b + 256] for every b)."""
    from ppdm.parties.local import LocalNetwork

    n, length = 8, 8192
    m0 = np.frombuffer(secrets.token_bytes(n * length), np.uint8).reshape(n, length)
    m1 = np.frombuffer(secrets.token_bytes(n * length), np.uint8).reshape(n, length)
    choices = np.zeros(n, dtype=bool)  # bob chooses m0; m1 must stay hidden
    net = LocalNetwork(["alice", "bob"], job_id="long", timeout=30)
    seen: list[np.ndarray] = []
    ep = net.endpoint("bob")
    original = ep.receive

    def spy(frm, step, **kw):
        value = original(frm, step, **kw)
        if isinstance(value, np.ndarray) and value.dtype == np.uint8 and value.size >= n * length:
            seen.append(value)
        return value

    ep.receive = spy  # type: ignore[method-assign]

    def party(net, _):
        if net.me == "alice":
            IKNPSender.setup(net, "bob").send(m0, m1)
            return None
        return IKNPReceiver.setup(net, "alice").receive(choices, length=length)

    sim = simulate(party, {"alice": None, "bob": None}, network=net, timeout=30)
    assert np.array_equal(sim.results["bob"], m0)
    ys = [v.reshape(-1) for v in seen]
    assert ys, "the receiver saw no ciphertexts"
    m1_blocks = m1.reshape(n, -1, 16)
    rel_m = m1_blocks[:, :-256] ^ m1_blocks[:, 256:]
    for y in ys:
        for half in (y[: n * length], y[n * length : 2 * n * length]):
            if half.size != n * length:
                continue
            yb = half.reshape(n, -1, 16)
            rel_y = yb[:, :-256] ^ yb[:, 256:]
            assert not np.all(rel_y == rel_m, axis=-1).any()


def test_both_parties_contribute_to_the_session_tag():
    from ppdm.protocols.ot.extension import session_tag

    a, b = bytes(16), bytes([1]) + bytes(15)
    assert session_tag(a, b) != session_tag(a, bytes(16)) != session_tag(b, bytes(16))
    assert 0 <= session_tag(a, b) < (1 << 40)

    def party(net, _):
        if net.me == "alice":
            return IKNPSender.setup(net, "bob")._session
        return IKNPReceiver.setup(net, "alice")._session

    sim = simulate(party, {"alice": None, "bob": None}, timeout=10)
    assert sim.results["alice"] == sim.results["bob"]


# KOS15 consistency check (malicious_receiver=True) ------------------------------------------


@pytest.mark.parametrize("kind", ["random", "chosen", "correlated"])
def test_kos_check_passes_for_an_honest_receiver(kind):
    rng = np.random.default_rng(7)
    m = 3000
    choices = rng.integers(0, 2, m).astype(np.uint8)
    m0 = rng.integers(0, 256, (m, 20)).astype(np.uint8)
    m1 = rng.integers(0, 256, (m, 20)).astype(np.uint8)
    delta = rng.integers(0, 2**63, m).astype(np.uint64)

    def party(net, _):
        if net.me == "alice":
            s = IKNPSender.setup(net, "bob", chunk=1024, malicious_receiver=True)
            if kind == "random":
                return s.random(m)
            if kind == "chosen":
                return s.send(m0, m1)
            return s.correlated(delta)
        r = IKNPReceiver.setup(net, "alice", chunk=1024, malicious_receiver=True)
        if kind == "random":
            return r.random(choices)
        if kind == "chosen":
            return r.receive(choices, length=20)
        return r.correlated(choices, dtype=np.uint64)

    sim = simulate(party, {"alice": None, "bob": None}, timeout=60)
    got = sim.results["bob"]
    if kind == "random":
        x0, x1 = sim.results["alice"]
        assert np.array_equal(got, np.where(choices[:, None] == 1, x1, x0))
    elif kind == "chosen":
        assert np.array_equal(got, np.where(choices[:, None] == 1, m1, m0))
    else:
        x0 = sim.results["alice"]
        assert np.array_equal(got, x0 + choices.astype(np.uint64) * delta)


def test_kos_check_catches_inconsistent_choice_bits():
    """A receiver that flips its choice bits in one column of u (to learn a bit of the
    sender's s) is named at the check step."""
    from ppdm.parties.local import LocalNetwork
    from ppdm.protocols.ot.extension import STEP_KOS, STEP_U

    net = LocalNetwork(["alice", "bob"], job_id="kos", timeout=30)
    ep = net.endpoint("bob")
    original = ep.send

    def cheat(to, step, value):
        if step.endswith("/" + STEP_U):
            value = value.copy()
            value[17] ^= 0xFF  # column 17 uses other choice bits
        return original(to, step, value)

    ep.send = cheat  # type: ignore[method-assign]
    choices = np.random.default_rng(1).integers(0, 2, 500).astype(np.uint8)

    def party(net, _):
        if net.me == "alice":
            return IKNPSender.setup(net, "bob", malicious_receiver=True).random(500)
        return IKNPReceiver.setup(net, "alice", malicious_receiver=True).random(choices)

    with pytest.raises(ProtocolError) as info:
        simulate(party, {"alice": None, "bob": None}, network=net, timeout=30)
    assert info.value.party == "bob" and info.value.step.endswith(STEP_KOS)


def test_without_the_check_the_same_cheat_goes_unnoticed():
    from ppdm.parties.local import LocalNetwork
    from ppdm.protocols.ot.extension import STEP_U

    net = LocalNetwork(["alice", "bob"], job_id="nokos", timeout=30)
    ep = net.endpoint("bob")
    original = ep.send

    def cheat(to, step, value):
        if step.endswith("/" + STEP_U):
            value = value.copy()
            value[17] ^= 0xFF
        return original(to, step, value)

    ep.send = cheat  # type: ignore[method-assign]
    choices = np.zeros(500, dtype=np.uint8)

    def party(net, _):
        if net.me == "alice":
            return IKNPSender.setup(net, "bob").random(500)
        return IKNPReceiver.setup(net, "alice").random(choices)

    simulate(party, {"alice": None, "bob": None}, network=net, timeout=30)  # no error


# Raw rows (IKNP's rows before its hash; ColumnOTs hashes them into pads) --------------------


@pytest.mark.parametrize("malicious", [False, True])
def test_raw_rows_are_the_iknp_correlation_and_hash_to_its_outputs(malicious):
    """``raw_rows``: ``t_i = q_i XOR r_i s`` row by row; the spans give every row its own
    OT index (chunks padded, and with the KOS15 check a gap of sacrificed OTs after each
    chunk); hashed under those indices and the session tag, the receiver's row gives
    the sender's output of its choice (and not the other one); and the session's next
    method starts past the rows' indices, so no other method ever hashes them."""
    choices = _bits(11, 700)

    def party(net, _):
        if net.me == "alice":
            s = IKNPSender.setup(net, "bob", chunk=256, malicious_receiver=malicious)
            raw = s.raw_rows(len(choices))
            before = s.count
            x0, _ = s.random(10)
            return raw, before, s.count, x0
        r = IKNPReceiver.setup(net, "alice", chunk=256, malicious_receiver=malicious)
        raw = r.raw_rows(choices)
        return raw, r.count, r.random(np.zeros(10, np.uint8))

    sim = simulate(party, {"alice": None, "bob": None}, timeout=60)
    (q, before, after, x0), (t, _, got) = sim.results["alice"], sim.results["bob"]
    assert q.rows.shape == t.rows.shape == (700, 16) and t.delta is None
    assert q.session == t.session and q.spans == t.spans
    assert np.array_equal(t.rows, q.rows ^ (choices[:, None] * q.delta))
    index = q.indices()
    assert len(set(index.tolist())) == 700 and int(index.max()) < before < after
    assert [n for _, n, _ in q.spans] == [256, 256, 188]
    gap = 192 if malicious else 0  # the KOS15 check's OTs after each chunk
    assert [s for _, _, s in q.spans] == [0, 256 + gap, 2 * (256 + gap)]
    assert np.array_equal(x0, got)  # the session's next OTs still work
    for lo, hi in ((0, 700), (250, 520), (511, 513)):
        part_q, part_t = q.take(lo, hi), t.take(lo, hi)
        assert np.array_equal(part_q.indices(), index[lo:hi])
        outs = [
            np.concatenate(
                [
                    tccr_expand(rows[f : f + n], start=s, session=q.session, nbytes=40)
                    for f, n, s in part_q.spans
                ]
            )
            for rows in (part_q.rows, part_q.rows ^ q.delta, part_t.rows)
        ]
        c = choices[lo:hi].astype(bool)
        assert np.array_equal(outs[2][c], outs[1][c]) and np.array_equal(outs[2][~c], outs[0][~c])
        assert not (outs[2] == np.where(c[:, None], outs[0], outs[1])).all(axis=1).any()


# The second IKNP direction's base OTs from the first (OTSession) ----------------------------


@pytest.mark.parametrize("malicious", [False, True])
@pytest.mark.parametrize("bob_first", [False, True])
def test_second_direction_sends_no_chou_orlandi(malicious, bob_first):
    """Whichever direction is set up second (setup_both's order, or the lazy properties
    in the other order) takes its 128 base OTs from 128 random OTs of the first: no
    Chou-Orlandi message in it, and set-up in 6 hops instead of 8. Outputs stay correct
    both ways, with and without KOS15."""
    n = 300
    bits = {"alice": _bits(3, n), "bob": _bits(4, n)}
    deltas = {p: np.arange(n, dtype=np.uint32) * (7 + i) for i, p in enumerate(PARTIES)}

    def party(net, _):
        peer = "bob" if net.me == "alice" else "alice"
        sess = OTSession(net, peer, chunk=256, malicious_receiver=malicious)
        if bob_first:
            first, second = ("receiver", "sender") if net.me == "alice" else ("sender", "receiver")
            getattr(sess, first), getattr(sess, second)
        else:
            sess.setup_both()
        return sess.correlated_both(deltas[net.me], bits[net.me])

    sim = simulate(party, {"alice": None, "bob": None}, timeout=60)
    out = sim.results
    for me, peer in (("alice", "bob"), ("bob", "alice")):
        want = out[me][0] + bits[peer].astype(np.uint32) * deltas[me]
        assert np.array_equal(out[peer][1], want)
    steps = {s["step"] for p in PARTIES for s in sim.metrics[p] if s["messages_sent"]}
    first, second = ("bob>alice", "alice>bob") if bob_first else ("alice>bob", "bob>alice")
    assert f"ot/iknp/{first}/{STEP_A}" in steps
    assert not any(step.startswith(f"ot/iknp/{second}/ot/") for step in steps)
    assert {s for s in steps if s.startswith(f"ot/iknp/{second}/")} == {
        f"ot/iknp/{second}/session",
        f"ot/iknp/{second}/session-reply",
        f"ot/iknp/{second}/u",
        f"ot/iknp/{second}/d",
    } | ({f"ot/iknp/{second}/kos-check"} if malicious else set())


def test_setup_both_hops_and_bytes():
    """Both directions in 5 sequential hops (7 with Chou-Orlandi both ways): the second
    direction's base OTs are 128 OTs of the first (2 KiB of ``u`` from bob, who is its
    receiver), not a point and 128 points (4.7 KB from each side)."""

    def party(net, _):
        OTSession(net, "bob" if net.me == "alice" else "alice").setup_both()

    sim = simulate(party, {"alice": None, "bob": None}, timeout=30)
    assert sim.hops == 5
    sent = {(p, s["step"]): s["bytes_sent"] for p in PARTIES for s in sim.metrics[p]}
    assert 16 * 128 <= sent["bob", "ot/iknp/alice>bob/u"] <= 16 * 128 + 128
    assert not any(step.startswith("ot/iknp/bob>alice/ot/") for _, step in sent)


def test_one_direction_alone_keeps_chou_orlandi():
    def party(net, _):
        peer = "bob" if net.me == "alice" else "alice"
        sess = OTSession(net, peer, chunk=256)
        return sess.sender.random(40) if net.me == "alice" else sess.receiver.random(_bits(5, 40))

    sim = simulate(party, {"alice": None, "bob": None}, timeout=30)
    (x0, x1), got = sim.results["alice"], sim.results["bob"]
    assert np.array_equal(got, np.where(_bits(5, 40)[:, None] == 1, x1, x0))
    steps = {s["step"] for p in PARTIES for s in sim.metrics[p] if s["messages_sent"]}
    assert f"ot/iknp/alice>bob/{STEP_A}" in steps
    assert not any(step.startswith("ot/iknp/bob>alice/") for step in steps)


def _bootstrapped_views(monkeypatch, m: int = 2048):
    """Alice sets up alice>bob (Chou-Orlandi) and uses it; then bob>alice is set up from
    it, then both directions are used again. Records every dir-1 output handed out, the
    second direction's base seeds, bob's raw rows of it and alice's choices."""
    seeds: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    init_s, init_r = IKNPSender.__init__, IKNPReceiver.__init__

    def s_init(self, net, peer, s_bits, keys, session, **kw):
        seeds[net.me] = (s_bits.copy(), keys.copy())
        init_s(self, net, peer, s_bits, keys, session, **kw)

    def r_init(self, net, peer, k0, k1, session, **kw):
        seeds[net.me] = (k0.copy(), k1.copy())
        init_r(self, net, peer, k0, k1, session, **kw)

    monkeypatch.setattr(IKNPSender, "__init__", s_init)
    monkeypatch.setattr(IKNPReceiver, "__init__", r_init)
    r = _bits(11, m)

    def party(net, _):
        if net.me == "alice":
            sess = OTSession(net, "bob", chunk=1024)
            before = sess.sender.random(300)
            sess.setup_both()
            after = sess.sender.random(300)
            sess.receiver.raw_rows(r)
            return before, after
        sess = OTSession(net, "alice", chunk=1024)
        before = sess.receiver.random(_bits(12, 300))
        sess.setup_both()
        after = sess.receiver.random(_bits(13, 300))
        return before, after, sess.sender.raw_rows(m)

    sim = simulate(party, {"alice": None, "bob": None}, timeout=60)
    return sim.results, seeds, r


def test_second_direction_base_seeds_are_fresh_ots(monkeypatch):
    """The 128 base OTs of bob>alice are OTs of alice>bob that nobody else gets: none of
    alice's two seeds of a column is an output of alice>bob handed out before or after
    (a set-up reusing earlier OTs, or later calls reusing its OTs, fails here), and the
    seeds match as base OTs (bob holds alice's seed of his choice bit s_j)."""
    results, seeds, _ = _bootstrapped_views(monkeypatch, m=64)
    (b0, b1), (a0, a1) = results["alice"]
    handed = {bytes(row) for arr in (b0, b1, a0, a1) for row in arr}
    k0, k1 = seeds["alice"]
    assert not handed & {bytes(row) for row in np.concatenate([k0, k1])}
    s_bits, mine = seeds["bob"]
    assert np.array_equal(mine, np.where(s_bits[:, None] == 1, k1, k0))
    bob_handed = {bytes(row) for arr in results["bob"][:2] for row in arr}
    assert not bob_handed & {bytes(row) for row in mine}


def test_second_direction_sender_cannot_predict_choices(monkeypatch):
    """Bob, the second direction's extension sender, tries to recover alice's choice
    bits from his view: his rows q_i = t_i XOR r_i s of that direction, his ``s``, and
    every output he ever got from the first direction (his 128 base keys among them).
    Column j with s_j = 1 is G(k_j^0) XOR r, so a key k_j^0 he knew would give r
    exactly (the control below); with the keys he has, no guess beats chance."""
    m = 2048
    results, seeds, r = _bootstrapped_views(monkeypatch, m=m)
    rows = results["bob"][2]
    s_bits, _ = seeds["bob"]
    q_cols = unpack(rows.rows, 128).T  # (128, m): column j, bit i = OT i
    known = np.concatenate([results["bob"][0], results["bob"][1], seeds["bob"][1]])
    stream_bits = unpack(AESCTRStreams(known).read(m // 8), m)  # (keys, m)
    cols = np.flatnonzero(s_bits)
    guesses = q_cols[cols][:, None, :] ^ stream_bits[None, :, :]  # (cols, keys, m)
    accuracy = (guesses == r).mean(axis=2)
    assert accuracy.max() < 0.6 and accuracy.min() > 0.4
    # Control: alice's k_j^0 (which bob never sees) would reveal r in every such column.
    k0 = seeds["alice"][0][cols]
    control = q_cols[cols] ^ unpack(AESCTRStreams(k0).read(m // 8), m)
    assert (control == r).all()
