"""Is a sum of private values non-negative? The secure test behind global-support checks.

Kantarcioglu & Clifton (IEEE TKDE 2004, section 3.2): to decide whether an itemset is
globally large without revealing supports, every party ``i`` computes its *excess*
``e_i = sup_i(X) - t_i`` (its support minus its share of the threshold) and the parties
learn only whether ``sum_i e_i >= 0``. As in KC, the first party masks its excess with a
random ``R`` and the masked partial sums travel the ring (:mod:`ppdm.protocols.secure_sum`
style), so that the last party ends with ``x = R + sum_i e_i`` (mod ``2^64``) while the
first keeps ``R``; then the two decide ``x - R >= 0`` with an OT-based secure comparison
(:mod:`ppdm.protocols.comparison`).

Because ``R`` is uniform in ``Z_{2^64}`` (no statistical slack), ``x`` and ``-R`` are
additive shares of the sum ``E``; with ``|E| < 2^62`` its sign is the bit 62 of
``E mod 2^63``: ``MSB = bit62(x) XOR bit62(-R) XOR carry``, where the carry
``[low62(x) + low62(-R) >= 2^62]`` is one millionaires' comparison of 63-bit values
(CrypTFlow2's DReLU). The XOR shares are then opened to every party. Given a public
``bound`` on every party's entries with ``n * bound < 2^V`` (``V <= 62``), the same holds
for bit ``V`` of ``E mod 2^(V+1)``, and the comparison shrinks to ``V + 1`` bits: the
association miners bound supports by the pooled number of transactions, about 20 bits
instead of 63 (5 leaf blocks instead of 16, one AND level less), with the same result.

:func:`secure_all_nonnegative` runs the same ring and comparison over a table of
``g`` tests per row but opens only each row's conjunction: the ``g`` sign bits stay
XOR-shared between the first and the last party and are ANDed with Beaver triples (made
in the comparison's own batch of triples, on the same OT session). A release rule made of
several tests needs this: opening the single tests would answer each on its own.

Security (semi-honest)
----------------------
- Every party learns ``[sum_i e_i >= 0]`` for every entry (with
  :func:`secure_all_nonnegative`: for every row, whether all its sums are) and nothing
  else: each ring message is uniformly masked, and the comparison and the ANDs reveal
  only their output (Beaver openings are uniformly random).
- Collusion: the two ring neighbours of a party learn its excess (as for the ring secure
  sum); the first and last party together learn the sum.

Cost for ``m`` entries and ``n`` parties: ``n - 1`` ring messages of ``8 m`` bytes, then
one batched 63-bit comparison between the first and last party (about ``2.4 KB`` per
entry with 4-bit blocks; ``V + 1`` bits with a ``bound``), then ``n - 1`` messages of
``m / 8`` bytes to publish the bits.

Sequential hops (one-way latencies, :mod:`ppdm.parties.metrics`): the first and last
party set up their OT session (IKNP base OTs, both directions) while the ring message
travels, so the ring's ``n - 1`` hops overlap the setup; with three parties a call is 14
hops (16 before the comparison's first AND level rode in its leaf tables, 18 when the
ring and the setup ran one after the other). A ``session`` reused across calls (one per
job for every level of an Apriori search) pays the setup once: the next calls take 7
hops each (9 before).
"""

from __future__ import annotations

import secrets

import numpy as np

from ppdm.errors import ProtocolError
from ppdm.parties.network import Network
from ppdm.protocols.comparison import _as_unsigned, _BitEngine, _compare_core, secure_ge_shares
from ppdm.protocols.ot.extension import OTSession

__all__ = ["compare_session", "secure_all_nonnegative", "secure_sum_nonnegative"]

_V = 62


