"""Association rules over vertically partitioned data (Vaidya & Clifton 2002, 2005).

Vaidya and Clifton, "Privacy preserving association rule mining in vertically
partitioned data", KDD 2002 (two parties, secure scalar product), and "Secure set
intersection cardinality with application to association rule mining", J. Computer
Security 13(4), 2005 (more parties); Aggarwal 2015, §20.5. The parties hold different
items (columns) of the same transactions (rows, aligned on a common transaction id),
e.g. stores selling complementary products to the same customers. The item schema — who
holds which items — is public.

Apriori runs on the public candidate lattice; the support of a candidate ``Z`` is counted
according to who owns its items:

- all items at one party: that party counts it locally; it publishes only which of these
  candidates are frequent and their counts (aggregates of its own columns), never the
  count of an infrequent one;
- items at two or more parties (``method="ot"``, the default): the owners compute
  additive shares of the number of transactions where all their parts' covers (the AND
  of each owner's own columns) are 1 with
  :func:`ppdm.protocols.gmw.multiparty_and_shares`, all candidates of a level and owner
  set in one batch. Two owners: one random OT per transaction and *distinct part* of the
  choosing owner serves every candidate over that part, at this level and the next ones
  (:class:`ppdm.protocols.dot_product_ot.ColumnOTs`: a part counted at one level keeps
  its OTs for the next; every candidate gets pads never used before), each candidate
  costing only its correction of ``l`` bits per transaction
  (:func:`ppdm.protocols.dot_product_ot.column_product_shares`); the owner with fewer
  parts new to it chooses; three or more owners: the same products chained GMW-style
  over additive shares;
- ``method="gilboa"``: two owners use the previous path, one correlated OT with a 64-bit
  correction per transaction *and candidate*
  (:func:`ppdm.protocols.dot_product_ot.binary_dot_product_shares`), kept for
  comparison; ``method="paillier"``: Paillier dot products
  (:func:`ppdm.protocols.dot_product_paillier.dot_product_paillier`, output as shares;
  slow, for comparison; the holder of a pair generates one key for the job and uses it
  for all of the pair's dot products). Three or more owners always use the GMW path: the
  commutative-encryption intersection (``multiparty="intersection"``) revealed subset
  intersection sizes to its evaluator and is refused with three or more parties.

What the shared counts reveal (``protect``)
-------------------------------------------
A co-party chooses its own columns freely: with one indicator item per transaction
(item ``1000 + i`` in row ``i`` only) every 2-item candidate ``{1000 + i, j}`` counts
``v_j[i]``, so counts opened in the clear give back the other parties' columns row by
row; differencing (items over ``R + {i}`` and ``R``) and threshold crossings (prefix
sets) defeat a plain minimum count. The shares are therefore never opened as they are:

- ``protect="dp"`` (the job's default): every count of a candidate over two or more
  owners is opened with noise (:func:`ppdm.protocols.gmw.open_noisy`): each owner adds
  its own two-sided geometric noise of scale ``max_shared_candidates / epsilon`` to its
  share, so each honest owner's noise alone makes every such count
  ``epsilon / max_shared_candidates``-differentially private with respect to one
  transaction (row) of its data, against any coalition of the other parties. One row
  changes each count by at most 1, and at most ``max_shared_candidates`` noisy counts
  are opened per job (a level that would exceed it is refused: mining stops there,
  ``protection["budget_exhausted"]``), so by basic sequential composition the whole job
  is ``epsilon``-DP for each party's shared columns. Frequent means noisy count
  ``>=`` the threshold; the published counts are the noisy ones (post-processing),
  capped at the smallest published count of their subsets. Results are therefore
  *noisy*: itemsets near the threshold may be missed or added, and counts are off by
  about ``sqrt(2 t) * max_shared_candidates / epsilon`` for ``t`` owners.
- ``protect="exact"`` (this function's default; in a job only with partners its owner
  trusts): counts are exact, but whether a shared candidate reaches the threshold is
  decided on the shares (:func:`ppdm.protocols.gmw.shares_at_least`, a secure
  comparison) and only the counts of frequent candidates are opened. An infrequent
  candidate reveals only that it is infrequent. This still lets a co-party learn single
  rows by differencing frequent counts (items over ``R + {i}`` and ``R`` with ``R`` large
  enough to be frequent): it protects only against parties trusted not to craft items.

The threshold count is ``max(min_count(min_support, n), min_aggregate)``.
``protect="exact"`` with ``min_aggregate=0`` gives exactly the itemsets, counts and
rules of a centralized Apriori on the pooled data. The result's ``protection`` records
the mode, ``epsilon``, the per-count ``epsilon_per_count`` and ``noise_scale``, the
number of ``noisy_counts`` opened and ``epsilon_spent`` (so a node can charge it to its
per-data-set budget).

Leakage (semi-honest), beyond the frequent itemsets and their (noisy) counts: the
one-owner counts of frequent candidates (the owner's own aggregates); with ``"dp"`` the
noisy counts of infrequent shared candidates, to their owners; nothing else (shares are
uniform; ring sizes follow from public values). No party sees another party's columns.

Cost per level (default): per owner set, ``16 N`` bytes per distinct part of each
choosing owner that the previous level did not count (none for the parts it did) plus
``N * l / 8`` bytes per candidate (two owners; ``t(t-1)/2`` times that
for ``t`` owners), ``N`` transactions; ``l`` is one more than the bits of
``max(T, b - T)`` with ``"exact"`` (``b`` a public bound of the count, the smallest
published count of its subsets, and ``T`` the threshold: room for the sign of
``count - T``, and every count up to ``b`` fits),
and the bits of ``N`` plus the noise range with ``"dp"`` (16 bits for mushroom at the
defaults); ``"exact"`` adds one secure comparison per shared candidate. Each level's
entry in the result records ``shared_candidates`` (counted by two or more owners),
``payload_bytes`` (all parties' payload of the counting protocol and the opening:
OT matrices, corrections, shares; computed from public information, so every party and
transport reports the same; message envelopes, the one-time OT setup and the
comparisons of ``"exact"`` excluded) and their ratio ``bytes_per_candidate_transaction``
(about 1.4 on BMS-WebView-1; about 24 with ``method="gilboa"``; ``None`` for Paillier).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from itertools import groupby
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ppdm.errors import ConfigError, ProtocolError
from ppdm.mining.assoc_common import AssocResult, native_label
from ppdm.mining.itemsets import (
    TransactionDB,
    as_transaction_db,
    min_count,
    support_counts,
)
from ppdm.parties.network import Network
from ppdm.progress import Progress, progress_or_null

if TYPE_CHECKING:
    from ppdm.protocols.paillier import PaillierPrivateKey

log = logging.getLogger(__name__)

__all__ = ["PROTECT_MODES", "VerticalAssocResult", "vertical_association_rules"]

#: ``protect`` values: noisy counts (differential privacy) or exact counts opened only
#: for frequent candidates (module docstring).
PROTECT_MODES = ("dp", "exact")

# Cells of the candidate x transaction bit matrix sent to one dot-product call.
_BATCH_CELLS = 1 << 25

Protect = Literal["dp", "exact"]


@dataclass
class VerticalAssocResult(AssocResult):
    """:class:`~ppdm.mining.assoc_common.AssocResult` plus ``protection``: how the shared
    counts were opened (``protect``, ``epsilon``, ``epsilon_per_count``, ``noise_scale``,
    ``noisy_counts``, ``epsilon_spent``, ``budget_exhausted``, ``refused_level``,
    ``threshold_count``, ``min_aggregate``; module docstring)."""

    protection: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out = super().to_json()
        out["protection"] = dict(self.protection)
        return out


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


def _agree(net: Network, params: list[Any]) -> None:
    """Every party runs with the same parameters that decide what is opened."""
    net.broadcast("vassoc/params", params)
    for p, got in net.gather("vassoc/params", expect=list).items():
        if got != params:
            raise ProtocolError(p, "vassoc/params", "job parameters differ between the parties")


@dataclass
class _Protection:
    """The job's protection settings and the privacy budget spent so far."""

    mode: str
    threshold: int
    scale: Fraction | None  # dp: noise scale per owner and count
    budget: int
    used: int = 0


