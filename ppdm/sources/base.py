"""The data-source interface every job reads through.

A job asks its party's source for what it needs, never for more:

* :meth:`DataSource.transactions` -- the whole transaction database in memory (small
  inputs, vertical association rules);
* :meth:`DataSource.local_counter` -- what horizontal association rules count on: the
  in-memory database under a size threshold, else a
  :class:`~ppdm.sources.counting.StreamedCounter` that scans the source once per level
  with bounded memory;
* :meth:`DataSource.read_frame` -- the named columns of a table (k-means records), read
  column by column from the source (a SQL ``SELECT`` of those columns, a Parquet
  projection), not the whole table.

Tables of transactions use the *long layout*: one row per (transaction id, item) in the
columns ``transaction_column`` (default ``tid``) and ``item_column`` (default ``item``);
a row whose item is NULL marks a transaction without items (it counts in the number of
transactions). The transactions are the distinct ids in ascending order.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ppdm.errors import ConfigError
from ppdm.mining.itemsets import TransactionDB
from ppdm.mining.readers import from_row_labels
from ppdm.sources.config import SourceSpec
from ppdm.sources.counting import (
    Batch,
    StreamedCounter,
    database_from_rows,
    label_array,
    sorted_unique,
)
from ppdm.sources.limits import current_read_timeout
from ppdm.sources.records import RecordBatch, StreamedRecords

__all__ = [
    "MEMORY_ROWS",
    "DataSource",
    "frame_labels",
    "long_frame_to_database",
    "long_to_database",
    "long_to_database_with_ids",
]

#: Below this many rows (item occurrences) ``engine = "auto"`` keeps the in-memory path.
MEMORY_ROWS = 8_000_000


def long_to_database(
    tids: np.ndarray, items: np.ndarray, valid: np.ndarray | None
) -> TransactionDB:
    """A database from long-layout arrays in any order: the transactions are the
    distinct ids in ascending order."""
    return long_to_database_with_ids(tids, items, valid)[1]


def long_to_database_with_ids(
    tids: np.ndarray, items: np.ndarray, valid: np.ndarray | None
) -> tuple[np.ndarray, TransactionDB]:
    """:func:`long_to_database` and the distinct ids (ascending): row ``r`` of the
    database is transaction ``ids[r]``."""
    if len(tids) == 0:
        empty = from_row_labels(0, np.zeros(0, np.int64), np.zeros(0, np.int64))
        return np.asarray(tids), empty
    try:
        tids = np.asarray(tids)
        ids = sorted_unique(tids)
        row = np.searchsorted(ids, tids)
    except TypeError:
        raise ConfigError("transaction ids must be all numbers or all strings") from None
    labels = label_array(items)
    if valid is not None:
        row, labels = row[valid], labels[valid]
    return ids, database_from_rows(len(ids), row, labels)


def frame_labels(items: Any) -> tuple[np.ndarray, np.ndarray | None]:
    """The item labels of a pandas column of a long layout and where an item is present
    (``None``: everywhere); an empty item marks a transaction without items, and gets a
    label of the column's own type that ``valid`` drops."""
    valid = items.notna().to_numpy()
    if valid.all():
        return items.to_numpy(), None
    fill = items[valid].iloc[0] if valid.any() else 0
    return items.where(valid, fill).to_numpy(), valid


def long_frame_to_database(frame: Any, spec: SourceSpec) -> tuple[np.ndarray, TransactionDB]:
    """The distinct transaction ids (ascending) of a pandas frame of ``spec``'s
    transaction and item columns, and the database of their transactions in that order
    (:func:`long_to_database_with_ids`); an empty id is a :class:`ConfigError`."""
    tids = frame[spec.transaction_column]
    if tids.isna().any():
        raise ConfigError(f"{spec.describe()}: the transaction id column has empty values")
    labels, valid = frame_labels(frame[spec.item_column])
    return long_to_database_with_ids(tids.to_numpy(), labels, valid)


class DataSource(ABC):
    """One ``[data]`` entry of a party, opened for one job (module docstring)."""

    def __init__(self, spec: SourceSpec, *, chunk_rows: int | None = None) -> None:
        from ppdm.sources import counting

        self.spec = spec
        self.chunk_rows = counting.DEFAULT_CHUNK_ROWS if chunk_rows is None else chunk_rows
        # Each read is bounded by the job's timeout when opened inside a job
        # (:func:`ppdm.sources.limits.read_time_limit`); ``None``: unbounded.
        self.read_timeout = current_read_timeout()

    def describe(self) -> str:
        """Kind and place of the source, for errors and logs (never a credential)."""
        return self.spec.describe()

    # -- tables -------------------------------------------------------------------------

    @abstractmethod
    def column_names(self) -> list[str]:
        """The columns of the table, in order."""

    @abstractmethod
    def read_frame(self, columns: Sequence[str] | None = None) -> Any:
        """A pandas DataFrame of ``columns`` (all when ``None``), rows in source order."""

    # -- transactions -------------------------------------------------------------------

    @abstractmethod
    def transactions(self) -> TransactionDB:
        """The whole transaction database, in memory."""

    def row_estimate(self) -> int | None:
        """About how many rows (item occurrences) the source holds; ``None``: unknown."""
        return None

    def batches(self, items: Sequence[Any] | None) -> Iterator[Batch]:
        """The long layout in batches, the rows of a transaction contiguous; only the rows
        of ``items`` when given. Sources that cannot stream raise :class:`ConfigError`."""
        raise ConfigError(f"{self.describe()}: this source cannot be streamed")

    def table_rows(self) -> int | None:
        """Rows of the table (``SELECT count(*)``); ``None`` where that is not cheap."""
        return None

    def record_batches(self, columns: Sequence[str], id_column: str) -> Iterator[RecordBatch]:
        """``(ids, x)`` batches of the id column and the numeric ``columns`` (float64), in
        id order (each call scans again). Sources that cannot stream raise
        :class:`ConfigError`."""
        raise ConfigError(f"{self.describe()}: this source cannot be streamed")

    def streamed_records(self, columns: Sequence[str], id_column: str) -> StreamedRecords:
        """The records behind horizontal k-means' local seam, scanned per iteration."""
        self._check_columns([id_column, *columns])
        cols = list(columns)
        return StreamedRecords(
            lambda: self.record_batches(cols, id_column), len(cols), self.describe()
        )

    def stream_records(self) -> bool:
        """Whether k-means should stream this table: ``engine = "stream"``, or ``auto``
        above :data:`MEMORY_ROWS` rows."""
        if self.spec.engine == "auto":
            rows = self.table_rows()
            return rows is not None and rows > MEMORY_ROWS
        return self.spec.engine == "stream"

    def local_counter(self) -> TransactionDB | StreamedCounter:
        """What horizontal association rules count on (module docstring): with
        ``engine = "auto"`` the in-memory database below :data:`MEMORY_ROWS` rows."""
        engine = self.spec.engine
        if engine == "auto":
            rows = self.row_estimate()
            engine = "stream" if rows is not None and rows > MEMORY_ROWS else "memory"
        if engine == "memory":
            return self.transactions()
        return StreamedCounter(self.batches, chunk_rows=self.chunk_rows)

    def _check_columns(self, columns: Sequence[str]) -> None:
        have = set(self.column_names())
        missing = [c for c in columns if c not in have]
        if missing:
            raise ConfigError(f"{self.describe()}: no column(s) {', '.join(map(repr, missing))}")

    def close(self) -> None:  # noqa: B027 -- sources without connections keep it
        """Release connections (a source is opened per job)."""

    def __enter__(self) -> DataSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