def compare_session(net: Network, scope: str) -> OTSession | None:
    """The OT session :func:`secure_sum_nonnegative` may reuse across calls on ``net``:
    at the first and the last party, one between the two on ``net.scoped(scope)``
    (created lazily: its base OTs run at its first use); ``None`` at the others. Without
    KK13 (``kk13=False``): a threshold test compares few values per call, and KK13's
    set-up and its sender's 16 hashes per OT cost more CPU than its bytes save (3-party
    rules on retail at 1 %: 0.61 s with it, 0.51 s without, same machine and run)."""
    parties = net.parties
    if len(parties) < 2 or net.me not in (parties[0], parties[-1]):
        return None
    peer = parties[-1] if net.me == parties[0] else parties[0]
    return OTSession(net.scoped(scope), peer, kk13=False)


def _sign_bit(n_parties: int, bound: int | None) -> int:
    """The bit ``V`` whose value in ``sum mod 2^(V+1)`` is the sign: the smallest with
    ``n_parties * bound < 2^V`` (every party's entries at most ``bound`` in absolute
    value), at most :data:`_V` (62, also when ``bound`` is ``None``). The comparison runs
    on ``V + 1`` bits: a public bound far below ``2^62`` (supports below the pooled
    number of transactions) makes it several times cheaper."""
    if bound is None:
        return _V
    if isinstance(bound, bool) or not isinstance(bound, int | np.integer) or bound < 1:
        raise ValueError("bound must be a positive integer")
    return min(_V, (max(n_parties, 1) * int(bound)).bit_length())


def _as_excess(net: Network, values: np.ndarray, bound: int | None = None) -> np.ndarray:
    v = np.asarray(values)
    if v.size and not np.issubdtype(v.dtype, np.integer):
        raise ValueError("values must be an integer array")
    n = max(len(net.parties), 1)
    if v.size:
        top = int(np.max(np.abs(v.astype(np.int64))))
        if top >= (1 << _V) // n:
            raise ValueError("values too large for a 62-bit signed sum")
        if bound is not None and top > bound:
            raise ValueError(f"a value exceeds the agreed bound {bound}")
    return v.astype(np.int64)


class _ExtraTriples(_BitEngine):
    """A bit engine whose first batch of triples (the comparison's own, made once its
    leaf OTs are done) also holds ``extra`` more for the caller's ANDs afterwards: the
    caller's triples cost no round trip of their own."""

    def __init__(self, session: OTSession, extra: int) -> None:
        super().__init__(session)
        self.extra = extra

    def make_triples(self, count: int, pairs: int = 0) -> None:
        super().make_triples(count + self.extra, pairs)
        self.extra = 0


def _held(ot: OTSession | None) -> OTSession:
    """The OT session, which the first and the last party always hold here."""
    if ot is None:
        raise RuntimeError("only the first and the last party hold the comparison's session")
    return ot


def _negative_shares(
    net: Network,
    mine: np.ndarray,
    session: OTSession | None,
    *,
    and_count: int = 0,
    sign_bit: int = _V,
) -> tuple[np.ndarray | None, _BitEngine | None]:
    """The ring and the comparison: at the first and the last party, XOR shares of
    ``[sum < 0]`` per entry (``None`` at the others), for sums with ``|sum| <
    2^sign_bit``. With ``and_count``, also a bit engine holding that many AND triples,
    made in the same batch as the comparison's own (no extra round trip)."""
    m = len(mine)
    parties = net.parties
    first, last = parties[0], parties[-1]
    me = net.me
    step = "threshold/ring"
    ot: OTSession | None = None
    if me in (first, last):
        peer = last if me == first else first
        if session is not None and session.peer != peer:
            raise ValueError(f"the OT session must be with {peer!r}, not {session.peer!r}")
        ot = (
            session
            if session is not None
            else OTSession(net.scoped("threshold/compare"), peer, kk13=False)
        )

    def recv_partial(frm: str) -> np.ndarray:
        got = net.receive(frm, step, expect=np.ndarray)
        if got.dtype != np.uint64 or got.shape != (m,):
            raise ProtocolError(frm, step, f"expected {m} uint64 partial sums")
        return got

    if me == first:
        mask = np.frombuffer(secrets.token_bytes(8 * m), dtype=np.uint64).copy()
        net.send(net.successor(), step, mask + mine)
        share = np.uint64(0) - mask  # -R mod 2^64
        _held(ot).setup_both()  # while the ring message travels
    else:
        if me == last:
            _held(ot).setup_both()  # before waiting for the ring: the two overlap
        partial = recv_partial(net.predecessor()) + mine
        if me != last:
            net.send(net.successor(), step, partial)
            return None, None
        share = partial
    ot = _held(ot)
    sub = ot.net
    low = share & np.uint64((1 << sign_bit) - 1)
    # x_party (last) compares low(x) >= 2^V - low(-R)
    mine_cmp = low if me == last else (np.uint64(1 << sign_bit) - low).astype(np.uint64)
    engine: _BitEngine | None = None
    if not and_count:
        carry = secure_ge_shares(
            sub, mine_cmp, x_party=last, y_party=first, bits=sign_bit + 1, session=ot
        )
    else:
        engine = _ExtraTriples(ot, and_count)
        lt = _compare_core(
            engine,
            _as_unsigned(mine_cmp, sign_bit + 1, False),
            x_party=last,
            bits=sign_bit + 1,
            block_bits=4,
            greater=False,
        )
        carry = lt ^ np.uint8(1) if me == last else lt  # [x >= y] = NOT [x < y]
    msb_share = (((share >> np.uint64(sign_bit)) & np.uint64(1)).astype(np.uint8)) ^ carry
    return msb_share, engine


