"""Private set intersection and private record alignment for n >= 2 parties.

:func:`private_intersection` gives every party the intersection of all parties' id sets
in a common order (the ids' natural order); :func:`align` also returns, for each party,
the positions of those ids in its own rows, so that vertically partitioned records line
up. Ids outside the intersection never leave their owner in the clear.

Two methods:

- ``method="oprf"`` (default): the KKRT16 OPRF PSI over IKNP OT extension
  (:mod:`ppdm.protocols.psi.kkrt`; cuckoo hashing in :mod:`~ppdm.protocols.psi.cuckoo`).
- ``method="ec"``: Diffie-Hellman PSI on the commutative encryption of
  :mod:`ppdm.protocols.commutative` (:mod:`ppdm.protocols.psi.ec`), two orders of
  magnitude slower, kept as an option.

n-party alignment (the leader is the first party of ``parties``)
-----------------------------------------------------------------
The leader ``P_0`` runs the two-party PSI as receiver with each other party ``P_j`` in
turn, as sender, on its *running* intersection ``I_{j-1} = S_0 cap S_1 cap ... cap
S_{j-1}`` (``I_0 = S_0``), padded with random dummy items back to ``|S_0|`` items; then
it sends the final intersection ``I = I_{n-1}`` to every party, which checks that every id
it gets is one of its own (:class:`~ppdm.errors.ProtocolError` otherwise).

What each party learns (semi-honest, no collusion):

- every party: the intersection ``I`` of all sets (ids and size) and ``|S_0|``;
- the leader ``P_0``: also every prefix intersection ``S_0 cap ... cap S_j`` (for two
  parties that is just ``I``; for three or more it is *more* than ``I``: for example
  ``S_0 cap S_1``, whatever ``P_2`` holds) and every ``|S_j|``;
- ``P_j`` (``j >= 1``): nothing else — the leader's padding hides how many of its ids
  survived the earlier parties.

Choose as leader the party entitled to see most (or the one with the smallest set).
Cost: ``n - 1`` two-party runs, sequential, plus ``n - 1`` result messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ppdm.errors import ProtocolError
from ppdm.parties.codec import ByteStrings
from ppdm.parties.network import Network
from ppdm.protocols.psi.cuckoo import CuckooFailure, cuckoo_bins
from ppdm.protocols.psi.ec import ec_receive, ec_send
from ppdm.protocols.psi.ids import IdSet, dummy_blocks
from ppdm.protocols.psi.kkrt import MAX_ITEMS, kkrt_receive, kkrt_send

__all__ = [
    "METHODS",
    "Alignment",
    "CuckooFailure",
    "IdSet",
    "align",
    "cuckoo_bins",
    "private_intersection",
]

METHODS = ("oprf", "ec")
STEP_RESULT = "psi/result"


@dataclass(frozen=True)
class Alignment:
    """A party's view of an alignment: the common ``ids`` (in the common order) and
    ``rows``, the position of each of them in the party's own id list."""

    ids: list[Any]
    rows: np.ndarray


def _receive(net: Network, peer: str, blocks: np.ndarray, method: str) -> np.ndarray:
    if method == "oprf":
        return kkrt_receive(net, peer, blocks)
    return ec_receive(net, peer, [bytes(b[:15]) for b in blocks])


def _send(net: Network, peer: str, blocks: np.ndarray, method: str) -> None:
    if method == "oprf":
        kkrt_send(net, peer, blocks)
    else:
        ec_send(net, peer, [bytes(b[:15]) for b in blocks])


def _encode_result(ids: IdSet, values: list[Any]) -> dict[str, Any]:
    if ids.kind == "int":
        payload: Any = np.asarray(values, dtype=np.int64)
    elif ids.kind == "str":
        payload = ByteStrings(v.encode("utf-8", errors="surrogatepass") for v in values)
    else:
        payload = ByteStrings(values)
    return {"kind": ids.kind, "ids": payload}


