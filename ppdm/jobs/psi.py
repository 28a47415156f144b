"""Job ``psi-align``: private record alignment (the intersection of the id columns).

Every party's ids come from its own settings: the id column (``id_column``, default
``record_id``) of its records table (``[data] records``, or the entry named by the
``data`` parameter: a CSV file, a Parquet dataset or a SQL table, see
:mod:`ppdm.sources`), or, with ``inputs="KEY"``, the list ``[inputs] KEY``; for testbeds
and benchmarks they are generated locally from public parameters (``generate_n`` ids per
party, a fraction ``overlap`` common to all, from ``seed``; see
:func:`ppdm.jobs.set_ops.generated_ids`). The protocol is
:func:`ppdm.protocols.psi.align` (``method="oprf"``, KKRT16 over IKNP, or ``"ec"``);
the leader is chosen by a commit-then-reveal coin toss among all parties (no roster
order, initiator or single party decides it).

Bounds, checked by every party before any PSI message (every party announces its set
size to the others, so all parties learn all set sizes): no set below ``min_set_size``
ids (default 10, the policy's minimum aggregation) and no other party's set more than
``max_set_ratio`` (default 2.0) times this party's. A party holding every possible id
cannot use the job as a membership oracle: it is refused before the PSI starts. If the
intersection holds fewer than ``min_set_size`` ids, no party outputs them: the job ends
with :class:`~ppdm.errors.AggregationTooSmall` at every party ("below the minimum"; the
leader, which computes the intersection, necessarily saw it).

The result at every party: ``size`` of the intersection, ``ids_sha256`` (SHA-256 over the
common ids in the common order, equal at every party), the ``leader`` the coin toss
chose, the ``max_set_ratio`` and ``min_set_size`` used and, when ``return_ids`` is true
and there are at most 100,000, the ``ids`` themselves. Every member learns the
intersection anyway (that is the job's output), so the document shows nothing new to
them; set sizes and a party's row positions stay out of it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from ppdm.errors import ConfigError
from ppdm.jobs._alignment import bounds
from ppdm.jobs.registry import JobSpec, PartyContext, register_job
from ppdm.jobs.set_ops import generated_ids
from ppdm.parties.network import Network
from ppdm.protocols.psi import DEFAULT_MAX_SET_RATIO, DEFAULT_MIN_SET_SIZE, METHODS, align

__all__ = ["PSI_DEFAULTS", "bounds", "ids_digest", "party_ids", "run_psi_align"]

RETURN_LIMIT = 100_000
#: Largest generated set (testbeds and benchmarks).
MAX_GENERATED = 10_000_000

PSI_DEFAULTS: dict[str, Any] = {
    "method": "oprf",
    "data": "records",
    "id_column": "record_id",
    "sep": ",",
    "inputs": None,
    "generate_n": None,
    "overlap": 0.5,
    "seed": 1,
    "return_ids": True,
    "max_set_ratio": DEFAULT_MAX_SET_RATIO,
    "min_set_size": DEFAULT_MIN_SET_SIZE,
}


def ids_digest(ids: list[Any]) -> str:
    """SHA-256 over the ids in order (length-prefixed ``repr``-free encodings)."""
    h = hashlib.sha256()
    for v in ids:
        raw = (
            v
            if isinstance(v, bytes)
            else (v.encode("utf-8", "surrogatepass") if isinstance(v, str) else str(v).encode())
        )
        h.update(len(raw).to_bytes(4, "big") + raw)
    return h.hexdigest()


def party_ids(net: Network, params: Mapping[str, Any], ctx: PartyContext) -> Any:
    """This party's ids: generated, from ``[inputs]`` or from its records' id column (a
    list, or the ids a compute engine encoded, :meth:`ppdm.compute.ComputeEngine.id_set`)."""
    if params.get("generate_n") is not None:
        n = params["generate_n"]
        if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= MAX_GENERATED:
            raise ConfigError(f"generate_n must be an int in [0, {MAX_GENERATED}]")
        return generated_ids(net.index, n, float(params["overlap"]), int(params["seed"]))
    key = params.get("inputs")
    if key is not None:
        if not isinstance(key, str) or not key:
            raise ConfigError("inputs must name an entry of the [inputs] table")
        raw = ctx.private_input(key)
        if not isinstance(raw, list) or not all(
            isinstance(x, str | int) and not isinstance(x, bool) for x in raw
        ):
            raise ConfigError(f"party {ctx.name!r}: inputs.{key} must be a list of strings or ints")
        return raw
    from ppdm.jobs.mining import read_party_records

    data, id_column, sep = params.get("data"), params.get("id_column"), params.get("sep")
    if not isinstance(data, str) or not data:
        raise ConfigError("data must name an entry of the [data] table")
    if not isinstance(id_column, str) or not id_column:
        raise ConfigError("id_column must be a column name")
    if not isinstance(sep, str) or len(sep) != 1:
        raise ConfigError("sep must be one character")
    table = ctx.settings.get("data") or {}
    if isinstance(table, Mapping) and data in table:
        # A Spark node encodes its ids on the executors: the node holds their 16-byte
        # blocks and, after the protocol, the common ids only (ppdm.compute.SparkIdSet).
        from pathlib import Path

        from ppdm.jobs.mining import party_engine
        from ppdm.sources import parse_data_entry

        spec = parse_data_entry(data, table[data], base_dir=Path(ctx.base_dir))
        encoded = party_engine(ctx).id_set(spec, id_column)
        if encoded is not None:
            return encoded
    # Only the id column is read (a SQL SELECT of it, a Parquet projection, or the CSV).
    records = read_party_records(ctx, data, sep=sep, id_column=id_column, columns=[])
    if records.ids is None:
        raise ConfigError(f"party {ctx.name!r}: the records have no id column {id_column!r}")
    return records.ids.tolist()


def run_psi_align(net: Network, params: Mapping[str, Any], ctx: PartyContext) -> dict[str, Any]:
    method = params.get("method")
    if method not in METHODS:
        raise ConfigError(f"method must be one of {', '.join(METHODS)}, not {method!r}")
    if len(net.parties) < 2:
        raise ConfigError("psi-align needs at least two parties")
    max_set_ratio, min_set_size = bounds(params)
    ids = party_ids(net, params, ctx)
    try:
        result = align(
            net, ids, method=method, max_set_ratio=max_set_ratio, min_set_size=min_set_size
        )
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"party {ctx.name!r}: {exc}") from None
    out: dict[str, Any] = {
        "party": net.me,
        "method": method,
        "leader": result.leader,
        "max_set_ratio": max_set_ratio,
        "min_set_size": min_set_size,
        "size": len(result.ids),
        "ids_sha256": ids_digest(result.ids),
    }
    if params.get("return_ids") and len(result.ids) <= RETURN_LIMIT:
        out["ids"] = [
            v.decode("utf-8", "backslashreplace") if isinstance(v, bytes) else v for v in result.ids
        ]
    return out


register_job(
    JobSpec(
        name="psi-align",
        summary="private record alignment: the intersection of the parties' id columns (KKRT16 PSI)",
        run=run_psi_align,
        defaults=PSI_DEFAULTS,
    )
)