def _open_bits(net: Network, share: np.ndarray | None, m: int) -> np.ndarray:
    """Open XOR-shared result bits between the first and the last party; the first
    sends the opened bits to the parties in between."""
    parties = net.parties
    first, last = parties[0], parties[-1]
    bits_out = "threshold/result"
    if share is not None:
        other = last if net.me == first else first
        net.send(other, "threshold/open", np.packbits(share))
        got = net.receive(other, "threshold/open", expect=np.ndarray)
        if got.dtype != np.uint8 or got.shape != ((m + 7) // 8,):
            raise ProtocolError(other, "threshold/open", "wrong length of opened bits")
        result = (share ^ np.unpackbits(got)[:m]).astype(bool)
        if net.me == first:
            net.broadcast(bits_out, np.packbits(result), to=parties[1:-1])
        return result
    got = net.receive(first, bits_out, expect=np.ndarray)
    if got.dtype != np.uint8 or got.shape != ((m + 7) // 8,):
        raise ProtocolError(first, bits_out, "wrong length of result bits")
    return np.unpackbits(got)[:m].astype(bool)


def secure_sum_nonnegative(
    net: Network,
    values: np.ndarray,
    *,
    session: OTSession | None = None,
    bound: int | None = None,
) -> np.ndarray:
    """``[sum over parties of values[j] >= 0]`` for every ``j``, learned by every party.

    Every party calls this with its own 1-D int64 array (same length everywhere); the
    true sums must satisfy ``|sum| < 2^62``. ``session``: at the first and the last
    party, an :class:`~ppdm.protocols.ot.extension.OTSession` between the two, to reuse
    across calls (both must pass one, or neither); default a new one per call, on
    ``net.scoped("threshold/compare")``. Other parties ignore it. ``bound``: a public
    bound (the same at every party) on the absolute value of every party's entries
    (a party's entry above it raises ``ValueError``); the comparison then runs on
    ``bit_length(n * bound) + 1`` bits instead of 63 (:func:`_sign_bit`), with the
    same result and the same leakage.

    Examples
    --------
    >>> from ppdm.parties.local import run_local
    >>> out = run_local(secure_sum_nonnegative,
    ...                 {"a": np.array([5, -9, 0]), "b": np.array([-5, 3, 0]),
    ...                  "c": np.array([0, 5, -1])})
    >>> out["b"].tolist()
    [True, False, False]
    """
    if np.ndim(values) != 1:
        raise ValueError("values must be a 1-D integer array")
    sign_bit = _sign_bit(len(net.parties), bound)
    v = _as_excess(net, values, bound)
    if len(net.parties) == 1:
        return v >= 0
    msb_share, _ = _negative_shares(net, v.view(np.uint64), session, sign_bit=sign_bit)
    if msb_share is not None and net.me == net.parties[0]:
        msb_share = msb_share ^ np.uint8(1)  # shares of [sum >= 0]
    return _open_bits(net, msb_share, len(v))


def _and_columns(engine: _BitEngine, bits: np.ndarray) -> np.ndarray:
    """XOR shares of the AND of every row of shared bits ``(m, g)``: a tree of Beaver
    ANDs, ``g - 1`` per row in ``ceil(log2 g)`` rounds."""
    while bits.shape[1] > 1:
        w = bits.shape[1]
        pairs = w // 2
        prod = engine.and_(
            np.ascontiguousarray(bits[:, 0 : 2 * pairs : 2]).reshape(-1),
            np.ascontiguousarray(bits[:, 1 : 2 * pairs : 2]).reshape(-1),
        ).reshape(len(bits), pairs)
        bits = np.concatenate([prod, bits[:, 2 * pairs :]], axis=1) if w % 2 else prod
    return np.ascontiguousarray(bits[:, 0])


def secure_all_nonnegative(
    net: Network,
    values: np.ndarray,
    *,
    session: OTSession | None = None,
    bound: int | None = None,
) -> np.ndarray:
    """``[every sum over parties of values[i, j] >= 0 for j = 0 .. g-1]`` for every row
    ``i``, learned by every party -- and nothing about the single tests of a row.

    Every party calls this with its own 2-D integer array of shape ``(m, g)`` (the same
    shape everywhere; sums and ``bound`` as for :func:`secure_sum_nonnegative`). The ``m g`` signs stay
    XOR-shared between the first and the last party; a tree of ``g - 1`` Beaver ANDs per
    row (:class:`ppdm.protocols.comparison._BitEngine`; the triples are made in the
    comparison's own batch, on the same OT session) combines them, and only the row results are
    opened. This is what a release rule made of several tests needs: revealing the
    single tests would answer each of them on its own (module :mod:`ppdm.mining
    .horizontal_rules`, ``min_aggregate``).

    Cost over :func:`secure_sum_nonnegative` on the ``m g`` entries: ``(g - 1) m`` ANDs
    (two bit-OTs and ``4/8`` byte per party each) and ``ceil(log2 g)`` hops; the row
    results are opened instead of the entries (``m / 8`` bytes, not ``m g / 8``).

    Examples
    --------
    >>> from ppdm.parties.local import run_local
    >>> out = run_local(secure_all_nonnegative,
    ...                 {"a": np.array([[5, 1], [-9, 9]]), "b": np.array([[-5, -2], [3, 0]]),
    ...                  "c": np.array([[0, 1], [6, -9]])})
    >>> out["c"].tolist()
    [True, True]
    """
    if np.ndim(values) != 2:
        raise ValueError("values must be a 2-D integer array (rows, tests)")
    sign_bit = _sign_bit(len(net.parties), bound)
    v = _as_excess(net, values, bound)
    m, g = v.shape
    if g < 1:
        raise ValueError("every row needs at least one test")
    if len(net.parties) == 1:
        return np.all(v >= 0, axis=1)
    if m == 0:
        return np.zeros(0, dtype=bool)
    flat = np.ascontiguousarray(v).reshape(-1).view(np.uint64)
    msb_share, engine = _negative_shares(
        net, flat, session, and_count=(g - 1) * m, sign_bit=sign_bit
    )
    row_share = None
    if msb_share is not None:
        if net.me == net.parties[0]:
            msb_share = msb_share ^ np.uint8(1)  # shares of [sum >= 0]
        bits = msb_share.reshape(m, g)
        if g == 1:
            row_share = bits[:, 0].copy()
        else:
            if engine is None:  # it holds the AND triples (made with the comparison's)
                raise RuntimeError("the AND triples were not made with the comparison")
            row_share = _and_columns(engine, bits)
    return _open_bits(net, row_share, m)
