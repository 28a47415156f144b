"""XOR-shared bit arithmetic between two parties: Beaver ANDs and their triples from OT.

Two parties hold XOR shares of bit vectors; an AND of two shared bits costs one
multiplication triple ``(a, b, c = a AND b)`` made ahead and one opening of ``x XOR a``
and ``y XOR b`` (Beaver 1991). Two ANDs with one operand in common share a *pair
triple* ``(a, b, b', a AND b, a AND b')``: the common operand is masked and opened once.
Used by the secure comparison's AND tree (:mod:`ppdm.protocols.comparison`) and by the
threshold tests built on it (:mod:`ppdm.protocols.threshold`).

Triples from random OTs, no corrections (Asharov, Lindell, Schneider and Zohner, "More
efficient oblivious transfer and extensions for faster secure computation", CCS 2013,
section 5; with random OTs as in Demmler, Schneider and Zohner, ABY, NDSS 2015): with
``(a_0 XOR a_1)(b_0 XOR b_1) = a_0 b_0 XOR a_1 b_1 XOR a_0 b_1 XOR a_1 b_0``, every
party multiplies its own shares and each cross term ``a_R AND b_S`` comes from one
random 1-out-of-2 OT in which ``R`` chooses with ``a_R``: the sender's ``b_S`` is the
XOR of its two outputs ``x^0``, ``x^1``, so ``R``'s output ``x^{a_R} = x^0 XOR (a_R AND
b_S)``, and ``x^0`` is the sender's share (:func:`_rot_triples`; one IKNP OT, 16 bytes
of ``u``, per cross term and direction, carrying two lanes ``b``, ``b'``).

Triples from 1-out-of-16 random OTs (:func:`_kk13_triples`, the 1-out-of-N form of the
same idea; Kolesnikov and Kumaresan, CRYPTO 2013, and Orrù, Orsini and Scholl, CT-RSA
2017, for the 1-out-of-N OT extension, :mod:`ppdm.protocols.ot.kk13`, with its
columns from SoftSpoken's VOLE, :mod:`ppdm.protocols.ot.softspoken`): one such OT, 7.5
bytes of ``u`` (KK13's own: 30), serves four cross terms at once. The receiver's
choice is four of its ``a`` bits, ``v = (a_0, .., a_3)``; the sender holds the 16 keys ``x^v`` and wants
``R`` to end with ``x^0 XOR F(a)``, ``F(v) = XOR_i (v_i AND b_i)`` in every lane. With
1-out-of-2 OTs the keys are affine in the choice, so ``F`` comes for free; 16 random
keys are not (``x^a`` for the 16 choices are 16 independent random values, and ``x^0
XOR F(a)`` with 8 lane bits ``b`` can match them only by chance), so the sender sends
the table ``T[v] = x^v XOR x^0 XOR F(v)`` for ``v = 1 .. 15`` and ``R`` takes ``x^a XOR
T[a]`` (``x^0`` itself when ``a = 0``). The sender's ``b_i`` are not drawn: they are the
lanes of slot ``i`` of ``x^{e_i} XOR x^0`` (``e_i`` the choice with only bit ``i`` set),
as ``b = x^0 XOR x^1`` with 1-out-of-2 OTs, so ``T[e_i]`` is zero in slot ``i``.
Each key byte holds four slots of two lanes (``b``, ``b'``): 15 bytes of table per OT.

Security (semi-honest). ``S`` sees only ``u`` (KK13: nothing about the choices, so
nothing about ``a_R``). ``R`` sees ``x^a`` and ``T``: every ``T[v]``, ``v != a``, is
masked by a key ``x^v`` that is pseudorandom to it (KK13, theorem 2), except the zero
slot ``i`` of ``T[e_i]``, which is zero whatever ``b`` is; ``T[a]`` gives it its share
``x^0 XOR F(a)``, uniform because ``x^0`` is unknown for ``a != 0`` (and for ``a = 0``
its share is ``x^0``, with every ``b_i`` masked by the unknown ``x^{e_i}``). So each
party's triple bits ``a``, ``b``, ``c`` are uniform given the peer's view, as with IKNP
triples.

Cost per cross term and direction: 16 bytes of ``u`` (IKNP) or ``(7.5 + 15) / 4 =
5.6`` bytes (1-out-of-16), at more CPU: for four cross terms the 1-out-of-16 sender
hashes 16 keys (64 fixed-key AES blocks, compiled with AES-NI), four IKNP senders 8
outputs (16 blocks). Both kinds are one ``u``
message each way; the KK13 tables answer the peer's ``u`` and are read only when the
first AND needs ``c``, after this party has sent its openings: they travel in the same
hop as the openings, so no round trip is added.
"""

