"""Two-party PSI by commutative encryption on secp256k1 (the EC path, ``method="ec"``).

The Diffie-Hellman PSI of Huberman, Franklin and Hogg ("Enhancing privacy and trust in
electronic communities", EC 1999) and Agrawal, Evfimievski and Srikant ("Information
sharing across private databases", SIGMOD 2003), on the commutative encryption of
:mod:`ppdm.protocols.commutative` (the primitive of the intersection-cardinality
protocol): ``R`` sends ``a H(x)`` in its own order; ``S`` returns ``b a H(x)`` in the
same order and ``b H(y)`` shuffled; ``R`` computes ``a b H(y)`` and marks its items whose
double encryption is among them.

Security (semi-honest, DDH in secp256k1, ``H`` a random oracle): ``S`` sees ``|X|``
random-looking points; ``R`` learns ``X cap Y`` and ``|Y|``. Cost: 2 messages (one round
trip), ``33 (2 |X| + |Y|)`` bytes, ``2 |X| + 2 |Y|`` scalar multiplications.
"""

from __future__ import annotations

import numpy as np

from ppdm.errors import ProtocolError
from ppdm.parties.network import Network
from ppdm.protocols.commutative import CommutativeKey, check_shape, hash_items, shuffle_rows

__all__ = ["ec_receive", "ec_send"]

STEP_MINE = "mine"
STEP_BACK = "back"
STEP_THEIRS = "theirs"


def _prefix(receiver: str, sender: str) -> str:
    return f"psi/ec/{receiver}>{sender}"


def _domain(net: Network, receiver: str, sender: str) -> bytes:
    return f"ppdm-psi|{net.job_id}|{receiver}|{sender}".encode()


def _check_count(value: np.ndarray, announced: int | None, party: str, step: str) -> None:
    if announced is not None and (value.ndim == 0 or value.shape[0] != announced):
        raise ProtocolError(party, step, "the number of items differs from the announced size")


def _row_keys(points: np.ndarray) -> set[bytes]:
    flat = np.ascontiguousarray(points).reshape(len(points), -1)
    return {r.tobytes() for r in flat}


def ec_receive(
    net: Network, sender: str, items: list[bytes], *, peer_size: int | None = None
) -> np.ndarray:
    """Receiver's side: the ``(n,)`` bool mask of the items ``sender`` holds.

    ``peer_size``: the set size ``sender`` announced before; it may send no other number
    of encrypted items."""
    prefix = _prefix(net.me, sender)
    scoped = net.scoped(prefix)
    key = CommutativeKey.generate()
    n = len(items)
    scoped.send(
        sender, STEP_MINE, key.encrypt(hash_items(items, domain=_domain(net, net.me, sender)))
    )
    back = scoped.receive(sender, STEP_BACK, expect=np.ndarray)
    # Only compared with our own encryptions below: validate shape, count and encoding.

    back = check_shape(back, sender, f"{prefix}/{STEP_BACK}", chunks=1, count=n)
    theirs = scoped.receive(sender, STEP_THEIRS, expect=np.ndarray)
    step = f"{prefix}/{STEP_THEIRS}"
    _check_count(theirs, peer_size, sender, step)
    theirs = key.encrypt_received(theirs, sender, step, chunks=1)
    common = _row_keys(theirs)
    flat = np.ascontiguousarray(back).reshape(n, -1)
    return np.fromiter((r.tobytes() in common for r in flat), dtype=bool, count=n)


def ec_send(
    net: Network, receiver: str, items: list[bytes], *, peer_size: int | None = None
) -> None:
    """Sender's side with ``receiver`` (``peer_size``: the set size it announced before;
    it may send no other number of items to be encrypted)."""
    prefix = _prefix(receiver, net.me)
    scoped = net.scoped(prefix)
    key = CommutativeKey.generate()
    got = scoped.receive(receiver, STEP_MINE, expect=np.ndarray)
    step = f"{prefix}/{STEP_MINE}"
    _check_count(got, peer_size, receiver, step)
    scoped.send(receiver, STEP_BACK, key.encrypt_received(got, receiver, step, chunks=1))
    mine = key.encrypt(hash_items(items, domain=_domain(net, receiver, net.me)))
    scoped.send(receiver, STEP_THEIRS, shuffle_rows(mine))
