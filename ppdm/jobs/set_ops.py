"""Jobs ``set-union`` and ``intersection-cardinality``.

Each party's set comes from its own settings (``[inputs] set_union`` / ``[inputs]
intersection``: a list of strings or integers) or, for testbeds and benchmarks, is
generated locally from public parameters (``generate_n`` items per party, a fraction
``overlap`` of them common to all parties, the rest private to each party, from
``seed``): the initiator never sends anyone's items. ``workers`` sets the processes used
for large batches of curve operations (``"auto"``: one per CPU).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from ppdm.errors import ConfigError
from ppdm.jobs.registry import JobSpec, PartyContext, register_job
from ppdm.parties.network import Network
from ppdm.protocols.commutative import set_workers
from ppdm.protocols.intersection import secure_intersection_cardinality
from ppdm.protocols.set_union import secure_set_union

_RETURN_LIMIT = 1000


def generated_ids(index: int, n: int, overlap: float, seed: int) -> list[int]:
    """Synthetic set of party ``index``: ``round(overlap * n)`` ids shared by all parties
    and the rest unique to this party (ids are offset by the seed)."""
    if n < 0 or not 0.0 <= overlap <= 1.0:
        raise ConfigError("generate_n must be >= 0 and overlap in [0, 1]")
    common = round(overlap * n)
    base = seed * 10**9
    own_start = base + (index + 1) * 10**7
    return list(range(base, base + common)) + list(range(own_start, own_start + n - common))


def _items(net: Network, params: Mapping[str, Any], ctx: PartyContext, key: str) -> list:
    if params.get("generate_n") is not None:
        return generated_ids(
            net.index, int(params["generate_n"]), float(params["overlap"]), int(params["seed"])
        )
    raw = ctx.private_input(key)
    if not isinstance(raw, list) or not all(isinstance(x, str | int) for x in raw):
        raise ConfigError(f"party {ctx.name!r}: inputs.{key} must be a list of strings or ints")
    return raw


def _digest(items: list[bytes]) -> str:
    h = hashlib.sha256()
    for item in items:
        h.update(len(item).to_bytes(4, "big") + item)
    return h.hexdigest()


def _use_workers(params: Mapping[str, Any]) -> None:
    workers = params.get("workers")
    set_workers(None if workers in (None, "auto") else int(workers))


def run_set_union(net: Network, params: Mapping[str, Any], ctx: PartyContext) -> dict[str, Any]:
    _use_workers(params)
    raw = _items(net, params, ctx, "set_union")
    items = [x.encode() if isinstance(x, str) else x.to_bytes(8, "big", signed=True) for x in raw]
    union = secure_set_union(
        net,
        items,
        max_item_bytes=int(params["max_item_bytes"]),
        fake_ratio=float(params["fake_ratio"]),
        pad_to=params.get("pad_to"),
    )
    out: dict[str, Any] = {"union_size": len(union), "union_sha256": _digest(union)}
    if len(union) <= _RETURN_LIMIT:
        out["union"] = [_show(item, raw) for item in union]
    return out


def _show(item: bytes, raw: list) -> str | int:
    if raw and isinstance(raw[0], int):
        return int.from_bytes(item, "big", signed=True)
    return item.decode("utf-8", errors="backslashreplace")


def run_intersection(net: Network, params: Mapping[str, Any], ctx: PartyContext) -> dict[str, Any]:
    _use_workers(params)
    raw = _items(net, params, ctx, "intersection")
    size = secure_intersection_cardinality(net, raw, fake_ratio=float(params["fake_ratio"]))
    return {"cardinality": size}


_GEN = {"generate_n": None, "overlap": 0.5, "seed": 1, "workers": "auto"}

register_job(
    JobSpec(
        name="set-union",
        summary="secure union of the parties' sets (commutative encryption, fake items)",
        run=run_set_union,
        defaults={**_GEN, "max_item_bytes": 29, "fake_ratio": 0.25, "pad_to": None},
    )
)
register_job(
    JobSpec(
        name="intersection-cardinality",
        summary="size of the intersection of the parties' sets (Vaidya & Clifton)",
        run=run_intersection,
        defaults={**_GEN, "fake_ratio": 0.0},
    )
)