def vertical_association_rules(
    net: Network,
    db: TransactionDB | Any,
    *,
    min_support: float,
    min_confidence: float,
    protect: Protect = "exact",
    epsilon: float = 1.0,
    max_shared_candidates: int = 256,
    min_aggregate: int = 0,
    method: Literal["ot", "gilboa", "paillier"] = "ot",
    multiparty: Literal["gmw", "intersection"] = "gmw",
    max_len: int | None = None,
    paillier_key_bits: int = 2048,
    max_paillier_encryptions: int = 1_000_000,
    progress: Progress | None = None,
) -> VerticalAssocResult:
    """Frequent itemsets (with support counts) and rules of the vertically partitioned
    transactions (module docstring). ``db`` holds this party's own item columns for all
    transactions, in the common transaction order (a :class:`TransactionDB`, or anything
    :func:`~ppdm.mining.itemsets.as_transaction_db` takes: a one-hot DataFrame of its
    columns, lists of items).

    ``protect``: ``"exact"`` (exact counts, opened only for frequent candidates) or
    ``"dp"`` (every shared count opened with noise; ``epsilon`` per party and job, split
    evenly over at most ``max_shared_candidates`` noisy counts). ``min_aggregate``: the
    smallest count that makes an itemset frequent, whatever ``min_support`` says.
    ``method`` and ``multiparty`` choose the protocols. With ``method="paillier"`` a
    two-owner group encrypts one cover of ``n`` transactions per distinct part of its
    first owner; a level that would take the job past ``max_paillier_encryptions``
    encryptions is refused before it starts (:class:`~ppdm.errors.ConfigError` at every
    party, naming the count: the parts are public). Every party must pass the same
    values (checked: :class:`~ppdm.errors.ProtocolError` otherwise)."""
    if method not in ("ot", "gilboa", "paillier"):
        raise ValueError(f"unknown method {method!r}")
    if multiparty not in ("gmw", "intersection"):
        raise ValueError(f"unknown multiparty protocol {multiparty!r}")
    if protect not in PROTECT_MODES:
        raise ValueError(f"unknown protect mode {protect!r}: dp or exact")
    _check_count(min_aggregate, "min_aggregate", 0)
    _check_count(max_shared_candidates, "max_shared_candidates", 1)
    scale: Fraction | None = None
    if protect == "dp":
        from ppdm.protocols.gmw import as_fraction

        if not isinstance(epsilon, int | float) or not np.isfinite(epsilon) or epsilon <= 0:
            raise ValueError("epsilon must be a positive finite number")
        scale = Fraction(max_shared_candidates) / as_fraction(epsilon)
    _check_count(max_paillier_encryptions, "max_paillier_encryptions", 0)
    min_count(min_support, 1)
    if multiparty == "intersection" and len(net.parties) > 2:
        raise ValueError(
            "multiparty='intersection' reveals subset intersection sizes to its evaluator "
            "and is not offered any more: use 'gmw'"
        )
    db = as_transaction_db(db, argument="db")
    n = db.n_transactions
    net.broadcast("vassoc/rows", n)
    for p, v in net.gather("vassoc/rows").items():
        if isinstance(v, bool) or not isinstance(v, int) or v != n:
            raise ProtocolError(p, "vassoc/rows", f"has {v} transactions, this party has {n}")
    _agree(
        net,
        [
            protect,
            repr(float(epsilon)) if protect == "dp" else "",
            max_shared_candidates if protect == "dp" else 0,
            min_aggregate,
            repr(float(min_support)),
            -1 if max_len is None else int(max_len),
            method,
            max_paillier_encryptions if method == "paillier" else 0,
        ],
    )
    own_items = [native_label(x) for x in db.items]
    schema = _exchange_schema(net, own_items)
    owner = {item: p for p in net.parties for item in schema[p]}
    bit = {x: 1 << i for i, p in enumerate(net.parties) for x in schema[p]}
    threshold = max(min_count(min_support, n), min_aggregate)
    guard = _Protection(protect, threshold, scale, max_shared_candidates)
    prog = progress_or_null(progress)
    sessions: dict[tuple[str, ...], Any] = {}
    counts: dict[frozenset, int] = {}
    levels: list[dict[str, Any]] = []
    prev: dict[tuple, int] = {}  # the last level's frequent itemsets and counts
    refused: int | None = None
    encryptions = 0  # Paillier encryptions of covers so far (method="paillier")
    k = 1
    prog.start("association levels", max_len)
    while max_len is None or k <= max_len:
        sub = net.scoped(f"vassoc/level{k}")
        _advance_kept(sessions)
        if k == 1:
            candidates = sorted((x,) for p in net.parties for x in schema[p])
            bound_of = dict.fromkeys(candidates, n)
        else:
            bound_of = _candidates(prev)
            candidates = list(bound_of)
        by_mask: dict[int, list[tuple]] = {}  # candidates by the bit mask of their owners
        for c in candidates:
            by_mask.setdefault(sum({bit[x] for x in c}), []).append(c)
        groups = {
            tuple(p for i, p in enumerate(net.parties) if m >> i & 1): g for m, g in by_mask.items()
        }
        shared_cands = sum(len(c) for o, c in groups.items() if len(o) > 1)
        if guard.scale is not None and guard.used + shared_cands > guard.budget:
            refused = k  # opening these counts would exceed the privacy budget
            break
        if method == "paillier":
            encryptions += _paillier_encryptions(groups, owner, n)
            if encryptions > max_paillier_encryptions:
                raise ConfigError(
                    f"method=paillier: counting level {k} would take the job to "
                    f"{encryptions:,} Paillier encryptions (one per transaction for each "
                    "distinct part of a pair's first owner), past "
                    f"max_paillier_encryptions={max_paillier_encryptions:,} (about "
                    f"{encryptions / PAILLIER_RATE / 60:,.1f} CPU-minutes at "
                    f"{PAILLIER_RATE:,} encryptions per CPU second): use method=ot, or "
                    "raise the limit"
                )
        level_counts: dict[tuple, int] = {}
        payload = 0
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
                sessions,
                bound_of,
                paillier_key_bits,
                guard,
            )
            payload += cost
            level_counts.update(got)
        prev = {c: level_counts[c] for c in sorted(level_counts)}
        counts.update((frozenset(c), v) for c, v in prev.items())
        per = shared_cands * n if method != "paillier" else 0
        levels.append(
            {
                "k": k,
                "candidates": len(candidates),
                "frequent": len(prev),
                "groups": {"+".join(o): len(c) for o, c in sorted(groups.items())},
                "shared_candidates": shared_cands,
                "payload_bytes": payload,
                "bytes_per_candidate_transaction": round(payload / per, 4) if per else None,
            }
        )
        prog.advance()
        if not prev:
            break
        k += 1
    prog.finish()
    result = VerticalAssocResult.with_counts(n, min_support, min_confidence, counts, levels)
    result.protection = _protection_record(guard, min_aggregate, epsilon, refused)
    return result


