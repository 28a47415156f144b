"""Base oblivious transfer: the Chou–Orlandi "simplest OT", batched, over secp256k1.

Chou and Orlandi, "The simplest protocol for oblivious transfer", LATINCRYPT 2015; the
1-out-of-2 OT of Aggarwal 2015, §20.5 (the sender offers ``(x0, x1)``, the receiver with
choice bit ``c`` learns ``x_c`` only, the sender learns nothing about ``c``).

Protocol for a batch of ``m`` OTs (group ``G`` = secp256k1, generator ``g``,
:mod:`ppdm.protocols.ecgroup`):

1. The sender draws one scalar ``a`` and sends ``A = a g``.
2. The receiver draws ``b_i`` and sends ``B_i = b_i g`` if ``c_i = 0`` and
   ``B_i = A + b_i g`` if ``c_i = 1``, all ``m`` points in one message.
3. The sender derives ``k_i^0 = H(i, A, B_i, a B_i)`` and
   ``k_i^1 = H(i, A, B_i, a (B_i - A))``; the receiver ``k_i^c = H(i, A, B_i, b_i A)``.
   ``H`` is SHAKE-256; hashing the transcript ``(A, B_i)`` and the index ``i`` keeps the
   keys of different OTs independent (Hauck and Loss, "Efficient and universally
   composable protocols for oblivious transfer from the CDH assumption", 2017).
4. Random OT stops here: the keys are the outputs (one round trip; the ``B_i`` travel
   in messages of 256 so that the two parties' work overlaps when they run in separate
   processes). For chosen messages the sender also sends ``x_i^0 XOR k_i^0`` and
   ``x_i^1 XOR k_i^1``.

Security (semi-honest, two parties)
-----------------------------------
- The receiver's message ``B_i`` is a uniformly random point whatever ``c_i``, so the
  sender learns nothing about the choices (information-theoretically).
- The receiver cannot compute ``a (B_i - A)`` resp. ``a B_i`` for the other key without
  solving CDH, so the unchosen message stays hidden (random-oracle model for ``H``).
- Every point from the peer is validated (on the curve; ``B_i = A`` would make the
  sender's second key the point at infinity and is rejected): a bad peer gets a
  :class:`~ppdm.errors.ProtocolError` naming it and the step, never a crash.
- There is no collusion question: two parties.

Cost for ``m`` OTs: sender 1 + 2m group operations (``m`` scalar multiplications and
``m`` additions), receiver ``2m`` scalar multiplications (one with the fixed generator)
and up to ``m`` additions; bytes: ``33`` (``A``) + ``33 m`` (the ``B_i``) + ``2 m L``
ciphertext bytes for ``L``-byte chosen messages. Random OT: one round trip (``A``, then
the ``B_i`` in ``ceil(m / 256)`` messages); chosen-message OT adds one message (1.5 round
trips). About 6,000 OTs/s with both parties in one process on an idle core.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from typing import Any

import numpy as np
from coincurve import PublicKey

from ppdm.errors import ProtocolError
from ppdm.parties.codec import ByteStrings
from ppdm.parties.network import Network
from ppdm.protocols import ecgroup
from ppdm.protocols.ecgroup import _CONTEXT as _CTX
from ppdm.protocols.ecgroup import _ffi, _lib

__all__ = [
    "ChouOrlandiReceiver",
    "ChouOrlandiSender",
    "base_ot_receive",
    "base_ot_receive_random",
    "base_ot_send",
    "base_ot_send_random",
]

STEP_A = "ot/base/A"
STEP_B = "ot/base/B"
STEP_CIPHERTEXTS = "ot/base/ciphertexts"
#: The receiver streams its points in messages of this many, so that the sender (in
#: another process) derives keys while the receiver is still computing points.
POINTS_PER_MESSAGE = 256

_KDF_LABEL = b"ppdm/ot/chou-orlandi/v1"


def _kdf(i: int, a: bytes, b: bytes, p: bytes, length: int) -> bytes:
    return hashlib.shake_256(_KDF_LABEL + i.to_bytes(8, "big") + a + b + p).digest(length)


def _scalar_bytes(k: int) -> bytes:
    return k.to_bytes(32, "big")


def check_choices(choices: np.ndarray | list[int]) -> np.ndarray:
    """Choice bits as a 1-D uint8 array of 0/1 (``ValueError`` otherwise)."""
    c = np.asarray(choices)
    if c.ndim != 1:
        raise ValueError("choice bits must be a 1-D array")
    if c.size and not np.issubdtype(c.dtype, np.integer) and c.dtype != np.bool_:
        raise ValueError("choice bits must be integers 0/1 or booleans")
    c = c.astype(np.uint8)
    if c.size and int(c.max()) > 1:
        raise ValueError("choice bits must be 0 or 1")
    return c


class ChouOrlandiSender:
    """The sender's side of one batch, free of I/O: :attr:`first_message` (the point
    ``A``) out, the receiver's points in, the key pairs out."""

    def __init__(self) -> None:
        self._a = ecgroup.random_scalar()
        self.first_message: bytes = ecgroup.base_mult(self._a)
        # -aA, added to a B_i to get a(B_i - A).
        self._minus_aa = PublicKey(ecgroup.neg(ecgroup.mult(self.first_message, self._a)))

    def keys(
        self,
        points: object,
        *,
        count: int,
        length: int,
        peer: str,
        step: str = STEP_B,
        offset: int = 0,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Validate the receiver's ``count`` points (OTs ``offset .. offset + count - 1``
        of the batch) and derive ``(k0, k1)``, each ``(count, length)`` uint8. Raises
        :class:`ProtocolError` on a bad batch."""
        if not isinstance(points, list | tuple):
            raise ProtocolError(peer, step, f"expected a batch of points, got {type(points)}")
        if len(points) != count:
            raise ProtocolError(peer, step, f"expected {count} points, got {len(points)}")
        a_bytes = _scalar_bytes(self._a)
        derive = _sender_keys_lib if _lib is not None else _sender_keys_py
        try:
            k0, k1 = derive(points, a_bytes, self.first_message, self._minus_aa, length, offset)
        except _BadPoint as exc:
            raise ProtocolError(peer, step, f"point {exc.index} {exc.what}") from None
        shape = (count, length)
        return (
            np.frombuffer(bytes(k0), dtype=np.uint8).reshape(shape).copy(),
            np.frombuffer(bytes(k1), dtype=np.uint8).reshape(shape).copy(),
        )


class ChouOrlandiReceiver:
    """The receiver's side of one batch, free of I/O: the sender's point in,
    :meth:`points` (the ``B_i``, chunk by chunk) out, :meth:`keys` (the chosen keys) out."""

    def __init__(self, first_message: object, *, peer: str, step: str = STEP_A) -> None:
        self._big_a = ecgroup.decode_point(first_message, peer, step)
        self._a_point = PublicKey(self._big_a)
        self._b_encs: list[bytes] = []
        self._scalars: list[bytes] = []

    def points(self, choices: np.ndarray) -> ByteStrings:
        """The points ``B_i`` for the next ``len(choices)`` OTs of the batch."""
        c = check_choices(choices).tolist()
        scalars = []
        for _ in c:
            bb = _scalar_bytes(secrets.randbelow(ecgroup.ORDER - 1) + 1)
            scalars.append(bb)
        if _lib is not None:
            out = _receiver_points_lib(scalars, c, self._big_a)
        else:
            out = []
            for bb, ci in zip(scalars, c, strict=True):
                bg = PublicKey.from_secret(bb)
                big_b = PublicKey.combine_keys([bg, self._a_point]) if ci else bg
                out.append(big_b.format())
        self._scalars.extend(scalars)
        self._b_encs.extend(out)
        return ByteStrings(out)

    def keys(self, length: int) -> np.ndarray:
        """The chosen keys ``k_i^{c_i} = H(i, A, B_i, b_i A)``, ``(m, length)`` uint8."""
        if _lib is not None:
            shared = _mult_one_point(self._big_a, self._scalars)
        else:
            shared = [self._a_point.multiply(bb).format() for bb in self._scalars]
        out = b"".join(
            _kdf(i, self._big_a, b, p, length)
            for i, (b, p) in enumerate(zip(self._b_encs, shared, strict=True))
        )
        return np.frombuffer(out, dtype=np.uint8).reshape(len(self._b_encs), length).copy()


# The per-OT loops on libsecp256k1 directly (coincurve's cffi module, as
# ecgroup.mult_points): a few key buffers reused for the whole batch instead of three or
# four coincurve objects per point; the same group operations and the same bytes (the
# coincurve versions below run when that module is missing).
_PUBKEY_BYTES = _ffi.sizeof("secp256k1_pubkey") if _ffi is not None else 0  # opaque point


class _BadPoint(Exception):
    """Point ``index`` of the peer's batch is unusable (``what``: why)."""

    def __init__(self, index: int, what: str) -> None:
        super().__init__(f"point {index} {what}")
        self.index, self.what = index, what


