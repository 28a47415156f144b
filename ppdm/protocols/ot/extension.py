"""IKNP oblivious-transfer extension: millions of OTs from 128 base OTs.

Ishai, Kilian, Nissim and Petrank, "Extending oblivious transfers efficiently", CRYPTO
2003 (semi-honest version), with the optimizations of Asharov, Lindell, Schneider and
Zohner, "More efficient oblivious transfer and extensions for faster secure computation",
CCS 2013 (a PRG instead of sending the base-OT matrix; correlated OT with one correction
word). Aggarwal 2015, §20.5 names 1-out-of-2 OT as the building block of distributed
privacy; this module makes it cheap enough to use millions of times.

Protocol (``kappa = 128``; ``G`` = AES-128-CTR, all 128 columns read in one call
(:class:`~ppdm.protocols.ot.crhash.AESCTRStreams`), ``H`` = the fixed-key AES TCCR hash of
:mod:`ppdm.protocols.ot.crhash`):

1. *Setup, roles reversed.* The extension receiver ``R`` acts as base-OT sender of 128
   random OTs with key pairs ``(k_j^0, k_j^1)``; the extension sender ``S`` picks random
   bits ``s`` and learns ``k_j^{s_j}`` (Chou–Orlandi, :mod:`~ppdm.protocols.ot.base`).
   In an :class:`OTSession` the direction set up second takes instead 128 fresh random
   OTs of the first, ``S`` choosing ``s`` (bootstrapping, as libOTe's ``split``).
   Both parties send a random 16-byte nonce (``R`` first, ``S`` in reply); the session
   tag in every hash tweak is SHA-256 of both (40 bits), so neither party chooses it.
2. *Extension of ``m`` OTs with choice bits ``r``.* ``R`` sets ``t^j = G(k_j^0)`` and sends
   ``u^j = t^j XOR G(k_j^1) XOR r`` (128 x m bits). ``S`` computes
   ``q^j = G(k_j^{s_j}) XOR s_j u^j = t^j XOR s_j r``; transposing, row ``i`` satisfies
   ``q_i = t_i XOR r_i s``.
3. *Outputs.* Random OT: ``S`` gets ``x_i^0 = H(i, q_i)``, ``x_i^1 = H(i, q_i XOR s)``;
   ``R`` gets ``H(i, t_i) = x_i^{r_i}``. Chosen messages: ``S`` also sends
   ``y_i^b = m_i^b XOR x_i^b``. Correlated OT (ALSZ13): ``S`` inputs ``Delta_i``, keeps
   ``x_i^0 = H(i, q_i)`` and sends ``d_i = x_i^0 + Delta_i - H(i, q_i XOR s)``; ``R`` gets
   ``H(i, t_i) + r_i d_i = x_i^0 + r_i Delta_i`` (arithmetic mod ``2^(8 * itemsize)``, or
   XOR for single bits with :meth:`IKNPSender.correlated_bits`).

Everything is processed in chunks of at most ``chunk`` OTs (default 2^19: an 8 MiB
``u`` message; fewer when the corrections of a chunk would exceed 8 MiB), so memory
stays bounded and :meth:`IKNPSender.iter_random` can stream any
number of OTs. The bit-matrix transpose is vectorized (:func:`~.bits.transpose_bits`).

Security (semi-honest, two parties)
-----------------------------------
- ``S`` sees ``u^j``, which is ``t^j XOR r`` masked by the PRG output ``G(k_j^{1-s_j})``
  it does not know: nothing about ``r``.
- ``R`` knows ``t_i`` but not ``s``; ``x_i^{1-r_i} = H(i, t_i XOR s)`` is pseudorandom to
  it as long as ``H`` is correlation robust, so the unchosen message stays hidden.
- A malicious receiver could learn ``s`` by sending inconsistent ``u``; this module
  implements the semi-honest protocol only (no consistency check as in KOS15).
- Messages of the wrong type, dtype or shape raise :class:`~ppdm.errors.ProtocolError`
  naming the peer and the step; base-OT points are validated as in
  :mod:`~ppdm.protocols.ot.base`.

Cost per OT after the setup: 16 bytes ``R -> S`` (``u``) for random OT; plus ``2L``
bytes ``S -> R`` for ``L``-byte chosen messages, or ``L`` bytes for correlated OT
(``1/8`` byte for bit correlations). One message per chunk in each used direction:
random OT is one-way, chosen and correlated OT one round trip. Setup: 128 base OTs
(``33 + 33 * 128`` bytes, one round trip; from the other direction 2 KiB of its ``u``,
no scalar multiplication) plus the two session nonces.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from ppdm.errors import ProtocolError
from ppdm.parties.network import Network
from ppdm.protocols.ot.base import (
    _check_length,
    base_ot_receive_random,
    base_ot_send_random,
    check_choices,
)
from ppdm.protocols.ot.bits import pack, transpose_bits, unpack
from ppdm.protocols.ot.common import ALIGN as _ALIGN
from ppdm.protocols.ot.common import check_chunk as _check_chunk
from ppdm.protocols.ot.common import clmul as _clmul
from ppdm.protocols.ot.common import gf2_weighted_sum as _gf2_weighted_sum
from ppdm.protocols.ot.common import pad as _pad
from ppdm.protocols.ot.common import scoped_errors as _scoped_errors
from ppdm.protocols.ot.common import session_tag as _session_tag
from ppdm.protocols.ot.common import spans as _spans
from ppdm.protocols.ot.crhash import AESCTRStream, AESCTRStreams, tccr_expand
from ppdm.protocols.ot.kk13 import KK13Receiver, KK13Sender
from ppdm.protocols.ot.softspoken import SS16Pair

__all__ = ["DEFAULT_CHUNK", "KAPPA", "IKNPReceiver", "IKNPSender", "OTSession", "RawRows"]

KAPPA = 128
#: OTs per chunk (one ``u`` message of ``16 * chunk`` bytes).
DEFAULT_CHUNK = 1 << 19

STEP_SESSION = "session"
STEP_SESSION_REPLY = "session-reply"
SESSION_NONCE_BYTES = 16


STEP_KOS = "kos-check"
#: Extra OTs per chunk sacrificed by the KOS15 check: kappa + the statistical parameter.
KOS_EXTRA = 128 + 64


def _kos_chi(session: int, start: int, u: np.ndarray, rows: int) -> np.ndarray:
    """The check's random coefficients ``chi_i`` in GF(2^128), one 16-byte row per OT:
    AES-CTR from SHA-256 of the session tag, the chunk's first OT index and ``u`` -- a
    Fiat-Shamir coin toss (random-oracle model): ``chi`` is fixed only after the receiver
    committed to ``u``, and costs no extra round trip."""
    h = hashlib.sha256(b"ppdm/iknp/kos15")
    h.update(session.to_bytes(8, "big") + start.to_bytes(8, "big"))
    h.update(np.ascontiguousarray(u).tobytes())
    return AESCTRStream(h.digest()[:16]).read(16 * rows).reshape(rows, 16)


def session_tag(receiver_nonce: bytes, sender_nonce: bytes) -> int:
    """The session tag of the hash tweaks, from both parties' random nonces (neither
    chooses it alone): the first :data:`~ppdm.protocols.ot.crhash.SESSION_BITS` bits of
    SHA-256 over both (:func:`~ppdm.protocols.ot.common.session_tag`)."""
    return _session_tag(b"ppdm/iknp/session", receiver_nonce, sender_nonce)


STEP_U = "u"
STEP_D = "d"

_UNSIGNED = (np.uint8, np.uint16, np.uint32, np.uint64)


def _prefix(sender: str, receiver: str) -> str:
    return f"ot/iknp/{sender}>{receiver}"


#: Largest correction message (bytes); chunks shrink for long messages to respect it.
MAX_CORRECTION_BYTES = 8 << 20


def _chunk_for(chunk: int, bytes_per_ot: int) -> int:
    """OTs per chunk when every OT also sends ``bytes_per_ot`` correction bytes."""
    fit = MAX_CORRECTION_BYTES // max(bytes_per_ot, 1)
    return max(_ALIGN, min(chunk, fit - fit % _ALIGN))


def _check_delta(delta: np.ndarray) -> np.ndarray:
    d = np.asarray(delta)
    if d.dtype.type not in _UNSIGNED or d.ndim not in (1, 2):
        raise ValueError("correlations must be a 1-D or 2-D array of an unsigned integer dtype")
    return np.ascontiguousarray(d)


def _check_seeds(seeds: np.ndarray) -> np.ndarray:
    if seeds.dtype != np.uint8 or seeds.shape != (KAPPA, 16):
        raise ValueError(f"base OTs must give ({KAPPA}, 16) uint8 keys")
    return seeds


def _check_bits(bits: np.ndarray) -> np.ndarray:
    return check_choices(np.asarray(bits))


def span_indices(spans: tuple[tuple[int, int, int], ...], lo: int, hi: int) -> np.ndarray:
    """The OT indices (uint64) of rows ``lo .. hi - 1`` of a batch whose chunks are
    ``spans``: ``(first row, rows, OT index of the first row)`` each."""
    out = np.empty(max(hi - lo, 0), dtype=np.uint64)
    for first, count, start in spans:
        a, b = max(lo, first), min(hi, first + count)
        if a < b:
            out[a - lo : b - lo] = np.arange(start + a - first, start + b - first, dtype=np.uint64)
    return out


@dataclass(frozen=True)
class RawRows:
    """IKNP's rows of a batch of random OTs *before* its hash (a sharp tool: the caller
    derives the outputs, and must keep the tweak discipline below).

    ``rows`` is ``(m, 16)`` uint8: ``q_i`` at the sender, ``t_i = q_i XOR r_i s`` at the
    receiver; ``delta`` is ``s`` (16 bytes) at the sender, ``None`` at the receiver;
    ``session`` the session tag; ``spans`` where the rows sit among the session's OTs:
    ``(first row, rows, OT index of the first row)`` per IKNP chunk (chunks are padded,
    and carry the KOS15 check's OTs when it is on, so indices are not contiguous across
    chunks; :meth:`indices`). At the receiver the rows come after the KOS15 check where
    it is enabled, as every output of the session does.

    Soundness. IKNP's own outputs are ``H((i, session, b), q_i)`` and
    ``H((i, session, b), q_i XOR s)`` (:func:`~ppdm.protocols.ot.crhash.tccr_expand`,
    block ``b`` of the output); the receiver, who knows ``t_i`` but not ``s``, learns
    nothing of the output of the choice it did not make as long as the tweakable
    circular correlation-robust hash (Guo, Katz, Wang and Yu, S&P 2020, section 7.4) is
    used under each tweak ``(i, session, b)`` of this ``s`` for one OT's pair ``q_i``,
    ``q_i XOR s`` only, once (one hidden query per tweak). Every call
    that returns raw rows consumes fresh OT indices of the session (the counter moves
    past them as for every other method), so no other method of the session -- its
    :meth:`IKNPSender.random`, chosen or correlated OTs, the KK13 base OTs -- ever hashes
    these rows. A consumer may therefore derive any outputs
    ``H((i, session, b), q_i)`` / ``H((i, session, b), q_i XOR s)`` (and the receiver
    ``H((i, session, b), t_i)``, equal to the one of its choice) with ``i`` the row's own
    OT index, as long as it never uses one ``(i, b)`` twice and keeps ``b`` below KK13's
    range (:data:`~ppdm.protocols.ot.kk13.TWEAK_BLOCK`): these are exactly IKNP
    random-OT outputs, one hash layer per output block."""

    rows: np.ndarray
    delta: np.ndarray | None
    session: int
    spans: tuple[tuple[int, int, int], ...]

    def indices(self, lo: int = 0, hi: int | None = None) -> np.ndarray:
        """The OT indices (uint64) of rows ``lo .. hi - 1``: their tweaks' index field."""
        return span_indices(self.spans, lo, len(self.rows) if hi is None else hi)

    def take(self, lo: int, hi: int) -> RawRows:
        """Rows ``lo .. hi - 1`` (a view) with their spans."""
        spans = tuple(
            (max(lo, f) - lo, min(hi, f + c) - max(lo, f), s + max(lo, f) - f)
            for f, c, s in self.spans
            if max(lo, f) < min(hi, f + c)
        )
        return RawRows(self.rows[lo:hi], self.delta, self.session, spans)


