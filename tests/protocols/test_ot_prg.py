"""The batched IKNP column PRG (:class:`~ppdm.protocols.ot.crhash.AESCTRStreams`): the same
bytes as one :class:`~ppdm.protocols.ot.crhash.AESCTRStream` per seed over any sequence
of reads, compiled (``_bits.aes_ctr_many``) and OpenSSL alike; the kernel's argument
checks; IKNP between a compiled and a fallback party."""

from __future__ import annotations

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from hypothesis import given, settings
from hypothesis import strategies as st

from ppdm.parties.local import simulate
from ppdm.protocols.ot import bits
from ppdm.protocols.ot.crhash import AESCTRStream, AESCTRStreams
from ppdm.protocols.ot.extension import KAPPA, IKNPReceiver, IKNPSender

#: Reads of odd lengths: empty, inside a block, across blocks, whole blocks, long.
READS = (0, 1, 7, 8, 15, 16, 17, 33, 0, 100, 4096, 5, 1256, 65536 + 3, 11, 2)


def _seeds(k: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (k, 16), dtype=np.uint8)


def _compiled_or_skip(seeds: np.ndarray) -> AESCTRStreams:
    streams = AESCTRStreams(seeds)
    if not streams.compiled:
        pytest.skip("the compiled AES-CTR kernel is not available here (no _bits or AES-NI)")
    return streams


def _reference(seeds: np.ndarray, reads: tuple[int, ...] | list[int]) -> list[np.ndarray]:
    streams = [AESCTRStream(bytes(k)) for k in seeds]
    return [np.array([s.read(n) for s in streams], np.uint8).reshape(len(seeds), n) for n in reads]


@pytest.mark.parametrize("compiled", [None, False])
def test_batched_reads_equal_one_stream_per_seed(compiled):
    seeds = _seeds(KAPPA)
    batched = AESCTRStreams(seeds, compiled=compiled)
    for n, want in zip(READS, _reference(seeds, READS), strict=True):
        got = batched.read(n)
        assert got.shape == (KAPPA, n) and got.dtype == np.uint8 and got.flags.c_contiguous
        assert np.array_equal(got, want), n
    assert batched.position == sum(READS)


@settings(max_examples=40, deadline=None)
@given(
    k=st.integers(0, 9),
    reads=st.lists(st.integers(0, 300), max_size=8),
    seed=st.integers(0, 2**32 - 1),
)
def test_compiled_equals_fallback_and_reference(k, reads, seed):
    seeds = _seeds(k, seed)
    fallback = AESCTRStreams(seeds, compiled=False)
    compiled = AESCTRStreams(seeds)  # the fallback again where the kernel is missing
    for n, want in zip(reads, _reference(seeds, reads), strict=True):
        assert np.array_equal(fallback.read(n), want)
        assert np.array_equal(compiled.read(n), want)


@pytest.mark.parametrize("aesni_only", [False, True])
def test_the_kernel_counts_128_bit_big_endian_blocks_far_into_the_stream(aesni_only):
    """Positions past 2^32 and 2^56 blocks and up to the last one allowed, windows
    starting and ending inside a block, on the VAES kernel (where the CPU has it) and on
    the AES-NI one: OpenSSL's CTR mode from the counter block of that position."""
    seeds = _seeds(3, 7)
    streams = _compiled_or_skip(seeds)
    for block, skip, nbytes in (
        (0, 3, 300),
        ((1 << 32) - 1, 5, 45),
        ((1 << 56) + 255, 15, 1),
        ((1 << 60) - 5, 5, 45),
        ((1 << 60) - 20, 0, 304),  # ends at 2^64 - 16 bytes, the last position allowed
    ):
        out = np.empty((3, nbytes), dtype=np.uint8)
        pos = 16 * block + skip
        assert bits._bits.aes_ctr_many(streams._rkeys, 3, pos, nbytes, out, aesni_only)
        for key, row in zip(seeds, out, strict=True):
            iv = block.to_bytes(16, "big")
            enc = Cipher(algorithms.AES(key.tobytes()), modes.CTR(iv)).encryptor()
            assert enc.update(bytes(skip + nbytes))[skip:] == row.tobytes()


@settings(max_examples=25, deadline=None)
@given(reads=st.lists(st.integers(0, 700), max_size=6), seed=st.integers(0, 2**32 - 1))
def test_the_aesni_kernel_equals_the_vaes_kernel(reads, seed):
    seeds = _seeds(5, seed)
    rk = _compiled_or_skip(seeds)._rkeys
    pos = 0
    for n in reads:
        a, b = np.empty((5, n), np.uint8), np.empty((5, n), np.uint8)
        assert bits._bits.aes_ctr_many(rk, 5, pos, n, a, False)
        assert bits._bits.aes_ctr_many(rk, 5, pos, n, b, True)
        assert np.array_equal(a, b)
        pos += n


