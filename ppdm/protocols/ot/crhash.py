"""Fixed-key AES primitives for OT extension: a correlation-robust hash and a PRG.

Everything here works on whole numpy buffers (one call encrypts millions of blocks with
``update_into``), never block by block.

- :func:`tccr_hash` is the *tweakable circular correlation-robust* hash of Guo, Katz,
  Wang and Yu, "Efficient and secure multiparty computation from fixed-key block
  ciphers" (IEEE S&P 2020), section 7.4: ``H(i, x) = pi(pi(x) ^ i) ^ pi(x)`` where ``pi``
  is AES-128 under a fixed, public key and ``i`` a 128-bit tweak that is never reused
  within a session (separate fields for the OT index, the session tag and the output
  block, :func:`make_tweaks`). It is the hash IKNP needs to
  break the correlation ``q_i = t_i ^ r_i s`` (Ishai, Kilian, Nissim, Petrank, CRYPTO
  2003, which asks for a correlation-robust hash). Longer outputs come from running it
  under several tweaks (:func:`tccr_expand`).
- :class:`AESCTRStream` is the PRG that stretches a 128-bit seed to a stream of any
  length: AES-128 in counter mode keyed with the seed (the standard choice; it is also
  what libOTe and emp-ot do). :class:`AESCTRStreams` reads the streams of many seeds in
  step (IKNP's 128 columns): the same bytes, one compiled call per read (``_bits.c``,
  VAES or AES-NI) or, without it, one cached OpenSSL encryptor per seed.

Concrete security: the fixed-key analysis bounds an attacker that makes ``p`` offline
AES evaluations and sees ``q`` hash outputs by roughly ``p * q / 2^128``; with
``q <= 2^40`` OTs in a session that leaves more than 2^80 work, the usual trade-off of
fixed-key AES implementations (emp-ot, libOTe).

Measured here: ~330 million AES blocks per second (ECB) and ~6 GB/s of CTR key stream on
one core, so hashing is never the bottleneck of the extension.
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from ppdm.protocols.ot import bits as _bitsmod

__all__ = [
    "BLOCK",
    "FIXED_KEY",
    "MAX_OUTPUT_BYTES",
    "SESSION_BITS",
    "AESCTRStream",
    "AESCTRStreams",
    "aes_permute",
    "make_tweaks",
    "tccr_expand",
    "tccr_hash",
]

BLOCK = 16
#: The public fixed AES key (nothing-up-my-sleeve: SHA-256 of a label).
FIXED_KEY = hashlib.sha256(b"ppdm/ot/crhash/fixed-key-aes-128").digest()[:BLOCK]


def _as_blocks(x: np.ndarray) -> np.ndarray:
    if x.dtype != np.uint8 or x.ndim != 2 or x.shape[1] != BLOCK:
        raise ValueError(f"expected an (n, {BLOCK}) uint8 array, got {x.dtype}{x.shape}")
    return np.ascontiguousarray(x)


_LOCAL = threading.local()


def _fixed_key_encryptor() -> Any:
    """This thread's ECB encryptor under :data:`FIXED_KEY`, made on first use: ECB keeps
    no state between calls on whole blocks, and one per thread is safe when parties
    share a process. Making one costs ~7 us, most of a small batch's hash."""
    enc = getattr(_LOCAL, "ecb", None)
    if enc is None:
        enc = _LOCAL.ecb = Cipher(algorithms.AES(FIXED_KEY), modes.ECB()).encryptor()
    return enc


def aes_permute(x: np.ndarray, *, key: bytes = FIXED_KEY) -> np.ndarray:
    """``pi(x)``: AES-128-ECB of every row of an ``(n, 16)`` uint8 array under ``key``."""
    x = _as_blocks(x)
    out = np.empty(x.size + BLOCK, dtype=np.uint8)
    if key == FIXED_KEY:
        enc = _fixed_key_encryptor()
    else:
        enc = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    n = enc.update_into(x.reshape(-1), out)  # type: ignore[arg-type]  # numpy buffers
    return out[:n].reshape(x.shape)


#: Field widths of a tweak (128 bits): OT index | session tag | output block.
INDEX_BITS, SESSION_BITS, BLOCK_BITS = 64, 40, 24
MAX_OUTPUT_BYTES = (1 << BLOCK_BITS) * BLOCK


