"""Secure sum: the ring protocol with a random mask (Clifton et al. 2002).

Clifton, Kantarcioglu, Vaidya, Lin and Zhu, "Tools for privacy preserving distributed
data mining", SIGKDD Explorations 4(2), 2002; Aggarwal 2015, §20.5 (secure sum as a
building block of distributed mining).

The parties form a ring in consortium order; the first party (the *initiator*) draws a
uniformly random mask ``R`` in ``Z_m``, sends ``R + x_1 mod m`` to the next party, each
party adds its own value mod ``m`` and forwards, and the last party returns the total to
the initiator, who subtracts ``R`` and sends the sum to everyone.

Security (semi-honest)
----------------------
- Each party sees only one value, ``R + x_1 + ... + x_{i-1} mod m``, which is uniformly
  distributed whatever the inputs, so a single party learns nothing beyond the sum.
- **Collusion**: two parties that are a party's neighbours on the ring (``i-1`` and
  ``i+1``) learn its value exactly: ``x_i`` is the difference between what ``i+1``
  received and what ``i-1`` sent. With ``n`` parties, any coalition learns the sum of the
  values of each run of honest parties between two colluders. Use
  :mod:`ppdm.protocols.additive_sum` (additive secret sharing) where collusion matters.
- The modulus must exceed the range of the true sum; results are interpreted as signed
  (two's complement) values in ``[-m/2, m/2)``.

Cost: ``n`` ring messages plus ``n - 1`` result messages; ``2`` rounds of ``n`` hops
(``n + 1`` sequential message latencies). Each message carries one element of ``Z_m`` per
vector entry (8 bytes per entry for vectors mod ``2^64``).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import overload

import numpy as np

from ppdm.errors import ProtocolError
from ppdm.parties.network import Network

__all__ = ["secure_sum"]

_VEC_MOD = 1 << 64


@overload
def secure_sum(
    net: Network, value: int, *, modulus: int | None = ..., ring: Sequence[str] | None = ...
) -> int: ...
@overload
def secure_sum(
    net: Network,
    value: np.ndarray,
    *,
    modulus: int | None = ...,
    ring: Sequence[str] | None = ...,
) -> np.ndarray: ...


def secure_sum(
    net: Network,
    value: int | np.ndarray,
    *,
    modulus: int | None = None,
    ring: Sequence[str] | None = None,
) -> int | np.ndarray:
    """Sum the parties' private integers (or integer vectors) with the masked ring.

    Every party on ``ring`` (default: all parties, in consortium order) calls this with its
    own ``value``; every one gets the sum. The first party on the ring is the initiator.

    Parameters
    ----------
    net
        This party's network.
    value
        A Python int, or a 1-D numpy integer array (the same length at every party).
    modulus
        ``m``. Default ``2**128`` for ints and ``2**64`` for arrays. For arrays a modulus
        other than ``2**64`` must be below ``2**62``.
    ring
        The parties taking part, in ring order.

    Returns
    -------
    int or numpy.ndarray
        The signed sum (``int64`` array for vectors).

    Examples
    --------
    >>> from ppdm.parties.local import run_local
    >>> run_local(secure_sum, {"alice": 3, "bob": 5, "carol": 9})
    {'alice': 17, 'bob': 17, 'carol': 17}
    """
    parties = tuple(ring) if ring is not None else net.parties
    if net.me not in parties:
        raise ValueError(f"party {net.me!r} is not on the ring {list(parties)}")
    if isinstance(value, np.ndarray):
        return _sum_vector(net, value, modulus, parties)
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"secure_sum takes an int or an integer array, not {type(value).__name__}")
    return _sum_int(net, int(value), modulus if modulus is not None else 1 << 128, parties)


def _signed(x: int, m: int) -> int:
    return x - m if x >= (m + 1) // 2 else x


def _sum_int(net: Network, x: int, m: int, ring: tuple[str, ...]) -> int:
    if m < 2:
        raise ValueError("modulus must be at least 2")
    if not -(m // 2) <= x < (m + 1) // 2:
        raise ValueError(f"this party's value is outside the signed range of Z_{m}")
    if len(ring) == 1:
        return x
    me, first = net.me, ring[0]
    nxt, prev = net.successor(ring), net.predecessor(ring)
    if me == first:
        mask = secrets.randbelow(m)
        net.send(nxt, "secure-sum/ring", (mask + x) % m)
        total = _check_residue(net.receive(prev, "secure-sum/ring", expect=int), m, prev)
        result = _signed((total - mask) % m, m)
        net.broadcast("secure-sum/result", result, to=ring[1:])
        return result
    partial = _check_residue(net.receive(prev, "secure-sum/ring", expect=int), m, prev)
    net.send(nxt, "secure-sum/ring", (partial + x) % m)
    result = net.receive(first, "secure-sum/result", expect=int)
    if not -(m // 2) <= result < (m + 1) // 2:
        raise ProtocolError(first, "secure-sum/result", "sum outside the signed range")
    return int(result)


def _check_residue(v: int, m: int, party: str) -> int:
    if isinstance(v, bool) or not 0 <= v < m:
        raise ProtocolError(party, "secure-sum/ring", f"value is not in Z_{m}")
    return int(v)


def _sum_vector(
    net: Network, x: np.ndarray, modulus: int | None, ring: tuple[str, ...]
) -> np.ndarray:
    if x.ndim != 1 or not np.issubdtype(x.dtype, np.integer):
        raise TypeError("secure_sum takes a 1-D integer array")
    m = _VEC_MOD if modulus is None else int(modulus)
    wrap = m == _VEC_MOD
    if not wrap and not 2 <= m < (1 << 62):
        raise ValueError("vector modulus must be 2**64 or in [2, 2**62)")
    n = len(x)
    if wrap:
        xr = x.astype(np.int64).view(np.uint64) if x.dtype != np.uint64 else x.copy()
    else:
        if x.size and (int(x.min()) < -(m // 2) or int(x.max()) >= (m + 1) // 2):
            raise ValueError(f"values outside the signed range of Z_{m}")
        xr = np.mod(x.astype(np.int64), m)
    if len(ring) == 1:
        return _vec_signed(xr, m, wrap)
    me, first = net.me, ring[0]
    nxt, prev = net.successor(ring), net.predecessor(ring)

    def recv_vec(frm: str, step: str) -> np.ndarray:
        v = net.receive(frm, step, expect=np.ndarray)
        want = np.uint64 if wrap else np.int64
        if v.dtype != want or v.shape != (n,):
            raise ProtocolError(
                frm, step, f"expected {n} values of {np.dtype(want)}, got {v.dtype}{v.shape}"
            )
        if not wrap and n and (int(v.min()) < 0 or int(v.max()) >= m):
            raise ProtocolError(frm, step, f"values not in Z_{m}")
        return v

    def add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a + b if wrap else np.mod(a + b, m)

    if me == first:
        if wrap:
            mask = np.frombuffer(secrets.token_bytes(8 * n), dtype=np.uint64).copy()
        else:
            mask = np.array([secrets.randbelow(m) for _ in range(n)], dtype=np.int64)
        net.send(nxt, "secure-sum/ring", add(mask, xr))
        total = recv_vec(prev, "secure-sum/ring")
        res = total - mask if wrap else np.mod(total - mask, m)
        result = _vec_signed(res, m, wrap)
        net.broadcast("secure-sum/result", result, to=ring[1:])
        return result
    partial = recv_vec(prev, "secure-sum/ring")
    net.send(nxt, "secure-sum/ring", add(partial, xr))
    result = net.receive(first, "secure-sum/result", expect=np.ndarray)
    if result.dtype != np.int64 or result.shape != (n,):
        raise ProtocolError(first, "secure-sum/result", "result has the wrong type or length")
    return result


def _vec_signed(v: np.ndarray, m: int, wrap: bool) -> np.ndarray:
    if wrap:
        return v.astype(np.uint64).view(np.int64).copy()
    v = v.astype(np.int64)
    return np.where(v >= (m + 1) // 2, v - m, v)
