"""KK13 OT extension: 1-out-of-16 random OTs for 30 bytes each, from 256 base OTs.

Kolesnikov and Kumaresan, "Improved OT extension for transferring short secrets", CRYPTO
2013 (semi-honest, section 4: IKNP with the receiver's choice bits replaced by the
codewords of a code of minimum distance ``kappa``); the same construction as the
1-out-of-N OT of Orrù, Orsini and Scholl, "Actively secure 1-out-of-N OT extension with
application to private set intersection", CT-RSA 2017, and of CrypTFlow2's leaves (Rathee
et al., CCS 2020, section 3). Aggarwal 2015, §20.5: 1-out-of-N OT, the generalization of
the 1-out-of-2 OT distributed mining is built from.

Code: the Walsh-Hadamard code of 8-bit messages (length 256, minimum distance 128),
``C(v)_i = parity(v AND i)`` for ``i < 256``; a choice ``v < 16`` uses the codeword of
the message ``v``. Every two of these codewords differ in exactly 128 positions
(64 in each 128-bit half: ``C(v)`` repeats a 16-bit pattern). Since ``v < 16``,
``C(v)_i`` depends on ``i mod 16`` only and is 0 in the 16 *dead* columns ``i = 0 mod
16`` for every choice: their ``u`` rows would be ``t^i XOR G(k_i^1)`` alone and carry
nothing, so they are not sent (both parties set ``t^i = q^i = 0`` there; the base OTs
of those columns go unused). The 128 positions where two codewords differ are all among
the 240 live columns, 64 in each half, so dropping the dead ones changes neither the
distance nor the split of the chained hash below.

Protocol (``G`` = AES-128-CTR, ``H`` = :func:`kk13_hash`):

1. *Setup, roles reversed.* The extension receiver ``R`` acts as base-OT sender of 256
   random OTs with key pairs ``(k_i^0, k_i^1)``; the extension sender ``S`` picks random
   bits ``s`` (256) and learns ``k_i^{s_i}`` (Chou-Orlandi,
   :mod:`~ppdm.protocols.ot.base`; or, from an
   :class:`~ppdm.protocols.ot.extension.OTSession`, 256 random IKNP OTs, 4 KiB instead
   of 8.5 KB and two AES calls an OT instead of three scalar multiplications, the base
   OTs of OT extension taken from OT extension as in KKRT16). Both send a random 16-byte nonce (``R`` first, with
   the base OTs' first message); the session tag of every hash tweak is SHA-256 of both
   (40 bits).
2. *Extension of ``m`` OTs with choices ``r_j < 16``.* ``R`` sets ``t^i = G(k_i^0)`` and
   sends ``u^i = t^i XOR G(k_i^1) XOR d^i`` for the 240 live columns (240 x m bits;
   ``t^i = 0`` in the dead ones), where ``d^i`` is column ``i`` of the matrix whose row
   ``j`` is ``C(r_j)``. ``S`` computes ``q^i = G(k_i^{s_i})
   XOR s_i u^i = t^i XOR s_i d^i`` (0 in the dead columns); after one 256-column bit
   transpose, row ``j`` is
   ``q_j = t_j XOR (C(r_j) AND s)``.
3. *Outputs.* ``S`` gets the 16 keys ``x_j^v = H(j, q_j XOR (C(v) AND s))``, ``v < 16``;
   ``R`` gets ``H(j, t_j) = x_j^{r_j}``.

``H(j, x)`` of a 256-bit ``x = (x_0, x_1)`` chains the tweakable circular
correlation-robust hash of :func:`~ppdm.protocols.ot.crhash.tccr_hash` over the two
halves, ``H(j, x) = TCCR((j, sigma, B + 1), x_1 XOR TCCR((j, sigma, B), x_0))``, with
the OT index ``j``, the session tag ``sigma`` and the block number in separate tweak
fields (:func:`~ppdm.protocols.ot.crhash.make_tweaks`: no tweak is used for two OTs or
sessions). The block numbers start at ``B =`` :data:`TWEAK_BLOCK` (``0x400000``), a range
IKNP's hash outputs never reach (they would need 64 MiB per OT) and below KKRT's
``0x800000``; SoftSpoken's SS16 (:mod:`~ppdm.protocols.ot.softspoken`: the same hash
and keys) uses ``B + 2`` and ``B + 3``. KK13's tweaks differ from the other protocols'
by construction, not only through the 40-bit session tag (which two sessions share with
probability 2^-40). Chaining, not XOR-ing, the halves: each half of ``C(v) AND s`` hides
only 64 unknown bits of ``s``, and the XOR of two independent half hashes could be
attacked meet-in-the-middle with about 2^64 work; the chain needs both halves at once (about
2^128 with the fixed-key AES modelled as a random permutation).

Security (semi-honest, two parties)
-----------------------------------
- ``S`` sees ``u^i`` of the live columns, each ``t^i XOR d^i`` masked by the PRG
  output ``G(k_i^{1 - s_i})`` it does not know: nothing about the choices.
- For ``v != r_j``, ``q_j XOR (C(v) AND s) = t_j XOR (C(r_j XOR v) AND s)``: ``R``
  knows ``t_j`` but not the 128 bits of ``s`` where ``C(r_j XOR v)`` is 1, so the 15
  other keys are pseudorandom to it (KK13, theorem 2, with ``H`` correlation robust).
- Semi-honest only: a receiver sending inconsistent ``u`` could learn bits of ``s``
  (the OOS17 check is not implemented; the comparison keeps its KOS15-checked IKNP
  leaves in a session with ``malicious_receiver=True``).
- Messages of the wrong type, dtype or shape raise :class:`~ppdm.errors.ProtocolError`
  naming the peer and the step; base-OT points are validated as in
  :mod:`~ppdm.protocols.ot.base`.

Cost per OT after the setup: 30 bytes ``R -> S`` (``u``: 240 live columns; 32 with the
dead ones), one message per chunk of at
most ``chunk`` OTs, one-way; against 64 bytes for a 1-out-of-16 OT from four IKNP OTs
(Naor-Pinkas, :mod:`~ppdm.protocols.ot.one_of_n`). Hashing: 16 keys of 4 AES calls at
``S``, 4 at ``R`` (compiled with AES-NI, VAES where the CPU has it,
:func:`compiled_keys`; otherwise numpy over OpenSSL's ECB: the same bytes). Setup: 256
base OTs (Chou-Orlandi: ``33 + 33 * 256`` bytes; IKNP: ``16 * 256``) and the two
nonces, one round trip.
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import Callable, Iterator

import numpy as np

from ppdm.errors import ProtocolError
from ppdm.parties.network import Network
from ppdm.protocols.ot import bits as _bitsmod
from ppdm.protocols.ot.base import _check_length, base_ot_receive_random, base_ot_send_random
from ppdm.protocols.ot.bits import pack, transpose_bits
from ppdm.protocols.ot.common import check_chunk as _check_chunk
from ppdm.protocols.ot.common import pad as _pad
from ppdm.protocols.ot.common import scoped_errors as _scoped_errors
from ppdm.protocols.ot.common import session_tag as _session_tag
from ppdm.protocols.ot.common import spans as _spans
from ppdm.protocols.ot.crhash import (
    BLOCK,
    BLOCK_BITS,
    FIXED_KEY,
    AESCTRStream,
    aes_permute,
    make_tweaks,
)

__all__ = ["CHOICES", "CODE_BITS", "KK13Receiver", "KK13Sender", "codewords", "kk13_hash"]

#: Code length = base OTs: the Walsh-Hadamard code of 8-bit messages, distance 128.
CODE_BITS = 256
#: Messages per OT (1-out-of-``CHOICES``).
CHOICES = 16
#: The columns ``i`` with ``i mod 16 != 0``: the others are zero in every codeword of a
#: choice below 16, so their ``u`` rows are not sent (module docstring).
_LIVE = np.arange(CODE_BITS) % CHOICES != 0
_LIVE.flags.writeable = False
#: Columns sent per OT: ``u`` has this many rows (30 bytes an OT).
LIVE_BITS = int(_LIVE.sum())
_LIVE_COLUMNS = np.flatnonzero(_LIVE)
#: OTs per chunk: one ``u`` message of ``30 * chunk`` bytes (7.5 MiB).
DEFAULT_CHUNK = 1 << 18
#: The first tweak block number of KK13's hash (module docstring).
TWEAK_BLOCK = 0x400000
_HASH_BATCH = 1 << 12  # OTs per hashing pass at the sender (16 keys each: 1 MiB arrays)
SESSION_NONCE_BYTES = 16
_ZERO_MASK = np.zeros((1, 2 * BLOCK), dtype=np.uint8)

STEP_SESSION = "session"
STEP_SESSION_REPLY = "session-reply"
STEP_U = "u"


def _prefix(sender: str, receiver: str) -> str:
    return f"ot/kk13/{sender}>{receiver}"


def session_tag(receiver_nonce: bytes, sender_nonce: bytes) -> int:
    """The session tag of the hash tweaks from both parties' nonces (a label of its own:
    never an IKNP session's tag for the same nonces)."""
    return _session_tag(b"ppdm/kk13/session", receiver_nonce, sender_nonce)