_NOT_BYTES = f"is not a {ecgroup.POINT_BYTES}-byte string"
_NOT_ON_CURVE = "is not on secp256k1"
_EQUALS_A = "equals the sender's A"


def _serializer() -> Callable[[Any], bytes]:
    """A function encoding a library point (compressed), with its buffers made once."""
    buf = _ffi.new("unsigned char[]", ecgroup.POINT_BYTES)
    size = _ffi.new("size_t *")
    ctx, ser, flag = _CTX.ctx, _lib.secp256k1_ec_pubkey_serialize, _lib.SECP256K1_EC_COMPRESSED

    def encode(key: Any) -> bytes:
        size[0] = ecgroup.POINT_BYTES
        ser(ctx, buf, size, key, flag)
        return bytes(_ffi.buffer(buf))

    return encode


def _parsed(point: bytes) -> Any:
    key = _ffi.new("secp256k1_pubkey *")
    if not _lib.secp256k1_ec_pubkey_parse(_CTX.ctx, key, point, ecgroup.POINT_BYTES):
        raise ValueError("not a point on secp256k1")
    return key


def _sender_keys_lib(
    points: list[Any] | tuple[Any, ...],
    a_bytes: bytes,
    big_a: bytes,
    minus_aa: PublicKey,
    length: int,
    offset: int,
) -> tuple[bytearray, bytearray]:
    """``(k0, k1)`` of :meth:`ChouOrlandiSender.keys` (:class:`_BadPoint` at the first
    point that is not a 33-byte string, not on the curve, or equal to ``A``)."""
    ctx, lib = _CTX.ctx, _lib
    parse, mult, combine = (
        lib.secp256k1_ec_pubkey_parse,
        lib.secp256k1_ec_pubkey_tweak_mul,
        lib.secp256k1_ec_pubkey_combine,
    )
    encode = _serializer()
    b = _ffi.new("secp256k1_pubkey *")
    ab = _ffi.new("secp256k1_pubkey *")
    ab_minus = _ffi.new("secp256k1_pubkey *")
    minus = _parsed(minus_aa.format())  # kept alive: the array below only points to it
    pair = _ffi.new("secp256k1_pubkey *[2]", [ab, minus])
    k0, k1 = bytearray(), bytearray()
    for i, raw in enumerate(points, start=offset):
        if not isinstance(raw, bytes) or len(raw) != ecgroup.POINT_BYTES:
            raise _BadPoint(i, _NOT_BYTES)
        if not parse(ctx, b, raw, ecgroup.POINT_BYTES):
            raise _BadPoint(i, _NOT_ON_CURVE)
        b_enc = encode(b)
        _ffi.memmove(ab, b, _PUBKEY_BYTES)
        if not mult(ctx, ab, a_bytes):
            raise ValueError("the sender's scalar is out of range")  # never: 0 < a < ORDER
        if not combine(ctx, ab_minus, pair, 2):  # a B_i - a A = infinity: B_i = A
            raise _BadPoint(i, _EQUALS_A)
        k0 += _kdf(i, big_a, b_enc, encode(ab), length)
        k1 += _kdf(i, big_a, b_enc, encode(ab_minus), length)
    return k0, k1


