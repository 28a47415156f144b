"""1-out-of-N and k-out-of-N oblivious transfer from 1-out-of-2 OTs (Naor–Pinkas).

Naor and Pinkas, "Oblivious transfer and polynomial evaluation", STOC 1999, section 3
(1-out-of-N OT from ``l = ceil(log2 N)`` invocations of 1-out-of-2 OT); Aggarwal 2015, §20.5 mentions the generalization of 1-out-of-2 OT "to the case of k out of N".

For every instance the sender holds ``N`` messages ``X_0 .. X_{N-1}`` of ``L`` bytes and
the receiver an index ``I`` with bits ``I_1 .. I_l``:

1. The parties run ``l`` *random* 1-out-of-2 OTs: the sender gets key pairs
   ``(K_j^0, K_j^1)``, the receiver learns ``K_j^{I_j}``.
2. The sender sends ``Y_J = X_J XOR F(K_1^{J_1}, J) XOR ... XOR F(K_l^{J_l}, J)`` for all
   ``J``, where ``F(K, J)`` is the ``J``-th ``L``-byte piece of a pseudorandom expansion
   of ``K``. Here the random OTs directly output ``N * L`` bytes (the OT-extension hash
   run as a PRG, :func:`~ppdm.protocols.ot.crhash.tccr_expand`), so ``F(K_j^b, J)`` is
   a slice of the OT output and costs no extra hashing.
3. The receiver unmasks ``Y_I`` with the ``l`` keys it knows.

The random OTs come from an IKNP session (:class:`~ppdm.protocols.ot.extension.OTSession`)
when one is given or when ``m * l >= 128``, and from base OTs otherwise, so a batch of
``m`` instances costs ``m * l`` random OTs of ``N * L`` bytes (16 bytes each on the wire
with IKNP) plus ``m * N * L`` bytes of masked messages.

**k-out-of-N** (:func:`k_of_n_send` / :func:`k_of_n_receive`) is ``k`` independent runs of
1-out-of-N over the same ``N`` messages, batched into one: each run masks the messages
with fresh keys, so the receiver learns exactly the ``k`` messages it asks for (it is
checked that its ``k`` indices are distinct) and the sender learns nothing. Cost:
``k * l`` 1-out-of-2 OTs and ``k * N * L`` bytes.

Security (semi-honest, two parties): the sender sees only its side of random OTs, so
nothing about ``I``; for any ``J != I`` at least one key ``K_j^{J_j}`` is unknown to the
receiver, so ``Y_J`` is pseudorandom to it. Messages of the wrong dtype or shape raise
:class:`~ppdm.errors.ProtocolError`.

Rounds: the OTs (one round trip for base OTs; one message for IKNP random OT) plus one
message with the ``Y``; large batches are cut into pieces of at most ~8 MiB each.
"""

from __future__ import annotations

import numpy as np

from ppdm.errors import ProtocolError
from ppdm.parties.network import Network
from ppdm.protocols.ot.base import base_ot_receive_random, base_ot_send_random
from ppdm.protocols.ot.extension import KAPPA, IKNPReceiver, IKNPSender, OTSession

__all__ = ["k_of_n_receive", "k_of_n_send", "one_of_n_receive", "one_of_n_send"]

STEP_Y = "ot/1-of-n/masked"
_MAX_BATCH = 8 << 20  # bytes of random-OT output per side per batch


def _log2(n: int) -> int:
    if n < 2:
        raise ValueError("1-out-of-N OT needs N >= 2 messages")
    return (n - 1).bit_length()


