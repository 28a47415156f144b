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
- items at two or more parties (``method="ot"``, the default): the owners count the
  transactions where all their parts' covers (the AND of each owner's own columns) are 1
  with :func:`ppdm.protocols.gmw.multiparty_and_counts`, all candidates of a level and
  owner set in one batch. Two owners: one random OT per transaction and *distinct part*
  of the choosing owner serves every candidate over that part, each candidate costing
  only its packed correction of ``l`` bits per transaction, ``l`` the bits of a public
  bound of its support, the smallest published support of its subsets one item smaller
  (:func:`ppdm.protocols.dot_product_ot.column_product_shares`);
  three or more owners: the same products chained GMW-style over additive shares;
- ``method="gilboa"``: the previous two-party path, one correlated OT with a 64-bit
  correction per transaction *and candidate* (:func:`ppdm.protocols.dot_product_ot.binary_dot_product`),
  kept for comparison; ``method="paillier"``: Paillier dot products
  (:func:`ppdm.protocols.dot_product_paillier.dot_product_paillier`; slow, for comparison);
- with ``multiparty="intersection"`` (and always with ``gilboa``/``paillier`` when asked
  for), candidates over three or more owners use the secure intersection cardinality of
  the owners' sets of covering transaction ids (:mod:`ppdm.protocols.intersection`,
  elliptic-curve commutative encryption), among the owners only.

Leakage (semi-honest): the support count of every candidate itemset is revealed to all
parties (as in Vaidya & Clifton 2002, whose parties compare the scalar product with the
threshold in the clear), from which the frequent itemsets and rules follow. The default
protocols reveal nothing else (shares are uniform; the ring sizes follow from public
counts); ``multiparty="intersection"`` adds that protocol's leakage to its evaluator
(subset intersection sizes). No party sees another party's columns.

Cost per level (default): per owner set, ``16 N`` bytes per distinct part of each
choosing owner plus ``N * l / 8`` bytes per candidate (two owners; ``t(t-1)/2`` times that
for ``t`` owners), ``N`` transactions; and broadcasts of the counts. Each level's entry in
the result records ``shared_candidates`` (counted by two or more owners),
``payload_bytes`` (all parties' protocol payload for them: OT matrices, corrections,
shares; computed from public information, so every party and transport reports the same;
message envelopes and the one-time OT setup excluded) and their ratio
``bytes_per_candidate_transaction`` (about 1.4 on BMS-WebView-1; about 24 with
``method="gilboa"``; ``None`` for Paillier and the intersection protocol).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np

from ppdm.errors import ProtocolError
from ppdm.mining.assoc_common import AssocResult, native_label
from ppdm.mining.itemsets import (
    TransactionDB,
    apriori_gen,
    as_transaction_db,
    min_count,
    support_counts,
)
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
    db: TransactionDB | Any,
    *,
    min_support: float,
    min_confidence: float,
    method: Literal["ot", "gilboa", "paillier"] = "ot",
    multiparty: Literal["gmw", "intersection"] = "gmw",
    max_len: int | None = None,
    paillier_key_bits: int = 2048,
    progress: Progress | None = None,
) -> AssocResult:
    """Frequent itemsets (with support counts) and rules of the vertically partitioned
    transactions (module docstring). ``db`` holds this party's own item columns for all
    transactions, in the common transaction order (a :class:`TransactionDB`, or anything
    :func:`~ppdm.mining.itemsets.as_transaction_db` takes: a one-hot DataFrame of its
    columns, lists of items). ``method`` and ``multiparty`` choose the protocols (module
    docstring); every party must pass the same."""
    if method not in ("ot", "gilboa", "paillier"):
        raise ValueError(f"unknown method {method!r}")
    if multiparty not in ("gmw", "intersection"):
        raise ValueError(f"unknown multiparty protocol {multiparty!r}")
    from ppdm.protocols.dot_product_ot import binary_dot_product
    from ppdm.protocols.intersection import secure_intersection_cardinalities

    min_count(min_support, 1)
    db = as_transaction_db(db, argument="db")
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
    sessions: dict[tuple[str, str], Any] = {}
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
        payload = shared_cands = 0
        for gi, (owners, cands) in enumerate(sorted(groups.items())):
            gsub = sub.scoped(f"group{gi}")
            got, cost = _count_group(
                gsub,
                net,
                db,
                owners,
                cands,
                owner,
                method,
                multiparty,
                sessions,
                counts,
                paillier_key_bits,
                binary_dot_product,
                secure_intersection_cardinalities,
            )
            if cost is not None:
                payload += cost
                shared_cands += len(cands)
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
                "shared_candidates": shared_cands,
                "payload_bytes": payload,
                "bytes_per_candidate_transaction": (
                    round(payload / (shared_cands * n), 4) if shared_cands and n else None
                ),
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
    multiparty: str,
    sessions: dict[tuple[str, str], Any],
    counts: Mapping[frozenset, int],
    key_bits: int,
    binary_dot_product: Any,
    intersections: Any,
) -> tuple[list[int], int | None]:
    """Support counts of candidates whose items belong to exactly ``owners``; every party
    calls this for every group in the same order and gets the counts, and the payload
    bytes of the counting protocol (``None`` for one owner and for the Paillier and
    intersection paths), computed from public information: the same at every party."""
    me = net.me
    m = len(cands)
    n = db.n_transactions
    announcer = owners[0]
    shared = len(owners) > 1 and method == "ot" and (len(owners) == 2 or multiparty == "gmw")
    plan = _shared_plan(n, owners, cands, owner, counts) if shared else None
    cost: int | None = None
    if plan is not None:
        from ppdm.protocols.gmw import multiparty_and_bytes

        cost = multiparty_and_bytes(n, plan[2], plan[3])
    elif len(owners) == 2 and method == "gilboa":
        cost = _gilboa_bytes(m, n)
    if me in owners:
        own_parts = [tuple(x for x in c if owner[x] == me) for c in cands]
        if len(owners) == 1:
            result = support_counts(db, own_parts).astype(np.int64)
        elif plan is not None:
            result = _shared_counts(net, root, db, plan, sessions)
        elif len(owners) == 2:
            a, b = owners
            if method == "paillier":
                result = _pair_paillier(net, db, own_parts, a, b, key_bits)
            else:
                result = _pair_ot(
                    net, db, own_parts, a, b, _session(root, sessions, a, b), binary_dot_product
                )
        else:
            covers = [np.flatnonzero(db.cover(part)) for part in own_parts]
            result = np.asarray(
                intersections(net.scoped("intersection"), covers, ring=owners), dtype=np.int64
            )
        others = [p for p in net.parties if p not in owners]
        if me == announcer and others:
            net.broadcast("counts", result, to=others)
        return [int(v) for v in result], cost
    got = net.receive(announcer, "counts", expect=np.ndarray)
    if got.dtype != np.int64 or got.shape != (m,) or (m and (got.min() < 0 or got.max() > n)):
        raise ProtocolError(announcer, "counts", f"expected {m} valid counts")
    return [int(v) for v in got], cost


