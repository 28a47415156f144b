"""The ``assoc`` and ``kmeans`` jobs: distributed mining with each party's own data file.

Issue 5 (Aggarwal 2015, §20.5 and figure 20.6): supermarket chains that each hold their
own customers' baskets (horizontal partitioning) or stores selling complementary products
to the same customers (vertical partitioning) mine the pooled data without showing it.
The protocols are in :mod:`ppdm.mining`; this module is the glue that makes them *jobs*:
each party reads its own file from its settings (``[data] transactions = "..."`` or
``[data] records = "..."``; the ``data`` parameter names another entry of the table), the
public parameters come from the initiator, and the result is JSON. ``ppdm simulate assoc|kmeans`` (in-process network) and ``ppdm job run
assoc|kmeans`` (party nodes over gRPC) run exactly this code.

The data files, their partitioning and a party's ``[data]`` entries are
:mod:`ppdm.jobs.mining_data` (see ``docs/mining.md``); the parameters, their defaults and
checks are :mod:`ppdm.jobs.mining_params`.

What the job documents reveal
-----------------------------
Every party's ``result`` goes to the job's initiator (``docs/jobs.md``). Besides the
protocol outputs (what every party learns anyway), a result holds the party's own
``local`` statistics (record count, cluster sizes of its own records) only when the job
runs with ``report_local=true`` (off by default: the initiator would see them); it never
holds another party's data.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ppdm.errors import ConfigError, ProtocolError
from ppdm.jobs.mining_data import (
    Records,
    alignable_records,
    alignable_transactions,
    detect_format,
    open_party_source,
    partition_file,
    party_engine,
    read_party_records,
    read_party_transactions,
    read_records,
    read_transactions,
    records_from_frame,
    set_party_data,
    write_transactions,
)
from ppdm.jobs.mining_params import ASSOC_DEFAULTS, KMEANS_DEFAULTS, check_params
from ppdm.jobs.registry import JobSpec, PartyContext, register_job
from ppdm.mining.itemsets import TransactionDB
from ppdm.parties.network import Network

__all__ = [
    "ASSOC_DEFAULTS",
    "KMEANS_DEFAULTS",
    "Records",
    "detect_format",
    "open_party_source",
    "partition_file",
    "party_engine",
    "read_party_records",
    "read_party_transactions",
    "read_records",
    "read_transactions",
    "records_from_frame",
    "run_assoc",
    "run_kmeans",
    "set_party_data",
    "write_transactions",
]

# ---------------------------------------------------------------------------------------
# Result documents and schema checks


def _jsonable(obj: Any) -> Any:
    """``obj`` with numpy scalars and arrays turned into Python values and NaN/inf into
    ``None`` (the same document in process and over gRPC)."""
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        return _jsonable(obj.item())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


#: The entries of :meth:`ppdm.mining.assoc_common.AssocResult.to_json` that it builds as
#: plain JSON values already (one per itemset and rule: not walked again).
_READY = frozenset({"frequent_itemsets", "rules"})


def _assoc_document(out: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`_jsonable` of an ``assoc`` result, except its :data:`_READY` entries."""
    return {k: v if k in _READY else _jsonable(v) for k, v in out.items()}


def _schema_digest(job_id: str, columns: Sequence[str]) -> bytes:
    """SHA-256 of the job id and the ordered column names (equal lists, equal digests)."""
    return hashlib.sha256(json.dumps([job_id, list(columns)]).encode("utf-8")).digest()