@functools.lru_cache(maxsize=1)
def codewords() -> np.ndarray:
    """The 16 codewords ``C(v)``, ``v < 16``: ``(16, 32)`` uint8, 256 bits packed
    little-endian (bit ``i`` of row ``v`` is ``parity(v AND i)``).

    >>> c = np.unpackbits(codewords(), axis=1, bitorder="little").astype(int)
    >>> sorted({int((c[a] ^ c[b]).sum()) for a in range(16) for b in range(a)})
    [128]
    """
    i = np.arange(CODE_BITS)
    v = np.arange(CHOICES)[:, None]
    bits = np.unpackbits((v & i).astype(np.uint8)[..., None], axis=-1).sum(axis=-1) & 1
    out = pack(bits)
    out.flags.writeable = False
    return out


def _check_choices(choices: np.ndarray) -> np.ndarray:
    c = np.asarray(choices)
    if c.ndim != 1 or (c.size and not np.issubdtype(c.dtype, np.integer)):
        raise ValueError("choices must be a 1-D integer array")
    if c.size and (int(c.min()) < 0 or int(c.max()) >= CHOICES):
        raise ValueError(f"choices must lie in [0, {CHOICES})")
    return c.astype(np.uint8)


def _check_seeds(seeds: np.ndarray) -> np.ndarray:
    if seeds.dtype != np.uint8 or seeds.shape != (CODE_BITS, BLOCK):
        raise ValueError(f"base OTs must give ({CODE_BITS}, {BLOCK}) uint8 keys")
    return seeds