def _sender_keys_py(
    points: list[Any] | tuple[Any, ...],
    a_bytes: bytes,
    big_a: bytes,
    minus_aa: PublicKey,
    length: int,
    offset: int,
) -> tuple[bytearray, bytearray]:
    """:func:`_sender_keys_lib` with coincurve's objects."""
    k0, k1 = bytearray(), bytearray()
    for i, raw in enumerate(points, start=offset):
        if not isinstance(raw, bytes) or len(raw) != ecgroup.POINT_BYTES:
            raise _BadPoint(i, _NOT_BYTES)
        try:
            b_point = PublicKey(raw)
        except (ValueError, TypeError):
            raise _BadPoint(i, _NOT_ON_CURVE) from None
        b_enc = b_point.format()
        ab = b_point.multiply(a_bytes)
        try:
            ab_minus = PublicKey.combine_keys([ab, minus_aa])
        except ValueError:
            raise _BadPoint(i, _EQUALS_A) from None
        k0 += _kdf(i, big_a, b_enc, ab.format(), length)
        k1 += _kdf(i, big_a, b_enc, ab_minus.format(), length)
    return k0, k1


def _receiver_points_lib(scalars: list[bytes], choices: list[int], big_a: bytes) -> list[bytes]:
    """``B_i = b_i G``, plus ``A`` where ``c_i = 1``, encoded."""
    ctx, create, combine = (
        _CTX.ctx,
        _lib.secp256k1_ec_pubkey_create,
        _lib.secp256k1_ec_pubkey_combine,
    )
    encode = _serializer()
    bg = _ffi.new("secp256k1_pubkey *")
    big_b = _ffi.new("secp256k1_pubkey *")
    a_key = _parsed(big_a)  # kept alive: the array below only points to it
    pair = _ffi.new("secp256k1_pubkey *[2]", [bg, a_key])
    out = []
    for bb, c in zip(scalars, choices, strict=True):
        if not create(ctx, bg, bb):
            raise ValueError("the receiver's scalar is out of range")  # never: 0 < b < ORDER
        if not c:
            out.append(encode(bg))
        elif combine(ctx, big_b, pair, 2):
            out.append(encode(big_b))
        else:  # b G = -A: probability 2^-256, as coincurve's combine_keys would raise
            raise ValueError("the public key could not be combined")
    return out