def test_the_kernel_checks_its_arguments():
    seeds = _seeds(2, 3)
    rk = _compiled_or_skip(seeds)._rkeys
    ext = bits._bits
    out = np.empty((2, 16), dtype=np.uint8)
    for pos in (-1, 1 << 64, (1 << 64) - 16, (1 << 64) - 31):
        with pytest.raises(OverflowError):
            ext.aes_ctr_many(rk, 2, pos, 16, out)
    assert ext.aes_ctr_many(rk, 2, (1 << 64) - 32, 16, out)  # the last position allowed
    with pytest.raises(OverflowError):
        ext.aes_ctr_many(rk, 2, 0, -1, out)
    with pytest.raises(OverflowError):
        ext.aes_ctr_many(rk, -2, 0, 16, out)
    with pytest.raises(OverflowError):  # n * 176 overflows
        ext.aes_ctr_many(rk, 1 << 62, 0, 16, out)
    with pytest.raises(OverflowError):  # n * nbytes overflows
        ext.aes_ctr_many(rk, 2, 0, 1 << 62, out)
    with pytest.raises(ValueError):
        ext.aes_ctr_many(rk, 2, 0, 17, out)  # out too small
    with pytest.raises(ValueError):
        ext.aes_ctr_many(rk[:1], 2, 0, 16, out)  # round keys of one key only
    with pytest.raises(TypeError):
        ext.aes_ctr_many(rk, 2, 1.5, 16, out)
    with pytest.raises(TypeError):
        ext.aes_ctr_many(rk, 2, 0, 16, bytes(32))  # read-only output


def test_streams_refuse_bad_seeds_reads_and_positions(monkeypatch):
    with pytest.raises(ValueError):
        AESCTRStreams(np.zeros((4, 15), np.uint8))
    with pytest.raises(ValueError):
        AESCTRStreams(np.zeros(16, np.uint8))
    with pytest.raises(ValueError):
        AESCTRStreams(_seeds(2)).read(-1)
    streams = AESCTRStreams(_seeds(2))
    if streams.compiled:
        streams._pos = (1 << 64) - 40
        with pytest.raises(OverflowError):
            streams.read(32)
        assert streams.position == (1 << 64) - 40  # a refused read does not move it
    monkeypatch.setattr(bits, "_bits", None)
    assert not AESCTRStreams(_seeds(2)).compiled
    with pytest.raises(RuntimeError):
        AESCTRStreams(_seeds(2), compiled=True)


@pytest.mark.parametrize("sender_compiled", [True, False])
def test_iknp_between_a_compiled_and_a_fallback_party(sender_compiled):
    """The two parties' PRGs must agree byte for byte: one party on the kernel, the other
    on OpenSSL, over several extensions of odd sizes (reads continuing mid-block)."""
    probe = AESCTRStreams(_seeds(1))
    if not probe.compiled:
        pytest.skip("the compiled AES-CTR kernel is not available here")
    rng = np.random.default_rng(11)
    k0, k1 = _seeds(KAPPA, 1), _seeds(KAPPA, 2)
    s_bits = rng.integers(0, 2, KAPPA).astype(np.uint8)
    seeds = np.where(s_bits[:, None] == 1, k1, k0)
    sizes = (1, 65, 200, 64, 1000)
    choices = [rng.integers(0, 2, m).astype(np.uint8) for m in sizes]

    def party(net, _):
        if net.me == "alice":
            ot = IKNPSender(net, "bob", s_bits, seeds, 5, chunk=512)
            ot._streams = AESCTRStreams(seeds, compiled=None if sender_compiled else False)
            return [ot.random(m) for m in sizes]
        rec = IKNPReceiver(net, "alice", k0, k1, 5, chunk=512)
        rec._streams0 = AESCTRStreams(k0, compiled=False if sender_compiled else None)
        rec._streams1 = AESCTRStreams(k1, compiled=False if sender_compiled else None)
        return [rec.random(c) for c in choices]

    out = simulate(party, {"alice": None, "bob": None}, timeout=60).results
    for (x0, x1), xr, c in zip(out["alice"], out["bob"], choices, strict=True):
        assert np.array_equal(xr, np.where(c[:, None] == 1, x1, x0))
        assert not np.array_equal(x0, x1)


def test_the_fixed_key_permutation_keeps_one_encryptor_per_thread():
    """``aes_permute`` reuses one fixed-key ECB encryptor per thread (parties share a
    process as threads): outputs stay AES-128-ECB under every interleaving, each thread
    has its own encryptor, and other keys still get theirs."""
    import threading

    from ppdm.protocols.ot import crhash

    rng = np.random.default_rng(4)
    xs = [rng.integers(0, 256, (int(n), 16), dtype=np.uint8) for n in rng.integers(1, 300, 20)]

    def ecb(key: bytes, x: np.ndarray) -> bytes:
        return Cipher(algorithms.AES(key), modes.ECB()).encryptor().update(x.tobytes())

    want = [ecb(crhash.FIXED_KEY, x) for x in xs]
    other = bytes(range(16))
    seen, bad = [], []

    def worker() -> None:
        for _ in range(30):
            for x, w in zip(xs, want, strict=True):
                if crhash.aes_permute(x).tobytes() != w:
                    bad.append(1)
            if crhash.aes_permute(xs[0], key=other).tobytes() != ecb(other, xs[0]):
                bad.append(2)
        seen.append(crhash._fixed_key_encryptor())  # kept alive: distinct ids

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad and len({id(e) for e in seen}) == 4