def _session(root: Network, sessions: dict[tuple[str, str], Any], a: str, b: str) -> Any:
    """The job's OT session between ``a`` and ``b`` (consortium order), made on first use."""
    from ppdm.protocols.ot.extension import OTSession

    key = (a, b) if root.parties.index(a) < root.parties.index(b) else (b, a)
    if key not in sessions:
        me = root.me
        sessions[key] = OTSession(root.scoped(f"vassoc/ot-{key[0]}-{key[1]}"), b if me == a else a)
    return sessions[key]


def _shared_plan(
    n: int,
    owners: tuple[str, ...],
    cands: Sequence[tuple],
    owner: Mapping[Any, str],
    counts: Mapping[frozenset, int],
) -> tuple[list[str], dict[str, list[tuple]], np.ndarray, np.ndarray]:
    """The public inputs of :func:`~ppdm.protocols.gmw.multiparty_and_counts` for a group:
    the owners' order, each owner's distinct parts, the candidates' part indices and the
    bounds (:func:`_bound`)."""
    parts = {p: [tuple(x for x in c if owner[x] == p) for c in cands] for p in owners}
    distinct = {p: sorted(set(parts[p])) for p in owners}
    # Choosers (later in the order) should have few distinct parts: their OTs are reused.
    order = sorted(owners, key=lambda p: (-len(distinct[p]), owners.index(p)))
    index = np.zeros((len(cands), len(order)), dtype=np.int64)
    for k, p in enumerate(order):
        at = {part: i for i, part in enumerate(distinct[p])}
        index[:, k] = [at[part] for part in parts[p]]
    bounds = np.array([_bound(c, counts, n) for c in cands], dtype=np.int64)
    return order, distinct, index, bounds


def _bound(candidate: tuple, counts: Mapping[frozenset, int], n: int) -> int:
    """A public upper bound of a candidate's support: the smallest published count of
    its subsets one item smaller (all frequent, by Apriori's pruning), else ``n``."""
    if len(candidate) < 2:
        return n
    whole = frozenset(candidate)
    return min(counts.get(whole - {x}, n) for x in candidate)


def _shared_counts(
    net: Network,
    root: Network,
    db: TransactionDB,
    plan: tuple[list[str], dict[str, list[tuple]], np.ndarray, np.ndarray],
    sessions: dict[tuple[str, str], Any],
) -> np.ndarray:
    """Supports of candidates over two or more owners by
    :func:`~ppdm.protocols.gmw.multiparty_and_counts`; only this party's columns are
    private."""
    from ppdm.protocols.gmw import multiparty_and_counts

    order, distinct, index, bounds = plan
    me = net.me
    own = np.stack([db.cover(part) for part in distinct[me]]).astype(np.uint8)
    mine = {p: _session(root, sessions, me, p) for p in order if p != me}
    return multiparty_and_counts(
        net.scoped("gmw"), own, owners=order, index=index, bounds=bounds, sessions=mine
    )


def _gilboa_bytes(m: int, n: int) -> int:
    """Payload bytes of :func:`_pair_ot` for ``m`` candidates: per batch one IKNP
    correlated OT per candidate and transaction (``u``, padded per chunk of ``2^19``)
    with a 64-bit correction each, and the 8-byte shares both ways."""
    per_batch = max(1, _BATCH_CELLS // max(n, 1))
    total = 0
    for start in range(0, m, per_batch):
        ots = min(per_batch, m - start) * n
        chunk = 1 << 19
        total += sum(16 * (-(-min(chunk, ots - o) // 64) * 64) for o in range(0, ots, chunk))
        total += 8 * ots + 16 * min(per_batch, m - start)
    return total


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
