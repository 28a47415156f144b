"""The ``assoc`` and ``kmeans`` jobs: distributed mining with each party's own data file.

Issue 5 (Aggarwal 2015, §20.5 and figure 20.6): supermarket chains that each hold their
own customers' baskets (horizontal partitioning) or stores selling complementary products
to the same customers (vertical partitioning) mine the pooled data without showing it.
The protocols are in :mod:`ppdm.mining`; this module is the glue that makes them *jobs*:
each party reads its own file from its settings (``[data] transactions = "..."`` or
``[data] records = "..."``; the ``data`` parameter names another entry of the table), the
public parameters come from the initiator, and the result is JSON. ``ppdm simulate assoc|kmeans`` (in-process network) and ``ppdm job run
assoc|kmeans`` (party nodes over gRPC) run exactly this code.

Data files (``docs/mining.md``)
-------------------------------
``transactions`` (``assoc``)
    A FIMI ``.dat`` file (integer items) or a basket CSV (string items, one basket per
    line). With ``mode="vertical"`` every party's file has one line per transaction of
    the common database, in the same order: the line number is the common transaction id
    (an empty line is a transaction without any of the party's items).
``records`` (``kmeans``)
    A CSV table with a header. The ``id_column`` (default ``record_id``), when present,
    identifies records: rows are sorted by it, and with ``mode="vertical"`` the parties
    check that they hold the same ids (by comparing a SHA-256 digest of the sorted ids)
    before aligning their columns on it. The other columns (or the ``columns`` parameter)
    are the numeric attributes.

:func:`partition_file` splits one pooled file into such party files (``ppdm
partition``), and :func:`set_party_data` points a party's settings file at its file.

What the job documents reveal
-----------------------------
Every party's ``result`` goes to the job's initiator (``docs/jobs.md``). Besides the
protocol outputs (what every party learns anyway), a result holds the party's own
``local`` statistics (record count, cluster sizes of its own records) only when the job
runs with ``report_local=true`` (off by default: the initiator would see them); it never
holds another party's data.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ppdm.errors import ConfigError, ProtocolError
from ppdm.jobs.registry import JobSpec, PartyContext, register_job
from ppdm.mining.itemsets import TransactionDB
from ppdm.mining.partition import horizontal_split, vertical_split
from ppdm.mining.readers import read_basket_csv, read_fimi, write_fimi
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

MODES = ("horizontal", "vertical")
TRANSACTION_FORMATS = ("fimi", "basket")
FORMATS = ("auto", "fimi", "basket", "records")

# ---------------------------------------------------------------------------------------
# Files


def detect_format(path: str | os.PathLike[str], fmt: str = "auto", *, table: bool) -> str:
    """The format of a data file: ``fmt`` unless it is ``"auto"``, else from the suffix
    (``.dat`` is FIMI; ``.csv`` is a records table when ``table`` else a basket CSV)."""
    if fmt not in FORMATS:
        raise ConfigError(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")
    if fmt != "auto":
        return fmt
    suffix = Path(path).suffix.lower()
    if suffix == ".dat":
        return "fimi"
    if suffix in (".csv", ".tsv", ".txt"):
        return "records" if table else "basket"
    raise ConfigError(
        f"{path}: cannot tell the format from the suffix {suffix!r}; name it "
        "(fimi, basket or records)"
    )


def read_transactions(
    path: str | os.PathLike[str], *, fmt: str = "auto", sep: str = ","
) -> TransactionDB:
    """Read a FIMI or basket-CSV transaction file (``fmt`` as in :func:`detect_format`)."""
    kind = detect_format(path, fmt, table=False)
    if kind == "records":
        raise ConfigError("association rules need transactions (fimi or basket), not records")
    if not Path(path).is_file():
        raise ConfigError(f"transaction file not found: {path}")
    if kind == "fimi":
        return read_fimi(path)
    return read_basket_csv(path, sep=sep)


def write_transactions(
    db: TransactionDB, path: str | os.PathLike[str], *, fmt: str, sep: str = ","
) -> None:
    """Write ``db`` as FIMI (integer items) or basket CSV, one line per transaction."""
    if fmt == "fimi":
        write_fimi(db, path)
        return
    if fmt != "basket":
        raise ConfigError(f"cannot write transactions as {fmt!r}")
    with open(path, "w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh, delimiter=sep, lineterminator="\n")
        for t in db.transactions():
            writer.writerow([str(x) for x in t])


class Records:
    """A numeric records table of one party: ``ids`` (or ``None``), ``columns``, ``x``."""

    def __init__(self, ids: np.ndarray | None, columns: list[str], x: np.ndarray | Any) -> None:
        self.ids = ids
        self.columns = columns
        self.x = x

    def id_digest(self) -> bytes:
        """SHA-256 of the sorted record ids (what vertical parties compare)."""
        h = hashlib.sha256()
        if self.ids is not None:
            for v in self.ids.tolist():
                h.update(str(v).encode() + b"\n")
        return h.digest()


def _read_table(path: str | os.PathLike[str], sep: str, **options: Any) -> Any:
    import pandas as pd

    if not Path(path).is_file():
        raise ConfigError(f"records file not found: {path}")
    try:
        return pd.read_csv(path, sep=sep, **options)
    except (ValueError, pd.errors.ParserError) as exc:
        raise ConfigError(f"{path}: not a CSV table with a header ({exc})") from None


def read_records(
    path: str | os.PathLike[str],
    *,
    sep: str = ",",
    id_column: str | None = "record_id",
    columns: Sequence[str] | None = None,
    require_all: bool = True,
) -> Records:
    """Read a records CSV (header required): rows sorted by ``id_column`` when it is
    present (ids must be unique), the numeric attributes ``columns`` (default: every
    column but the id). With ``require_all=False`` the listed columns that the file does
    not have are skipped (vertical partitioning: each party holds some of them)."""
    return records_from_frame(
        _read_table(path, sep), path, id_column=id_column, columns=columns, require_all=require_all
    )


def open_party_source(ctx: PartyContext, key: str, *, fmt: str = "auto", sep: str = ",") -> Any:
    """The :class:`ppdm.sources.DataSource` of entry ``key`` of the party's ``[data]``
    table (a file path, or a ``kind = "parquet"`` / ``"sql"`` table), opened afresh for
    this job."""
    from ppdm.sources import open_source

    return open_source(
        ctx.settings.get("data", {}), key, base_dir=ctx.base_dir, party=ctx.name, fmt=fmt, sep=sep
    )


def party_engine(ctx: PartyContext) -> Any:
    """The node's compute engine (:func:`ppdm.compute.engine_for`): the ``[compute]``
    table of the party's settings, the embedded engine by default."""
    from ppdm.compute import engine_for

    return engine_for(ctx.settings, party=ctx.name)


