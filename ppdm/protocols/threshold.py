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
(CrypTFlow2's DReLU). The XOR shares are then opened to every party.

Security (semi-honest)
----------------------
- Every party learns ``[sum_i e_i >= 0]`` for every entry and nothing else: each ring
  message is uniformly masked, and the comparison reveals only its output.
- Collusion: the two ring neighbours of a party learn its excess (as for the ring secure
  sum); the first and last party together learn the sum.

Cost for ``m`` entries and ``n`` parties: ``n - 1`` ring messages of ``8 m`` bytes, then
one batched 63-bit comparison between the first and last party (about ``2.4 KB`` per
entry with 4-bit blocks), then ``n - 1`` messages of ``m / 8`` bytes to publish the bits.

Sequential hops (one-way latencies, :mod:`ppdm.parties.metrics`): the first and last
party set up their OT session (IKNP base OTs, both directions) while the ring message
travels, so the ring's ``n - 1`` hops overlap the setup; with three parties a call is 16
hops (18 when the two ran one after the other). A ``session`` reused across calls (one
per job for every level of an Apriori search) pays the setup once: the next calls take
9 hops each.
"""

from __future__ import annotations

import secrets

import numpy as np

from ppdm.errors import ProtocolError
from ppdm.parties.network import Network
from ppdm.protocols.comparison import secure_ge_shares
from ppdm.protocols.ot.extension import OTSession

__all__ = ["secure_sum_nonnegative"]

_V = 62
_LOW = np.uint64((1 << _V) - 1)


def compare_session(net: Network, scope: str) -> OTSession | None:
    """The OT session :func:`secure_sum_nonnegative` may reuse across calls on ``net``:
    at the first and the last party, one between the two on ``net.scoped(scope)``
    (created lazily: its base OTs run at its first use); ``None`` at the others."""
    parties = net.parties
    if len(parties) < 2 or net.me not in (parties[0], parties[-1]):
        return None
    peer = parties[-1] if net.me == parties[0] else parties[0]
    return OTSession(net.scoped(scope), peer)


def secure_sum_nonnegative(
    net: Network, values: np.ndarray, *, session: OTSession | None = None
) -> np.ndarray:
    """``[sum over parties of values[j] >= 0]`` for every ``j``, learned by every party.

    Every party calls this with its own 1-D int64 array (same length everywhere); the
    true sums must satisfy ``|sum| < 2^62``. ``session``: at the first and the last
    party, an :class:`~ppdm.protocols.ot.extension.OTSession` between the two, to reuse
    across calls (both must pass one, or neither); default a new one per call, on
    ``net.scoped("threshold/compare")``. Other parties ignore it.

    Examples
    --------
    >>> from ppdm.parties.local import run_local
    >>> out = run_local(secure_sum_nonnegative,
    ...                 {"a": np.array([5, -9, 0]), "b": np.array([-5, 3, 0]),
    ...                  "c": np.array([0, 5, -1])})
    >>> out["b"].tolist()
    [True, False, False]
    """
    v = np.asarray(values)
    if v.ndim != 1 or (v.size and not np.issubdtype(v.dtype, np.integer)):
        raise ValueError("values must be a 1-D integer array")
    if v.size and int(np.max(np.abs(v.astype(np.int64)))) >= (1 << _V) // max(len(net.parties), 1):
        raise ValueError("values too large for a 62-bit signed sum")
    mine = v.astype(np.int64).view(np.uint64)
    m = len(mine)
    parties = net.parties
    if len(parties) == 1:
        return v.astype(np.int64) >= 0
    first, last = parties[0], parties[-1]
    me = net.me
    step = "threshold/ring"
    ot: OTSession | None = None
    if me in (first, last):
        peer = last if me == first else first
        if session is not None and session.peer != peer:
            raise ValueError(f"the OT session must be with {peer!r}, not {session.peer!r}")
        ot = session if session is not None else OTSession(net.scoped("threshold/compare"), peer)

    def recv_partial(frm: str) -> np.ndarray:
        got = net.receive(frm, step, expect=np.ndarray)
        if got.dtype != np.uint64 or got.shape != (m,):
            raise ProtocolError(frm, step, f"expected {m} uint64 partial sums")
        return got

    if me == first:
        mask = np.frombuffer(secrets.token_bytes(8 * m), dtype=np.uint64).copy()
        net.send(net.successor(), step, mask + mine)
        share = np.uint64(0) - mask  # -R mod 2^64
        if ot is not None:
            ot.setup_both()  # while the ring message travels
    else:
        if me == last and ot is not None:
            ot.setup_both()  # before waiting for the ring: the two overlap
        partial = recv_partial(net.predecessor()) + mine
        if me != last:
            net.send(net.successor(), step, partial)
        share = partial
    bits_out = "threshold/result"
    if ot is not None:
        sub = ot.net
        low = share & _LOW
        if me == last:  # x_party: compares low(x) >= 2^62 - low(-R)
            carry = secure_ge_shares(sub, low, x_party=last, y_party=first, bits=_V + 1, session=ot)
        else:
            y = (np.uint64(1 << _V) - low).astype(np.uint64)
            carry = secure_ge_shares(sub, y, x_party=last, y_party=first, bits=_V + 1, session=ot)
        msb_share = (((share >> np.uint64(_V)) & np.uint64(1)).astype(np.uint8)) ^ carry
        other = last if me == first else first
        net.send(other, "threshold/open", np.packbits(msb_share))
        got = net.receive(other, "threshold/open", expect=np.ndarray)
        if got.dtype != np.uint8 or got.shape != ((m + 7) // 8,):
            raise ProtocolError(other, "threshold/open", "wrong length of opened bits")
        msb = msb_share ^ np.unpackbits(got)[:m]
        result = msb == 0
        if me == first:
            net.broadcast(bits_out, np.packbits(result), to=parties[1:-1])
        return result
    got = net.receive(first, bits_out, expect=np.ndarray)
    if got.dtype != np.uint8 or got.shape != ((m + 7) // 8,):
        raise ProtocolError(first, bits_out, "wrong length of result bits")
    return np.unpackbits(got)[:m].astype(bool)