def _mult_one_point(point: bytes, scalars: list[bytes]) -> list[bytes]:
    """``b P`` for every scalar ``b`` (32 big-endian bytes), encoded."""
    ctx, mult = _CTX.ctx, _lib.secp256k1_ec_pubkey_tweak_mul
    encode = _serializer()
    base = _parsed(point)
    key = _ffi.new("secp256k1_pubkey *")
    out = []
    for bb in scalars:
        _ffi.memmove(key, base, _PUBKEY_BYTES)
        if not mult(ctx, key, bb):
            raise ValueError("the receiver's scalar is out of range")  # never: 0 < b < ORDER
        out.append(encode(key))
    return out


def _check_length(length: int) -> int:
    if isinstance(length, bool) or not isinstance(length, int | np.integer) or length < 1:
        raise ValueError("message length must be a positive number of bytes")
    return int(length)


def base_ot_send_random(
    net: Network, receiver: str, count: int, *, length: int = 16
) -> tuple[np.ndarray, np.ndarray]:
    """Sender of ``count`` random OTs: returns the key pairs ``(k0, k1)``.

    Each is a ``(count, length)`` uint8 array; the receiver learns ``k0[i]`` or
    ``k1[i]`` according to its ``i``-th choice bit. One round trip.

    Examples
    --------
    >>> from ppdm.parties.local import run_local
    >>> def party(net, inp):
    ...     if net.me == "alice":
    ...         return base_ot_send_random(net, "bob", 3)
    ...     return base_ot_receive_random(net, "alice", [0, 1, 1])
    >>> out = run_local(party, {"alice": None, "bob": None})
    >>> (k0, k1), kb = out["alice"], out["bob"]
    >>> bool((kb[0] == k0[0]).all() and (kb[1] == k1[1]).all() and (kb[2] == k1[2]).all())
    True
    """
    if count < 0:
        raise ValueError("count must be non-negative")
    length = _check_length(length)
    sender = ChouOrlandiSender()
    net.send(receiver, STEP_A, sender.first_message)
    k0 = np.empty((count, length), dtype=np.uint8)
    k1 = np.empty((count, length), dtype=np.uint8)
    for o in range(0, count, POINTS_PER_MESSAGE):
        n = min(POINTS_PER_MESSAGE, count - o)
        points = net.receive(receiver, STEP_B, expect=list)
        k0[o : o + n], k1[o : o + n] = sender.keys(
            points, count=n, length=length, peer=receiver, offset=o
        )
    return k0, k1