class IKNPSender:
    """The extension sender's side of an IKNP session with ``peer``.

    Build it with :meth:`setup` (while the peer builds an :class:`IKNPReceiver`); then
    every call must be matched by the receiver's corresponding call with the same
    number of OTs, in the same order.
    """

    def __init__(
        self,
        net: Network,
        peer: str,
        s_bits: np.ndarray,
        seeds: np.ndarray,
        session: int,
        *,
        chunk: int,
        malicious_receiver: bool = False,
    ) -> None:
        self.net = net
        self.peer = peer
        self.chunk = _check_chunk(chunk)
        self.malicious_receiver = bool(malicious_receiver)
        self._s_bits = s_bits.astype(bool)
        self._s_rows = np.flatnonzero(self._s_bits).tolist()
        self._s_row = pack(s_bits)  # (16,) uint8
        self._streams = AESCTRStreams(seeds)
        self._session = session
        self._index = 0

    @classmethod
    def setup(
        cls,
        net: Network,
        peer: str,
        *,
        chunk: int = DEFAULT_CHUNK,
        malicious_receiver: bool = False,
        base_ots: Callable[[np.ndarray], np.ndarray] | None = None,
    ) -> IKNPSender:
        """Run the 128 base OTs (as base-OT receiver) with ``peer``: Chou-Orlandi, or
        ``base_ots(s_bits)``, fresh random OTs of another extension returning the chosen
        16-byte keys (the peer passes the matching sender's side). With
        ``malicious_receiver=True`` every chunk is checked for a consistent receiver
        (KOS15; the peer must set it too)."""
        scoped = net.scoped(_prefix(net.me, peer))
        theirs = scoped.receive(peer, STEP_SESSION, expect=bytes)
        if len(theirs) != SESSION_NONCE_BYTES:
            raise ProtocolError(
                peer,
                f"{_prefix(net.me, peer)}/{STEP_SESSION}",
                f"session nonce must be {SESSION_NONCE_BYTES} bytes",
            )
        mine = secrets.token_bytes(SESSION_NONCE_BYTES)
        scoped.send(peer, STEP_SESSION_REPLY, mine)
        session = session_tag(theirs, mine)
        s_bits = np.unpackbits(np.frombuffer(secrets.token_bytes(KAPPA // 8), np.uint8))
        if base_ots is not None:
            seeds = _check_seeds(base_ots(s_bits))
        else:
            with _scoped_errors(_prefix(net.me, peer)):
                seeds = base_ot_receive_random(scoped, peer, s_bits)
        return cls(
            scoped, peer, s_bits, seeds, session, chunk=chunk, malicious_receiver=malicious_receiver
        )

    @property
    def count(self) -> int:
        """OTs consumed so far in this session (including alignment padding)."""
        return self._index

    # Core ------------------------------------------------------------------------------

    def _q_rows(self, n: int) -> tuple[int, np.ndarray]:
        """Receive one ``u`` chunk for ``n`` OTs; return (first index, Q rows (n, 16)).
        With the KOS15 check, ``KOS_EXTRA`` more OTs ride along and are sacrificed to
        check that the receiver used one choice vector in every column."""
        extra = KOS_EXTRA if self.malicious_receiver else 0
        padded = _pad(n + extra)
        nbytes = padded // 8
        u = self.net.receive(self.peer, STEP_U, expect=np.ndarray)
        if u.dtype != np.uint8 or u.shape != (KAPPA, nbytes):
            raise ProtocolError(
                self.peer,
                f"{_prefix(self.net.me, self.peer)}/{STEP_U}",
                f"expected a uint8 matrix of shape {(KAPPA, nbytes)}, got {u.dtype}{u.shape}",
            )
        g = self._streams.read(nbytes)
        if nbytes < 2048:
            g[self._s_bits] ^= u[self._s_bits]
        else:  # row by row: no gathered copies of half the matrix (20x faster at 64 KiB)
            for j in self._s_rows:
                g[j] ^= u[j]
        start = self._index
        self._index += padded
        q = transpose_bits(g)[: n + extra]
        if extra:
            self._kos_verify(q, u, start)
        return start, q[:n]

    def _kos_verify(self, q: np.ndarray, u: np.ndarray, start: int) -> None:
        """KOS15's correlation check: ``sum chi_i q_i == t + x * s`` (Keller, Orsini and
        Scholl, CRYPTO 2015, section 3), with the receiver's ``x = sum chi_i r_i`` and
        ``t = sum chi_i t_i``. A receiver that used different choice bits in different
        columns (to learn bits of ``s``) fails it except with probability about 2^-64."""
        step = f"{_prefix(self.net.me, self.peer)}/{STEP_KOS}"
        got = self.net.receive(self.peer, STEP_KOS, expect=np.ndarray)
        if got.dtype != np.uint8 or got.shape != (48,):
            raise ProtocolError(self.peer, step, "expected 48 bytes (x and t)")
        x = int.from_bytes(got[:16].tobytes(), "little")
        t = int.from_bytes(got[16:].tobytes(), "little")
        chi = _kos_chi(self._session, start, u, len(q))
        s_int = int.from_bytes(self._s_row.tobytes(), "little")
        if _gf2_weighted_sum(chi, q) != t ^ _clmul(x, s_int):
            raise ProtocolError(self.peer, step, "the receiver's choice bits are inconsistent")

    def _hash_pair(self, q: np.ndarray, start: int, nbytes: int) -> tuple[np.ndarray, np.ndarray]:
        h0 = tccr_expand(q, start=start, session=self._session, nbytes=nbytes)
        h1 = tccr_expand(q ^ self._s_row, start=start, session=self._session, nbytes=nbytes)
        return h0, h1

    # Random OT -------------------------------------------------------------------------

    def iter_random(self, m: int, *, length: int = 16) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Stream ``m`` random OTs chunk by chunk: yields ``(x0, x1)``, each
        ``(n, length)`` uint8 for the ``n`` OTs of the chunk."""
        length = _check_length(length)
        for _, n in _spans(m, self.chunk):
            start, q = self._q_rows(n)
            yield self._hash_pair(q, start, length)

    def random(self, m: int, *, length: int = 16) -> tuple[np.ndarray, np.ndarray]:
        """``m`` random OTs: the two ``(m, length)`` uint8 message arrays."""
        x0 = np.empty((m, length), dtype=np.uint8)
        x1 = np.empty((m, length), dtype=np.uint8)
        pieces = self.iter_random(m, length=length)
        for (o, n), (a, b) in zip(_spans(m, self.chunk), pieces, strict=True):
            x0[o : o + n] = a
            x1[o : o + n] = b
        return x0, x1

    def raw_rows(self, m: int) -> RawRows:
        """``m`` random OTs as IKNP's unhashed rows ``q_i`` and ``s`` (:class:`RawRows`:
        the caller hashes them, under the tweak discipline stated there). The peer calls
        :meth:`IKNPReceiver.raw_rows` (or any receiver method taking the same ``m`` OTs:
        the messages are those of :meth:`random`)."""
        rows = np.empty((m, 16), dtype=np.uint8)
        spans = []
        for o, n in _spans(m, self.chunk):
            start, q = self._q_rows(n)
            rows[o : o + n] = q
            spans.append((o, n, start))
        return RawRows(rows, self._s_row.copy(), self._session, tuple(spans))

    # Chosen-message OT -----------------------------------------------------------------

    def send(self, m0: np.ndarray, m1: np.ndarray) -> None:
        """Chosen-message OT: ``m0``, ``m1`` are ``(m, L)`` uint8 arrays."""
        m0 = np.asarray(m0)
        m1 = np.asarray(m1)
        if m0.dtype != np.uint8 or m0.ndim != 2 or m0.shape != m1.shape or m1.dtype != np.uint8:
            raise ValueError("m0 and m1 must be (m, L) uint8 arrays of the same shape")
        m, length = m0.shape
        for o, n in _spans(m, _chunk_for(self.chunk, 2 * length)):
            start, q = self._q_rows(n)
            h0, h1 = self._hash_pair(q, start, length)
            h0 ^= m0[o : o + n]
            h1 ^= m1[o : o + n]
            self.net.send(self.peer, STEP_D, np.stack([h0, h1]))

    # Correlated OT ---------------------------------------------------------------------

    def correlated(self, delta: np.ndarray) -> np.ndarray:
        """Correlated OT over ``Z_{2^k}`` (``k`` = bits of ``delta``'s dtype).

        ``delta`` is ``(m,)`` or ``(m, w)`` unsigned integers; returns the sender's
        ``x0`` (same shape and dtype, uniformly random). The receiver gets
        ``x0 + r_i * delta`` (wrapping).
        """
        delta = _check_delta(delta)
        m = delta.shape[0]
        width = 1 if delta.ndim == 1 else delta.shape[1]
        nbytes = width * delta.dtype.itemsize
        x0 = np.empty_like(delta)
        for o, n in _spans(m, _chunk_for(self.chunk, nbytes)):
            start, q = self._q_rows(n)
            h0, h1 = self._hash_pair(q, start, nbytes)
            a = np.ascontiguousarray(h0).view(delta.dtype).reshape((n, *delta.shape[1:]))
            b = np.ascontiguousarray(h1).view(delta.dtype).reshape((n, *delta.shape[1:]))
            x0[o : o + n] = a
            self.net.send(self.peer, STEP_D, a + delta[o : o + n] - b)
        return x0

    def correlated_bits(self, delta: np.ndarray) -> np.ndarray:
        """Correlated OT on single bits: returns random bits ``x0`` (uint8 0/1); the
        receiver gets ``x0 XOR (r_i AND delta_i)``. Corrections travel packed."""
        delta = _check_bits(delta)
        m = len(delta)
        x0 = np.empty(m, dtype=np.uint8)
        for o, n in _spans(m, self.chunk):
            start, q = self._q_rows(n)
            h0, h1 = self._hash_pair(q, start, 1)
            a = h0[:, 0] & 1
            x0[o : o + n] = a
            self.net.send(self.peer, STEP_D, pack(a ^ delta[o : o + n] ^ (h1[:, 0] & 1)))
        return x0


@dataclass
class _Pending:
    """A receiver's half-done batch: ``u`` sent, hashes computed, corrections due."""

    kind: str
    choices: np.ndarray
    hashes: list[np.ndarray] = field(default_factory=list)
    spans: list[tuple[int, int]] = field(default_factory=list)
    dtype: np.dtype = field(default_factory=lambda: np.dtype(np.uint8))
    shape: tuple[int, ...] = ()
    length: int = 0


class IKNPReceiver:
    """The extension receiver's side of an IKNP session with ``peer``."""

    def __init__(
        self,
        net: Network,
        peer: str,
        seeds0: np.ndarray,
        seeds1: np.ndarray,
        session: int,
        *,
        chunk: int,
        malicious_receiver: bool = False,
    ) -> None:
        self.net = net
        self.peer = peer
        self.chunk = _check_chunk(chunk)
        self.malicious_receiver = bool(malicious_receiver)
        self._streams0 = AESCTRStreams(seeds0)
        self._streams1 = AESCTRStreams(seeds1)
        self._session = session
        self._index = 0

    @classmethod
    def setup(
        cls,
        net: Network,
        peer: str,
        *,
        chunk: int = DEFAULT_CHUNK,
        malicious_receiver: bool = False,
        base_ots: Callable[[int], tuple[np.ndarray, np.ndarray]] | None = None,
    ) -> IKNPReceiver:
        """Run the 128 base OTs (as base-OT sender) with ``peer``: Chou-Orlandi, or
        ``base_ots(128)``, fresh random OTs of another extension returning both 16-byte
        keys of every OT (the peer passes the matching receiver's side). With
        ``malicious_receiver=True`` this party proves, per chunk, that it used one choice
        vector (KOS15; the peer must set it too)."""
        scoped = net.scoped(_prefix(peer, net.me))
        mine = secrets.token_bytes(SESSION_NONCE_BYTES)
        scoped.send(peer, STEP_SESSION, mine)
        theirs = scoped.receive(peer, STEP_SESSION_REPLY, expect=bytes)
        if len(theirs) != SESSION_NONCE_BYTES:
            raise ProtocolError(
                peer,
                f"{_prefix(peer, net.me)}/{STEP_SESSION_REPLY}",
                f"session nonce must be {SESSION_NONCE_BYTES} bytes",
            )
        session = session_tag(mine, theirs)
        if base_ots is not None:
            k0, k1 = (_check_seeds(k) for k in base_ots(KAPPA))
        else:
            with _scoped_errors(_prefix(peer, net.me)):
                k0, k1 = base_ot_send_random(scoped, peer, KAPPA)
        return cls(
            scoped, peer, k0, k1, session, chunk=chunk, malicious_receiver=malicious_receiver
        )

    @property
    def count(self) -> int:
        return self._index

    def _t_rows(self, r: np.ndarray) -> tuple[int, np.ndarray]:
        """Send ``u`` for the choice bits ``r`` of one chunk; return (first index, T rows).
        With the KOS15 check, ``KOS_EXTRA`` random choice bits are appended and the
        check values follow ``u``."""
        n = len(r)
        extra = KOS_EXTRA if self.malicious_receiver else 0
        if extra:
            r = np.concatenate(
                [r, np.unpackbits(np.frombuffer(secrets.token_bytes(extra // 8), np.uint8))]
            )
        padded = _pad(n + extra)
        nbytes = padded // 8
        r_row = pack(np.concatenate([r, np.zeros(padded - n - extra, dtype=np.uint8)]))
        t = self._streams0.read(nbytes)
        u = self._streams1.read(nbytes)
        u ^= t
        u ^= r_row
        self.net.send(self.peer, STEP_U, u)
        start = self._index
        self._index += padded
        rows = transpose_bits(t)[: n + extra]
        if extra:
            chi = _kos_chi(self._session, start, u, n + extra)
            x = (
                np.bitwise_xor.reduce(chi[r.astype(bool)], axis=0)
                if r.any()
                else np.zeros(16, np.uint8)
            )
            t_sum = _gf2_weighted_sum(chi, rows)
            check = np.frombuffer(bytes(x) + t_sum.to_bytes(32, "little"), np.uint8)
            self.net.send(self.peer, STEP_KOS, check)
        return start, rows[:n]

    def _hash(self, t: np.ndarray, start: int, nbytes: int) -> np.ndarray:
        return tccr_expand(t, start=start, session=self._session, nbytes=nbytes)

    def _correction(self, expect_dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
        d = self.net.receive(self.peer, STEP_D, expect=np.ndarray)
        if d.dtype != expect_dtype or d.shape != shape:
            raise ProtocolError(
                self.peer,
                f"{_prefix(self.peer, self.net.me)}/{STEP_D}",
                f"expected {np.dtype(expect_dtype)} corrections of shape {shape}, "
                f"got {d.dtype}{d.shape}",
            )
        return d

    # Random OT -------------------------------------------------------------------------

    def iter_random(self, choices: np.ndarray, *, length: int = 16) -> Iterator[np.ndarray]:
        """Stream random OTs with the given choice bits: yields ``(n, length)`` chunks."""
        r = _check_bits(choices)
        length = _check_length(length)
        for o, n in _spans(len(r), self.chunk):
            start, t = self._t_rows(r[o : o + n])
            yield self._hash(t, start, length)

    def random(self, choices: np.ndarray, *, length: int = 16) -> np.ndarray:
        """Random OTs: the chosen messages ``x_i^{r_i}``, ``(m, length)`` uint8."""
        r = _check_bits(choices)
        out = np.empty((len(r), length), dtype=np.uint8)
        pieces = self.iter_random(r, length=length)
        for (o, n), x in zip(_spans(len(r), self.chunk), pieces, strict=True):
            out[o : o + n] = x
        return out

    def raw_rows(self, choices: np.ndarray) -> RawRows:
        """Random OTs with the given choice bits as IKNP's unhashed rows ``t_i`` (after
        the KOS15 check where it is on; :class:`RawRows`, ``delta`` None): ``H((i,
        session, b), t_i)`` is the sender's output of choice ``r_i``."""
        r = _check_bits(choices)
        rows = np.empty((len(r), 16), dtype=np.uint8)
        spans = []
        for o, n in _spans(len(r), self.chunk):
            start, t = self._t_rows(r[o : o + n])
            rows[o : o + n] = t
            spans.append((o, n, start))
        return RawRows(rows, None, self._session, tuple(spans))

    # Two-phase batches (u first, corrections later) -------------------------------------

    def start(
        self,
        kind: str,
        choices: np.ndarray,
        *,
        dtype: type | np.dtype = np.uint8,
        width: int | None = None,
        length: int = 0,
    ) -> _Pending:
        """Send ``u`` for every chunk of a chosen (``kind="chosen"``, ``length`` bytes),
        correlated (``"correlated"``, ``dtype``/``width``) or bit-correlated
        (``"bits"``) batch; :meth:`finish` then reads the sender's corrections. Lets a
        party act as receiver and sender of two batches in one round trip."""
        r = _check_bits(choices)
        p = _Pending(kind=kind, choices=r)
        chunk = self.chunk
        if kind == "chosen":
            if length < 1:
                raise ValueError("length must be positive")
            p.length = nbytes = int(length)
            chunk = _chunk_for(chunk, 2 * nbytes)
        elif kind == "correlated":
            p.dtype = np.dtype(dtype)
            if p.dtype.type not in _UNSIGNED:
                raise ValueError("correlated OT needs an unsigned integer dtype")
            p.shape = () if width is None else (int(width),)
            nbytes = p.dtype.itemsize * (1 if width is None else int(width))
            chunk = _chunk_for(chunk, nbytes)
        elif kind == "bits":
            nbytes = 1
        else:
            raise ValueError(f"unknown batch kind {kind!r}")
        p.spans = _spans(len(r), chunk)
        for o, n in p.spans:
            start, t = self._t_rows(r[o : o + n])
            p.hashes.append(self._hash(t, start, nbytes))
        return p

    def finish(self, p: _Pending) -> np.ndarray:
        """Complete a batch begun with :meth:`start`."""
        m = len(p.choices)
        if p.kind == "chosen":
            out: np.ndarray = np.empty((m, p.length), dtype=np.uint8)
            for (o, n), h in zip(p.spans, p.hashes, strict=True):
                y = self._correction(np.dtype(np.uint8), (2, n, p.length))
                c = p.choices[o : o + n]
                out[o : o + n] = y[c, np.arange(n)] ^ h
            return out
        if p.kind == "correlated":
            out = np.empty((m, *p.shape), dtype=p.dtype)
            for (o, n), h in zip(p.spans, p.hashes, strict=True):
                d = self._correction(p.dtype, (n, *p.shape))
                x = np.ascontiguousarray(h).view(p.dtype).reshape((n, *p.shape))
                c = p.choices[o : o + n].astype(p.dtype)
                out[o : o + n] = x + (c if not p.shape else c[:, None]) * d
            return out
        out = np.empty(m, dtype=np.uint8)
        for (o, n), h in zip(p.spans, p.hashes, strict=True):
            d = self._correction(np.dtype(np.uint8), ((n + 7) // 8,))
            out[o : o + n] = (h[:, 0] & 1) ^ (unpack(d, n) & p.choices[o : o + n])
        return out

    def receive(self, choices: np.ndarray, *, length: int) -> np.ndarray:
        """Chosen-message OT: the chosen ``(m, length)`` rows."""
        return self.finish(self.start("chosen", choices, length=length))

    def correlated(
        self, choices: np.ndarray, *, dtype: type | np.dtype = np.uint64, width: int | None = None
    ) -> np.ndarray:
        """Correlated OT: ``x0 + r_i * delta_i`` for the sender's ``x0`` and ``delta``
        (shape ``(m,)``, or ``(m, width)`` when ``width`` is given)."""
        return self.finish(self.start("correlated", choices, dtype=dtype, width=width))

    def correlated_bits(self, choices: np.ndarray) -> np.ndarray:
        """Bit-correlated OT: ``x0_i XOR (r_i AND delta_i)`` as uint8 0/1."""
        return self.finish(self.start("bits", choices))


class OTSession:
    """Both IKNP directions between this party and ``peer``, each set up on first use.

    Protocols that need OTs both ways (multiplication triples, comparisons, argmin) take
    an ``OTSession`` so the 128 base OTs per direction are paid once per job, not once
    per call. Both parties must create their sessions at the same point of the protocol
    and make matching calls in the same order.
    """

    def __init__(
        self,
        net: Network,
        peer: str,
        *,
        chunk: int = DEFAULT_CHUNK,
        malicious_receiver: bool = False,
        kk13: bool = True,
    ) -> None:
        if peer == net.me or peer not in net.parties:
            raise ValueError(f"peer {peer!r} must be another party of the job")
        self.net = net
        self.peer = peer
        self.chunk = chunk
        self.malicious_receiver = malicious_receiver
        #: Whether large comparison batches may use KK13 (fewer bytes, more sender CPU);
        #: both parties must pass the same. ``False`` for protocols that compare few
        #: values per call, where KK13's set-up and its 16 hashes per OT do not pay.
        self.kk13 = kk13
        self._sender: IKNPSender | None = None
        self._receiver: IKNPReceiver | None = None
        self._kk13_sender: KK13Sender | None = None
        self._kk13_receiver: KK13Receiver | None = None
        #: Both SoftSpoken 1-out-of-16 directions (:class:`~.softspoken.SS16Pair`): the
        #: comparison's leaves, triples and multiplexers.
        self.ot16 = SS16Pair(self)

    @property
    def is_first(self) -> bool:
        """Whether this party comes before the peer in consortium order."""
        return self.net.parties.index(self.net.me) < self.net.parties.index(self.peer)

    @property
    def sender(self) -> IKNPSender:
        """This party as extension sender (the peer must use its :attr:`receiver`).
        The direction set up second takes its base OTs from 128 fresh random OTs of the
        first (here this party as IKNP receiver, choosing ``s``), the first runs
        Chou-Orlandi; both parties agree, as this party's receiver exists exactly when
        the peer's sender does."""
        if self._sender is None:
            base = None if self._receiver is None else self._receiver.random
            self._sender = IKNPSender.setup(
                self.net,
                self.peer,
                chunk=self.chunk,
                malicious_receiver=self.malicious_receiver,
                base_ots=base,
            )
        return self._sender

    @property
    def receiver(self) -> IKNPReceiver:
        """This party as extension receiver (the peer must use its :attr:`sender`); base
        OTs from this party's :attr:`sender` if that exists (see :attr:`sender`)."""
        if self._receiver is None:
            base = None if self._sender is None else self._sender.random
            self._receiver = IKNPReceiver.setup(
                self.net,
                self.peer,
                chunk=self.chunk,
                malicious_receiver=self.malicious_receiver,
                base_ots=base,
            )
        return self._receiver

    @property
    def kk13_sender(self) -> KK13Sender:
        """This party as KK13 1-out-of-16 sender (:mod:`~ppdm.protocols.ot.kk13`; the
        peer must use its :attr:`kk13_receiver`), set up on first use with 256 random
        OTs of this session as base OTs (this party as IKNP receiver)."""
        if self._kk13_sender is None:
            base = self.receiver.random
            self._kk13_sender = KK13Sender.setup(self.net, self.peer, base_ots=base)
        return self._kk13_sender

    @property
    def kk13_receiver(self) -> KK13Receiver:
        """This party as KK13 1-out-of-16 receiver (the peer uses its :attr:`kk13_sender`)."""
        if self._kk13_receiver is None:
            base = self.sender.random
            self._kk13_receiver = KK13Receiver.setup(self.net, self.peer, base_ots=base)
        return self._kk13_receiver

    def setup_both(self) -> None:
        """Set up whichever directions are missing, in an order both parties agree on."""
        if self._sender is not None and self._receiver is not None:
            return
        if self.is_first:
            _ = self.sender
            _ = self.receiver
        else:
            _ = self.receiver
            _ = self.sender

    def setup_kk13_both(self) -> None:
        """Both IKNP directions, then both KK13 directions, in an order both parties agree
        on (the first party sets up its KK13 sender first, the second its receiver)."""
        self.setup_both()
        if self.is_first:
            _ = self.kk13_sender
            _ = self.kk13_receiver
        else:
            _ = self.kk13_receiver
            _ = self.kk13_sender

    def correlated_both(
        self, delta: np.ndarray, choices: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Correlated OT in both directions at once (one round trip): this party sends
        with correlations ``delta`` and receives with choice bits ``choices``; the peer
        does the same. Returns ``(x0 as sender, output as receiver)``; the receiver
        side uses ``delta``'s dtype and width (both parties must use the same)."""
        delta = _check_delta(delta)
        self.setup_both()
        width = None if delta.ndim == 1 else delta.shape[1]
        pending = self.receiver.start("correlated", choices, dtype=delta.dtype, width=width)
        x0 = self.sender.correlated(delta)
        return x0, self.receiver.finish(pending)

    def correlated_bits_both(
        self, delta: np.ndarray, choices: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Bit-correlated OT in both directions at once (see :meth:`correlated_both`)."""
        self.setup_both()
        pending = self.receiver.start("bits", choices)
        x0 = self.sender.correlated_bits(delta)
        return x0, self.receiver.finish(pending)