from __future__ import annotations

import secrets

import numpy as np

from ppdm.errors import ProtocolError
from ppdm.protocols.ot.bits import pack, unpack
from ppdm.protocols.ot.extension import OTSession

STEP_AND = "cmp/and"
STEP_REVEAL = "cmp/reveal"
STEP_TRIPLES = "cmp/triples"
#: Cross terms (slots) per direction from which a batch of triples uses the 1-out-of-16
#: OTs: below it the set-up of a direction (240 random IKNP OTs and 7.5 KiB of GGM sums,
#: 11.5 KiB) would cost more than the 41.5 bytes such an OT (7.5 of ``u``, 15 of table)
#: saves over four IKNP OTs.
KK13_MIN_SLOTS = 1024
_SLOTS = 4  # cross terms per KK13 OT: the four bits of its choice
_TABLE_SPAN = 1 << 18  # 1-out-of-16 OTs per table message (3.75 MiB)
_SHIFTS = np.array([0, 2, 4, 6], dtype=np.uint8)  # slot i: lanes at bits 2 i and 2 i + 1


def random_bits(n: int) -> np.ndarray:
    """``n`` uniform bits (uint8 0/1) from the OS CSPRNG."""
    return unpack(np.frombuffer(secrets.token_bytes((n + 7) // 8), dtype=np.uint8), n)


def _kk13_send_tables(session: OTSession, m: int) -> tuple[np.ndarray, np.ndarray]:
    """The sender's side of :func:`_kk13_triples` for ``m`` OTs: sends the tables and
    returns ``(b, x0)``, this party's ``b`` lanes ``(4 m,)`` (two bits a slot) and its
    shares ``x^0`` ``(m,)`` (one byte, four slots)."""
    keys = session.ot16.sender.random(m, length=1)[:, :, 0]  # (m, 16)
    x0 = keys[:, 0]
    unit = keys[:, [1, 2, 4, 8]] ^ x0[:, None]
    d = unit & (np.uint8(3) << _SHIFTS)[None, :]  # slot i of x^{e_i} XOR x^0: b_i
    f = np.zeros_like(keys)
    for v in range(1, 16):
        low = v & -v
        f[:, v] = f[:, v ^ low] ^ d[:, low.bit_length() - 1]
    table = keys ^ x0[:, None] ^ f
    for o in range(0, m, _TABLE_SPAN):
        session.net.send(
            session.peer, STEP_TRIPLES, np.ascontiguousarray(table[o : o + _TABLE_SPAN, 1:])
        )
    b = (d >> _SHIFTS[None, :]) & 3
    return b.reshape(-1), x0


def _kk13_receive_tables(session: OTSession, choices: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """The receiver's share ``x^0 XOR F(a)`` of every OT (one byte, four slots)."""
    m = len(choices)
    out = keys.copy()
    for o in range(0, m, _TABLE_SPAN):
        n = min(_TABLE_SPAN, m - o)
        got = session.net.receive(session.peer, STEP_TRIPLES, expect=np.ndarray)
        if got.dtype != np.uint8 or got.shape != (n, 15):
            raise ProtocolError(
                session.peer,
                STEP_TRIPLES,
                f"expected {n} tables of 15 bytes, got {got.dtype}{got.shape}",
            )
        c = choices[o : o + n].astype(np.intp)
        chosen = got[np.arange(n), np.maximum(c - 1, 0)]
        out[o : o + n] ^= np.where(c > 0, chosen, 0).astype(np.uint8)
    return out


class _Pending:
    """KK13 triples whose ``c`` still lacks this party's receiver shares (the peer's
    tables, read by :meth:`BitEngine.settle`): the buffer rows they complete."""

    def __init__(self, choices: np.ndarray, keys: np.ndarray, single: slice, double: slice):
        self.choices = choices
        self.keys = keys
        self.single = single
        self.double = double


def _kk13_triples(
    session: OTSession, count: int, pairs: int
) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """:func:`_rot_triples` from KK13 1-out-of-16 random OTs (module docstring): the
    triples with ``c`` lacking this party's receiver shares, and what completes them
    (``choices``, ``keys``) once the peer's tables are read (:meth:`BitEngine.settle`)."""
    total = count + pairs
    m = -(-total // _SLOTS)
    session.ot16.setup_both()
    a_all = random_bits(_SLOTS * m)
    choices = (a_all.reshape(m, _SLOTS) << np.arange(_SLOTS, dtype=np.uint8)).sum(axis=1)
    choices = choices.astype(np.uint8)
    keys = session.ot16.receiver.random(choices, length=1)[:, 0]  # sends u
    b, x0 = _kk13_send_tables(session, m)  # reads the peer's u, sends the tables
    mine = (x0[:, None] >> _SHIFTS[None, :]) & 3  # this party's sender shares
    a = a_all[:total]
    b = b[:total]
    c = ((a * np.uint8(3)) & b) ^ mine.reshape(-1)[:total]
    single = np.stack([a[:count], b[:count] & 1, c[:count] & 1], axis=1).astype(np.uint8)
    rest = slice(count, total)
    double = np.stack(
        [a[rest], b[rest] & 1, b[rest] >> 1, c[rest] & 1, c[rest] >> 1], axis=1
    ).astype(np.uint8)
    return single, double, (choices, keys)


def _rot_triples(session: OTSession, count: int, pairs: int) -> tuple[np.ndarray, np.ndarray]:
    """XOR shares of ``count`` bit triples ``(a, b, a AND b)`` and ``pairs`` pair triples
    ``(a, b, b', a AND b, a AND b')``, from one batch of IKNP random OTs each way (one
    ``u`` message per direction, no corrections; module docstring).

    Every party chooses its ``a`` with :func:`random_bits` and uses it as its choice
    bits as the receiver; as the sender its ``b`` (and ``b'``) are the XOR of its two
    random-OT outputs, so the receiver's output and the sender's first output are XOR
    shares of ``a_receiver AND b_sender``: the cross terms of ``(a_0 + a_1)(b_0 + b_1)``.
    Returns ``(count, 3)`` and ``(pairs, 5)`` uint8 arrays."""
    total = count + pairs
    if not total:
        return np.zeros((0, 3), dtype=np.uint8), np.zeros((0, 5), dtype=np.uint8)
    session.setup_both()
    a = random_bits(total)
    theirs = session.receiver.random(a, length=1)[:, 0]  # a_me AND b_peer, shared
    x0, x1 = session.sender.random(total, length=1)
    b = (x0[:, 0] ^ x1[:, 0]) & 3  # two lanes: b and b'
    c = (a * np.uint8(3)) & b ^ (theirs & 3) ^ (x0[:, 0] & 3)
    single = np.stack([a[:count], b[:count] & 1, c[:count] & 1], axis=1)
    rest = slice(count, total)
    double = np.stack(
        [a[rest], b[rest] & 1, b[rest] >> 1, c[rest] & 1, c[rest] >> 1], axis=1
    ).astype(np.uint8)
    return single.astype(np.uint8), double


def use_kk13_triples(session: OTSession, slots: int) -> bool:
    """Whether a batch of ``slots`` cross terms per direction uses KK13 (both parties
    know both): not in a session checked against a malicious receiver (KK13 here has no
    consistency check), not in a session that opts out of KK13 (``session.kk13``), and
    from :data:`KK13_MIN_SLOTS` up."""
    return slots >= KK13_MIN_SLOTS and session.kk13 and not session.malicious_receiver


class BitEngine:
    """XOR-shared bit arithmetic between two parties: Beaver ANDs from OT triples.

    ``kk13``: whether batches of triples may use KK13 OTs (:func:`use_kk13_triples`
    decides by their size); the comparison turns it off with blocks other than 4 bits,
    whose leaves keep IKNP OTs as well."""

    def __init__(self, session: OTSession, *, kk13: bool = True) -> None:
        self.session = session
        self.net = session.net
        self.peer = session.peer
        self.first = session.is_first
        self.kk13 = kk13
        self._a = self._b = self._c = np.zeros(0, dtype=np.uint8)
        #: Pair triples ``(a, b, b', a AND b, a AND b')`` for two ANDs with one operand
        #: in common (:meth:`and_pair`), one row each.
        self._pairs = np.zeros((0, 5), dtype=np.uint8)
        #: Triples (and pair triples) the next batch makes for later comparisons (no
        #: round trip of theirs).
        self.ahead = 0
        self.ahead_pairs = 0
        self._pending: _Pending | None = None

    def make_triples(self, count: int, pairs: int = 0) -> None:
        """Hold at least ``count`` bit triples ``(a, b, c = a AND b)`` and ``pairs`` pair
        triples, XOR-shared: those made ahead are used first; otherwise one batch of
        random OTs each way (:func:`_kk13_triples` or :func:`_rot_triples`) makes the
        missing ones plus :attr:`ahead` and :attr:`ahead_pairs` more. Both parties make
        the same calls, so their buffers agree."""
        self.settle()
        held, held_pairs = len(self._a), len(self._pairs)
        if held >= count and held_pairs >= pairs:
            return
        count = max(count - held, 0) + self.ahead
        pairs = max(pairs - held_pairs, 0) + self.ahead_pairs
        self.ahead = self.ahead_pairs = 0
        if self.kk13 and use_kk13_triples(self.session, count + pairs):
            single, double, (choices, keys) = _kk13_triples(self.session, count, pairs)
            self._pending = _Pending(
                choices, keys, slice(held, held + count), slice(held_pairs, held_pairs + pairs)
            )
        else:
            single, double = _rot_triples(self.session, count, pairs)
        self._a = np.concatenate([self._a, single[:, 0]])
        self._b = np.concatenate([self._b, single[:, 1]])
        self._c = np.concatenate([self._c, single[:, 2]])
        self._pairs = np.concatenate([self._pairs, double])

    def settle(self) -> None:
        """Complete the ``c`` of KK13 triples with the peer's tables (read as late as
        possible: after this party sent its first openings, so no hop is added)."""
        p, self._pending = self._pending, None
        if p is None:
            return
        share = _kk13_receive_tables(self.session, p.choices, p.keys)
        lanes = ((share[:, None] >> _SHIFTS[None, :]) & 3).reshape(-1)
        count = p.single.stop - p.single.start
        pairs = p.double.stop - p.double.start
        self._c[p.single] ^= lanes[:count] & 1
        self._pairs[p.double, 3] ^= lanes[count : count + pairs] & 1
        self._pairs[p.double, 4] ^= lanes[count : count + pairs] >> 1

    def _open(self, step_values: np.ndarray, n_bits: int) -> np.ndarray:
        """Send this party's masked operands, complete pending triples, and return the
        peer's (``n_bits`` bits)."""
        self.net.send(self.peer, STEP_AND, pack(step_values))
        self.settle()
        got = self.net.receive(self.peer, STEP_AND, expect=np.ndarray)
        want = ((n_bits + 7) // 8,)
        if got.dtype != np.uint8 or got.shape != want:
            raise ProtocolError(
                self.peer, STEP_AND, f"expected {want[0]} packed bytes, got {got.dtype}{got.shape}"
            )
        return unpack(got, n_bits)

    def and_(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Shares of ``x AND y`` for shared bit vectors of equal length."""
        n = len(x)
        if len(self._a) < n:
            raise RuntimeError("not enough multiplication triples")  # pragma: no cover
        e = x ^ self._a[:n]
        f = y ^ self._b[:n]
        both = self._open(np.concatenate([e, f]), 2 * n)
        a, b, c = self._a[:n], self._b[:n], self._c[:n]
        self._a, self._b, self._c = self._a[n:], self._b[n:], self._c[n:]
        ee = e ^ both[:n]
        ff = f ^ both[n:]
        z = c ^ (ee & b) ^ (ff & a)
        if self.first:
            z ^= ee & ff
        return z

    def and_pair(
        self, x: np.ndarray, y: np.ndarray, z: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Shares of ``x AND y`` and ``x AND z`` from one pair triple per position: ``x``
        is masked once (``e = x XOR a``), so the two ANDs open three bits, not four,
        and their triples cost two random OTs, not four."""
        n = len(x)
        if len(self._pairs) < n:
            raise RuntimeError("not enough pair triples")  # pragma: no cover
        e = x ^ self._pairs[:n, 0]
        f = y ^ self._pairs[:n, 1]
        g = z ^ self._pairs[:n, 2]
        opened = self._open(np.concatenate([e, f, g]), 3 * n)
        t, self._pairs = self._pairs[:n], self._pairs[n:]
        a, b, b2, c, c2 = t[:, 0], t[:, 1], t[:, 2], t[:, 3], t[:, 4]
        ee = e ^ opened[:n]
        ff = f ^ opened[n : 2 * n]
        gg = g ^ opened[2 * n :]
        xy = c ^ (ee & b) ^ (ff & a)
        xz = c2 ^ (ee & b2) ^ (gg & a)
        if self.first:
            xy ^= ee & ff
            xz ^= ee & gg
        return xy, xz

    def open(self, share: np.ndarray, *, to: str | None = None) -> np.ndarray | None:
        """Reveal shared bits to both parties (``to=None``) or to party ``to``."""
        n = len(share)
        if to is None or to == self.peer:
            self.net.send(self.peer, STEP_REVEAL, pack(share))
        if to is None or to == self.net.me:
            got = self.net.receive(self.peer, STEP_REVEAL, expect=np.ndarray)
            if got.dtype != np.uint8 or got.shape != ((n + 7) // 8,):
                raise ProtocolError(self.peer, STEP_REVEAL, "shares have the wrong shape")
            return share ^ unpack(got, n)
        return None