def _party_spec(ctx: PartyContext, key: str) -> Any:
    """The checked entry ``[data] key`` of the party's settings."""
    from ppdm.sources import parse_data_entry

    table = ctx.settings.get("data", {}) or {}
    if not isinstance(table, Mapping):
        raise ConfigError(f"party {ctx.name!r}: [data] must be a table")
    if key not in table:
        raise ConfigError(
            f"party {ctx.name!r} has no data file {key!r} in the [data] table of its settings file"
        )
    return parse_data_entry(key, table[key], base_dir=Path(ctx.base_dir))


def read_party_transactions(
    ctx: PartyContext, key: str, *, fmt: str = "auto", sep: str = ",", counter: bool = False
) -> Any:
    """The party's transactions ``[data] key`` through its node's compute engine: the
    whole :class:`TransactionDB`, or with ``counter=True`` what horizontal association
    rules count on (embedded: the in-memory database for small inputs, else a streamed
    counter that scans the source once per level in bounded memory; Spark: a counter
    whose every level is one Spark job)."""
    engine = party_engine(ctx)
    spec = _party_spec(ctx, key)
    if not counter:
        return engine.transactions(spec, fmt=fmt, sep=sep)
    return engine.local_counter(spec, fmt=fmt, sep=sep)


def read_party_records(
    ctx: PartyContext,
    key: str,
    *,
    sep: str = ",",
    id_column: str | None = "record_id",
    columns: Sequence[str] | None = None,
    require_all: bool = True,
    stream_ok: bool = False,
) -> Records:
    """:func:`read_records` through the party's node's compute engine, ``[data] key``:
    only the id column and the wanted attributes are read (a SQL ``SELECT`` of those
    columns, a Parquet projection). With ``stream_ok`` (horizontal k-means) a table that
    has the id column may stay where it is: ``x`` is then the engine's
    :class:`ppdm.mining.kmeans.LocalRecords` (embedded: a
    :class:`ppdm.sources.StreamedRecords` for a large table, ``engine = "stream"`` or
    ``auto`` above ``ppdm.sources.MEMORY_ROWS`` rows; Spark: its partitioned records,
    every Lloyd step one Spark job)."""
    engine = party_engine(ctx)
    spec = _party_spec(ctx, key)
    available = engine.column_names(spec, sep=sep)
    if columns is None:
        wanted = [c for c in available if c != id_column]
    else:
        wanted = [c for c in columns if c in available or require_all]
    has_id = id_column is not None and id_column in available
    if stream_ok and id_column is not None and has_id:
        names = [c for c in wanted if c != id_column]
        local = engine.local_records(spec, names, id_column, sep=sep)
        if local is not None:
            return Records(local.ids, names, local)  # the source stays open
    if has_id:
        wanted = [id_column, *[c for c in wanted if c != id_column]]
    df = engine.read_frame(spec, wanted, sep=sep)
    return records_from_frame(
        df, spec.describe(), id_column=id_column, columns=columns, require_all=require_all
    )


