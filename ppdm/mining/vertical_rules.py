"""Association rules over vertically partitioned data (Vaidya & Clifton 2002, 2005).

Vaidya and Clifton, "Privacy preserving association rule mining in vertically
partitioned data", KDD 2002 (two parties, secure scalar product), and "Secure set
intersection cardinality with application to association rule mining", J. Computer
Security 13(4), 2005 (more parties); seed 000 section 20.5. The parties hold different
items (columns) of the same transactions (rows, aligned on a common transaction id),
e.g. stores selling complementary products to the same customers. The item schema — who
holds which items — is public.

Apriori runs on the public candidate lattice; the support of a candidate ``Z`` is counted
according to who owns its items:

- all items at one party: that party counts it locally and shares the count;
- items at two parties ``a`` and ``b``: the dot product of ``a``'s and ``b``'s
  transaction covers (the AND of their own columns), by default with the OT-based binary
  dot product (:func:`ppdm.protocols.dot_product_ot.binary_dot_product`, one correlated
  OT per transaction; all candidates of a level in one batch), or with Paillier
  (:func:`ppdm.protocols.dot_product_paillier.dot_product_paillier`, ``method="paillier"``:
  one encryption per transaction and distinct ``a``-part; slow, for comparison);
- items at three or more parties: the secure intersection cardinality of the owners' sets
  of covering transaction ids (:mod:`ppdm.protocols.intersection`), among the owners only.

Leakage (semi-honest): the support count of every candidate itemset is revealed to all
parties (as in Vaidya & Clifton 2002, whose parties compare the scalar product with the
threshold in the clear), from which the frequent itemsets and rules follow; plus, for
candidates over three or more parties, the leakage of the intersection protocol to its
evaluator (subset intersection sizes). No party sees another party's columns.

Cost per level: one batched OT dot product per pair of parties that shares candidates
(``N`` OTs per candidate, ~``(16 + 8) N`` bytes), one batched intersection per owner set of
three or more parties, and broadcasts of the counts.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np

from ppdm.errors import ProtocolError
from ppdm.mining.assoc_common import AssocResult, native_label
from ppdm.mining.itemsets import TransactionDB, apriori_gen, min_count, support_counts
from ppdm.parties.codec import ByteStrings
from ppdm.parties.network import Network
from ppdm.progress import Progress, progress_or_null

log = logging.getLogger(__name__)

__all__ = ["vertical_association_rules"]

# Cells of the candidate x transaction bit matrix sent to one dot-product call.
_BATCH_CELLS = 1 << 25


def _exchange_schema(net: Network, own: list) -> dict[str, list]:
    """Every party's item labels (the public schema)."""
    payload = [str(x) for x in own] if own and isinstance(own[0], str) else [int(x) for x in own]
    net.broadcast("vassoc/schema", payload)
    schema = {net.me: list(own)}
    for p, items in net.gather("vassoc/schema", expect=list).items():
        if not all(isinstance(x, int | str) and not isinstance(x, bool) for x in items):
            raise ProtocolError(p, "vassoc/schema", "item labels must be ints or strings")
        schema[p] = items
    owner: dict[Any, str] = {}
    for p in net.parties:
        for item in schema[p]:
            if item in owner:
                raise ProtocolError(p, "vassoc/schema", f"item {item!r} also held by {owner[item]}")
            owner[item] = p
    return schema


def vertical_association_rules(
    net: Network,
    db: TransactionDB,
    *,
    min_support: float,
    min_confidence: float,
    method: Literal["ot", "paillier"] = "ot",
    max_len: int | None = None,
    paillier_key_bits: int = 2048,
    progress: Progress | None = None,
) -> AssocResult:
    """Frequent itemsets (with support counts) and rules of the vertically partitioned
    transactions (module docstring). ``db`` holds this party's own item columns for all
    transactions, in the common transaction order."""
    from ppdm.protocols.dot_product_ot import binary_dot_product
    from ppdm.protocols.intersection import secure_intersection_cardinalities
    from ppdm.protocols.ot.extension import OTSession

    min_count(min_support, 1)
    n = db.n_transactions
    net.broadcast("vassoc/rows", n)
    for p, v in net.gather("vassoc/rows").items():
        if isinstance(v, bool) or not isinstance(v, int) or v != n:
            raise ProtocolError(p, "vassoc/rows", f"has {v} transactions, this party has {n}")
    own_items = [native_label(x) for x in db.items]
    schema = _exchange_schema(net, own_items)
    owner = {item: p for p in net.parties for item in schema[p]}
    threshold = min_count(min_support, n)
    prog = progress_or_null(progress)
    sessions: dict[tuple[str, str], OTSession] = {}
    counts: dict[frozenset, int] = {}
    levels: list[dict[str, Any]] = []
    prev: list[tuple] = []
    k = 1
    prog.start("association levels", max_len)
    while max_len is None or k <= max_len:
        sub = net.scoped(f"vassoc/level{k}")
        if k == 1:
            candidates = sorted((x,) for p in net.parties for x in schema[p])
        else:
            candidates = apriori_gen(prev)
        groups: dict[tuple[str, ...], list[tuple]] = {}
        for c in candidates:
            owners = tuple(p for p in net.parties if any(owner[x] == p for x in c))
            groups.setdefault(owners, []).append(c)
        level_counts: dict[tuple, int] = {}
        for gi, (owners, cands) in enumerate(sorted(groups.items())):
            gsub = sub.scoped(f"group{gi}")
            got = _count_group(
                gsub,
                net,
                db,
                owners,
                cands,
                owner,
                method,
                sessions,
                paillier_key_bits,
                binary_dot_product,
                secure_intersection_cardinalities,
                OTSession,
            )
            level_counts.update(zip(cands, got, strict=True))
        large = sorted(c for c in candidates if level_counts[c] >= threshold)
        for c in large:
            counts[frozenset(c)] = level_counts[c]
        levels.append(
            {
                "k": k,
                "candidates": len(candidates),
                "frequent": len(large),
                "groups": {"+".join(o): len(c) for o, c in sorted(groups.items())},
            }
        )
        prog.advance()
        if not large:
            break
        prev = large
        k += 1
    prog.finish()
    return AssocResult.with_counts(n, min_support, min_confidence, counts, levels)