def base_ot_receive_random(
    net: Network, sender: str, choices: np.ndarray | list[int], *, length: int = 16
) -> np.ndarray:
    """Receiver of random OTs with the given choice bits: returns ``(m, length)`` keys."""
    length = _check_length(length)
    c = check_choices(np.asarray(choices))
    first = net.receive(sender, STEP_A, expect=bytes)
    role = ChouOrlandiReceiver(first, peer=sender)
    for o in range(0, len(c), POINTS_PER_MESSAGE):
        net.send(sender, STEP_B, role.points(c[o : o + POINTS_PER_MESSAGE]))
    return role.keys(length)


def base_ot_send(net: Network, receiver: str, m0: np.ndarray, m1: np.ndarray) -> None:
    """Sender of chosen-message OTs: ``m0`` and ``m1`` are ``(m, L)`` uint8 arrays; the
    receiver gets row ``i`` of ``m0`` or of ``m1`` according to its choice bit ``i``.

    Examples
    --------
    >>> from ppdm.parties.local import run_local
    >>> x0 = np.frombuffer(b"no  hi  ", dtype=np.uint8).reshape(2, 4)
    >>> x1 = np.frombuffer(b"yes bye ", dtype=np.uint8).reshape(2, 4)
    >>> def party(net, inp):
    ...     if net.me == "alice":
    ...         return base_ot_send(net, "bob", x0, x1)
    ...     return base_ot_receive(net, "alice", [1, 0], length=4).tobytes()
    >>> run_local(party, {"alice": None, "bob": None})["bob"]
    b'yes hi  '
    """
    m0 = np.asarray(m0)
    m1 = np.asarray(m1)
    if m0.dtype != np.uint8 or m0.ndim != 2 or m0.shape != m1.shape or m1.dtype != np.uint8:
        raise ValueError("m0 and m1 must be (m, L) uint8 arrays of the same shape")
    count, length = m0.shape
    k0, k1 = base_ot_send_random(net, receiver, count, length=length)
    net.send(receiver, STEP_CIPHERTEXTS, np.stack([m0 ^ k0, m1 ^ k1]))


def base_ot_receive(
    net: Network, sender: str, choices: np.ndarray | list[int], *, length: int
) -> np.ndarray:
    """Receiver of chosen-message OTs: returns the chosen ``(m, length)`` rows."""
    c = check_choices(np.asarray(choices))
    keys = base_ot_receive_random(net, sender, c, length=length)
    ct = net.receive(sender, STEP_CIPHERTEXTS, expect=np.ndarray)
    want = (2, len(c), int(length))
    if ct.dtype != np.uint8 or ct.shape != want:
        raise ProtocolError(
            sender,
            STEP_CIPHERTEXTS,
            f"expected uint8 ciphertexts of shape {want}, got {ct.dtype}{ct.shape}",
        )
    return ct[c, np.arange(len(c))] ^ keys
