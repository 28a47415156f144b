"""Files and Parquet datasets: :class:`FileSource` and :class:`ParquetDatasetSource`.

A file is FIMI (``.dat``), a basket CSV, a records CSV or a Parquet file; a Parquet
dataset is a directory of Parquet files (hive partitions such as ``year=2024/`` become
columns). Parquet is read by DuckDB (embedded, no server), which scans only the columns
asked for, pushes the candidate-item filter of each counting scan into the scan, and
streams record batches into numpy, so a dataset larger than memory is counted in bounded
memory (DuckDB's own memory is capped by ``memory_limit`` and spills to a private
temporary folder). A large FIMI file is streamed in blocks of lines.

Inside a job each DuckDB query and each batch fetch is bounded by the job's timeout: a
watchdog interrupts the connection (:mod:`ppdm.sources.limits`), and the error is a
:class:`~ppdm.errors.SourceError` with the fault class ``source-timeout`` (a file that
cannot be opened: ``source-unreachable``; one DuckDB cannot parse: ``source-malformed``).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import warnings
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ppdm.errors import ConfigError, SourceError
from ppdm.extras import require
from ppdm.mining.itemsets import TransactionDB
from ppdm.mining.readers import read_basket_csv, read_fimi
from ppdm.sources.base import DataSource, long_to_database
from ppdm.sources.config import SourceSpec, quote_identifier
from ppdm.sources.counting import Batch, label_array
from ppdm.sources.limits import Watchdog, duckdb_fault
from ppdm.sources.records import RecordBatch

__all__ = ["DUCKDB_MEMORY_LIMIT", "FileSource", "ParquetDatasetSource", "fimi_batches"]

log = logging.getLogger(__name__)

#: DuckDB's memory cap per source (it spills to disk above it).
DUCKDB_MEMORY_LIMIT = "1GB"
#: Rows per record batch fetched from DuckDB.
BATCH_ROWS = 1 << 20
#: Bytes of a FIMI file parsed at once when streaming it.
FIMI_BLOCK_BYTES = 32 << 20


def fimi_batches(
    path: str | os.PathLike[str], *, block_bytes: int = FIMI_BLOCK_BYTES
) -> Iterator[Batch]:
    """Stream a FIMI file as long-layout batches (line number = transaction id; an empty
    line is a marker row), ``block_bytes`` at a time, same rules as
    :func:`ppdm.mining.readers.read_fimi`."""
    first_line = 0
    with open(path, "rb") as fh:
        tail = b""
        while True:
            block = fh.read(block_bytes)
            data = tail + block
            if not block:
                if data:
                    yield _fimi_block(data, first_line, path)
                return
            cut = data.rfind(b"\n")
            if cut < 0:
                tail = data
                continue
            head, tail = data[: cut + 1], data[cut + 1 :]
            batch = _fimi_block(head, first_line, path)
            first_line += head.count(b"\n")
            yield batch


def _fimi_block(raw: bytes, first_line: int, path: Any) -> Batch:
    try:
        text = raw.decode("ascii").replace("\r", "")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: a FIMI file holds ASCII integers only") from None
    if text.endswith("\n"):
        text = text[:-1]
    n_lines = text.count("\n") + 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        try:
            tokens = (
                np.fromstring(text.replace("\n", " -1 "), dtype=np.int64, sep=" ")
                if text.strip()
                else np.full(n_lines - 1, -1, dtype=np.int64)
            )
        except (DeprecationWarning, ValueError):
            raise ConfigError(f"{path}: items must be integers separated by blanks") from None
    if np.any(tokens < -1):
        raise ConfigError(f"{path}: items must be non-negative integers")
    sep = tokens == -1
    line = np.cumsum(sep)[~sep]
    items = tokens[~sep]
    per_line = np.bincount(line, minlength=n_lines)
    empty = np.flatnonzero(per_line == 0)
    tids = np.concatenate([line, empty]) + first_line
    labels = np.concatenate([items, np.zeros(len(empty), dtype=np.int64)])
    valid = np.concatenate([np.ones(len(items), bool), np.zeros(len(empty), bool)])
    order = np.argsort(tids, kind="stable")
    return tids[order], labels[order], valid[order]


class _DuckDB:
    """One private DuckDB connection (in memory, capped, its own spill folder)."""

    def __init__(self) -> None:
        duckdb = require("duckdb", "files", "reading CSV and Parquet data")
        require("pyarrow", "files", "reading CSV and Parquet data")

        self.tmp = tempfile.mkdtemp(prefix="ppdm-duckdb-")
        os.chmod(self.tmp, 0o700)
        self.con = duckdb.connect(
            ":memory:",
            config={
                "memory_limit": DUCKDB_MEMORY_LIMIT,
                "temp_directory": self.tmp,
                "threads": max(1, min(4, os.cpu_count() or 1)),
                "preserve_insertion_order": True,
            },
        )

        # A streamed counter may outlive the job's code path: clean up when collected.
        self._cleanup = weakref.finalize(self, _close_duckdb, self.con, self.tmp)

    def close(self) -> None:
        self._cleanup()


def _close_duckdb(con: Any, tmp: str) -> None:
    try:
        con.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _rows(rel: Any) -> list[tuple]:
    return list(rel.fetchall())


def _arrow_table(rel: Any) -> Any:
    """A DuckDB relation as one Arrow table (DuckDB 2 names it ``to_arrow_table``)."""
    if hasattr(rel, "to_arrow_table"):
        return rel.to_arrow_table()
    return rel.arrow()


def _arrow_reader(rel: Any) -> Any:
    """A DuckDB relation as a stream of Arrow record batches of :data:`BATCH_ROWS` rows."""
    if hasattr(rel, "to_arrow_reader"):
        return rel.to_arrow_reader(BATCH_ROWS)
    return rel.fetch_arrow_reader(BATCH_ROWS)


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


class _ParquetTable:
    """DuckDB's view of a Parquet file or dataset directory (shared by both sources)."""

    def __init__(self, source: DataSource, path: Path) -> None:
        self.source = source
        self.path = path
        self._db: _DuckDB | None = None
        self._ordered: dict[str, bool] = {}
        if path.is_dir():
            if not any(path.rglob("*.parquet")):
                raise ConfigError(f"{source.describe()}: no .parquet files in {path}")
            self.relation = (
                f"read_parquet({_literal(str(path / '**' / '*.parquet'))}, "
                "hive_partitioning = true, union_by_name = true)"
            )
        elif path.is_file():
            self.relation = f"read_parquet({_literal(str(path))})"
        else:
            raise ConfigError(f"{source.describe()}: not found")

    @property
    def con(self) -> Any:
        if self._db is None:
            self._db = _DuckDB()
        return self._db.con

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def _run(self, sql: str, fetch: Callable[[Any], Any]) -> Any:
        """``fetch(relation)`` of the DuckDB relation of ``sql``; a DuckDB error is logged
        here and raised as a :class:`ConfigError` naming only the source."""
        import duckdb

        con = self.con
        dog = Watchdog(self.source.read_timeout, con.interrupt)
        try:
            with dog.guard():
                return fetch(con.sql(sql))
        except duckdb.Error as exc:
            raise self._failure(exc, timed_out=dog.fired) from None

    def _failure(self, exc: BaseException, *, timed_out: bool = False) -> SourceError:
        fault = duckdb_fault(exc, timed_out=timed_out)
        log.warning("%s: DuckDB (%s): %s", self.source.describe(), fault, exc)
        return SourceError(
            fault,
            f"{self.source.describe()}: cannot read the Parquet data "
            f"({fault}: {type(exc).__name__}; see the node's log)",
        )

    def _stream(self, sql: str) -> Iterator[Any]:
        """The record batches of ``sql``, streamed; each fetch bounded by the read limit."""
        import duckdb
        import pyarrow as pa

        con = self.con
        dog = Watchdog(self.source.read_timeout, con.interrupt)
        try:
            with dog.guard():
                batches = iter(_arrow_reader(con.sql(sql)))
            while True:
                with dog.guard():
                    batch = next(batches, None)
                if batch is None:
                    return
                yield batch
        except (duckdb.Error, pa.ArrowException) as exc:
            raise self._failure(exc, timed_out=dog.fired) from None

    def column_names(self) -> list[str]:
        return [str(r[0]) for r in self._run(f"DESCRIBE SELECT * FROM {self.relation}", _rows)]

    def read_frame(self, columns: Sequence[str] | None) -> Any:
        if columns is not None:
            self.source._check_columns(columns)
        cols = "*" if columns is None else ", ".join(quote_identifier(c) for c in columns)
        if columns is not None and not columns:
            import pandas as pd

            n = self._run(f"SELECT count(*) FROM {self.relation}", _rows)[0][0]
            return pd.DataFrame(index=range(n))
        return self._run(f"SELECT {cols} FROM {self.relation}", lambda rel: rel.df())

    def row_count(self) -> int:
        return int(self._run(f"SELECT count(*) FROM {self.relation}", _rows)[0][0])

    def _pair(self) -> tuple[str, str]:
        spec = self.source.spec
        self.source._check_columns([spec.transaction_column, spec.item_column])
        return quote_identifier(spec.transaction_column), quote_identifier(spec.item_column)

    def transactions(self) -> TransactionDB:
        t, i = self._pair()
        table = self._run(f"SELECT {t}, {i} FROM {self.relation}", _arrow_table)
        tids, items, valid = _arrow_columns(table.column(0), table.column(1))
        return long_to_database(tids, items, valid)

    def _is_ordered(self, t: str) -> bool:
        """Whether the file order already has each transaction's rows together and the
        ids ascending (integer ids only); checked once by a scan of the id column."""
        if t not in self._ordered:
            reader = self._stream(f"SELECT {t} FROM {self.relation}")
            last = None
            ordered = True
            for rb in reader:
                col = rb.column(0)
                if col.null_count or col.type.id not in _INT_TYPES:
                    ordered = False
                    break
                a = col.to_numpy()
                if len(a) == 0:
                    continue
                if (last is not None and a[0] < last) or np.any(a[1:] < a[:-1]):
                    ordered = False
                    break
                last = a[-1]
            self._ordered[t] = ordered
            log.info(
                "%s: file order is %s", self.source.describe(), "by id" if ordered else "unsorted"
            )
        return self._ordered[t]

    def record_batches(self, columns: Sequence[str], id_column: str) -> Iterator[RecordBatch]:
        """``(ids, x)`` in id order: file order when it is by id (checked on every batch),
        else ``ORDER BY`` the id."""
        idq = quote_identifier(id_column)
        sql = f"SELECT {', '.join([idq, *(quote_identifier(c) for c in columns)])} FROM "
        ordered = self._is_ordered(idq)
        sql += self.relation + ("" if ordered else f" ORDER BY {idq}")
        last = None
        for rb in self._stream(sql):
            col = rb.column(0)
            if col.null_count:
                raise ConfigError(f"{self.source.describe()}: the id column has empty values")
            ids = col.to_numpy(zero_copy_only=False)
            if len(ids) == 0:
                continue
            if ordered and ((last is not None and ids[0] < last) or np.any(ids[1:] < ids[:-1])):
                raise ConfigError(
                    f"{self.source.describe()}: the rows changed order during the scan"
                )
            last = ids[-1]
            x = np.zeros((len(ids), len(columns)))
            for j, name in enumerate(columns):
                x[:, j] = _float_column(rb.column(j + 1), name, self.source.describe())
            yield ids, x

    def batches(self, items: Sequence[Any] | None) -> Iterator[Batch]:
        """The long layout in file order when that is by id (checked again on every batch:
        a change raises rather than miscount), else ``ORDER BY`` the id (DuckDB sorts out
        of core). The candidate-item filter is applied to each batch in numpy: a filter
        join inside DuckDB would not keep the file order."""
        t, i = self._pair()
        ordered = self._is_ordered(t)
        sql = f"SELECT {t}, {i} FROM {self.relation}" + ("" if ordered else f" ORDER BY {t}")
        wanted = None if items is None else label_array(list(items))
        last = None
        for rb in self._stream(sql):
            tids, labels, valid = _arrow_columns(rb.column(0), rb.column(1))
            if len(tids) == 0:
                continue
            if ordered and ((last is not None and tids[0] < last) or np.any(tids[1:] < tids[:-1])):
                raise ConfigError(
                    f"{self.source.describe()}: the rows changed order during the scan; "
                    "was the data modified while the job ran?"
                )
            last = tids[-1]
            if wanted is not None:
                keep = np.isin(labels, wanted)
                if valid is not None:
                    keep &= valid
                tids, labels, valid = tids[keep], labels[keep], None
            yield tids, labels, valid


