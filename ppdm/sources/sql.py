"""SQL databases: :class:`SqlSource` (PostgreSQL through psycopg 3, SQLite through the
standard library).

The node connects with the URL of its ``[data]`` entry (no password in it) and the
password read at each job from ``password_env`` or ``password_file``
(:func:`~ppdm.sources.config.resolve_password`), passed to the driver as a separate
argument, so it is in no string the node builds. Every session is read-only
(PostgreSQL: ``SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY`` through psycopg's
``read_only``; SQLite: the file opened with ``mode=ro``), on top of the read-only role
the deployment guide asks for.

What the node sends the database: ``SELECT <the columns a job needs> FROM <table or
(query)>``; for a streamed counting scan ``SELECT tid, item ... WHERE item = ANY(<the
level's candidate items>) ORDER BY tid`` through a server-side cursor (rows arrive in
batches; the database sorts). Column names from job parameters are quoted identifiers.

Errors: a driver error is logged on the node (with the password, if it appears, masked)
and raised as a :class:`~ppdm.errors.SourceError` naming only the source, the error class
and the SQLSTATE -- a database message can quote the data -- with its fault class
(``source-locked``, ``source-unreachable``, ``source-malformed``, ``source-timeout``).

Stalls: inside a job every read is bounded by the job's timeout ``T``
(:mod:`ppdm.sources.limits`): PostgreSQL sessions start with ``statement_timeout = T``
and ``lock_timeout = 0.8 T`` and connect within ``min(T, 15 s)``; SQLite waits at most
``T`` on a locked file and interrupts a statement running past ``T``.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Iterator, Sequence
from decimal import Decimal
from typing import Any
from urllib.parse import quote

import numpy as np

from ppdm.errors import ConfigError, SourceError
from ppdm.extras import require
from ppdm.mining.itemsets import TransactionDB
from ppdm.sources.base import DataSource, long_to_database
from ppdm.sources.config import SourceSpec, quote_identifier, resolve_password
from ppdm.sources.counting import Batch, label_array
from ppdm.sources.limits import LOCK_SHARE, postgres_fault, sqlite_fault
from ppdm.sources.records import RecordBatch

__all__ = ["FETCH_ROWS", "SqlSource"]

log = logging.getLogger(__name__)

#: Rows fetched per round trip of a server-side cursor.
FETCH_ROWS = 100_000


class SqlSource(DataSource):
    """A table or query of a SQL database (module docstring)."""

    def __init__(self, spec: SourceSpec, **kw: Any) -> None:
        super().__init__(spec, **kw)
        self._conn: Any = None
        self._password: str | None = None
        self._cursors = 0
        self._started = 0.0  # when the running SQLite statement started (monotonic)
        self._timed_out = False

    # -- connection -----------------------------------------------------------------------

    def _connect(self) -> Any:
        if self._conn is not None:
            return self._conn
        spec = self.spec
        if spec.scheme == "sqlite":
            import sqlite3

            path = spec.file_path
            if not path.is_file():
                raise SourceError(
                    "source-unreachable", f"{self.describe()}: database file not found"
                )
            busy = 5.0 if self.read_timeout is None else self.read_timeout
            try:
                conn: Any = sqlite3.connect(
                    f"file:{quote(str(path))}?mode=ro", uri=True, timeout=busy
                )
            except sqlite3.Error as exc:
                raise self._failure(exc, connecting=True) from None
            if self.read_timeout is not None:
                conn.set_progress_handler(self._sqlite_overdue, 10_000)
            self._conn = conn
            return conn
        psycopg = require("psycopg", "sql", "a PostgreSQL source")

        self._password = resolve_password(spec)
        options: dict[str, Any] = {"connect_timeout": 15}
        if self.read_timeout is not None:
            ms = max(1, int(self.read_timeout * 1000))
            lock_ms = max(1, int(self.read_timeout * LOCK_SHARE * 1000))
            # libpq counts whole seconds, at least 2; never longer than without a bound
            options["connect_timeout"] = max(2, min(15, math.ceil(self.read_timeout)))
            options["options"] = f"-c statement_timeout={ms} -c lock_timeout={lock_ms}"
        try:
            conn = psycopg.connect(
                spec.url or "",
                password=self._password,
                application_name="ppdm",
                **options,
            )
            conn.read_only = True
        except psycopg.Error as exc:
            raise self._failure(exc, connecting=True) from None
        self._conn = conn
        return conn

    def _sqlite_overdue(self) -> int:
        """SQLite's progress handler: non-zero interrupts a statement running past the
        read bound."""
        overdue = (
            self.read_timeout is not None
            and self._started > 0
            and time.monotonic() - self._started > self.read_timeout
        )
        if overdue:
            self._timed_out = True
        return int(overdue)

    def _failure(self, exc: BaseException, *, connecting: bool = False) -> SourceError:
        message = str(exc)
        if self._password:
            message = message.replace(self._password, "***")
        if self.spec.scheme == "sqlite":
            fault = sqlite_fault(exc, timed_out=self._timed_out)
        else:
            fault = postgres_fault(exc, connecting=connecting)
        log.warning("%s: %s (%s): %s", self.describe(), type(exc).__name__, fault, message)
        code = getattr(exc, "sqlstate", None)
        detail = type(exc).__name__ + (f", SQLSTATE {code}" if code else "")
        return SourceError(
            fault,
            f"{self.describe()}: the database refused the connection or the query "
            f"({fault}: {detail}; see the node's log)",
        )

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            finally:
                self._conn = None
                self._password = None

    # -- queries --------------------------------------------------------------------------

    def _relation(self) -> str:
        spec = self.spec
        if spec.table is not None:
            return ".".join(quote_identifier(p) for p in spec.table.split("."))
        return f"({spec.query}) AS ppdm_source"

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> Iterator[list[tuple]]:
        """The result of ``sql`` in lists of at most :data:`FETCH_ROWS` rows (a
        server-side cursor on PostgreSQL)."""
        conn = self._connect()
        if self.spec.scheme == "sqlite":
            import sqlite3

            try:
                self._timed_out = False
                self._started = time.monotonic()
                cur = conn.execute(sql, tuple(params))
                while True:
                    self._started = time.monotonic()  # each fetch is one bounded read
                    rows = cur.fetchmany(FETCH_ROWS)
                    self._started = 0.0
                    if not rows:
                        break
                    yield rows
            except sqlite3.Error as exc:
                raise self._failure(exc) from None
            finally:
                self._started = 0.0
            return
        import psycopg

        self._cursors += 1
        try:
            name = f"ppdm_scan_{self._cursors}"
            with conn.transaction(), conn.cursor(name=name) as cur:
                cur.itersize = FETCH_ROWS
                cur.execute(sql, tuple(params) or None)
                while rows := cur.fetchmany(FETCH_ROWS):
                    yield rows
        except psycopg.Error as exc:
            raise self._failure(exc) from None

    def _description(self) -> list[str]:
        conn = self._connect()
        sql = f"SELECT * FROM {self._relation()} LIMIT 0"
        if self.spec.scheme == "sqlite":
            import sqlite3

            try:
                self._timed_out = False
                self._started = time.monotonic()
                cur = conn.execute(sql)
            except sqlite3.Error as exc:
                raise self._failure(exc) from None
            finally:
                self._started = 0.0
            return [str(d[0]) for d in cur.description]
        import psycopg

        try:
            with conn.transaction(), conn.cursor() as cur:
                cur.execute(sql)
                return [str(d.name) for d in cur.description or []]
        except psycopg.Error as exc:
            raise self._failure(exc) from None

    def column_names(self) -> list[str]:
        return self._description()

    def read_frame(self, columns: Sequence[str] | None = None) -> Any:
        import pandas as pd

        names = self.column_names() if columns is None else list(columns)
        self._check_columns(names)
        if not names:
            return pd.DataFrame(index=range(self._count()))
        cols = ", ".join(quote_identifier(c) for c in names)
        rows: list[tuple] = []
        for part in self._rows(f"SELECT {cols} FROM {self._relation()}"):
            rows.extend(part)
        df = pd.DataFrame.from_records(rows, columns=names)
        for c in names:  # NUMERIC columns arrive as Decimal: make them floats
            if (
                df[c].dtype == object
                and len(df)
                and df[c].map(lambda v: isinstance(v, Decimal)).all()
            ):
                df[c] = df[c].astype(np.float64)
        return df

    def _pair(self) -> tuple[str, str]:
        spec = self.spec
        self._check_columns([spec.transaction_column, spec.item_column])
        return quote_identifier(spec.transaction_column), quote_identifier(spec.item_column)

    def transactions(self) -> TransactionDB:
        t, i = self._pair()
        tids: list[Any] = []
        items: list[Any] = []
        for part in self._rows(f"SELECT {t}, {i} FROM {self._relation()}"):
            for a, b in part:
                tids.append(a)
                items.append(b)
        return long_to_database(*_columns(tids, items))

    def _count(self) -> int:
        rows: list[tuple] = []
        for part in self._rows(f"SELECT count(*) FROM {self._relation()}"):
            rows.extend(part)
        return int(rows[0][0])

    def row_estimate(self) -> int | None:
        return self._count()

    def table_rows(self) -> int | None:
        return self._count()

    def record_batches(self, columns: Sequence[str], id_column: str) -> Iterator[RecordBatch]:
        """``(ids, x)`` ordered by the id (the database sorts; a server-side cursor)."""
        idq = quote_identifier(id_column)
        cols = ", ".join([idq, *(quote_identifier(c) for c in columns)])
        for part in self._rows(f"SELECT {cols} FROM {self._relation()} ORDER BY {idq}"):
            ids = np.asarray([r[0] for r in part])
            if any(v is None for v in ids.tolist()):
                raise ConfigError(f"{self.describe()}: the id column has empty values")
            try:
                x = np.array([r[1:] for r in part], dtype=np.float64).reshape(len(part), -1)
            except (TypeError, ValueError):
                raise ConfigError(
                    f"{self.describe()}: the columns hold missing or non-numeric values"
                ) from None
            yield ids, x

    def batches(self, items: Sequence[Any] | None) -> Iterator[Batch]:
        t, i = self._pair()
        sql = f"SELECT {t}, {i} FROM {self._relation()}"
        params: list[Any] = []
        if items is not None:
            if self.spec.scheme == "sqlite":
                sql += f" WHERE {i} IN (SELECT value FROM json_each(?))"
                params.append(json.dumps(list(items)))
            else:
                sql += f" WHERE {i} = ANY(%s)"
                params.append(list(items))
        for part in self._rows(sql + f" ORDER BY {t}", params):
            tids = [a for a, _ in part]
            labels = [b for _, b in part]
            yield _columns(tids, labels)


def _columns(tids: list[Any], items: list[Any]) -> Batch:
    valid = np.array([x is not None for x in items], dtype=bool)
    if valid.all():
        return np.asarray(tids), label_array(items), None
    fill: Any = "" if any(isinstance(x, str) for x in items) else 0
    labels = label_array([fill if x is None else x for x in items])
    return np.asarray(tids), labels, valid