def _tccr(x: np.ndarray, tweaks: np.ndarray) -> np.ndarray:
    """:func:`~ppdm.protocols.ot.crhash.tccr_hash` on ``(r, 2)`` uint64 blocks (the 16
    bytes of a block as two words: XORs on words, not bytes). ``x`` is overwritten."""
    px = aes_permute(x.view(np.uint8)).view(np.uint64)
    np.bitwise_xor(px, tweaks, out=x)
    y = aes_permute(x.view(np.uint8)).view(np.uint64)
    y ^= px
    return y


def _repeat_blocks(blocks: np.ndarray, times: int) -> np.ndarray:
    """Every 16-byte block of ``blocks`` (``(n,)`` of dtype ``V16``) ``times`` times in a
    row, as ``(n * times, 2)`` uint64 (whole blocks copied at once: far faster than a
    broadcast over two-word rows)."""
    return np.repeat(blocks, times).view(np.uint64).reshape(-1, 2)


def _hash_halves(
    x0: np.ndarray,
    x1: tuple[np.ndarray, ...],
    start: int,
    session: int,
    w: int,
    block: int = TWEAK_BLOCK,
) -> np.ndarray:
    """:func:`kk13_hash` of OTs ``start .. start + n - 1`` with ``w`` inputs each (rows
    ``w j .. w j + w - 1``): ``x0`` the first halves (``(n * w, 2)`` uint64, overwritten),
    the second halves the XOR of the arrays ``x1``; tweak blocks ``block``, ``block + 1``."""
    n = len(x0) // w
    t0, t1 = (make_tweaks(start, n, session, block + b).view("V16").reshape(n) for b in (0, 1))
    h = _tccr(x0, _repeat_blocks(t0, w) if w > 1 else t0.view(np.uint64).reshape(n, 2))
    for part in x1:
        h ^= part
    return _tccr(h, _repeat_blocks(t1, w) if w > 1 else t1.view(np.uint64).reshape(n, 2))