def _check_count(value: Any, name: str, least: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{name} must be a {'positive' if least else 'non-negative'} integer")


def _protection_record(
    guard: _Protection, min_aggregate: int, epsilon: float, refused: int | None
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "protect": guard.mode,
        "threshold_count": guard.threshold,
        "min_aggregate": min_aggregate,
    }
    if guard.scale is None:
        out["compared_counts"] = guard.used
        return out
    per_count = float(epsilon) / guard.budget
    out.update(
        {
            "epsilon": float(epsilon),
            "max_shared_candidates": guard.budget,
            "epsilon_per_count": per_count,
            "noise": "two-sided geometric, added by each owner to its share",
            "noise_scale": float(guard.scale),
            "noisy_counts": guard.used,
            "epsilon_spent": per_count * guard.used,
            "composition": "basic: one row changes each shared count by at most 1",
            "budget_exhausted": refused is not None,
            "refused_level": refused,
        }
    )
    return out


def _count_group(
    net: Network,
    root: Network,
    db: TransactionDB,
    owners: tuple[str, ...],
    cands: Sequence[tuple],
    owner: Mapping[Any, str],
    method: str,
    sessions: dict[tuple[str, ...], Any],
    bound_of: Mapping[tuple, int],
    key_bits: int,
    guard: _Protection,
) -> tuple[dict[tuple, int], int]:
    """The frequent candidates among ``cands`` (whose items belong to exactly
    ``owners``) with their published counts; every party calls this for every group in
    the same order and gets the same answer, and the payload bytes of the counting
    protocol (0 for one owner), computed from public information: the same at every
    party."""
    me = net.me
    m = len(cands)
    n = db.n_transactions
    announcer = owners[0]
    thresholds = np.full(m, guard.threshold, dtype=np.int64)
    cost = 0
    shared = len(owners) > 1
    plan = None
    bounds = thresholds  # only shared candidates need their public bounds
    if shared:
        bounds = np.array([bound_of[c] for c in cands], dtype=np.int64)
        from ppdm.protocols.dot_product_ot import bit_widths
        from ppdm.protocols.gmw import noisy_width

        if guard.scale is not None:
            ring = np.full(m, (1 << noisy_width(n, len(owners), guard.scale)) - 1, np.int64)
        else:  # count - threshold in [-threshold, bound - threshold], with its sign
            ring = 2 * np.maximum(thresholds, bounds - thresholds) + 1
        widths = bit_widths(ring)
        if method == "ot" or len(owners) > 2:
            from ppdm.protocols.gmw import multiparty_and_bytes

            plan = _shared_plan(owners, cands, owner, ring, sessions)
            order, distinct = plan[0], plan[1]
            ledgers = {(a, b): _ledger(sessions, a, b) for a in order for b in order if a != b}
            cost = multiparty_and_bytes(
                n, plan[2], plan[3], owners=order, kept=ledgers, labels=distinct
            )
        elif method == "gilboa":
            cost = _gilboa_bytes(m, n) + 8 * 2 * m
        guard.used += m
    if me not in owners:
        return _receive_frequent(net, announcer, cands, guard.threshold, n), cost
    if not shared:  # every item of every candidate is this party's
        exact = support_counts(db, list(cands)).astype(np.int64)
        frequent = exact >= guard.threshold
        published = exact
    else:
        if plan is not None:
            share = _shared_counts(net, root, db, plan, sessions)
        elif method == "paillier":
            a, b = owners
            key = _paillier_key(sessions, a, b, key_bits) if me == a else None
            own_parts = [tuple(x for x in c if owner[x] == me) for c in cands]
            share = _pair_paillier(net, db, own_parts, a, b, key_bits, key)
        else:
            a, b = owners
            own_parts = [tuple(x for x in c if owner[x] == me) for c in cands]
            share = _pair_ot(net, db, own_parts, a, b, _session(root, sessions, a, b))
        share &= (np.uint64(1) << widths.astype(np.uint64)) - np.uint64(1)
        frequent, published = _open_protected(
            net, root, share, widths, owners, bounds, thresholds, n, guard, sessions
        )
    others = [p for p in net.parties if p not in owners]
    if me == announcer and others:
        net.broadcast("frequent", np.packbits(frequent), to=others)
        net.broadcast("counts", published[frequent].astype(np.int64), to=others)
    return {c: int(v) for c, f, v in zip(cands, frequent, published, strict=True) if f}, cost


def _open_protected(
    net: Network,
    root: Network,
    share: np.ndarray,
    widths: np.ndarray,
    owners: tuple[str, ...],
    bounds: np.ndarray,
    thresholds: np.ndarray,
    n: int,
    guard: _Protection,
    sessions: dict[tuple[str, ...], Any],
) -> tuple[np.ndarray, np.ndarray]:
    """``(frequent, published counts)`` of shared candidates from this owner's
    ``share``: noisy counts (``dp``; capped at the public bound) or exact counts opened
    only where a secure comparison found them frequent (``exact``)."""
    from ppdm.protocols.dot_product_ot import open_shares
    from ppdm.protocols.gmw import open_noisy, shares_at_least

    me = net.me
    if guard.scale is not None:
        noisy = open_noisy(net, share, width=int(widths[0]), n=n, owners=owners, scale=guard.scale)
        return noisy >= guard.threshold, np.minimum(noisy, bounds)
    a, b = owners[0], owners[1]
    session = _session(root, sessions, a, b) if me in (a, b) else None
    frequent = shares_at_least(
        net, share, widths=widths, thresholds=thresholds, owners=owners, session=session
    )
    published = np.zeros(len(share), dtype=np.int64)
    rows = np.flatnonzero(frequent)
    if len(rows):
        published[rows] = open_shares(
            net,
            share[rows],
            widths=widths[rows],
            bounds=bounds[rows],
            to=[p for p in owners if p != me],
            step="vassoc/open",
        )
        if bool((published[rows] < thresholds[rows]).any()):
            raise ProtocolError(
                owners[-1], "vassoc/open", "a frequent count opened below the threshold"
            )
    return frequent, published


def _receive_frequent(
    net: Network, announcer: str, cands: Sequence[tuple], threshold: int, n: int
) -> dict[tuple, int]:
    """At a party outside the owners: the frequent candidates and their counts, as the
    first owner announces them."""
    m = len(cands)
    bits = net.receive(announcer, "frequent", expect=np.ndarray)
    if bits.dtype != np.uint8 or bits.shape != ((m + 7) // 8,):
        raise ProtocolError(announcer, "frequent", f"expected {m} packed bits")
    frequent = np.unpackbits(bits)[:m].astype(bool)
    got = net.receive(announcer, "counts", expect=np.ndarray)
    f = int(frequent.sum())
    if (
        got.dtype != np.int64
        or got.shape != (f,)
        or (f and (got.min() < threshold or got.max() > n))
    ):
        raise ProtocolError(announcer, "counts", "expected a valid count per frequent candidate")
    chosen = [c for c, keep in zip(cands, frequent, strict=True) if keep]
    return {c: int(v) for c, v in zip(chosen, got, strict=True)}


def _session(root: Network, sessions: dict[tuple[str, ...], Any], a: str, b: str) -> Any:
    """The job's OT session between ``a`` and ``b`` (consortium order), made on first use."""
    from ppdm.protocols.ot.extension import OTSession

    key = (a, b) if root.parties.index(a) < root.parties.index(b) else (b, a)
    if key not in sessions:
        me = root.me
        sessions[key] = OTSession(root.scoped(f"vassoc/ot-{key[0]}-{key[1]}"), b if me == a else a)
    return sessions[key]


def _shared_plan(
    owners: tuple[str, ...],
    cands: Sequence[tuple],
    owner: Mapping[Any, str],
    ring: np.ndarray,
    sessions: dict[tuple[str, ...], Any],
) -> tuple[list[str], dict[str, list[tuple]], np.ndarray, np.ndarray]:
    """The public inputs of :func:`~ppdm.protocols.gmw.multiparty_and_shares` for a
    group: the owners' order, each owner's distinct parts, the candidates' part indices
    and the ring bounds (the counts are shared modulo ``2^bit_length(ring)``)."""
    parts = {p: [tuple(x for x in c if owner[x] == p) for c in cands] for p in owners}
    distinct = {p: sorted(set(parts[p])) for p in owners}

    def new_parts(p: str) -> int:  # parts whose OTs p would make afresh as the chooser
        others = [q for q in owners if q != p]
        kept = sum(_ledger(sessions, q, p).kept(distinct[p], sending=True) for q in others)
        return (len(owners) - 1) * len(distinct[p]) - kept

    # Choosers (later in the order) should have few parts without kept OTs: one random
    # OT per new part and transaction serves all its candidates, at this level and the
    # next ones (ColumnOTs).
    order = sorted(owners, key=lambda p: (-new_parts(p), -len(distinct[p]), owners.index(p)))
    index = np.zeros((len(cands), len(order)), dtype=np.int64)
    for k, p in enumerate(order):
        at = {part: i for i, part in enumerate(distinct[p])}
        index[:, k] = [at[part] for part in parts[p]]
    return order, distinct, index, np.asarray(ring, dtype=np.int64)


def _candidates(prev: Mapping[tuple, int]) -> dict[tuple, int]:
    """The next level's candidates (``apriori_gen`` of the frequent ``prev``, in its
    order), each with a public bound of its support: the smallest count of its subsets
    one item smaller (all frequent, by the pruning), found as it prunes."""
    out: dict[tuple, int] = {}
    level = sorted(prev)
    for _, group in groupby(level, key=lambda t: t[:-1]):
        g = list(group)
        for i, a in enumerate(g):
            for b in g[i + 1 :]:
                c = a + b[-1:]
                bound = min(prev[a], prev[b])
                for j in range(len(c) - 2):
                    got = prev.get(c[:j] + c[j + 1 :])
                    if got is None:
                        break
                    bound = min(bound, got)
                else:
                    out[c] = bound
    return out


def _shared_counts(
    net: Network,
    root: Network,
    db: TransactionDB,
    plan: tuple[list[str], dict[str, list[tuple]], np.ndarray, np.ndarray],
    sessions: dict[tuple[str, ...], Any],
) -> np.ndarray:
    """This owner's additive shares of the supports of candidates over two or more
    owners, by :func:`~ppdm.protocols.gmw.multiparty_and_shares`; only this party's
    columns are private."""
    from ppdm.protocols.gmw import multiparty_and_shares

    order, distinct, index, ring = plan
    me = net.me
    cache = sessions.setdefault(("covers",), {})  # covers of parts one item shorter
    for part in [p for p in cache if 1 < len(p) < max(map(len, distinct[me])) - 1]:
        del cache[part]
    own = np.stack([_cover(cache, db, part) for part in distinct[me]])
    kept = {p: _kept(root, sessions, me, p) for p in order if p != me}
    share, _ = multiparty_and_shares(
        net.scoped("gmw"),
        own,
        owners=order,
        index=index,
        bounds=ring,
        sessions={p: k.session for p, k in kept.items()},
        kept=kept,
        labels=distinct,
    )
    return share


def _cover(cache: dict[tuple, np.ndarray], db: TransactionDB, part: tuple) -> np.ndarray:
    """This party's cover of ``part`` (0/1 ``uint8``): its prefix's AND its last item's,
    each from ``cache`` where it was made before (at this level or the last one)."""
    if part not in cache and len(part) == 1:
        cache[part] = db.cover(part).view(np.uint8)
    elif part not in cache:
        cache[part] = _cover(cache, db, part[:-1]) & _cover(cache, db, part[-1:])
    return cache[part]


def _kept(root: Network, sessions: dict[tuple[str, ...], Any], a: str, b: str) -> Any:
    """This party's :class:`~ppdm.protocols.dot_product_ot.ColumnOTs` with the other
    party of the pair: the random OTs of its parts kept from level to level."""
    from ppdm.protocols.dot_product_ot import ColumnOTs

    slot = ("kept", *sorted((a, b), key=root.parties.index))
    if slot not in sessions:
        sessions[slot] = ColumnOTs(_session(root, sessions, a, b))
    return sessions[slot]


def _ledger(sessions: dict[tuple[str, ...], Any], sender: str, chooser: str) -> Any:
    """The public book-keeping of the kept OTs from ``sender`` to ``chooser`` (every
    party follows every pair's, for the payload bytes and the choice of choosers)."""
    from ppdm.protocols.dot_product_ot import ColumnOTs

    slot = ("ledger", sender, chooser)
    if slot not in sessions:
        sessions[slot] = ColumnOTs(None)
    return sessions[slot]


def _advance_kept(sessions: dict[tuple[str, ...], Any]) -> None:
    """A new level: kept OTs of parts the last level did not use are dropped."""
    from ppdm.protocols.dot_product_ot import ColumnOTs

    for value in sessions.values():
        if isinstance(value, ColumnOTs):
            value.advance()


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
) -> np.ndarray:
    """``method="gilboa"``: additive shares modulo ``2^64`` of the two owners' counts,
    one correlated OT per candidate and transaction."""
    from ppdm.protocols.dot_product_ot import binary_dot_product_shares

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
        got = binary_dot_product_shares(
            net.scoped(f"dot{start}"), bits, x_party=a, y_party=b, session=session
        )
        out.append(np.asarray(got, dtype=np.uint64).reshape(-1))
    return np.concatenate(out) if out else np.zeros(0, dtype=np.uint64)


#: Paillier encryptions per CPU second of one process at the default 2048-bit key, about
#: what ``python benchmarks/paillier.py`` measures (for the estimate in the refusal).
PAILLIER_RATE = 2_000


def _paillier_encryptions(
    groups: dict[tuple[str, ...], list[tuple]], owner: dict[Any, str], n: int
) -> int:
    """Encryptions ``method="paillier"`` spends on a level: ``n`` per distinct part of
    the first owner of every two-owner group (groups of more owners use GMW)."""
    total = 0
    for owners, cands in groups.items():
        if len(owners) == 2:
            parts = {tuple(x for x in c if owner[x] == owners[0]) for c in cands}
            total += len(parts) * n
    return total


def _paillier_key(
    sessions: dict[tuple[str, ...], Any], a: str, b: str, key_bits: int
) -> PaillierPrivateKey:
    """The Paillier key pair ``a`` holds for its dot products with ``b`` in this job, made
    on first use (held in ``sessions`` beside the OT sessions, under a 3-tuple key that
    no pair of parties uses). One key for all groups and levels: a fresh key per dot
    product cost a prime search and the encryption tables each time and protects
    nothing more (``b`` only ever sees ciphertexts under ``a``'s key)."""
    from ppdm.protocols.paillier import generate_keypair

    slot = ("paillier", a, b)
    if slot not in sessions:
        sessions[slot] = generate_keypair(key_bits)[1]
    return sessions[slot]


def _pair_paillier(
    net: Network,
    db: TransactionDB,
    parts: list[tuple],
    a: str,
    b: str,
    key_bits: int,
    key: PaillierPrivateKey | None,
) -> np.ndarray:
    """Paillier path: one encrypted cover per distinct ``a``-part, dot products with all
    of ``b``'s covers that go with it (Vaidya & Clifton 2002 with Goethals et al.'s
    scalar product), as additive shares modulo the key's ``N``; ``a`` passes its
    :func:`_paillier_key` (``b`` passes ``None``). Returns shares modulo
    ``2^64``: shares ``s_a + s_b = c + N`` as integers unless ``s_b <= c`` (probability
    ``(c + 1) / N`` for a uniform mask), so ``s_a`` and ``s_b - N`` add up to ``c``."""
    from ppdm.parties.codec import ByteStrings
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
    result = np.zeros(len(parts), dtype=np.uint64)
    low = (1 << 64) - 1
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
            output="shares",
            key=key,
            min_key_bits=min(key_bits, 2048),
        )
        if len(res.shares) != len(rows):
            raise ProtocolError(a if me == b else b, "paillier", "wrong number of shares")
        lift = 0 if me == a else res.modulus
        result[rows] = [(int(v) - lift) & low for v in res.shares]
    return result