def _decode_result(value: Any, own: IdSet, leader: str) -> list[Any]:
    step = STEP_RESULT
    if not isinstance(value, dict) or set(value) != {"kind", "ids"}:
        raise ProtocolError(leader, step, "expected the kind and the ids of the intersection")
    kind, raw = value["kind"], value["ids"]
    if kind not in ("int", "str", "bytes"):
        raise ProtocolError(leader, step, "unknown id kind")
    if kind == "int":
        if not isinstance(raw, np.ndarray) or raw.dtype != np.int64 or raw.ndim != 1:
            raise ProtocolError(leader, step, "integer ids must be a 1-D int64 array")
        got: list[Any] = raw.tolist()
    else:
        if not isinstance(raw, ByteStrings):
            raise ProtocolError(leader, step, "ids must be a batch of byte strings")
        if kind == "str":
            try:
                got = [b.decode("utf-8", errors="surrogatepass") for b in raw]
            except UnicodeDecodeError as exc:
                raise ProtocolError(leader, step, "an id is not valid UTF-8") from exc
        else:
            got = list(raw)
    if len(got) > len(own):
        raise ProtocolError(leader, step, "more ids than this party holds")
    if got and kind != own.kind:
        raise ProtocolError(leader, step, "the ids are of another kind than this party's")
    if len(set(got)) != len(got):
        raise ProtocolError(leader, step, "the intersection repeats an id")
    mine = set(own.values)
    if not all(v in mine for v in got):
        raise ProtocolError(leader, step, "the intersection holds an id this party lacks")
    return sorted(got)


def private_intersection(
    net: Network,
    ids: Sequence[Any] | np.ndarray,
    *,
    method: str = "oprf",
    parties: Sequence[str] | None = None,
) -> list[Any]:
    """The intersection of all parties' ids, sorted (the common order).

    ``ids``: this party's distinct ints, strings or byte strings. ``parties`` restricts
    the protocol to some parties (default: all; the first is the leader); only they call
    it. See the module docstring for what each party learns.

    Examples
    --------
    >>> from ppdm.parties.local import run_local
    >>> run_local(private_intersection, {"a": [5, 1, 3, 9], "b": [3, 4, 5], "c": [5, 3, 7]})
    {'a': [3, 5], 'b': [3, 5], 'c': [3, 5]}
    """
    return align(net, ids, method=method, parties=parties).ids


def align(
    net: Network,
    ids: Sequence[Any] | np.ndarray,
    *,
    method: str = "oprf",
    parties: Sequence[str] | None = None,
) -> Alignment:
    """Private record alignment: the common ids (sorted) and this party's row of each.

    Examples
    --------
    >>> from ppdm.parties.local import run_local
    >>> out = run_local(align, {"a": ["p7", "p2", "p5"], "b": ["p5", "p9", "p7"]})
    >>> out["a"].ids, out["a"].rows.tolist(), out["b"].rows.tolist()
    (['p5', 'p7'], [2, 0], [0, 2])
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}")
    group = tuple(parties) if parties is not None else net.parties
    if net.me not in group or len(set(group)) != len(group):
        raise ValueError(f"party {net.me!r} must be one of distinct parties {list(group)}")
    own = IdSet.of(ids)
    if len(own) > MAX_ITEMS:
        raise ValueError(f"at most {MAX_ITEMS} ids per party")
    leader = group[0]
    if len(group) == 1:
        common = sorted(own.values)
    elif net.me == leader:
        blocks = own.blocks()
        current = np.arange(len(own), dtype=np.int64)
        for peer in group[1:]:
            padded = np.concatenate([blocks[current], dummy_blocks(len(own) - len(current))])
            found = _receive(net, peer, padded, method)
            current = current[found[: len(current)]]
        common = sorted(own.values[i] for i in current.tolist())
        net.broadcast(STEP_RESULT, _encode_result(own, common), to=group[1:])
    else:
        _send(net, leader, own.blocks(), method)
        common = _decode_result(net.receive(leader, STEP_RESULT, expect=dict), own, leader)
    position = {v: i for i, v in enumerate(own.values)}
    rows = np.fromiter((position[v] for v in common), dtype=np.int64, count=len(common))
    return Alignment(ids=common, rows=rows)
