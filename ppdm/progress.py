"""Progress display and logging set-up shared by the command line and long-running APIs.

Library code never prints. Long loops take an optional :class:`Progress` (or ``None``)
and call :meth:`Progress.advance`; the command line passes a rich-backed one that draws a
bar on stderr, tests pass nothing.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from rich.progress import TaskID


class Progress(Protocol):
    """What long-running code reports to: a task with a total and an advance call."""

    def start(self, description: str, total: float | None = None) -> None: ...

    def advance(self, amount: float = 1.0) -> None: ...

    def finish(self) -> None: ...


class NullProgress:
    """A :class:`Progress` that shows nothing (the default for library calls)."""

    def start(self, description: str, total: float | None = None) -> None:
        return None

    def advance(self, amount: float = 1.0) -> None:
        return None

    def finish(self) -> None:
        return None


class RichProgress:
    """A :class:`Progress` drawn with rich on stderr; silent when stderr is not a terminal
    unless ``force`` is set."""

    def __init__(self, *, force: bool = False) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            TextColumn,
            TimeElapsedColumn,
        )
        from rich.progress import Progress as _RichProgress

        console = Console(stderr=True, force_terminal=force or None)
        self._enabled = force or sys.stderr.isatty()
        self._progress = _RichProgress(
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=False,
            disable=not self._enabled,
        )
        self._task: TaskID | None = None
        self._started = False

    def start(self, description: str, total: float | None = None) -> None:
        if not self._started:
            self._progress.start()
            self._started = True
        if self._task is not None:
            self._progress.update(self._task, completed=self._progress.tasks[-1].total or 0)
        self._task = self._progress.add_task(description, total=total)

    def advance(self, amount: float = 1.0) -> None:
        if self._task is not None:
            self._progress.advance(self._task, amount)

    def finish(self) -> None:
        if self._started:
            self._progress.stop()
            self._started = False
        self._task = None


def progress_or_null(progress: Progress | None) -> Progress:
    """Return ``progress`` or a :class:`NullProgress` when it is ``None``."""
    return progress if progress is not None else NullProgress()


@contextmanager
def progress_task(
    progress: Progress | None, description: str, total: float | None = None
) -> Iterator[Progress]:
    """Context manager: start a task on ``progress`` (may be ``None``) and finish it."""
    p = progress_or_null(progress)
    p.start(description, total)
    try:
        yield p
    finally:
        p.finish()


def configure_logging(level: str | int = "INFO") -> None:
    """Log to stderr with timestamps and logger names (used by the command line)."""
    logging.basicConfig(
        level=level,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


# Structured logs --------------------------------------------------------------------------

#: The job a thread is working on, for the ``job_id`` of every log line it writes.
_current_job: ContextVar[str | None] = ContextVar("ppdm_job_id", default=None)


@contextmanager
def job_log_context(job_id: str | None) -> Iterator[None]:
    """Within this block, log lines of this thread carry ``job_id``."""
    token = _current_job.set(job_id)
    try:
        yield
    finally:
        _current_job.reset(token)


class JsonLogFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, ISO 8601), level, logger, message, the party
    (the node's) and the job the thread works on (``null`` outside a job).

    >>> rec = logging.LogRecord("ppdm.x", logging.INFO, "f.py", 1, "hello %s", ("bob",), None)
    >>> doc = json.loads(JsonLogFormatter(party="alice").format(rec))
    >>> doc["message"], doc["party"], doc["job_id"], doc["level"]
    ('hello bob', 'alice', None, 'INFO')
    """

    def __init__(self, *, party: str | None = None) -> None:
        super().__init__()
        self.party = party

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "time": _dt.datetime.fromtimestamp(record.created, _dt.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "party": self.party,
            "job_id": _current_job.get(),
            "thread": record.threadName,
        }
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return json.dumps(doc, ensure_ascii=False)


def use_json_logs(party: str | None, level: str | int = "INFO") -> None:
    """Switch the root logger's stderr output to :class:`JsonLogFormatter` lines."""
    root = logging.getLogger()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLogFormatter(party=party))
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
