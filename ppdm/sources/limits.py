"""How long a read of a party's data source may stall, and what a failed read is called.

A job reads its party's data while its peers wait for its next message; a source that
stalls (a PostgreSQL table another session holds ``LOCK TABLE ... ACCESS EXCLUSIVE``, a
SQLite file a writer keeps locked, a DuckDB scan of a huge dataset) must not hold the
job past its timeout ``T``. The node runs each job inside :func:`read_time_limit` (``T``
seconds); every source opened inside it bounds each of its reads by ``T``:

* PostgreSQL: ``statement_timeout = T`` and ``lock_timeout`` a little under ``T`` set for
  the session at connection start (every ``FETCH`` of a server-side cursor is a
  statement of its own), and the connection attempt itself bounded by ``min(T, 15 s)``;
* SQLite: the busy timeout ``T`` (a locked file) and a progress handler that interrupts
  a statement running past ``T``;
* DuckDB (Parquet files and datasets): a watchdog that calls ``interrupt()`` on the
  connection when one query or one batch fetch runs past ``T``.

A failed read raises :class:`ppdm.errors.SourceError` whose fault class
(:data:`ppdm.errors.SOURCE_FAULTS`: ``source-locked``, ``source-unreachable``,
``source-malformed``, ``source-timeout``) is the public code the node reports and its
peers see; the driver's message stays in the node's log.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = [
    "LOCK_SHARE",
    "Watchdog",
    "current_read_timeout",
    "duckdb_fault",
    "postgres_fault",
    "read_time_limit",
    "sqlite_fault",
]

#: ``lock_timeout`` as a share of the statement bound, so that a lock wait is named a
#: lock (``source-locked``) rather than a slow statement.
LOCK_SHARE = 0.8

_READ_TIMEOUT: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "ppdm_source_read_timeout", default=None
)


@contextmanager
def read_time_limit(seconds: float | None) -> Iterator[None]:
    """Bound every read of the sources opened inside the block by ``seconds`` (``None``:
    no bound, the default outside a job)."""
    if seconds is not None and not seconds > 0:
        raise ValueError("a read time limit must be a positive number of seconds")
    token = _READ_TIMEOUT.set(None if seconds is None else float(seconds))
    try:
        yield
    finally:
        _READ_TIMEOUT.reset(token)


def current_read_timeout() -> float | None:
    """The bound set by the innermost :func:`read_time_limit` of this thread, if any."""
    return _READ_TIMEOUT.get()


class Watchdog:
    """Calls ``interrupt`` once if a guarded call runs longer than ``seconds``; ``fired``
    tells the caller that the error it caught came from the watchdog.

    >>> import time
    >>> hits = []
    >>> dog = Watchdog(0.05, lambda: hits.append(1))
    >>> with dog.guard():
    ...     time.sleep(0.2)
    >>> dog.fired, hits
    (True, [1])
    """

    def __init__(self, seconds: float | None, interrupt: Callable[[], Any]) -> None:
        self.seconds = seconds
        self.interrupt = interrupt
        self.fired = False

    def _fire(self) -> None:
        self.fired = True
        self.interrupt()

    @contextmanager
    def guard(self) -> Iterator[None]:
        if self.seconds is None:
            yield
            return
        timer = threading.Timer(self.seconds, self._fire)
        timer.daemon = True
        timer.start()
        try:
            yield
        finally:
            timer.cancel()


def postgres_fault(exc: BaseException, *, connecting: bool) -> str:
    """The fault class of a psycopg error (by SQLSTATE class)."""
    code = str(getattr(exc, "sqlstate", None) or "")
    if code == "55P03":  # lock_not_available: lock_timeout expired
        return "source-locked"
    if code == "57014":  # query_canceled: statement_timeout expired
        return "source-timeout"
    if connecting or code[:2] in ("08", "28", "3D", "53", "57", "58"):
        # connection exceptions, authorization, unknown database, resources, operator
        # intervention (shutdown), system errors
        return "source-unreachable"
    return "source-malformed"


def sqlite_fault(exc: BaseException, *, timed_out: bool) -> str:
    """The fault class of a sqlite3 error."""
    text = str(exc).lower()
    if timed_out or "interrupted" in text:
        return "source-timeout"
    if "locked" in text or "busy" in text:
        return "source-locked"
    if "unable to open" in text or "disk i/o" in text or "readonly" in text:
        return "source-unreachable"
    return "source-malformed"


def duckdb_fault(exc: BaseException, *, timed_out: bool) -> str:
    """The fault class of a DuckDB error."""
    name = type(exc).__name__
    if timed_out or name == "InterruptException":
        return "source-timeout"
    if name in ("IOException", "HTTPException", "PermissionException"):
        return "source-unreachable"
    return "source-malformed"