def records_from_frame(
    df: Any,
    where: Any,
    *,
    id_column: str | None = "record_id",
    columns: Sequence[str] | None = None,
    require_all: bool = True,
) -> Records:
    """A :class:`Records` table from a DataFrame (rules of :func:`read_records`)."""
    import pandas as pd

    path = where
    ids = None
    if id_column is not None and id_column in df.columns:
        if df[id_column].isna().any():
            raise ConfigError(f"{path}: the id column {id_column!r} has empty values")
        if df[id_column].duplicated().any():
            raise ConfigError(f"{path}: the id column {id_column!r} has duplicate ids")
        df = df.sort_values(id_column, kind="stable").reset_index(drop=True)
        ids = df[id_column].to_numpy()
    if columns is None:
        names = [str(c) for c in df.columns if c != id_column]
    else:
        names = [str(c) for c in columns]
        missing = [c for c in names if c not in df.columns]
        if missing and require_all:
            raise ConfigError(f"{path}: no column(s) {', '.join(map(repr, missing))}")
        names = [c for c in names if c in df.columns]
    for c in names:
        if not pd.api.types.is_numeric_dtype(df[c]) or pd.api.types.is_bool_dtype(df[c]):
            raise ConfigError(
                f"{path}: column {c!r} is not numeric (encode it as numbers, or select the "
                "numeric columns with the columns parameter / --columns)"
            )
    x = df[names].to_numpy(dtype=np.float64) if names else np.zeros((len(df), 0))
    if not np.all(np.isfinite(x)):
        raise ConfigError(f"{path}: the attributes have missing or infinite values")
    return Records(ids, names, x)