def make_tweaks(start: int, count: int, session: int, block: int = 0) -> np.ndarray:
    """Tweaks for OT indices ``start .. start + count - 1``: ``(count, 16)`` uint8.

    The 128-bit tweak has three separate fields, so no two (index, session, block)
    triples ever share a tweak: the OT index (low 64 bits), the session tag (40 bits) and
    the output block number (24 bits: outputs up to 256 MiB per OT). Values that do not
    fit their field are refused, never truncated (a truncated block number made block
    ``b`` and ``b + 256`` share a tweak, and the hash output repeat every 4 KiB).

    >>> t = make_tweaks(5, 2, session=7, block=3)
    >>> int.from_bytes(bytes(t[1, :8]), "little"), int.from_bytes(bytes(t[1, 8:]), "little")
    (6, 117440515)
    """
    if count < 0 or start < 0 or start + count > (1 << INDEX_BITS):
        raise ValueError(f"OT indices must lie in [0, 2**{INDEX_BITS})")
    if not 0 <= session < (1 << SESSION_BITS):
        raise ValueError(f"session tag must lie in [0, 2**{SESSION_BITS})")
    if not 0 <= block < (1 << BLOCK_BITS):
        raise ValueError(f"block number must lie in [0, 2**{BLOCK_BITS}) (outputs up to 256 MiB)")
    words = np.empty((count, 2), dtype="<u8")
    words[:, 0] = np.arange(start, start + count, dtype=np.uint64)
    words[:, 1] = np.uint64((session << BLOCK_BITS) | block)
    return words.view(np.uint8).reshape(count, BLOCK)


def tccr_hash(x: np.ndarray, tweaks: np.ndarray) -> np.ndarray:
    """``H(i, x) = pi(pi(x) ^ i) ^ pi(x)`` row by row (Guo et al. 2020, section 7.4).

    >>> x = np.zeros((2, 16), dtype=np.uint8)
    >>> h = tccr_hash(x, make_tweaks(0, 2, session=7))
    >>> h.shape, bool((h[0] != h[1]).any())
    ((2, 16), True)
    """
    x = _as_blocks(x)
    tweaks = _as_blocks(tweaks)
    if tweaks.shape != x.shape:
        raise ValueError("one tweak per row is needed")
    px = aes_permute(x)
    y = aes_permute(px ^ tweaks)
    y ^= px
    return y


