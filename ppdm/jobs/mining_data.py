"""The data of the ``assoc`` and ``kmeans`` jobs: files, partitions and a party's entries.

Readers and writers of the data files the mining jobs take, the split of one pooled file
into party files (``ppdm partition``), pointing a party's settings at its file, and the
reading of a party's ``[data]`` entry through its node's compute engine. The jobs
themselves are :mod:`ppdm.jobs.mining`.

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
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ppdm.errors import ConfigError
from ppdm.jobs.registry import PartyContext
from ppdm.mining.itemsets import TransactionDB
from ppdm.mining.partition import horizontal_split, vertical_split
from ppdm.mining.readers import read_basket_csv, read_fimi, write_fimi

__all__ = [
    "FORMATS",
    "MODES",
    "TRANSACTION_FORMATS",
    "Alignable",
    "Records",
    "alignable_records",
    "alignable_transactions",
    "detect_format",
    "open_party_source",
    "partition_file",
    "party_engine",
    "read_id_transactions",
    "read_party_records",
    "read_party_transactions",
    "read_records",
    "read_transactions",
    "records_from_frame",
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
    wanted = _wanted_columns(available, id_column, columns, require_all=require_all)
    has_id = id_column is not None and id_column in available
    if stream_ok and id_column is not None and has_id:
        names = [c for c in wanted if c != id_column]
        local = engine.local_records(spec, names, id_column, sep=sep)
        if local is not None:
            return Records(local.ids, names, local)  # the source stays open
    if has_id and id_column is not None:
        wanted = [id_column, *[c for c in wanted if c != id_column]]
    df = engine.read_frame(spec, wanted, sep=sep)
    return records_from_frame(
        df, spec.describe(), id_column=id_column, columns=columns, require_all=require_all
    )


def _wanted_columns(
    available: Sequence[str],
    id_column: str | None,
    columns: Sequence[str] | None,
    *,
    require_all: bool,
) -> list[str]:
    """The attribute columns to read: ``columns`` (those the table has unless
    ``require_all``: a missing one is then named by :func:`records_from_frame`), or every
    column but the id."""
    if columns is None:
        return [c for c in available if c != id_column]
    return [c for c in columns if c in available or require_all]


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


# ---------------------------------------------------------------------------------------
# A party's data before private record alignment (align=true)


@dataclass(frozen=True)
class Alignable:
    """A party's ids for :func:`ppdm.protocols.psi.align` and how to read its rows of the
    common ids afterwards.

    ``ids`` is what ``align`` takes: a list read into the node's memory (the embedded
    engine), or the ids its compute engine encoded where the data live
    (:meth:`ppdm.compute.ComputeEngine.id_set`: the node holds their PSI blocks, never
    the ids). ``take(alignment)`` is this party's data of the common ids in the common
    order: a subset of what the node read (embedded) or, on Spark, the rows of the
    common ids only, read by one Spark job after the alignment. ``size`` is this party's
    own count of ids (an upper bound of the aligned ones)."""

    ids: Any
    size: int
    take: Callable[[Any], Any]


def _changed(where: str) -> ConfigError:
    return ConfigError(f"{where}: the ids changed during the job")


def alignable_records(
    ctx: PartyContext, key: str, *, sep: str, id_column: str, columns: Sequence[str] | None
) -> Alignable:
    """The party's records ``[data] key`` for vertical k-means with ``align=true``:
    ``take`` gives :class:`Records` of the common ids (the columns as
    :func:`read_party_records` with ``require_all=False`` picks them)."""
    engine = party_engine(ctx)
    spec = _party_spec(ctx, key)
    where = spec.describe()
    available = engine.column_names(spec, sep=sep)
    if id_column not in available:
        raise ConfigError(
            f"party {ctx.name!r}: align=true needs the id column {id_column!r} in the records"
        )
    encoded = engine.id_set(spec, id_column)
    if encoded is None:
        records = read_party_records(
            ctx, key, sep=sep, id_column=id_column, columns=columns, require_all=False
        )
        ids = records.ids
        if ids is None:  # (the column was there when the names were read)
            raise _changed(where)

        def subset(common: Any) -> Records:
            return Records(ids[common.rows], records.columns, records.x[common.rows])

        return Alignable(ids, len(ids), subset)
    wanted = _wanted_columns(available, id_column, columns, require_all=False)

    def read_common(common: Any) -> Records:
        frame = encoded.rows_of(common.ids, wanted)
        got = records_from_frame(
            frame, where, id_column=id_column, columns=columns, require_all=False
        )
        if got.ids is None or got.ids.tolist() != list(common.ids):
            raise _changed(where)
        return got

    return Alignable(encoded, len(encoded), read_common)


def _common_transactions(db: TransactionDB, rows: np.ndarray) -> TransactionDB:
    """The transactions ``rows`` over the items that occur in them: an item found only
    in transactions outside the intersection is not a candidate (the count of candidates
    the peers see would tell them of rows outside it), as on Spark, where only the
    common transactions are read."""
    sub = db.subset(rows)
    return sub.project(sub.items[sub.item_counts() > 0])


def alignable_transactions(ctx: PartyContext, key: str, *, fmt: str, sep: str) -> Alignable:
    """The party's transactions ``[data] key`` for vertical association rules with
    ``align=true``: a text file whose lines start with the transaction id
    (:func:`read_id_transactions`), or a long layout whose transaction id column is the
    id (Parquet, SQL, a Spark table; on a Spark node the ids are encoded on the
    executors and only the common transactions are read back). ``take`` gives the
    :class:`TransactionDB` of the common transactions in the common order, over the
    items that occur in them."""
    engine = party_engine(ctx)
    spec = _party_spec(ctx, key)
    where = spec.describe()
    if not spec.is_table:
        ids, db = read_id_transactions(spec.file_path, fmt=spec.format or fmt, sep=spec.sep or sep)
        return Alignable(ids, len(ids), lambda common: _common_transactions(db, common.rows))
    from ppdm.sources.base import long_frame_to_database

    t, i = spec.transaction_column, spec.item_column
    encoded = engine.id_set(spec, t, distinct=True)
    if encoded is None:
        tids, db = long_frame_to_database(engine.read_frame(spec, [t, i], sep=sep), spec)
        return Alignable(
            tids.tolist(), len(tids), lambda common: _common_transactions(db, common.rows)
        )

    def read_common(common: Any) -> TransactionDB:
        tids, db = long_frame_to_database(encoded.rows_of(common.ids, [i]), spec)
        if tids.tolist() != list(common.ids):
            raise _changed(where)
        return db

    return Alignable(encoded, len(encoded), read_common)
