"""The private inputs and data sets a job reads at a party, as the cross-job disclosure
audit (:mod:`ppdm.service.disclosure`) follows them: whether a ``[data]`` entry is a
source table or a file, what identity the audit follows it by, and a digest of its
current version.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the job registry is imported by a node's first job, not its start
    from ppdm.jobs.registry import PartyContext


def _source_entry(ctx: PartyContext, key: str) -> bool:
    """Whether ``[data] key`` is a source table (``kind = "parquet"``/``"sql"``/...,
    :mod:`ppdm.sources`) rather than a file path."""
    data = ctx.settings.get("data", {})
    return isinstance(data, Mapping) and isinstance(data.get(key), Mapping)


_file_digests: dict[tuple[str, int, int], str] = {}
_digest_lock = threading.Lock()


def input_version(ctx: PartyContext, key: str) -> str:
    """A digest of this party's private input or data file ``key`` (``inputs.X`` or
    ``data.X``): the disclosure audit keeps one history per version, so a changed input
    starts afresh. File digests are cached by path, size and modification time."""
    table, _, name = key.partition(".")
    if table == "inputs":
        value = ctx.private_input(name)
        text = json.dumps(value, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()
    if _source_entry(ctx, name):
        from ppdm.sources import source_version

        return source_version(ctx.settings.get("data"), name, base_dir=ctx.base_dir, party=ctx.name)
    path = Path(ctx.data_path(name))
    st = path.stat()
    cache_key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    with _digest_lock:
        hit = _file_digests.get(cache_key)
    if hit is not None:
        return hit
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    digest = h.hexdigest()
    with _digest_lock:
        _file_digests[cache_key] = digest
    return digest


def input_identity(ctx: PartyContext, key: str) -> str:
    """What the disclosure audit follows for ``key`` (``inputs.X`` or ``data.X``): the
    data, not the name a settings entry gives it. A data file is followed by its resolved
    path, a source by its definition without credentials (kind, place, table or query),
    a private input by its key. Histories are also joined across identities by content
    (:func:`input_version`), so renaming an entry, or copying a file to a new path, keeps
    its history; and a changed input keeps the answers on its earlier versions."""
    table, _, name = key.partition(".")
    if table == "inputs":
        return f"inputs:{name}"
    if _source_entry(ctx, name):
        from ppdm.sources.config import parse_data_entry

        spec = parse_data_entry(name, ctx.settings["data"][name], base_dir=ctx.base_dir)
        if spec.kind == "sql":
            return f"sql:{spec.url}:{spec.table or getattr(spec, 'query', '')}"
        if spec.kind == "spark-table":  # a table of the Spark catalog (ppdm.compute)
            return f"spark-table:{spec.table}"
        return f"{spec.kind}:{Path(spec.file_path).resolve()}"
    return f"file:{Path(ctx.data_path(name)).resolve()}"