def _check_names(value: Any, party: str, step: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ProtocolError(party, step, "expected a list of column names")
    return value


# ---------------------------------------------------------------------------------------
# assoc


def run_assoc(net: Network, params: Mapping[str, Any], ctx: PartyContext) -> dict[str, Any]:
    """Association rules of the parties' pooled transactions (``[data] transactions``).

    ``mode="horizontal"``: Kantarcioglu & Clifton
    (:func:`ppdm.mining.horizontal_rules.horizontal_association_rules`; ``reveal_counts``,
    ``label_bytes``, ``fake_ratio``, ``min_aggregate`` (default 10: an itemset is released
    only if at least that many baskets outside any ``colluders`` parties support it) and
    ``colluders`` (default 1) apply). ``mode="vertical"``: Vaidya & Clifton
    (:func:`ppdm.mining.vertical_rules.vertical_association_rules`; ``method`` ``ot`` or
    ``paillier`` applies). Returns ``AssocResult.to_json()`` plus ``mode``, ``party`` and
    (with ``report_local``) this party's ``local`` transaction and item counts.
    """
    opts = check_params("assoc", params)
    mode = opts["mode"]
    if opts["align"]:
        return _aligned_assoc(net, opts, ctx)
    db = read_party_transactions(
        ctx, opts["data"], fmt=opts["format"], sep=opts["sep"], counter=mode == "horizontal"
    )
    if mode == "horizontal":
        result = _horizontal_assoc(net, db, opts, ctx)
    else:
        result = _vertical_assoc(net, db, opts, ctx)
    out: dict[str, Any] = {"mode": mode, "party": net.me, **result.to_json()}
    if opts["report_local"]:
        out["local"] = {"transactions": db.n_transactions, "items": db.n_items}
    return _assoc_document(out)


def _horizontal_assoc(net: Network, db: Any, opts: Mapping[str, Any], ctx: PartyContext) -> Any:
    from ppdm.mining.horizontal_rules import horizontal_association_rules, local_label_bytes

    if opts["min_aggregate"] and opts["colluders"] >= len(net.parties):
        raise ConfigError(
            f"min_aggregate needs more parties than colluders ({opts['colluders']}): "
            "lower colluders or set min_aggregate=0"
        )
    kind = "none"
    if db.n_items:
        kind = "str" if np.issubdtype(db.items.dtype, np.str_) else "int"
        if kind == "int" and db.items.min() < 0:
            raise ConfigError(f"party {ctx.name!r}: item labels must be non-negative")
    # Every party must decode the union's labels the same way: agree on the label kind.
    net.broadcast("assoc/schema", kind)
    kinds = {kind}
    for p, v in net.gather("assoc/schema").items():
        if v not in ("none", "int", "str"):
            raise ProtocolError(p, "assoc/schema", f"unknown label kind {v!r}")
        kinds.add(v)
    kinds.discard("none")
    if len(kinds) > 1:
        raise ConfigError(
            "the parties' transaction files mix integer (FIMI) and string (basket) item labels"
        )
    common = kinds.pop() if kinds else "int"
    label_bytes = opts["label_bytes"]
    if label_bytes is None:
        label_bytes = 4 if common == "int" else 32
    if db.n_items and (need := local_label_bytes(db)) > label_bytes:
        raise ConfigError(
            f"party {ctx.name!r}: an item label needs {need} bytes, more than "
            f"label_bytes={label_bytes}; raise label_bytes"
        )
    return horizontal_association_rules(
        net,
        db,
        min_support=opts["min_support"],
        min_confidence=opts["min_confidence"],
        reveal_counts=opts["reveal_counts"],
        max_len=opts["max_len"],
        label_bytes=label_bytes,
        fake_ratio=opts["fake_ratio"],
        min_aggregate=opts["min_aggregate"],
        colluders=opts["colluders"],
        progress=ctx.progress,
    )


# ---------------------------------------------------------------------------------------
# kmeans


def _initial_centers(init: Any, records: Records, k: int, mode: str) -> Any:
    """``init`` as the mining functions take it: a method name, or this party's part of
    explicit centers (a list of ``k`` rows in horizontal mode, or a ``{column: [k
    values]}`` object in either mode); names were checked by :func:`check_params`."""
    if isinstance(init, str):
        return init
    d = len(records.columns)
    try:
        if isinstance(init, dict):
            missing = [c for c in records.columns if c not in init]
            if missing:
                raise ConfigError(f"init has no initial values for column(s) {missing}")
            arr = np.array([init[c] for c in records.columns], dtype=np.float64).T
        elif isinstance(init, list) and mode == "horizontal":
            arr = np.array(init, dtype=np.float64)
        else:
            raise ConfigError(
                "init must be a method name, a {column: [k values]} object, or (horizontal) "
                "a list of k rows"
            )
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"init holds non-numeric or ragged values ({exc})") from None
    if arr.shape != (k, d) or not np.all(np.isfinite(arr)):
        raise ConfigError(f"initial centers must be {k} finite rows of {d} values")
    return arr


