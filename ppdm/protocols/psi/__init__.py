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

n-party alignment
-----------------
1. *Opening* (:mod:`ppdm.protocols.psi.opening`), before any PSI message: every party
   announces its set size to the others and commits to a random coin; each party refuses
   to go on if any set is below ``min_set_size`` (default 10, the policy's minimum
   aggregation; :class:`~ppdm.errors.AggregationTooSmall`) or if another party's set is
   more than ``max_set_ratio`` (default 2) times its own (:class:`~ppdm.errors.ProtocolError`
   naming that party); then the coins are revealed and checked against the commitments,
   and their hash chooses the leader ``L``, uniformly if any one party is honest. No
   roster order, initiator or single party decides who leads.
2. *PSI.* ``L`` runs the two-party PSI as receiver with each other party ``P_j`` in turn
   (group order), as sender, on its *running* intersection ``I_{j-1} = S_L cap ... ``
   (``I_0 = S_L``), padded with random dummy items back to ``|S_L|`` items. The two-party
   runs check that each side's hello announces the size it announced in the opening, and
   the receiver accepts exactly that many tags (or encrypted items) from the sender.
3. *Result.* If the final intersection ``I`` holds fewer than ``min_set_size`` ids, ``L``
   sends only "below the minimum" and every party raises
   :class:`~ppdm.errors.AggregationTooSmall` (no party outputs any id); otherwise ``L``
   sends ``I`` to every party, which checks that it holds at least ``min_set_size`` ids,
   all of them its own (:class:`~ppdm.errors.ProtocolError` otherwise).

What each party learns (semi-honest, no collusion):

- every party: every party's set size (announced in the opening), who leads, and the
  intersection ``I`` of all sets (ids and size) if it has at least ``min_set_size`` ids,
  else only that it is below the minimum;
- the leader ``L``: also every prefix intersection ``S_L cap S_1 cap ... cap S_j`` (for
  two parties that is just ``I``; for three or more it is *more* than ``I``), and ``I``
  itself even when it is below the minimum (it computes it);
- the other parties: nothing else — the leader's padding hides how many of its ids
  survived the earlier parties.

What a party that chooses its own ids can learn about another's: at most whether each of
its own ids is in the other's set, so the ratio bound caps the candidates it can test
against a party ``P`` at ``max_set_ratio |S_P|`` (and the minimum output at 0 unless the
common ids reach ``min_set_size``). A leader that lies about its set in the KKRT path can
fill the empty bins of its cuckoo table with codewords of further ids (the sender cannot
tell: ``u`` is pseudorandom): up to ``cuckoo_bins(|S_L|)`` candidates, about ``1.5
|S_L|`` (more for small sets), so ``1.5 max_set_ratio |S_P|`` at most. A sender cannot
send more tags than it announced.

Cost: the opening (two rounds, ``2 n (n - 1)`` short messages), ``n - 1`` two-party runs,
sequential, plus ``n - 1`` result messages.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ppdm.errors import AggregationTooSmall, ProtocolError
from ppdm.parties.network import Network
from ppdm.protocols.psi.cuckoo import CuckooFailure, cuckoo_bins
from ppdm.protocols.psi.ec import ec_receive, ec_send
from ppdm.protocols.psi.ids import IdSet, dummy_blocks, joined_bytes
from ppdm.protocols.psi.kkrt import MAX_ITEMS, kkrt_receive, kkrt_send
from ppdm.protocols.psi.opening import (
    DEFAULT_MAX_SET_RATIO,
    DEFAULT_MIN_SET_SIZE,
    check_options,
    negotiate,
)

