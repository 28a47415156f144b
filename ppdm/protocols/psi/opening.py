"""The opening of an n-party alignment: size bounds and the choice of the leader.

Before any PSI message, every party of the group, in two rounds:

1. *Announce.* Sends every other party its set size ``|S_i|`` and a commitment
   ``c_i = SHA-256(r_i || name_i)`` to a fresh 32-byte coin ``r_i`` from :mod:`secrets`.
2. *Check.* Refuses to go on if any announced size (its own included) is below
   ``min_set_size`` (:class:`~ppdm.errors.AggregationTooSmall`) or if another party's set
   is more than ``max_set_ratio`` times its own (:class:`~ppdm.errors.ProtocolError`
   naming that party). Fixed reasons: the sizes stay out of the error texts.
3. *Reveal.* Sends its coin ``r_i``; checks every revealed coin against its commitment
   (:class:`~ppdm.errors.ProtocolError` naming the party on a mismatch). The leader is
   ``group[SHA-256("ppdm/psi/leader" || r_0 || ... || r_{n-1}) mod n]`` (coins in group
   order).

Why: the leader of :func:`ppdm.protocols.psi.align` learns its own set's intersection
with each other party's set. Without a bound, a party holding every possible id would
turn that into a membership oracle for the others' whole id lists; with the ratio bound
each other party caps how many candidates the leader (or any party) can test against it
at ``max_set_ratio`` times its own size (times the cuckoo expansion of the KKRT
receiver, see :mod:`ppdm.protocols.psi`). The coin toss takes the choice of the leader
away from the roster order, the initiator and every single party.

Security (semi-honest; commit-then-reveal in the random-oracle model): a commitment
hides its 256-bit coin and binds its party (the name is hashed in, so a party cannot
replay another's commitment); as long as one party's coin is uniform and drawn before it
sees the others' coins, the leader is uniform among the ``n`` parties (the modulo bias
is below ``n 2^-256``). A party can still abort after seeing the others' reveals (and so
veto one outcome at the price of ending the job): nothing here stops a rerun.

What every party learns here: every party's set size (the leader learned them anyway
through the two-party PSI; now all parties do) and who leads. Cost: two rounds, ``2 n
(n - 1)`` messages of at most 50 bytes.
"""

from __future__ import annotations

import hashlib
import math
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ppdm.errors import AggregationTooSmall, ProtocolError
from ppdm.parties.network import Network
from ppdm.protocols.psi.kkrt import MAX_ITEMS

__all__ = [
    "COIN_BYTES",
    "DEFAULT_MAX_SET_RATIO",
    "DEFAULT_MIN_SET_SIZE",
    "STEP_ANNOUNCE",
    "STEP_REVEAL",
    "Setup",
    "check_bounds",
    "commitment",
    "leader_index",
    "negotiate",
]

#: A party may hold at most this many times the ids of any other party.
DEFAULT_MAX_SET_RATIO = 2.0
#: No set, and no intersection that is output, may hold fewer ids (the policy's minimum
#: aggregation).
DEFAULT_MIN_SET_SIZE = 10
COIN_BYTES = 32
STEP_ANNOUNCE = "psi/announce"
STEP_REVEAL = "psi/reveal"

#: The fixed public reasons of a refusal (no size in them).
REASON_TOO_SMALL = "a party's id set is below the minimum set size"
REASON_RATIO = "the party's id set is larger than the allowed ratio to this party's"
REASON_COMMITMENT = "the revealed coin does not match the party's commitment"


@dataclass(frozen=True)
class Setup:
    """What the opening settled: the ``leader`` and every party's announced size."""

    leader: str
    sizes: Mapping[str, int]


def commitment(coin: bytes, party: str) -> bytes:
    """``SHA-256(coin || party)``: the commitment of ``party`` to its coin."""
    return hashlib.sha256(coin + party.encode("utf-8")).digest()


def leader_index(coins: Sequence[bytes], n: int) -> int:
    """The leader's position from every party's coin, in group order."""
    h = hashlib.sha256(b"ppdm/psi/leader" + b"".join(coins)).digest()
    return int.from_bytes(h, "big") % n


