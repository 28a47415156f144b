"""What the OT extensions share (IKNP in :mod:`.extension`, KK13 in :mod:`.kk13`): chunks of
OTs aligned to the bit transpose's 64-column blocks, the session tag of their hash tweaks
and the full step tags of a sub-protocol's errors; and the carry-less arithmetic of IKNP's
KOS15 check."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from ppdm.errors import ProtocolError
from ppdm.protocols.ot.crhash import SESSION_BITS

__all__ = [
    "ALIGN",
    "check_chunk",
    "clmul",
    "gf2_weighted_sum",
    "pad",
    "scoped_errors",
    "session_tag",
    "spans",
]

#: OTs come in multiples of this: the transpose works on 64-column blocks.
ALIGN = 64


def pad(n: int) -> int:
    """``n`` rounded up to a multiple of :data:`ALIGN`."""
    return -(-n // ALIGN) * ALIGN


def check_chunk(chunk: int) -> int:
    """A chunk size (OTs) rounded down to a multiple of :data:`ALIGN`; too small is refused."""
    if chunk < ALIGN:
        raise ValueError(f"chunk must be at least {ALIGN} OTs")
    return chunk - chunk % ALIGN


def spans(m: int, chunk: int) -> list[tuple[int, int]]:
    """``(offset, count)`` of every chunk of ``m`` OTs."""
    return [(o, min(chunk, m - o)) for o in range(0, m, chunk)]


@contextmanager
def scoped_errors(prefix: str) -> Iterator[None]:
    """Give errors of a sub-protocol run on a scoped view the full step tag."""
    try:
        yield
    except ProtocolError as exc:
        if exc.step.startswith(prefix + "/"):
            raise
        raise ProtocolError(exc.party, f"{prefix}/{exc.step}", exc.reason) from exc


def session_tag(label: bytes, receiver_nonce: bytes, sender_nonce: bytes) -> int:
    """The session tag of an extension's hash tweaks, from both parties' random nonces
    (neither chooses it alone) under the extension's own ``label``: the first
    :data:`~ppdm.protocols.ot.crhash.SESSION_BITS` bits of SHA-256 over all three."""
    digest = hashlib.sha256(label + receiver_nonce + sender_nonce).digest()
    return int.from_bytes(digest[:8], "big") >> (64 - SESSION_BITS)


_BIT_SELECT = [((np.arange(256) >> j) & 1).astype(bool) for j in range(8)]


def gf2_weighted_sum(chi: np.ndarray, rows: np.ndarray) -> int:
    """``sum_i chi_i * rows_i`` in GF(2)[X] (carry-less products, unreduced, at most 255
    bits), rows read as little-endian 128-bit polynomials (IKNP's KOS15 check).

    Four Russians over the bytes of ``chi``: for byte position ``b``, XOR the rows into
    256 buckets by ``chi_i``'s byte value (one ``xor.at`` pass), then each bit ``j`` of
    the byte contributes the XOR of the buckets whose value has bit ``j`` set, shifted by
    ``8 b + j``. Sixteen passes over the rows instead of 128."""
    r64 = np.ascontiguousarray(rows).view(np.uint64).reshape(len(rows), 2)
    total = 0
    for b in range(16):
        buckets = np.zeros((256, 2), dtype=np.uint64)
        np.bitwise_xor.at(buckets, chi[:, b], r64)
        for j, select in enumerate(_BIT_SELECT):
            acc = np.bitwise_xor.reduce(buckets[select], axis=0)
            total ^= int.from_bytes(acc.astype("<u8").tobytes(), "little") << (8 * b + j)
    return total


def clmul(a: int, b: int) -> int:
    """Carry-less product of two polynomials over GF(2) given as ints."""
    out = 0
    while a:
        if a & 1:
            out ^= b
        a >>= 1
        b <<= 1
    return out