__all__ = [
    "DEFAULT_MAX_SET_RATIO",
    "DEFAULT_MIN_SET_SIZE",
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
REASON_BELOW = "the intersection is below the minimum set size"
#: The leader's whole message when the intersection is below the minimum.
BELOW_MINIMUM = {"below_minimum": True}


@dataclass(frozen=True)
class Alignment:
    """A party's view of an alignment: the common ``ids`` (in the common order),
    ``rows``, the position of each of them in the party's own id list, and the
    ``leader`` the coin toss chose."""

    ids: list[Any]
    rows: np.ndarray
    leader: str


def _receive(
    net: Network, peer: str, blocks: np.ndarray, method: str, peer_size: int
) -> np.ndarray:
    if method == "oprf":
        return kkrt_receive(net, peer, blocks, peer_size=peer_size)
    return ec_receive(net, peer, [bytes(b[:15]) for b in blocks], peer_size=peer_size)


def _send(net: Network, peer: str, blocks: np.ndarray, method: str, peer_size: int) -> None:
    if method == "oprf":
        kkrt_send(net, peer, blocks, peer_size=peer_size)
    else:
        ec_send(net, peer, [bytes(b[:15]) for b in blocks], peer_size=peer_size)


def _encode_result(ids: IdSet, values: list[Any]) -> dict[str, Any]:
    """The intersection as the leader sends it: int64 values, or the strings' UTF-8
    (byte strings' raw) bytes back to back with their lengths."""
    if ids.kind == "int":
        return {"kind": "int", "ids": np.asarray(values, dtype=np.int64)}
    blob, lengths = joined_bytes(ids.kind, values)
    return {"kind": ids.kind, "ids": {"lengths": lengths, "data": blob}}


def _split_ids(leader: str, kind: str, raw: Any) -> list[Any]:
    """The strings / byte strings of a result (its ``lengths`` and ``data``)."""
    step = STEP_RESULT
    if not isinstance(raw, dict) or set(raw) != {"lengths", "data"}:
        raise ProtocolError(leader, step, "expected the lengths and the bytes of the ids")
    lengths, data = raw["lengths"], raw["data"]
    if not isinstance(data, bytes) or not isinstance(lengths, np.ndarray):
        raise ProtocolError(leader, step, "expected the lengths and the bytes of the ids")
    if lengths.dtype != np.int64 or lengths.ndim != 1 or (lengths < 0).any():
        raise ProtocolError(leader, step, "id lengths must be a 1-D array of int64 >= 0")
    if int(lengths.sum()) != len(data):
        raise ProtocolError(leader, step, "the id lengths do not add up to the bytes sent")
    ends = np.cumsum(lengths).tolist()
    starts = [0, *ends][: len(ends)]
    if kind == "str" and data.isascii():
        text = data.decode("ascii")  # one byte a character: the same offsets
        return [text[a:b] for a, b in zip(starts, ends, strict=True)]
    pieces = [data[a:b] for a, b in zip(starts, ends, strict=True)]
    if kind == "bytes":
        return pieces
    try:
        return [b.decode("utf-8", errors="surrogatepass") for b in pieces]
    except UnicodeDecodeError as exc:
        raise ProtocolError(leader, step, "an id is not valid UTF-8") from exc


def _decode_result(
    value: Any, own: IdSet, leader: str, min_set_size: int
) -> tuple[list[Any], np.ndarray]:
    """The leader's result checked against this party's ids: the common ids in the
    common order (strictly increasing, which also rules out a repeated id) and their
    rows here."""
    step = STEP_RESULT
    if isinstance(value, dict) and set(value) == set(BELOW_MINIMUM):
        if value["below_minimum"] is not True:
            raise ProtocolError(leader, step, "expected the ids or below the minimum")
        raise AggregationTooSmall(REASON_BELOW)
    if not isinstance(value, dict) or set(value) != {"kind", "ids"}:
        raise ProtocolError(leader, step, "expected the kind and the ids of the intersection")
    kind, raw = value["kind"], value["ids"]
    if kind not in ("int", "str", "bytes"):
        raise ProtocolError(leader, step, "unknown id kind")
    if kind == "int":
        if not isinstance(raw, np.ndarray) or raw.dtype != np.int64 or raw.ndim != 1:
            raise ProtocolError(leader, step, "integer ids must be a 1-D int64 array")
        got: Any = raw
        ordered = bool((got[1:] > got[:-1]).all())
    else:
        got = _split_ids(leader, kind, raw)
        ordered = all(map(operator.lt, got, got[1:]))
    if len(got) > len(own):
        raise ProtocolError(leader, step, "more ids than this party holds")
    if len(got) and kind != own.kind:
        raise ProtocolError(leader, step, "the ids are of another kind than this party's")
    if not ordered:
        raise ProtocolError(leader, step, "the intersection is not in the common order")
    rows = own.locate(got)
    if rows is None:
        raise ProtocolError(leader, step, "the intersection holds an id this party lacks")
    if len(got) < min_set_size:
        raise ProtocolError(leader, step, "the intersection is below the minimum but was sent")
    return (got.tolist() if kind == "int" else got), np.asarray(rows, dtype=np.int64)


def private_intersection(
    net: Network,
    ids: Sequence[Any] | np.ndarray,
    *,
    method: str = "oprf",
    parties: Sequence[str] | None = None,
    max_set_ratio: float = DEFAULT_MAX_SET_RATIO,
    min_set_size: int = DEFAULT_MIN_SET_SIZE,
) -> list[Any]:
    """The intersection of all parties' ids, sorted (the common order).

    ``ids``: this party's distinct ints, strings or byte strings. ``parties`` restricts
    the protocol to some parties (default: all); only they call it. See :func:`align`
    for the bounds and the module docstring for what each party learns.

    Examples
    --------
    >>> from functools import partial
    >>> from ppdm.parties.local import run_local
    >>> sets = {"a": range(0, 30), "b": range(10, 40), "c": range(5, 35)}
    >>> run_local(partial(private_intersection, min_set_size=5), sets)["b"]
    [10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29]
    """
    return align(
        net,
        ids,
        method=method,
        parties=parties,
        max_set_ratio=max_set_ratio,
        min_set_size=min_set_size,
    ).ids


def align(
    net: Network,
    ids: Sequence[Any] | np.ndarray,
    *,
    method: str = "oprf",
    parties: Sequence[str] | None = None,
    max_set_ratio: float = DEFAULT_MAX_SET_RATIO,
    min_set_size: int = DEFAULT_MIN_SET_SIZE,
) -> Alignment:
    """Private record alignment: the common ids (sorted) and this party's row of each.

    Before any PSI message, every party refuses sets below ``min_set_size`` ids and any
    other party's set larger than ``max_set_ratio`` times its own (``math.inf``
    disables the ratio check, ``0`` the minimum); the leader is chosen by a coin toss
    among all parties. An intersection below ``min_set_size`` ids is output by no party:
    :class:`~ppdm.errors.AggregationTooSmall` everywhere. See the module docstring.

    Examples
    --------
    >>> from functools import partial
    >>> from ppdm.parties.local import run_local
    >>> a = [f"p{i}" for i in range(12)]
    >>> b = [f"p{i}" for i in range(20, 1, -1)]
    >>> out = run_local(partial(align, min_set_size=5), {"a": a, "b": b})
    >>> out["a"].ids[:3], out["a"].rows[:3].tolist(), out["b"].rows[:3].tolist()
    (['p10', 'p11', 'p2'], [10, 11, 2], [10, 9, 18])
    >>> out["a"].leader == out["b"].leader in ("a", "b")
    True
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}")
    check_options(max_set_ratio, min_set_size)
    group = tuple(parties) if parties is not None else net.parties
    if net.me not in group or len(set(group)) != len(group):
        raise ValueError(f"party {net.me!r} must be one of distinct parties {list(group)}")
    # Ids a compute engine encoded where the data live (ppdm.compute) are used as given.
    encoded = hasattr(ids, "blocks") and hasattr(ids, "locate")
    own: IdSet = ids if encoded else IdSet.of(ids)  # type: ignore[assignment]
    if len(own) > MAX_ITEMS:
        raise ValueError(f"at most {MAX_ITEMS} ids per party")
    if len(group) == 1:
        if len(own) < min_set_size:
            raise AggregationTooSmall(REASON_BELOW)
        common, rows = own.common(np.arange(len(own), dtype=np.int64))
        leader = net.me
    else:
        opened = negotiate(
            net, group, len(own), max_set_ratio=max_set_ratio, min_set_size=min_set_size
        )
        leader = opened.leader
        if net.me == leader:
            common, rows = _lead(net, own, group, opened.sizes, method, min_set_size)
        else:
            _send(net, leader, own.blocks(), method, opened.sizes[leader])
            value = net.receive(leader, STEP_RESULT, expect=dict)
            common, rows = _decode_result(value, own, leader, min_set_size)
    return Alignment(ids=common, rows=rows, leader=leader)


def _lead(
    net: Network,
    own: IdSet,
    group: Sequence[str],
    sizes: Mapping[str, int],
    method: str,
    min_set_size: int,
) -> tuple[list[Any], np.ndarray]:
    """The leader's part: PSI with every other party on the running intersection; the
    common ids in the common order and their rows here."""
    others = [p for p in group if p != net.me]
    blocks = own.blocks()
    current = np.arange(len(own), dtype=np.int64)
    for peer in others:
        padded = np.concatenate([blocks[current], dummy_blocks(len(own) - len(current))])
        found = _receive(net, peer, padded, method, sizes[peer])
        current = current[found[: len(current)]]
    if len(current) < min_set_size:
        net.broadcast(STEP_RESULT, BELOW_MINIMUM, to=others)
        raise AggregationTooSmall(REASON_BELOW)
    common, rows = own.common(current)
    net.broadcast(STEP_RESULT, _encode_result(own, common), to=others)
    return common, rows