def compiled_keys(
    q: np.ndarray,
    masks: np.ndarray,
    start: int,
    session: int,
    length: int,
    *,
    block: int = TWEAK_BLOCK,
) -> np.ndarray | None:
    """:func:`kk13_hash` of ``q_j XOR masks[v]`` for every row ``j`` of ``q`` (``(n, 32)``
    uint8, OT indices ``start ..``) and every row ``v`` of ``masks`` (``(w, 32)``), the
    first ``length`` bytes, tweak blocks ``block`` and ``block + 1``: ``(n, w, length)``
    uint8 from the compiled hash (AES-NI, ``_bits.kk13_keys``; the same bytes), or
    ``None`` when it is not built or the CPU has no AES instructions."""
    ext = _bitsmod._bits
    if ext is None or not hasattr(ext, "kk13_keys"):
        return None
    make_tweaks(start + max(len(q) - 1, 0), 1, session, block + 1)  # range checks
    n, w = len(q), len(masks)
    out = np.empty((n, w, length), dtype=np.uint8)
    hi = (session << BLOCK_BITS) | block
    args = (np.ascontiguousarray(q), np.ascontiguousarray(masks), w, FIXED_KEY, start)
    if ext.kk13_keys(*args, hi, hi + 1, n, length, out):
        return out
    return None


def kk13_hash(x: np.ndarray, *, start: int, session: int, block: int = TWEAK_BLOCK) -> np.ndarray:
    """``H(j, x_j) = TCCR((j, sigma, B + 1), x_1 XOR TCCR((j, sigma, B), x_0))`` for OT
    indices ``j = start, start + 1, ...`` and ``B = block`` (KK13's :data:`TWEAK_BLOCK`
    unless given): ``x`` is ``(n, 32)`` or ``(n, w, 32)`` uint8 (``w`` inputs of the same
    OT); returns ``(n, 16)`` or ``(n, w, 16)`` uint8."""
    if x.dtype != np.uint8 or x.ndim not in (2, 3) or x.shape[-1] != 2 * BLOCK:
        raise ValueError("expected (n, 32) or (n, w, 32) uint8 inputs")
    w = 1 if x.ndim == 2 else x.shape[1]
    words = np.ascontiguousarray(x).view(np.uint64).reshape(-1, 4)
    out = _hash_halves(words[:, :2].copy(), (words[:, 2:],), start, session, w, block)
    out = out.view(np.uint8)
    return out if x.ndim == 2 else out.reshape(x.shape[0], w, BLOCK)


