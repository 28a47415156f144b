"""Collusion-resistant secure sum: additive secret sharing over ``Z_{2^64}`` with pairwise
PRG masks.

Additive sharing of each input among all parties (Benaloh 1986; the "secret sharing"
secure sum of Clifton et al. 2002, Aggarwal 2015, §20.5), with the shares of every pair
derived from a shared key instead of being sent, as in the pairwise masking of Bonawitz
et al., "Practical secure aggregation for privacy-preserving machine learning", CCS 2017
(section 4, without dropouts).

Protocol (parties ``P_1 .. P_m`` in consortium order, each with a vector ``x_i`` of ``d``
integers):

1. Every party draws an ephemeral X25519 key pair and broadcasts its public key (one
   round). Each pair ``i < j`` derives ``k_ij = BLAKE2b(X25519(sk_i, pk_j) || context)``
   where the context binds the job id, the step scope, the session label and both
   parties' names and public keys.
2. ``P_i`` sends ``y_i = x_i + sum_{j > i} PRG(k_ij) - sum_{j < i} PRG(k_ji) mod 2^64``,
   with the PRG AES-256-CTR keyed by ``k_ij`` (``d`` 64-bit words). The masks cancel in
   ``sum_i y_i = sum_i x_i mod 2^64``.
3. Either every party sends ``y_i`` to every other and adds them up (``aggregator=None``,
   one round), or all send to an ``aggregator``, which adds them up and broadcasts the sum
   (two rounds, fewer messages).

Security (semi-honest)
----------------------
- A coalition of up to ``m - 1`` parties (including the aggregator) learns nothing about
  the honest parties' inputs beyond the sum: for any two honest parties the mask between
  them is a PRG output under a key only they know (X25519 / CDH in Curve25519), so the
  honest parties' ``y`` values are jointly pseudorandom subject only to their total, which
  the coalition can compute from the result anyway. (With ``m - 1`` colluders the sum
  reveals the one honest input: that is inherent to any sum.) Compare the ring protocol
  (:mod:`ppdm.protocols.secure_sum`), where the two neighbours of a party learn its input.
- Keys are ephemeral per call and bound to the job and session, so masks never repeat
  across runs. Public keys are not authenticated by this protocol: the party network's
  mutual TLS does that. Not secure against active attacks (a party can add anything to
  the sum); malformed messages raise :class:`~ppdm.errors.ProtocolError`.
- The sum is computed mod ``2^64`` and returned as signed ``int64`` (two's complement);
  the true sum must lie in ``[-2^63, 2^63)`` to be exact.

Cost: ``m (m - 1)`` key messages of 32 bytes (1 round), then ``m (m - 1)`` messages of
``8 d`` bytes (all-to-all, 1 round) or ``2 (m - 1)`` messages of ``8 d`` bytes (aggregator,
2 rounds). Computation: ``m - 1`` X25519 operations and ``8 d (m - 1)`` bytes of AES-CTR
per party.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from ppdm.errors import ProtocolError
from ppdm.parties.network import Network

__all__ = ["additive_sum", "pair_mask"]

_KEY_STEP = "additive-sum/key"
_MASKED_STEP = "additive-sum/masked"
_RESULT_STEP = "additive-sum/result"


def pair_mask(key: bytes, length: int) -> np.ndarray:
    """``length`` pseudorandom 64-bit words: AES-256-CTR keystream under ``key`` (32 bytes)
    with a zero counter block (each key is used for one mask only)."""
    if len(key) != 32:
        raise ValueError("pair keys are 32 bytes")
    enc = Cipher(algorithms.AES(key), modes.CTR(b"\x00" * 16)).encryptor()
    stream = enc.update(b"\x00" * (8 * length)) + enc.finalize()
    return np.frombuffer(stream, dtype="<u8").astype(np.uint64)


def _pair_key(
    shared: bytes, net: Network, session: str, a: str, b: str, pk_a: bytes, pk_b: bytes
) -> bytes:
    h = hashlib.blake2b(digest_size=32, person=b"ppdm-addsum-v1")
    for part in (shared, net.job_id.encode(), session.encode(), a.encode(), b.encode()):
        h.update(len(part).to_bytes(4, "big") + part)
    h.update(pk_a + pk_b)
    return h.digest()


def additive_sum(
    net: Network,
    value: np.ndarray,
    *,
    parties: Sequence[str] | None = None,
    aggregator: str | None = None,
    session: str = "",
) -> np.ndarray:
    """Sum the parties' integer vectors, hiding each one from any ``m - 1`` others.

    Every party in ``parties`` (default: all) calls this with its own vector (the same
    length everywhere); every one gets the sum.

    Parameters
    ----------
    net
        This party's network.
    value
        A 1-D integer (or bool) numpy array; it is reduced mod ``2^64``.
    parties
        The parties taking part (default: all of the job), in any order.
    aggregator
        If given, every party sends its masked vector to this party, which broadcasts the
        sum (2 rounds, ``2 (m - 1)`` vector messages); default all-to-all (1 round,
        ``m (m - 1)`` vector messages).
    session
        A label that separates several sums in one job (bound into the pair keys).

    Returns
    -------
    numpy.ndarray
        The sum mod ``2^64`` as ``int64`` (two's complement).

    Examples
    --------
    >>> from ppdm.parties.local import run_local
    >>> out = run_local(
    ...     additive_sum,
    ...     {"alice": np.array([1, -2]), "bob": np.array([10, 20]), "carol": np.array([5, 5])},
    ... )
    >>> out["carol"].tolist()
    [16, 23]
    """
    group = tuple(p for p in net.parties if p in set(parties)) if parties else net.parties
    if parties is not None and len(group) != len(set(parties)):
        raise ValueError(f"unknown parties in {list(parties)}")
    if net.me not in group:
        raise ValueError(f"party {net.me!r} is not among {list(group)}")
    if aggregator is not None and aggregator not in group:
        raise ValueError(f"aggregator {aggregator!r} is not among {list(group)}")
    x = np.asarray(value)
    if x.dtype == np.bool_:
        x = x.astype(np.int64)
    if x.ndim != 1 or not np.issubdtype(x.dtype, np.integer):
        raise TypeError("additive_sum takes a 1-D integer array")
    words = x.astype(np.int64).view(np.uint64) if x.dtype != np.uint64 else x.copy()
    d = len(words)
    if len(group) == 1:
        return words.view(np.int64).copy()
    others = [p for p in group if p != net.me]

    sk = X25519PrivateKey.generate()
    pk = sk.public_key().public_bytes_raw()
    net.broadcast(_KEY_STEP, pk, to=others)
    masked = words.copy()
    me_idx = group.index(net.me)
    for p in others:
        peer = net.receive(p, _KEY_STEP, expect=bytes)
        if len(peer) != 32:
            raise ProtocolError(p, _KEY_STEP, "X25519 public key must be 32 bytes")
        try:
            shared = sk.exchange(X25519PublicKey.from_public_bytes(peer))
        except ValueError as exc:
            raise ProtocolError(p, _KEY_STEP, f"invalid X25519 public key: {exc}") from exc
        if me_idx < group.index(p):
            key = _pair_key(shared, net, session, net.me, p, pk, peer)
            masked += pair_mask(key, d)
        else:
            key = _pair_key(shared, net, session, p, net.me, peer, pk)
            masked -= pair_mask(key, d)

    def receive_masked(frm: str) -> np.ndarray:
        v = net.receive(frm, _MASKED_STEP, expect=np.ndarray)
        if v.dtype != np.uint64 or v.shape != (d,):
            raise ProtocolError(
                frm, _MASKED_STEP, f"expected {d} uint64 values, got {v.dtype}{v.shape}"
            )
        return v

    if aggregator is None:
        net.broadcast(_MASKED_STEP, masked, to=others)
        total = masked.copy()
        for p in others:
            total += receive_masked(p)
        return total.view(np.int64).copy()
    if net.me != aggregator:
        net.send(aggregator, _MASKED_STEP, masked)
        result = net.receive(aggregator, _RESULT_STEP, expect=np.ndarray)
        if result.dtype != np.int64 or result.shape != (d,):
            raise ProtocolError(aggregator, _RESULT_STEP, "sum has the wrong type or length")
        return result
    total = masked.copy()
    for p in others:
        total += receive_masked(p)
    result = total.view(np.int64).copy()
    net.broadcast(_RESULT_STEP, result, to=others)
    return result