def partition_file(
    input_path: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    parties: Sequence[str],
    mode: str,
    seed: int = 0,
    fmt: str = "auto",
    sep: str = ",",
    id_column: str = "record_id",
    columns: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Split one pooled data file into one file per party (``ppdm partition``).

    Horizontal: a random partition of the rows (:func:`ppdm.mining.partition.horizontal_split`),
    each party's rows in the pooled order. Vertical: a random partition of the items
    (transactions) or attribute columns (records) among the parties
    (:func:`~ppdm.mining.partition.vertical_split`); every party keeps every row. Records
    files keep (or get, numbered from 0) the common ``id_column``; transaction files keep
    the line order, so the line number is the common transaction id.

    Writes ``<party>.dat`` / ``<party>.csv`` and ``partition.json`` (the manifest, also
    returned) into ``out_dir``. ``columns`` keeps only those attributes of a records table.
    """
    if mode not in MODES:
        raise ConfigError(f"mode must be horizontal or vertical, not {mode!r}")
    names = list(parties)
    if len(names) < 2:
        raise ConfigError("partitioning needs at least two parties")
    if len(set(names)) != len(names):
        raise ConfigError("party names must be distinct")
    kind = detect_format(input_path, fmt, table=True)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {
        "input": str(input_path),
        "mode": mode,
        "seed": seed,
        "format": kind,
        "parties": {},
    }
    if kind == "records":
        _partition_records(input_path, out, names, mode, seed, sep, id_column, columns, manifest)
    else:
        if columns is not None:
            raise ConfigError("columns apply to records tables, not to transactions")
        db = read_transactions(input_path, fmt=kind, sep=sep)
        manifest["rows"] = db.n_transactions
        ext = ".dat" if kind == "fimi" else ".csv"
        try:
            if mode == "horizontal":
                parts = horizontal_split(db.n_transactions, len(names), seed=seed)
                pieces = [(db.subset(rows), {"rows": len(rows)}) for rows in parts]
            else:
                cols = vertical_split(db.items.tolist(), len(names), seed=seed)
                pieces = [
                    (db.project(c), {"rows": db.n_transactions, "items": len(c)}) for c in cols
                ]
        except ValueError as exc:
            raise ConfigError(f"{input_path}: {exc}") from None
        for name, (part, info) in zip(names, pieces, strict=True):
            write_transactions(part, out / f"{name}{ext}", fmt=kind, sep=sep)
            manifest["parties"][name] = {"file": f"{name}{ext}", **info}
    (out / "partition.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def _partition_records(
    input_path: str | os.PathLike[str],
    out: Path,
    names: list[str],
    mode: str,
    seed: int,
    sep: str,
    id_column: str,
    columns: Sequence[str] | None,
    manifest: dict[str, Any],
) -> None:
    df = _read_table(input_path, sep, dtype=str, keep_default_na=False)
    if id_column in df.columns:
        if df[id_column].duplicated().any():
            raise ConfigError(f"{input_path}: the id column {id_column!r} has duplicate ids")
    else:
        df.insert(0, id_column, [str(i) for i in range(len(df))])
    manifest["rows"] = len(df)
    manifest["id_column"] = id_column
    attrs = [c for c in df.columns if c != id_column]
    if columns is not None:
        missing = [c for c in columns if c not in attrs]
        if missing:
            raise ConfigError(f"{input_path}: no column(s) {', '.join(map(repr, missing))}")
        attrs = [c for c in attrs if c in set(columns)]
        df = df[[id_column, *attrs]]
    try:
        if mode == "horizontal":
            parts = horizontal_split(len(df), len(names), seed=seed)
            pieces = [(df.iloc[rows], {"rows": len(rows), "columns": attrs}) for rows in parts]
        else:
            cols = vertical_split(attrs, len(names), seed=seed)
            pieces = [(df[[id_column, *c]], {"rows": len(df), "columns": c}) for c in cols]
    except ValueError as exc:
        raise ConfigError(f"{input_path}: {exc}") from None
    for name, (part, info) in zip(names, pieces, strict=True):
        part.to_csv(out / f"{name}.csv", sep=sep, index=False)
        manifest["parties"][name] = {"file": f"{name}.csv", **info}


def set_party_data(
    settings_path: str | os.PathLike[str], key: str, data_path: str | os.PathLike[str]
) -> None:
    """Point ``[data] key`` of a party's settings file at ``data_path`` (written relative
    to the settings file when it lies below its folder).

    Only that entry changes: the owner's comments, other keys, order and formatting are
    kept, and the file is replaced atomically (a running node re-reads ``[data]`` when a
    job starts, so it sees the new file without a restart).
    """
    from ppdm.parties.consortium import update_toml_file

    settings = Path(settings_path)
    if not settings.is_file():
        raise ConfigError(f"settings file not found: {settings}")
    target = Path(data_path).resolve()
    if not target.is_file():
        raise ConfigError(f"data file not found: {data_path}")
    base = settings.resolve().parent
    try:
        value = str(target.relative_to(base))
    except ValueError:
        value = str(target)
    update_toml_file(settings, {"data": {key: value}})


# ---------------------------------------------------------------------------------------
# Parameter checks


def _choice(params: Mapping[str, Any], name: str, allowed: Sequence[str]) -> str:
    value = params[name]
    if value not in allowed:
        raise ConfigError(f"{name} must be one of {', '.join(allowed)}, not {value!r}")
    return str(value)


def _flag(params: Mapping[str, Any], name: str) -> bool:
    value = params[name]
    if not isinstance(value, bool):
        raise ConfigError(f"{name} must be true or false, not {value!r}")
    return value


def _fraction(params: Mapping[str, Any], name: str, *, low_open: bool) -> float:
    value = params[name]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{name} must be a number, not {value!r}")
    v = float(value)
    ok = (0.0 < v <= 1.0) if low_open else (0.0 <= v <= 1.0)
    if not ok or math.isnan(v):
        raise ConfigError(f"{name} must be in {'(0, 1]' if low_open else '[0, 1]'}, not {value!r}")
    return v


def _integer(params: Mapping[str, Any], name: str, *, low: int, high: int | None = None) -> int:
    value = params[name]
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # JSON numbers may arrive as floats
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be an integer, not {value!r}")
    if value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ConfigError(f"{name} must be {bound}, not {value}")
    return value


def _optional_integer(
    params: Mapping[str, Any], name: str, *, low: int, high: int | None = None
) -> int | None:
    return None if params[name] is None else _integer(params, name, low=low, high=high)


def _number(params: Mapping[str, Any], name: str, *, low: float = 0.0) -> float:
    value = params[name]
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise ConfigError(f"{name} must be a number, not {value!r}")
    if value < low:
        raise ConfigError(f"{name} must be >= {low:g}, not {value!r}")
    return float(value)


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


def _schema_digest(job_id: str, columns: Sequence[str]) -> bytes:
    """SHA-256 of the job id and the ordered column names (equal lists, equal digests)."""
    return hashlib.sha256(json.dumps([job_id, list(columns)]).encode("utf-8")).digest()


def _check_names(value: Any, party: str, step: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ProtocolError(party, step, "expected a list of column names")
    return value


# ---------------------------------------------------------------------------------------
# assoc

ASSOC_DEFAULTS: dict[str, Any] = {
    "mode": "horizontal",
    "min_support": 0.1,
    "min_confidence": 0.8,
    "reveal_counts": False,
    "method": "ot",
    "multiparty": "gmw",
    "protect": "dp",
    "epsilon": 1.0,
    "max_shared_candidates": 256,
    "max_len": None,
    "label_bytes": None,
    "fake_ratio": 0.25,
    "min_aggregate": 10,
    "colluders": 1,
    "format": "auto",
    "sep": ",",
    "data": "transactions",
    "report_local": False,
    "align": False,
    "align_method": "oprf",
    "max_set_ratio": 2.0,
    "min_set_size": 10,
}


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
    return _jsonable(out)


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

KMEANS_DEFAULTS: dict[str, Any] = {
    "mode": "horizontal",
    "k": 3,
    "init": "aggregate",
    "seed": 0,
    "max_iter": 300,
    "tol": 0.0,
    "fraction_bits": None,
    "columns": None,
    "id_column": "record_id",
    "sep": ",",
    "data": "records",
    "include_labels": False,
    "report_local": False,
    "min_cluster_size": 10,
    "min_party_records": 3,
    "align": False,
    "align_method": "oprf",
    "max_set_ratio": 2.0,
    "min_set_size": 10,
}


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
    records = read_party_records(
        ctx,
        opts["data"],
        sep=opts["sep"],
        id_column=opts["id_column"],
        columns=opts["columns"],
        require_all=mode == "horizontal",
        stream_ok=mode == "horizontal" and not opts["align"],
    )
    if opts["align"]:
        # The aligned records are a subset of this party's: refuse before the alignment.
        _check_local_bound(records, opts)
        records = _aligned_records(net, records, opts, ctx)
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


def _check_local_bound(records: Records, opts: Mapping[str, Any]) -> None:
    """Vertical k-means: every party holds the same records, so ``k`` is checked against
    this party's own count before anything derived from the records (ids, alignment) is
    sent; the text names no count."""
    k, size = opts["k"], opts["min_cluster_size"]
    if k * max(size, 1) > len(records.x):
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
    _check_local_bound(records, opts)
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


def check_params(job: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """The validated parameters of job ``assoc`` or ``kmeans`` (defaults filled in);
    :class:`ConfigError` naming the first bad one. Data-dependent checks (explicit
    initial centers, label sizes) happen in the job."""
    if job == "assoc":
        merged = {**ASSOC_DEFAULTS, **params}
        fmt = merged["format"]
        if fmt not in ("auto", *TRANSACTION_FORMATS):
            raise ConfigError(f"format must be auto, fimi or basket, not {fmt!r}")
        return {
            "mode": _choice(merged, "mode", MODES),
            "min_support": _fraction(merged, "min_support", low_open=True),
            "min_confidence": _fraction(merged, "min_confidence", low_open=False),
            "reveal_counts": _flag(merged, "reveal_counts"),
            "method": _choice(merged, "method", ("ot", "gilboa", "paillier")),
            "multiparty": _choice(merged, "multiparty", ("gmw", "intersection")),
            "protect": _choice(merged, "protect", ("dp", "exact")),
            "epsilon": _vertical_epsilon(merged),
            "max_shared_candidates": _integer(merged, "max_shared_candidates", low=1),
            "max_len": _optional_integer(merged, "max_len", low=1),
            "label_bytes": _optional_integer(merged, "label_bytes", low=1, high=255),
            "fake_ratio": _number(merged, "fake_ratio"),
            "min_aggregate": _integer(merged, "min_aggregate", low=0, high=1 << 40),
            "colluders": _integer(merged, "colluders", low=1),
            "format": fmt,
            "sep": _separator(merged),
            "data": _data_key(merged),
            "report_local": _flag(merged, "report_local"),
            **_align_params(merged),
        }
    if job != "kmeans":
        raise ConfigError(f"no mining job {job!r}")
    merged = {**KMEANS_DEFAULTS, **params}
    mode = _choice(merged, "mode", MODES)
    id_column = merged["id_column"]
    if id_column is not None and not isinstance(id_column, str):
        raise ConfigError(f"id_column must be a column name or null, not {id_column!r}")
    columns = merged["columns"]
    if columns is not None and (
        not isinstance(columns, list) or not columns or not all(isinstance(c, str) for c in columns)
    ):
        raise ConfigError("columns must be a non-empty list of column names")
    init = merged["init"]
    if init == "aggregate":
        # The default: starting centres that are aggregates -- every party's own quantile
        # slabs along a coin-tossed direction horizontally (reliable under the size
        # floors), random groups dealt from a joint seed vertically.
        init = "random-slabs" if mode == "horizontal" else "random-partition"
    if isinstance(init, str):
        allowed = (
            ("random-partition", "random-slabs", "first-k", "kmeans++")
            if mode == "horizontal"
            else ("random-partition", "first-k", "random")
        )
        if init not in allowed:
            hint = (
                " (k-means++ seeding would reveal every record's distance in vertical mode)"
                if init == "kmeans++" and mode == "vertical"
                else ""
            )
            raise ConfigError(f"init must be one of {', '.join(allowed)} in {mode} mode{hint}")
    elif not isinstance(init, list | dict):
        raise ConfigError("init must be a method name, a {column: [k values]} object or rows")
    return {
        "mode": mode,
        "k": _integer(merged, "k", low=1),
        "init": init,
        "seed": _integer(merged, "seed", low=0),
        "max_iter": _integer(merged, "max_iter", low=1),
        "tol": _number(merged, "tol"),
        "fraction_bits": _optional_integer(merged, "fraction_bits", low=-64, high=52),
        "columns": columns,
        "id_column": id_column,
        "sep": _separator(merged),
        "data": _data_key(merged),
        "include_labels": _flag(merged, "include_labels"),
        "min_cluster_size": _integer(merged, "min_cluster_size", low=0),
        "min_party_records": _integer(merged, "min_party_records", low=0),
        "report_local": _flag(merged, "report_local"),
        **_align_params(merged),
    }


# ---------------------------------------------------------------------------------------
# Private record alignment before vertical mining (align=true; docs/mining.md)


def _align_params(merged: Mapping[str, Any]) -> dict[str, Any]:
    """``align`` (vertical mode only; k-means needs an id column), ``align_method`` and
    the size bounds of the alignment, ``max_set_ratio`` (default 2.0) and
    ``min_set_size`` (default 10), as in the ``psi-align`` job
    (:func:`ppdm.jobs.psi.bounds`)."""
    from ppdm.jobs._alignment import bounds

    align = _flag(merged, "align")
    method = _choice(merged, "align_method", ("oprf", "ec"))
    if align and merged.get("mode") != "vertical":
        raise ConfigError("align=true applies to mode=vertical only")
    if align and "id_column" in merged and merged["id_column"] is None:
        raise ConfigError("align=true needs an id_column")
    ratio, size = bounds(merged)
    return {"align": align, "align_method": method, "max_set_ratio": ratio, "min_set_size": size}


def _aligned_records(
    net: Network, records: Records, opts: Mapping[str, Any], ctx: PartyContext
) -> Records:
    """The records whose ids every party holds, in the common order: private record
    alignment (:func:`ppdm.protocols.psi.align`) on this party's id column."""
    from ppdm.protocols.psi import align

    if records.ids is None:
        raise ConfigError(
            f"party {ctx.name!r}: align=true needs the id column {opts['id_column']!r} in "
            "the records file"
        )
    try:
        common = align(
            net,
            records.ids,
            method=opts["align_method"],
            max_set_ratio=opts["max_set_ratio"],
            min_set_size=opts["min_set_size"],
        )
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"party {ctx.name!r}: {exc}") from None
    return Records(records.ids[common.rows], records.columns, records.x[common.rows])