class KK13Sender:
    """The extension sender's side of a KK13 session with ``peer``: 16 keys per OT.

    Build it with :meth:`setup` (while the peer builds a :class:`KK13Receiver`); every
    call must be matched by the receiver's with the same number of OTs, in order.
    """

    #: The first of the hash's two tweak block numbers (SoftSpoken's subclass: its own).
    tweak_block = TWEAK_BLOCK

    def __init__(
        self,
        net: Network,
        peer: str,
        s_bits: np.ndarray,
        seeds: np.ndarray,
        session: int,
        *,
        chunk: int,
    ) -> None:
        self.net = net
        self.peer = peer
        self.chunk = _check_chunk(chunk)
        self._s_bits = s_bits.astype(bool)
        self._s_live = self._s_bits[_LIVE]
        self._mask_rows = codewords() & pack(s_bits)[None, :]  # C(v) AND s: (16, 32)
        masks = self._mask_rows.view(np.uint64)  # (16, 4)
        # C(v) AND s for every choice v, repeated for a whole hashing batch: (batch * 16,
        # 2) words per 128-bit half, row 16 j + v for the OT j of the batch.
        self._masks = [np.tile(masks[:, h : h + 2], (_HASH_BATCH, 1)) for h in (0, 2)]
        self._streams = [AESCTRStream(bytes(k)) for k in seeds[_LIVE]]
        self._session = session
        self._index = 0

    @classmethod
    def setup(
        cls,
        net: Network,
        peer: str,
        *,
        chunk: int = DEFAULT_CHUNK,
        base_ots: Callable[[np.ndarray], np.ndarray] | None = None,
    ) -> KK13Sender:
        """Run the 256 base OTs (as base-OT receiver) with ``peer``: Chou-Orlandi OTs,
        or ``base_ots(s_bits)``, random OTs of another extension that return the chosen
        16-byte keys (the peer must pass the matching sender's side)."""
        prefix = _prefix(net.me, peer)
        scoped = net.scoped(prefix)
        theirs = scoped.receive(peer, STEP_SESSION, expect=bytes)
        if len(theirs) != SESSION_NONCE_BYTES:
            raise ProtocolError(
                peer,
                f"{prefix}/{STEP_SESSION}",
                f"session nonce must be {SESSION_NONCE_BYTES} bytes",
            )
        mine = secrets.token_bytes(SESSION_NONCE_BYTES)
        scoped.send(peer, STEP_SESSION_REPLY, mine)
        s_bits = np.unpackbits(np.frombuffer(secrets.token_bytes(CODE_BITS // 8), np.uint8))
        if base_ots is not None:
            seeds = _check_seeds(base_ots(s_bits))
        else:
            with _scoped_errors(prefix):
                seeds = base_ot_receive_random(scoped, peer, s_bits)
        return cls(scoped, peer, s_bits, seeds, session_tag(theirs, mine), chunk=chunk)

    @property
    def count(self) -> int:
        """OTs consumed so far in this session (including alignment padding)."""
        return self._index

    def _q_rows(self, n: int) -> tuple[int, np.ndarray]:
        """Receive one ``u`` chunk for ``n`` OTs: (first index, ``q`` rows ``(n, 32)``)."""
        padded = _pad(n)
        nbytes = padded // 8
        u = self.net.receive(self.peer, STEP_U, expect=np.ndarray)
        if u.dtype != np.uint8 or u.shape != (LIVE_BITS, nbytes):
            raise ProtocolError(
                self.peer,
                f"{_prefix(self.net.me, self.peer)}/{STEP_U}",
                f"expected a uint8 matrix of shape {(LIVE_BITS, nbytes)}, got {u.dtype}{u.shape}",
            )
        # The dead columns (i = 0 mod 16) stay zero on both sides: q^i = t^i = 0.
        g = np.zeros((CODE_BITS, nbytes), dtype=np.uint8)
        for i, stream in zip(_LIVE_COLUMNS, self._streams, strict=True):
            g[i] = stream.read(nbytes)
        g[_LIVE_COLUMNS[self._s_live]] ^= u[self._s_live]
        start = self._index
        self._index += padded
        return start, transpose_bits(g)[:n]

    def _keys(self, q: np.ndarray, start: int, length: int) -> np.ndarray:
        """The 16 keys ``H(j, q_j XOR (C(v) AND s))`` of every row: ``(n, 16, length)``."""
        n = len(q)
        fast = compiled_keys(
            q, self._mask_rows, start, self._session, length, block=self.tweak_block
        )
        if fast is not None:
            return fast
        halves = np.ascontiguousarray(q).view("V16")  # (n, 2): the two 128-bit halves
        out = np.empty((n, CHOICES, length), dtype=np.uint8)
        for o in range(0, n, _HASH_BATCH):
            b = min(_HASH_BATCH, n - o)
            rows = b * CHOICES
            x0 = _repeat_blocks(halves[o : o + b, 0], CHOICES)
            x0 ^= self._masks[0][:rows]
            x1 = (_repeat_blocks(halves[o : o + b, 1], CHOICES), self._masks[1][:rows])
            keys = _hash_halves(x0, x1, start + o, self._session, CHOICES, self.tweak_block)
            out[o : o + b] = keys.view(np.uint8).reshape(b, CHOICES, BLOCK)[..., :length]
        return out

    def iter_random(self, m: int, *, length: int = BLOCK) -> Iterator[np.ndarray]:
        """Stream ``m`` random 1-out-of-16 OTs chunk by chunk: yields the keys of the
        chunk's ``n`` OTs, ``(n, 16, length)`` uint8 (``length <= 16``)."""
        length = _check_key_length(length)
        for _, n in _spans(m, self.chunk):
            start, q = self._q_rows(n)
            yield self._keys(q, start, length)

    def random(self, m: int, *, length: int = BLOCK) -> np.ndarray:
        """``m`` random 1-out-of-16 OTs: every OT's 16 keys, ``(m, 16, length)`` uint8."""
        out = np.empty((m, CHOICES, length), dtype=np.uint8)
        for (o, n), keys in zip(
            _spans(m, self.chunk), self.iter_random(m, length=length), strict=True
        ):
            out[o : o + n] = keys
        return out


def _check_key_length(length: int) -> int:
    length = _check_length(length)
    if length > BLOCK:
        raise ValueError(f"KK13 keys are at most {BLOCK} bytes")
    return length


class KK13Receiver:
    """The extension receiver's side of a KK13 session with ``peer``."""

    #: The first of the hash's two tweak block numbers (SoftSpoken's subclass: its own).
    tweak_block = TWEAK_BLOCK

    def __init__(
        self,
        net: Network,
        peer: str,
        seeds0: np.ndarray,
        seeds1: np.ndarray,
        session: int,
        *,
        chunk: int,
    ) -> None:
        self.net = net
        self.peer = peer
        self.chunk = _check_chunk(chunk)
        self._streams0 = [AESCTRStream(bytes(k)) for k in seeds0[_LIVE]]
        self._streams1 = [AESCTRStream(bytes(k)) for k in seeds1[_LIVE]]
        self._session = session
        self._index = 0

    @classmethod
    def setup(
        cls,
        net: Network,
        peer: str,
        *,
        chunk: int = DEFAULT_CHUNK,
        base_ots: Callable[[int], tuple[np.ndarray, np.ndarray]] | None = None,
    ) -> KK13Receiver:
        """Run the 256 base OTs (as base-OT sender) with ``peer``: Chou-Orlandi OTs, or
        ``base_ots(256)``, random OTs of another extension that return the two 16-byte
        keys of every OT (the peer must pass the matching receiver's side)."""
        prefix = _prefix(peer, net.me)
        scoped = net.scoped(prefix)
        mine = secrets.token_bytes(SESSION_NONCE_BYTES)
        scoped.send(peer, STEP_SESSION, mine)
        # The base OTs' first message follows the nonce without waiting for the reply:
        # the set-up is one round trip.
        if base_ots is not None:
            k0, k1 = (_check_seeds(k) for k in base_ots(CODE_BITS))
        else:
            with _scoped_errors(prefix):
                k0, k1 = base_ot_send_random(scoped, peer, CODE_BITS)
        theirs = scoped.receive(peer, STEP_SESSION_REPLY, expect=bytes)
        if len(theirs) != SESSION_NONCE_BYTES:
            raise ProtocolError(
                peer,
                f"{prefix}/{STEP_SESSION_REPLY}",
                f"session nonce must be {SESSION_NONCE_BYTES} bytes",
            )
        return cls(scoped, peer, k0, k1, session_tag(mine, theirs), chunk=chunk)

    @property
    def count(self) -> int:
        """OTs consumed so far in this session (including alignment padding)."""
        return self._index

    def _t_rows(self, r: np.ndarray) -> tuple[int, np.ndarray]:
        """Send ``u`` for the choices ``r`` of one chunk: (first index, ``t`` rows)."""
        n = len(r)
        padded = _pad(n)
        nbytes = padded // 8
        bits = np.zeros((4, padded), dtype=np.uint8)
        bits[:, :n] = (r[None, :] >> np.arange(4, dtype=np.uint8)[:, None]) & 1
        packed = pack(bits)  # (4, nbytes): bit k of every choice
        # Column i of the codeword matrix is parity(r_j AND i): it depends on i mod 16
        # only, the XOR of the bit rows k with bit k of i set.
        d = np.zeros((CHOICES, nbytes), dtype=np.uint8)
        for a in range(1, CHOICES):
            low = a & -a
            d[a] = d[a ^ low] ^ packed[low.bit_length() - 1]
        t = np.zeros((CODE_BITS, nbytes), dtype=np.uint8)  # dead columns: t^i = 0
        u = np.empty((LIVE_BITS, nbytes), dtype=np.uint8)
        for row, i in enumerate(_LIVE_COLUMNS):
            t[i] = self._streams0[row].read(nbytes)
            u[row] = self._streams1[row].read(nbytes)
            u[row] ^= t[i]
        # Live row 15 g + k - 1 is column i = 16 g + k, k = 1 .. 15: d[k] is its code bit.
        rows = u.reshape(CODE_BITS // CHOICES, CHOICES - 1, nbytes)
        rows ^= d[None, 1:]
        self.net.send(self.peer, STEP_U, u)
        start = self._index
        self._index += padded
        return start, transpose_bits(t)[:n]

    def iter_random(self, choices: np.ndarray, *, length: int = BLOCK) -> Iterator[np.ndarray]:
        """Stream random 1-out-of-16 OTs with the given choices (integers below 16):
        yields the chosen keys of every chunk, ``(n, length)`` uint8."""
        r = _check_choices(choices)
        length = _check_key_length(length)
        for o, n in _spans(len(r), self.chunk):
            start, t = self._t_rows(r[o : o + n])
            fast = compiled_keys(
                t, _ZERO_MASK, start, self._session, length, block=self.tweak_block
            )
            if fast is not None:
                yield fast[:, 0]
                continue
            words = t.view(np.uint64)  # (n, 4)
            keys = _hash_halves(
                words[:, :2].copy(), (words[:, 2:],), start, self._session, 1, self.tweak_block
            )
            yield keys.view(np.uint8)[:, :length]

    def random(self, choices: np.ndarray, *, length: int = BLOCK) -> np.ndarray:
        """Random 1-out-of-16 OTs: the chosen keys ``x_j^{r_j}``, ``(m, length)`` uint8."""
        r = _check_choices(choices)
        out = np.empty((len(r), length), dtype=np.uint8)
        for (o, n), keys in zip(
            _spans(len(r), self.chunk), self.iter_random(r, length=length), strict=True
        ):
            out[o : o + n] = keys
        return out
