"""Where a party's private data comes from: files, Parquet datasets and SQL databases.

Every job reads its party's data through one small interface, :class:`DataSource`,
opened per job from an entry of the ``[data]`` table of the party's settings
(:func:`open_source`; the schema is in :mod:`ppdm.sources.config` and
``docs/jobs.md``), so the data is read afresh for every job and the protocols and miners
do not change:

* :class:`FileSource` -- FIMI, basket CSV, records CSV, Parquet file (as before: a
  ``[data]`` entry that is a path);
* :class:`ParquetDatasetSource` -- a directory of Parquet files (hive partitions),
  scanned by DuckDB;
* :class:`SqlSource` -- a table or query of PostgreSQL (psycopg 3) or SQLite, read-only,
  with the password from an environment variable or a private file.

Local work on large inputs runs in bounded memory: :class:`StreamedCounter` counts a
level's candidate itemsets chunk by chunk over a stream that DuckDB (Parquet), a
server-side cursor (SQL) or a block reader (FIMI) delivers; below
:data:`~ppdm.sources.base.MEMORY_ROWS` rows (``engine = "auto"``) the in-memory
:class:`~ppdm.mining.itemsets.TransactionDB` path is kept.

Stalls are bounded: a node runs each job inside :func:`read_time_limit` (the job's
timeout), and every read of a source opened inside it ends within that bound with a
:class:`~ppdm.errors.SourceError` naming its fault class (:mod:`ppdm.sources.limits`).

Layering: above :mod:`ppdm.mining` (it builds its databases), below :mod:`ppdm.jobs`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ppdm.errors import ConfigError
from ppdm.sources.config import SourceSpec, parse_data_entry, parse_data_table, resolve_password
from ppdm.sources.limits import current_read_timeout, read_time_limit

if TYPE_CHECKING:
    from ppdm.sources.base import MEMORY_ROWS, DataSource, long_to_database
    from ppdm.sources.counting import StreamedCounter
    from ppdm.sources.files import FileSource, ParquetDatasetSource
    from ppdm.sources.records import StreamedRecords
    from ppdm.sources.sql import SqlSource

# The readers (and the miners they build databases for) load on first use: a node that
# only checks its [data] table at start (ppdm.sources.config) does not import them.
_LAZY = {
    "MEMORY_ROWS": "base",
    "DataSource": "base",
    "long_to_database": "base",
    "StreamedCounter": "counting",
    "FileSource": "files",
    "ParquetDatasetSource": "files",
    "StreamedRecords": "records",
    "SqlSource": "sql",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


__all__ = [
    "HEADER_READ_TIMEOUT",
    "MEMORY_ROWS",
    "DataSource",
    "FileSource",
    "ParquetDatasetSource",
    "SourceSpec",
    "SqlSource",
    "StreamedCounter",
    "StreamedRecords",
    "check_source",
    "current_read_timeout",
    "long_to_database",
    "open_source",
    "open_spec",
    "parse_data_entry",
    "parse_data_table",
    "read_time_limit",
    "resolve_password",
    "source_columns",
    "source_version",
]


#: Seconds a read of a source's column names may take outside a job.
HEADER_READ_TIMEOUT = 30.0


def open_spec(spec: SourceSpec, *, fmt: str = "auto", sep: str = ",") -> DataSource:
    """The source of a checked entry; ``fmt``/``sep`` (the job's parameters) apply to a
    file entry that does not name its own."""
    from ppdm.sources.files import FileSource, ParquetDatasetSource
    from ppdm.sources.sql import SqlSource

    if spec.kind == "file":
        if spec.path is not None and spec.path.is_dir():
            return ParquetDatasetSource(spec)
        return FileSource(spec, fmt=fmt, sep=sep)
    if spec.kind == "parquet":
        return ParquetDatasetSource(spec)
    if spec.kind == "spark-table":
        raise ConfigError(
            f'{spec.describe()}: a Spark catalog table is read by [compute] engine = "spark" only'
        )
    return SqlSource(spec)


def open_source(
    data: Mapping[str, Any] | None,
    key: str,
    *,
    base_dir: Path,
    party: str,
    fmt: str = "auto",
    sep: str = ",",
) -> DataSource:
    """Open entry ``key`` of a party's ``[data]`` table (a job calls this each time it
    runs). :class:`ConfigError` if there is no such entry or it is not valid."""
    table = data or {}
    if not isinstance(table, Mapping):
        raise ConfigError(f"party {party!r}: [data] must be a table")
    if key not in table:
        raise ConfigError(
            f"party {party!r} has no data file {key!r} in the [data] table of its settings file"
        )
    spec = parse_data_entry(key, table[key], base_dir=Path(base_dir))
    return open_spec(spec, fmt=fmt, sep=sep)


def _entry(data: Mapping[str, Any] | None, key: str, base_dir: Path, party: str) -> SourceSpec:
    table = data or {}
    if not isinstance(table, Mapping) or key not in table:
        raise ConfigError(
            f"party {party!r} has no data file {key!r} in the [data] table of its settings file"
        )
    return parse_data_entry(key, table[key], base_dir=Path(base_dir))


def check_source(data: Mapping[str, Any] | None, key: str, *, base_dir: Path, party: str) -> None:
    """What a node checks before accepting a job that reads ``[data] key``, without
    reading the data or connecting: the entry is valid, a file or dataset exists, a SQL
    source's password can be read (set, or a private file). :class:`ConfigError` if not."""
    spec = _entry(data, key, base_dir, party)
    if spec.kind == "spark-table":
        return  # in the Spark engine's catalog: nothing on this host to check
    if spec.kind == "sql":
        if spec.scheme == "sqlite":
            if spec.path is None or not spec.path.is_file():
                raise ConfigError(f"{spec.describe()}: database file not found")
        else:
            resolve_password(spec)
        return
    path = spec.file_path
    if not (path.is_file() or (path.is_dir() and any(path.rglob("*.parquet")))):
        raise ConfigError(f"{spec.describe()}: not found")


def source_columns(
    data: Mapping[str, Any] | None, key: str, *, base_dir: Path, party: str, sep: str = ","
) -> list[str]:
    """The column names of the table ``[data] key`` (a records file, a Parquet dataset or
    a SQL table or query; the query is run with ``LIMIT 0``). A node asks this before a
    job runs, outside any job's bound: the read is bounded by :data:`HEADER_READ_TIMEOUT`
    then (a locked table fails as ``source-locked`` instead of holding the node)."""
    limit = current_read_timeout() or HEADER_READ_TIMEOUT
    with (
        read_time_limit(limit),
        open_source(data, key, base_dir=base_dir, party=party, sep=sep) as source,
    ):
        return source.column_names()


def source_version(data: Mapping[str, Any] | None, key: str, *, base_dir: Path, party: str) -> str:
    """A digest that changes when the source changes, for the node's disclosure audit:
    a file's bytes, a dataset's file names, sizes and modification times; for a SQL source
    its definition (URL without credentials, table or query) -- the node cannot see
    the database change, so the audit keeps one history across the database's updates."""
    import hashlib
    import json

    spec = _entry(data, key, base_dir, party)
    h = hashlib.sha256()
    if spec.kind in ("sql", "spark-table"):
        h.update(json.dumps([spec.url, spec.table, spec.query]).encode())
        return h.hexdigest()
    path = spec.file_path
    if path.is_dir():
        for f in sorted(path.rglob("*.parquet")):
            st = f.stat()
            h.update(f"{f.relative_to(path)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        return h.hexdigest()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