def read_id_transactions(
    path: str | os.PathLike[str], *, fmt: str = "auto", sep: str = ","
) -> tuple[list[str], TransactionDB]:
    """A transaction file whose lines start with the transaction id: ``(ids, db)``.

    FIMI: the first whitespace-separated token of a line is its id, the rest its integer
    items; basket CSV: the first field is the id. Ids are kept as strings and must be
    distinct; blank lines are skipped.
    """
    from ppdm.mining.readers import from_transactions

    kind = detect_format(path, fmt, table=False)
    if kind == "records":
        raise ConfigError("association rules need transactions (fimi or basket), not records")
    if not Path(path).is_file():
        raise ConfigError(f"transaction file not found: {path}")
    ids: list[str] = []
    rows: list[list[Any]] = []
    with open(path, newline="", encoding="utf-8") as f:
        if kind == "fimi":
            for number, line in enumerate(f, 1):
                tokens = line.split()
                if not tokens:
                    continue
                try:
                    items = [int(t) for t in tokens[1:]]
                except ValueError:
                    raise ConfigError(f"{path}:{number}: items must be integers") from None
                if any(i < 0 for i in items):
                    raise ConfigError(f"{path}:{number}: items must be non-negative")
                ids.append(tokens[0])
                rows.append(items)
        else:
            for row in csv.reader(f, delimiter=sep):
                fields = [x.strip() for x in row]
                if not any(fields):
                    continue
                ids.append(fields[0])
                rows.append([x for x in fields[1:] if x])
    if len(set(ids)) != len(ids):
        raise ConfigError(f"{path}: the transaction ids (first field of each line) repeat")
    return ids, from_transactions(rows)