def _batch(n: int, length: int, ell: int) -> int:
    """Instances per batch (bounded work buffers and messages of at most ~8 MiB)."""
    return max(1, _MAX_BATCH // (n * length * ell))


class _SenderOTs:
    """Where the sender's random 1-out-of-2 OTs come from (same choice at both ends)."""

    def __init__(self, net: Network, peer: str, total: int, session: OTSession | None):
        self._net, self._peer = net, peer
        self._iknp: IKNPSender | None = None
        if session is not None:
            self._iknp = session.sender
        elif total >= KAPPA:
            self._iknp = IKNPSender.setup(net, peer)

    def random(self, count: int, length: int) -> tuple[np.ndarray, np.ndarray]:
        if self._iknp is not None:
            return self._iknp.random(count, length=length)
        return base_ot_send_random(self._net, self._peer, count, length=length)


class _ReceiverOTs:
    def __init__(self, net: Network, peer: str, total: int, session: OTSession | None):
        self._net, self._peer = net, peer
        self._iknp: IKNPReceiver | None = None
        if session is not None:
            self._iknp = session.receiver
        elif total >= KAPPA:
            self._iknp = IKNPReceiver.setup(net, peer)

    def random(self, bits: np.ndarray, length: int) -> np.ndarray:
        if self._iknp is not None:
            return self._iknp.random(bits, length=length)
        return base_ot_receive_random(self._net, self._peer, bits, length=length)


def one_of_n_send(
    net: Network, receiver: str, messages: np.ndarray, *, session: OTSession | None = None
) -> None:
    """Sender of ``m`` 1-out-of-N OTs: ``messages`` is ``(m, N, L)`` uint8.

    ``F(K, J)`` is realized as the ``J``-th ``L``-byte piece of the random-OT output
    itself (random OTs of ``N * L`` bytes, i.e. the correlation-robust hash expanded as a
    PRG), so the sender hashes ``2 * l * ceil(N L / 16)`` blocks per instance.
    ``session`` (an :class:`OTSession` with ``receiver``) reuses its IKNP setup; the
    receiver must pass one too.

    Examples
    --------
    >>> from ppdm.parties.local import run_local
    >>> menu = np.frombuffer(b"tea coffeejuicewater", dtype=np.uint8).reshape(1, 4, 5)
    >>> def party(net, _):
    ...     if net.me == "shop":
    ...         return one_of_n_send(net, "guest", menu)
    ...     return one_of_n_receive(net, "shop", [2], n=4, length=5).tobytes()
    >>> run_local(party, {"shop": None, "guest": None})["guest"]
    b'juice'
    """
    x = np.asarray(messages)
    if x.dtype != np.uint8 or x.ndim != 3 or x.shape[2] < 1:
        raise ValueError("messages must be an (m, N, L) uint8 array with L >= 1")
    m, n, length = x.shape
    ell = _log2(n)
    ots = _SenderOTs(net, receiver, m * ell, session)
    bits = (np.arange(n)[None, :] >> np.arange(ell)[:, None]) & 1  # (ell, N)
    step = _batch(n, length, ell)
    for o in range(0, m, step):
        b = min(step, m - o)
        r0, r1 = ots.random(b * ell, n * length)
        r0 = r0.reshape(b, ell, n, length)
        r1 = r1.reshape(b, ell, n, length)
        y = x[o : o + b].copy()
        for j in range(ell):
            y ^= np.where(bits[j][None, :, None].astype(bool), r1[:, j], r0[:, j])
        net.send(receiver, STEP_Y, y)


def one_of_n_receive(
    net: Network,
    sender: str,
    choices: np.ndarray | list[int],
    *,
    n: int,
    length: int,
    session: OTSession | None = None,
) -> np.ndarray:
    """Receiver of 1-out-of-N OTs: ``choices`` are ``m`` indices in ``[0, n)``; returns
    the chosen messages, ``(m, length)`` uint8."""
    c = np.asarray(choices)
    if c.ndim != 1 or (c.size and not np.issubdtype(c.dtype, np.integer)):
        raise ValueError("choices must be a 1-D integer array")
    if c.size and (int(c.min()) < 0 or int(c.max()) >= n):
        raise ValueError(f"choices must lie in [0, {n})")
    if length < 1:
        raise ValueError("length must be positive")
    m = len(c)
    ell = _log2(n)
    ci = c.astype(np.intp)
    ots = _ReceiverOTs(net, sender, m * ell, session)
    out = np.empty((m, length), dtype=np.uint8)
    step = _batch(n, length, ell)
    for o in range(0, m, step):
        b = min(step, m - o)
        cb = ci[o : o + b]
        bits = ((cb[:, None] >> np.arange(ell)[None, :]) & 1).astype(np.uint8)
        keys = ots.random(bits.reshape(-1), n * length).reshape(b, ell, n, length)
        y = net.receive(sender, STEP_Y, expect=np.ndarray)
        if y.dtype != np.uint8 or y.shape != (b, n, length):
            raise ProtocolError(
                sender,
                STEP_Y,
                f"expected masked messages of shape {(b, n, length)}, got {y.dtype}{y.shape}",
            )
        rows = np.arange(b)
        row = y[rows, cb]
        for j in range(ell):
            row ^= keys[rows, j, cb]
        out[o : o + b] = row
    return out


def k_of_n_send(
    net: Network,
    receiver: str,
    messages: np.ndarray,
    k: int,
    *,
    session: OTSession | None = None,
) -> None:
    """Sender of one k-out-of-N OT over the ``(N, L)`` uint8 ``messages``."""
    x = np.asarray(messages)
    if x.dtype != np.uint8 or x.ndim != 2:
        raise ValueError("messages must be an (N, L) uint8 array")
    if not 1 <= k <= x.shape[0]:
        raise ValueError("k must lie in [1, N]")
    one_of_n_send(net, receiver, np.broadcast_to(x, (k, *x.shape)), session=session)


def k_of_n_receive(
    net: Network,
    sender: str,
    indices: np.ndarray | list[int],
    *,
    n: int,
    length: int,
    session: OTSession | None = None,
) -> np.ndarray:
    """Receiver of a k-out-of-N OT: ``k`` distinct indices; returns ``(k, length)``.

    Examples
    --------
    >>> from ppdm.parties.local import run_local
    >>> rows = np.arange(40, dtype=np.uint8).reshape(10, 4)
    >>> def party(net, _):
    ...     if net.me == "a":
    ...         return k_of_n_send(net, "b", rows, 3)
    ...     return k_of_n_receive(net, "a", [7, 0, 3], n=10, length=4)[:, 0].tolist()
    >>> run_local(party, {"a": None, "b": None})["b"]
    [28, 0, 12]
    """
    idx = np.asarray(indices)
    if len(np.unique(idx)) != len(idx):
        raise ValueError("k-out-of-N indices must be distinct")
    return one_of_n_receive(net, sender, idx, n=n, length=length, session=session)
