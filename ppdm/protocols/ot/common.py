"""What the OT extensions share (IKNP in :mod:`.extension`, KK13 in :mod:`.kk13`): chunks of
OTs aligned to the bit transpose's 64-column blocks, the session tag of their hash tweaks
and the full step tags of a sub-protocol's errors."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager

from ppdm.errors import ProtocolError
from ppdm.protocols.ot.crhash import SESSION_BITS

__all__ = ["ALIGN", "check_chunk", "pad", "scoped_errors", "session_tag", "spans"]

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