def _vertical_epsilon(params: Mapping[str, Any]) -> float:
    """``epsilon`` of ``protect="dp"``: a positive finite number (per party and job)."""
    value = _number(params, "epsilon")
    if not 0.0 < value < math.inf:
        raise ConfigError(f"epsilon must be a positive finite number, not {value!r}")
    return value


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
        multiparty=opts["multiparty"],
        max_len=opts["max_len"],
        progress=ctx.progress,
    )


def _aligned_assoc(net: Network, opts: Mapping[str, Any], ctx: PartyContext) -> dict[str, Any]:
    """Vertical association rules after private record alignment: every party's file
    lists its own transactions, each line starting with the transaction id."""
    from ppdm.protocols.psi import align

    if len(net.parties) < 2:
        raise ConfigError("vertical association rules need at least two parties")
    ids, db = read_id_transactions(ctx.data_path(opts["data"]), fmt=opts["format"], sep=opts["sep"])
    common = align(
        net,
        ids,
        method=opts["align_method"],
        max_set_ratio=opts["max_set_ratio"],
        min_set_size=opts["min_set_size"],
    )
    db = db.subset(common.rows)
    result = _vertical_assoc(net, db, opts, ctx)
    out: dict[str, Any] = {"mode": "vertical", "party": net.me, "aligned": len(common.ids)}
    out.update(result.to_json())
    if opts["report_local"]:
        out["local"] = {"transactions": len(ids), "items": db.n_items}
    return _jsonable(out)


def _data_key(params: Mapping[str, Any]) -> str:
    key = params["data"]
    if not isinstance(key, str) or not key:
        raise ConfigError(f"data must name an entry of the [data] table, not {key!r}")
    return key


def _separator(params: Mapping[str, Any]) -> str:
    sep = params["sep"]
    if not isinstance(sep, str) or len(sep) != 1 or sep in '\r\n"':
        raise ConfigError(f"sep must be one character (not a quote or newline), not {sep!r}")
    return sep


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