def check_bounds(
    sizes: Mapping[str, int],
    me: str,
    *,
    max_set_ratio: float,
    min_set_size: int,
) -> None:
    """Refuse, as party ``me``, sizes outside the bounds (see the module docstring)."""
    own = sizes[me]
    for party, size in sizes.items():
        if size < min_set_size:
            raise AggregationTooSmall(REASON_TOO_SMALL)
        if party != me and math.isfinite(max_set_ratio) and size > max_set_ratio * own:
            raise ProtocolError(party, STEP_ANNOUNCE, REASON_RATIO)


def check_options(max_set_ratio: float, min_set_size: int) -> None:
    """A :class:`ValueError` for bounds out of range (``max_set_ratio >= 1``, may be
    ``inf`` to disable; ``min_set_size`` an int ``>= 0``)."""
    if (
        isinstance(max_set_ratio, bool)
        or not isinstance(max_set_ratio, int | float)
        or math.isnan(max_set_ratio)
        or max_set_ratio < 1
    ):
        raise ValueError("max_set_ratio must be a number >= 1")
    if isinstance(min_set_size, bool) or not isinstance(min_set_size, int) or min_set_size < 0:
        raise ValueError("min_set_size must be an int >= 0")


def _announcement(value: Any, party: str) -> tuple[int, bytes]:
    if not isinstance(value, dict) or set(value) != {"size", "commit"}:
        raise ProtocolError(party, STEP_ANNOUNCE, "expected a set size and a commitment")
    size, commit = value["size"], value["commit"]
    if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size <= MAX_ITEMS:
        raise ProtocolError(party, STEP_ANNOUNCE, "the set size is not an int in range")
    if not isinstance(commit, bytes) or len(commit) != hashlib.sha256().digest_size:
        raise ProtocolError(party, STEP_ANNOUNCE, "the commitment must be 32 bytes")
    return size, commit


def negotiate(
    net: Network,
    group: Sequence[str],
    size: int,
    *,
    max_set_ratio: float = DEFAULT_MAX_SET_RATIO,
    min_set_size: int = DEFAULT_MIN_SET_SIZE,
) -> Setup:
    """Run the opening with the parties of ``group`` (this party's set has ``size``
    ids): announce and check sizes, toss the coin for the leader."""
    return _negotiate(
        net,
        group,
        size,
        secrets.token_bytes(COIN_BYTES),
        max_set_ratio=max_set_ratio,
        min_set_size=min_set_size,
    )


def _negotiate(
    net: Network,
    group: Sequence[str],
    size: int,
    coin: bytes,
    *,
    max_set_ratio: float,
    min_set_size: int,
) -> Setup:
    """:func:`negotiate` with a given coin (tests fix one party's coin)."""
    check_options(max_set_ratio, min_set_size)
    if size < min_set_size:
        # Refuse before announcing anything: the peers learn only that this party quit.
        raise AggregationTooSmall(REASON_TOO_SMALL)
    others = [p for p in group if p != net.me]
    net.broadcast(STEP_ANNOUNCE, {"size": size, "commit": commitment(coin, net.me)}, to=others)
    sizes = {net.me: size}
    commits = {}
    for party, value in net.gather(STEP_ANNOUNCE, frm=others, expect=dict).items():
        sizes[party], commits[party] = _announcement(value, party)
    check_bounds(sizes, net.me, max_set_ratio=max_set_ratio, min_set_size=min_set_size)
    net.broadcast(STEP_REVEAL, coin, to=others)
    coins = {net.me: coin}
    for party, value in net.gather(STEP_REVEAL, frm=others, expect=bytes).items():
        if len(value) != COIN_BYTES or commitment(value, party) != commits[party]:
            raise ProtocolError(party, STEP_REVEAL, REASON_COMMITMENT)
        coins[party] = value
    leader = group[leader_index([coins[p] for p in group], len(group))]
    return Setup(leader=leader, sizes={p: sizes[p] for p in group})