def run_kmeans(net: Network, params: Mapping[str, Any], ctx: PartyContext) -> dict[str, Any]:
    """Lloyd's k-means of the parties' pooled records (``[data] records``).

    ``mode="horizontal"``: every party holds whole records with the same columns
    (:func:`ppdm.mining.kmeans.horizontal_kmeans`); ``centers`` are the full centers.
    ``mode="vertical"``: every party holds some columns of the same records, aligned on
    ``id_column`` (:func:`ppdm.mining.kmeans.vertical_kmeans`); ``centers`` are this
    party's columns of the centers, ``schema`` lists every party's columns (public), and
    ``inertia`` is the secure sum of the parties' partial squared distances.

    Starting centers default to ``init="random-partition"`` (means of random groups:
    aggregates); ``k * min_cluster_size`` is checked against the pooled record count
    before anything derived from the records is sent (with ``align=true`` first against
    this party's own records, an upper bound of the aligned ones), every released centre
    covers at least ``min_cluster_size`` records, and a party holding 1 to
    ``min_party_records - 1`` of its records in one stops the job
    (:mod:`ppdm.mining.kmeans`).
    """
    from ppdm.mining.kmeans import horizontal_kmeans

    opts = check_params("kmeans", params)
    mode, k = opts["mode"], opts["k"]
    if opts["align"]:
        records = _aligned_records(net, opts, ctx)
    else:
        records = read_party_records(
            ctx,
            opts["data"],
            sep=opts["sep"],
            id_column=opts["id_column"],
            columns=opts["columns"],
            require_all=mode == "horizontal",
            stream_ok=mode == "horizontal",
        )
    out: dict[str, Any] = {"mode": mode, "party": net.me}
    if mode == "horizontal":
        # The parties compare a digest of their column lists, salted with the job id,
        # never the names: a peer's column names are its own (and would otherwise reach
        # this node's log and its owner's view of an error).
        mine = _schema_digest(net.job_id, records.columns)
        net.broadcast("kmeans/schema", mine)
        for p, v in net.gather("kmeans/schema").items():
            if not isinstance(v, bytes) or len(v) != len(mine):
                raise ProtocolError(p, "kmeans/schema", "expected a 32-byte schema digest")
            if v != mine:
                raise ConfigError(
                    f"party {p!r} has other columns than this party ({len(records.columns)} "
                    "columns here): horizontal k-means needs the same columns everywhere"
                )
        init = _initial_centers(opts["init"], records, k, mode)
        try:
            result = horizontal_kmeans(
                net,
                records.x,
                k=k,
                init=init,
                seed=opts["seed"],
                max_iter=opts["max_iter"],
                tol=opts["tol"],
                fraction_bits=opts["fraction_bits"],
                min_cluster_size=opts["min_cluster_size"],
                min_party_records=opts["min_party_records"],
                progress=ctx.progress,
                column_names=records.columns,
            )
        except (ValueError, OverflowError) as exc:
            raise ConfigError(f"party {ctx.name!r}: {exc}") from None
        out.update(columns=records.columns, **result.to_json())
    else:
        result, schema, inertia = _vertical(net, records, opts, ctx)
        out.update(columns=records.columns, schema=schema, **result.to_json())
        out["inertia"] = inertia
    out["history"] = result.history
    if result.initial_centers is not None and opts["init"] in ("random-partition", "random-slabs"):
        # Aggregate starting centres are released like the centres of an iteration (this
        # party's own columns, vertically): a reader can restart Lloyd from them.
        out["initial_centers"] = np.asarray(result.initial_centers).tolist()
    if opts["report_local"]:
        own = np.bincount(result.labels, minlength=k) if mode == "horizontal" else None
        out["local"] = {
            "records": len(records.x),
            "columns": len(records.columns),
            **({"cluster_sizes": own} if own is not None else {}),
        }
    if opts["include_labels"]:
        out["labels"] = result.labels
        out["record_ids"] = records.ids if records.ids is not None else None
    return _jsonable(out)