def tccr_expand(x: np.ndarray, *, start: int, session: int, nbytes: int) -> np.ndarray:
    """``nbytes`` of hash output per row: ``H((i, s, 0), x) || H((i, s, 1), x) || ...``,
    block ``b`` under the tweak of OT index ``i``, session ``s`` and block ``b`` (separate
    fields of :func:`make_tweaks`: no tweak is ever used twice, so no output block
    repeats). ``nbytes`` above :data:`MAX_OUTPUT_BYTES` is refused."""
    x = _as_blocks(x)
    n = x.shape[0]
    if not 0 <= nbytes <= MAX_OUTPUT_BYTES:
        raise ValueError(f"hash outputs are limited to {MAX_OUTPUT_BYTES} bytes per row")
    if nbytes <= BLOCK:
        return tccr_hash(x, make_tweaks(start, n, session))[:, :nbytes]
    blocks = -(-nbytes // BLOCK)
    # pi(x) does not depend on the tweak: computed once for all the output blocks, then
    # one AES pass over every (row, block) pair -- blocks + 1 passes instead of 2 * blocks.
    px = aes_permute(x)
    tweaks = np.empty((n, blocks, BLOCK), dtype=np.uint8)
    for b in range(blocks):
        tweaks[:, b] = make_tweaks(start, n, session, b)
    tweaks ^= px[:, None, :]
    y = aes_permute(tweaks.reshape(n * blocks, BLOCK)).reshape(n, blocks, BLOCK)
    y ^= px[:, None, :]
    return y.reshape(n, blocks * BLOCK)[:, :nbytes]


class AESCTRStream:
    """A PRG: AES-128-CTR keyed with a 16-byte seed, read in consecutive pieces."""

    def __init__(self, seed: bytes) -> None:
        if len(seed) != BLOCK:
            raise ValueError(f"seed must be {BLOCK} bytes")
        self._enc = Cipher(algorithms.AES(bytes(seed)), modes.CTR(bytes(BLOCK))).encryptor()

    def read(self, nbytes: int) -> np.ndarray:
        """The next ``nbytes`` of the stream as a uint8 array."""
        out = np.empty(nbytes + BLOCK, dtype=np.uint8)
        zeros = np.zeros(nbytes, dtype=np.uint8)
        n = self._enc.update_into(zeros, out)  # type: ignore[arg-type]  # numpy buffers
        return out[:n]


#: Bytes of AES round keys per seed (11 round keys of AES-128).
_SCHEDULE_BYTES = 11 * BLOCK
#: The compiled kernel takes stream positions below this (its counter's high half is 0).
_MAX_POSITION = (1 << 64) - BLOCK


class AESCTRStreams:
    """The PRG streams of ``k`` seeds read in step: :meth:`read` returns the next
    ``nbytes`` of every stream as row ``j`` of a ``(k, nbytes)`` array, byte for byte
    what ``AESCTRStream(seeds[j])`` returns for the same sequence of reads (AES-128-CTR,
    128-bit big-endian counter from an all-zero IV, reads continuing mid-block).

    Compiled (``_bits.aes_ctr_many``: the seeds' key schedules made once, then one call
    per read, VAES or AES-NI) when the extension is built and the CPU has AES
    instructions; otherwise one OpenSSL CTR encryptor per seed, made once and kept.
    ``compiled=True`` demands the kernel, ``False`` forces OpenSSL (the tests compare).
    """

    def __init__(self, seeds: np.ndarray, *, compiled: bool | None = None) -> None:
        keys = np.ascontiguousarray(seeds, dtype=np.uint8)
        if keys.ndim != 2 or keys.shape[1] != BLOCK:
            raise ValueError(f"seeds must be a (k, {BLOCK}) uint8 array")
        self.count = len(keys)
        self._pos = 0
        self._rkeys: np.ndarray | None = None
        self._encs: list[Any] = []
        ext = _bitsmod._bits
        if compiled is not False and ext is not None and hasattr(ext, "aes_ctr_many"):
            rkeys = np.empty((self.count, _SCHEDULE_BYTES), dtype=np.uint8)
            if ext.aes_schedules(keys, self.count, rkeys):
                self._rkeys = rkeys
        if self._rkeys is None:
            if compiled:
                raise RuntimeError("the compiled AES-CTR kernel is not available here")
            zero_iv = modes.CTR(bytes(BLOCK))
            self._encs = [Cipher(algorithms.AES(k.tobytes()), zero_iv).encryptor() for k in keys]

    @property
    def compiled(self) -> bool:
        """Whether reads run in the compiled kernel."""
        return self._rkeys is not None

    @property
    def position(self) -> int:
        """Bytes read so far from every stream."""
        return self._pos

    def read(self, nbytes: int) -> np.ndarray:
        """The next ``nbytes`` of every stream: ``(k, nbytes)`` uint8."""
        nbytes = int(nbytes)
        if nbytes < 0:
            raise ValueError("nbytes must be non-negative")
        if self._rkeys is not None:
            if self._pos + nbytes > _MAX_POSITION:
                raise OverflowError("PRG streams are limited to 2^64 - 16 bytes")
            out = np.empty((self.count, nbytes), dtype=np.uint8)
            if _bitsmod._bits.aes_ctr_many(self._rkeys, self.count, self._pos, nbytes, out):
                self._pos += nbytes
                return out
            raise RuntimeError("the compiled AES-CTR kernel refused a read")  # pragma: no cover
        # update_into wants BLOCK - 1 bytes of slack after its output: row j is written
        # at j * nbytes with the rows after it as slack (they are written later).
        flat = np.empty(self.count * nbytes + BLOCK, dtype=np.uint8)
        zeros = np.zeros(nbytes, dtype=np.uint8)
        for j, enc in enumerate(self._encs):
            enc.update_into(zeros, flat[j * nbytes :])  # type: ignore[arg-type]  # numpy
        self._pos += nbytes
        return flat[: self.count * nbytes].reshape(self.count, nbytes)