def _count_group(
    net: Network,
    root: Network,
    db: TransactionDB,
    owners: tuple[str, ...],
    cands: Sequence[tuple],
    owner: Mapping[Any, str],
    method: str,
    sessions: dict[tuple[str, str], Any],
    key_bits: int,
    binary_dot_product: Any,
    intersections: Any,
    ot_session: Any,
) -> list[int]:
    """Support counts of candidates whose items belong to exactly ``owners``; every party
    calls this for every group in the same order and gets the counts."""
    me = net.me
    m = len(cands)
    announcer = owners[0]
    if me in owners:
        own_parts = [tuple(x for x in c if owner[x] == me) for c in cands]
        if len(owners) == 1:
            result = support_counts(db, own_parts).astype(np.int64)
        elif len(owners) == 2:
            a, b = owners
            peer = b if me == a else a
            if method == "paillier":
                result = _pair_paillier(net, db, own_parts, a, b, key_bits)
            else:
                key = (a, b)
                if key not in sessions:
                    sessions[key] = ot_session(root.scoped(f"vassoc/ot-{a}-{b}"), peer)
                result = _pair_ot(net, db, own_parts, a, b, sessions[key], binary_dot_product)
        else:
            covers = [np.flatnonzero(db.cover(part)) for part in own_parts]
            result = np.asarray(
                intersections(net.scoped("intersection"), covers, ring=owners), dtype=np.int64
            )
        others = [p for p in net.parties if p not in owners]
        if me == announcer and others:
            net.broadcast("counts", result, to=others)
        return [int(v) for v in result]
    got = net.receive(announcer, "counts", expect=np.ndarray)
    if (
        got.dtype != np.int64
        or got.shape != (m,)
        or (m and (got.min() < 0 or got.max() > db.n_transactions))
    ):
        raise ProtocolError(announcer, "counts", f"expected {m} valid counts")
    return [int(v) for v in got]


def _pair_ot(
    net: Network,
    db: TransactionDB,
    parts: list[tuple],
    a: str,
    b: str,
    session: Any,
    dot: Any,
) -> np.ndarray:
    n = db.n_transactions
    per_batch = max(1, _BATCH_CELLS // max(n, 1))
    out = []
    for start in range(0, len(parts), per_batch):
        chunk = parts[start : start + per_batch]
        bits = (
            np.stack([db.cover(p) for p in chunk]).astype(np.uint8)
            if chunk
            else np.zeros((0, n), np.uint8)
        )
        got = dot(net.scoped(f"dot{start}"), bits, x_party=a, y_party=b, session=session)
        out.append(np.asarray(got, dtype=np.int64).reshape(-1))
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def _pair_paillier(
    net: Network, db: TransactionDB, parts: list[tuple], a: str, b: str, key_bits: int
) -> np.ndarray:
    """Paillier path: one encrypted cover per distinct ``a``-part, dot products with all
    of ``b``'s covers that go with it (Vaidya & Clifton 2002 with Goethals et al.'s
    scalar product)."""
    from ppdm.protocols.dot_product_paillier import dot_product_paillier

    me = net.me
    # a announces the grouping by its distinct parts (public: the candidates are public).
    if me == a:
        distinct = sorted(set(parts))
        net.send(b, "paillier/groups", ByteStrings(repr(p).encode() for p in distinct))
        index = {p: i for i, p in enumerate(distinct)}
        group_of = np.array([index[p] for p in parts], dtype=np.int64)
        net.send(b, "paillier/assign", group_of)
    else:
        names = net.receive(a, "paillier/groups", expect=ByteStrings)
        group_of = net.receive(a, "paillier/assign", expect=np.ndarray)
        if (
            group_of.dtype != np.int64
            or group_of.shape != (len(parts),)
            or (len(parts) and (group_of.min() < 0 or group_of.max() >= len(names)))
        ):
            raise ProtocolError(a, "paillier/assign", "invalid candidate grouping")
        distinct = [(i,) for i in range(len(names))]  # only the count matters here
    result = np.zeros(len(parts), dtype=np.int64)
    for g in range(len(distinct)):
        rows = np.flatnonzero(group_of == g)
        if me == a:
            vec = db.cover(distinct[g]).astype(np.int64)
        else:
            vec = np.stack([db.cover(parts[i]) for i in rows]).astype(np.int64)
        res = dot_product_paillier(
            net.scoped(f"paillier/g{g}"),
            vec,
            holder=a,
            other=b,
            output="both",
            key_bits=key_bits,
            min_key_bits=min(key_bits, 2048),
        )
        if res.values is None:  # pragma: no cover - output="both" always reveals
            raise ProtocolError(a if me == b else b, "paillier", "dot products not revealed")
        result[rows] = np.asarray(res.values, dtype=np.int64).reshape(-1)
    return result