def _check_local_bound(n_records: int, opts: Mapping[str, Any]) -> None:
    """Vertical k-means: every party holds the same records, so ``k`` is checked against
    this party's own count before anything derived from the records (ids, alignment) is
    sent; the text names no count."""
    k, size = opts["k"], opts["min_cluster_size"]
    if k * max(size, 1) > n_records:
        raise ConfigError(
            "k * min_cluster_size exceeds the number of records (k = "
            f"{k}, min_cluster_size = {size}); nothing derived from the records was sent"
        )


def _vertical(
    net: Network, records: Records, opts: Mapping[str, Any], ctx: PartyContext
) -> tuple[Any, dict[str, list[str]], float]:
    from ppdm.mining import fixed_point
    from ppdm.mining.kmeans import vertical_kmeans

    if len(net.parties) < 2:
        raise ConfigError("vertical k-means needs at least two parties")
    k = opts["k"]
    if records.ids is None and opts["id_column"] is not None:
        raise ConfigError(
            f"party {ctx.name!r}: vertical k-means aligns records on the id column "
            f"{opts['id_column']!r}, which the records file lacks (or set id_column=null "
            "to align on row order)"
        )
    # The public schema: who holds which columns (names must not repeat).
    net.broadcast("vkmeans/schema", records.columns)
    schema = {net.me: records.columns}
    for p, v in net.gather("vkmeans/schema").items():
        schema[p] = _check_names(v, p, "vkmeans/schema")
    schema = {p: schema[p] for p in net.parties}
    seen: dict[str, str] = {}
    for p, names in schema.items():
        for c in names:
            if c in seen:
                raise ConfigError(f"column {c!r} is held by both {seen[c]!r} and {p!r}")
            seen[c] = p
    _check_local_bound(len(records.x), opts)
    # The same records everywhere: compare digests of the sorted common ids.
    digest = records.id_digest()
    net.broadcast("vkmeans/ids", digest)
    for p, v in net.gather("vkmeans/ids").items():
        if not isinstance(v, bytes) or len(v) != 32:
            raise ProtocolError(p, "vkmeans/ids", "expected a 32-byte digest")
        if v != digest and records.ids is not None:
            raise ConfigError(
                f"party {p!r} holds other record ids than party {net.me!r}: the vertical "
                "partitions must cover the same records"
            )
    init = _initial_centers(opts["init"], records, k, "vertical")
    try:
        result = vertical_kmeans(
            net,
            records.x,
            k=k,
            init=init,
            seed=opts["seed"],
            max_iter=opts["max_iter"],
            tol=opts["tol"],
            min_cluster_size=opts["min_cluster_size"],
            min_party_records=opts["min_party_records"],
            fraction_bits=opts["fraction_bits"],
            progress=ctx.progress,
        )
    except (ValueError, OverflowError) as exc:
        raise ConfigError(f"party {ctx.name!r}: {exc}") from None
    # Inertia: the sum over the parties of their own columns' squared distances to the
    # assigned centers (one secure sum at a precision fitted to the magnitudes; reveals
    # the total and the order of magnitude of each party's part).
    own = float(((records.x - result.centers[result.labels]) ** 2).sum()) if len(records.x) else 0.0
    total = fixed_point.secure_real_sum(net, np.array([own]), step="vkmeans/inertia")
    return result, schema, float(total[0])