_INT_TYPES: set[int] = set()


def _init_int_types() -> None:
    pa = require("pyarrow", "files", "reading Parquet data")

    for t in (pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32()):
        _INT_TYPES.add(t.id)


def _float_column(col: Any, name: str, where: str) -> np.ndarray:
    import pyarrow as pa
    import pyarrow.compute as pc

    t = col.type
    if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)):
        raise ConfigError(f"{where}: column {name!r} is not numeric")
    return np.asarray(pc.cast(col, pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)


def _arrow_columns(tid_col: Any, item_col: Any) -> Batch:
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(tid_col, pa.ChunkedArray):
        tid_col = tid_col.combine_chunks()
    if isinstance(item_col, pa.ChunkedArray):
        item_col = item_col.combine_chunks()
    if tid_col.null_count:
        raise ConfigError("a transaction id is NULL")
    tids = tid_col.to_numpy(zero_copy_only=False)
    valid = None
    if item_col.null_count:
        valid = np.asarray(item_col.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        fill = (
            ""
            if pa.types.is_string(item_col.type) or pa.types.is_large_string(item_col.type)
            else 0
        )
        item_col = pc.fill_null(item_col, fill)
    items = label_array(item_col.to_numpy(zero_copy_only=False))
    return tids, items, valid


class ParquetDatasetSource(DataSource):
    """A Parquet dataset: a directory of Parquet files (hive partitions) or one file."""

    def __init__(self, spec: SourceSpec, **kw: Any) -> None:
        super().__init__(spec, **kw)
        if not _INT_TYPES:
            _init_int_types()
        self._table = _ParquetTable(self, spec.file_path)

    def column_names(self) -> list[str]:
        return self._table.column_names()

    def read_frame(self, columns: Sequence[str] | None = None) -> Any:
        return self._table.read_frame(columns)

    def transactions(self) -> TransactionDB:
        return self._table.transactions()

    def row_estimate(self) -> int | None:
        return self._table.row_count()

    def table_rows(self) -> int | None:
        return self._table.row_count()

    def record_batches(self, columns: Sequence[str], id_column: str) -> Iterator[RecordBatch]:
        return self._table.record_batches(columns, id_column)

    def batches(self, items: Sequence[Any] | None) -> Iterator[Batch]:
        return self._table.batches(items)

    def close(self) -> None:
        self._table.close()


class FileSource(DataSource):
    """A data file: FIMI, basket CSV, records CSV or Parquet (``format`` of the entry, else
    of the job, else from the suffix: ``.dat`` FIMI, ``.csv``/``.tsv``/``.txt`` basket
    or records, ``.parquet`` Parquet)."""

    def __init__(self, spec: SourceSpec, *, fmt: str = "auto", sep: str = ",", **kw: Any) -> None:
        super().__init__(spec, **kw)
        self.path = spec.file_path
        self.fmt = spec.format if spec.format not in (None, "auto") else fmt
        self.sep = spec.sep or sep
        self._parquet: ParquetDatasetSource | None = None

    def _format(self, *, table: bool) -> str:
        fmt = self.fmt
        if fmt in (None, "auto"):
            suffix = self.path.suffix.lower()
            if suffix == ".dat":
                return "fimi"
            if suffix in (".csv", ".tsv", ".txt"):
                return "records" if table else "basket"
            if suffix in (".parquet", ".pq"):
                return "parquet"
            raise ConfigError(
                f"{self.path}: cannot tell the format from the suffix {suffix!r}; name it "
                "(fimi, basket, records or parquet)"
            )
        return str(fmt)

    def _pq(self) -> ParquetDatasetSource:
        if self._parquet is None:
            self._parquet = ParquetDatasetSource(self.spec, chunk_rows=self.chunk_rows)
        return self._parquet

    def _transaction_format(self) -> str:
        kind = self._format(table=False)
        if kind == "records":
            raise ConfigError("association rules need transactions (fimi or basket), not records")
        if kind != "parquet" and not self.path.is_file():
            raise ConfigError(f"transaction file not found: {self.path}")
        return kind

    def transactions(self) -> TransactionDB:
        kind = self._transaction_format()
        if kind == "fimi":
            return read_fimi(self.path)
        if kind == "basket":
            return read_basket_csv(self.path, sep=self.sep)
        return self._pq().transactions()

    def row_estimate(self) -> int | None:
        kind = self._transaction_format()
        if kind == "fimi":
            return self.path.stat().st_size // 4  # ~4 bytes per item occurrence
        if kind == "parquet":
            return self._pq().row_estimate()
        return None

    def batches(self, items: Sequence[Any] | None) -> Iterator[Batch]:
        kind = self._transaction_format()
        if kind == "fimi":
            wanted = None if items is None else np.asarray(sorted(items), dtype=np.int64)
            for tids, labels, valid in fimi_batches(self.path):
                if wanted is not None:
                    keep = np.isin(labels, wanted) & (True if valid is None else valid)
                    tids, labels, valid = tids[keep], labels[keep], None
                yield tids, labels, valid
            return
        if kind == "parquet":
            yield from self._pq().batches(items)
            return
        raise ConfigError(f"{self.describe()}: a basket CSV is read in memory (engine=memory)")

    def table_rows(self) -> int | None:
        return self._pq().table_rows() if self._format(table=True) == "parquet" else None

    def record_batches(self, columns: Sequence[str], id_column: str) -> Iterator[RecordBatch]:
        if self._format(table=True) != "parquet":
            return super().record_batches(columns, id_column)
        return self._pq().record_batches(columns, id_column)

    def column_names(self) -> list[str]:
        kind = self._format(table=True)
        if kind == "parquet":
            return self._pq().column_names()
        if kind != "records":
            raise ConfigError(f"{self.path}: a {kind} file is not a table")
        return [str(c) for c in self._read_csv(nrows=0).columns]

    def read_frame(self, columns: Sequence[str] | None = None) -> Any:
        kind = self._format(table=True)
        if kind == "parquet":
            return self._pq().read_frame(columns)
        if kind != "records":
            raise ConfigError(f"{self.path}: a {kind} file is not a table")
        if columns is None:
            return self._read_csv()
        self._check_columns(columns)
        wanted = list(columns)
        return self._read_csv(usecols=wanted)[wanted] if wanted else self._read_csv()[[]]

    def _read_csv(self, **options: Any) -> Any:
        import pandas as pd

        if not self.path.is_file():
            raise ConfigError(f"records file not found: {self.path}")
        try:
            return pd.read_csv(self.path, sep=self.sep, **options)
        except (ValueError, pd.errors.ParserError) as exc:
            raise ConfigError(f"{self.path}: not a CSV table with a header ({exc})") from None

    def close(self) -> None:
        if self._parquet is not None:
            self._parquet.close()