# ---------------------------------------------------------------------------------------
# Private record alignment before vertical mining (align=true; docs/mining.md)


def _aligned_records(net: Network, opts: Mapping[str, Any], ctx: PartyContext) -> Records:
    """The records whose ids every party holds, in the common order: private record
    alignment (:func:`ppdm.protocols.psi.align`) on this party's id column, ``k``
    checked first against this party's own count (an upper bound of the aligned ones).
    On a Spark node the ids are encoded on the executors and only the common records
    are read back (:func:`ppdm.jobs.mining_data.alignable_records`)."""
    data = alignable_records(
        ctx, opts["data"], sep=opts["sep"], id_column=opts["id_column"], columns=opts["columns"]
    )
    _check_local_bound(data.size, opts)
    return data.take(_align(net, data.ids, opts, ctx))


def _align(net: Network, ids: Any, opts: Mapping[str, Any], ctx: PartyContext) -> Any:
    from ppdm.protocols.psi import align

    try:
        return align(
            net,
            ids,
            method=opts["align_method"],
            max_set_ratio=opts["max_set_ratio"],
            min_set_size=opts["min_set_size"],
        )
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"party {ctx.name!r}: {exc}") from None


def _vertical_assoc(
    net: Network, db: TransactionDB, opts: Mapping[str, Any], ctx: PartyContext
) -> Any:
    """Vaidya & Clifton vertical association rules on this party's item columns, with
    ``protect`` (``dp``: noisy shared counts, ``epsilon`` per party split over at most
    ``max_shared_candidates`` counts; ``exact``: exact counts opened only for frequent
    candidates) and ``min_aggregate`` (the smallest count of a frequent itemset)."""
    from ppdm.mining.vertical_rules import vertical_association_rules

    if len(net.parties) < 2:
        raise ConfigError("vertical association rules need at least two parties")
    if opts["multiparty"] == "intersection" and len(net.parties) > 2:
        raise ConfigError(
            "multiparty=intersection reveals subset intersection sizes and is not offered "
            "any more: use gmw"
        )
    return vertical_association_rules(
        net,
        db,
        min_support=opts["min_support"],
        min_confidence=opts["min_confidence"],
        protect=opts["protect"],
        epsilon=opts["epsilon"],
        max_shared_candidates=opts["max_shared_candidates"],
        min_aggregate=opts["min_aggregate"],
        method=opts["method"],
        max_paillier_encryptions=opts["max_paillier_encryptions"],
        multiparty=opts["multiparty"],
        max_len=opts["max_len"],
        progress=ctx.progress,
    )


def _aligned_assoc(net: Network, opts: Mapping[str, Any], ctx: PartyContext) -> dict[str, Any]:
    """Vertical association rules after private record alignment on the transaction ids
    (a text file whose lines start with the id, or a long layout's transaction id
    column; on a Spark node encoded on the executors,
    :func:`ppdm.jobs.mining_data.alignable_transactions`)."""
    if len(net.parties) < 2:
        raise ConfigError("vertical association rules need at least two parties")
    data = alignable_transactions(ctx, opts["data"], fmt=opts["format"], sep=opts["sep"])
    common = _align(net, data.ids, opts, ctx)
    db = data.take(common)
    result = _vertical_assoc(net, db, opts, ctx)
    out: dict[str, Any] = {"mode": "vertical", "party": net.me, "aligned": len(common.ids)}
    out.update(result.to_json())
    if opts["report_local"]:
        out["local"] = {"transactions": data.size, "items": db.n_items}
    return _assoc_document(out)


register_job(
    JobSpec(
        name="assoc",
        summary="association rules of horizontally or vertically partitioned transactions",
        run=run_assoc,
        defaults=ASSOC_DEFAULTS,
    )
)
register_job(
    JobSpec(
        name="kmeans",
        summary="Lloyd's k-means of horizontally or vertically partitioned records",
        run=run_kmeans,
        defaults=KMEANS_DEFAULTS,
    )
)
