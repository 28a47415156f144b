"""The bounds of a job on its Spark work: one job group per step, cancelled when the
step runs past the job's timeout or the job ends first (:meth:`SparkEngine.run
<ppdm.compute.spark.SparkEngine.run>`).

The watcher thread looks every :data:`GUARD_POLL_S` seconds at the clock (the job's
timeout ``T``, :func:`ppdm.sources.read_time_limit`) and at the job's end
(:func:`ppdm.compute.engine.job_scope`); when either fires it cancels the step's job
group (``interruptOnCancel``: the tasks are interrupted and their Python workers
killed), and again at every later look, so a Spark job the step starts afterwards is
cancelled too. The group's description is fixed: no parameter or value of the job is
in the Spark UI or logs.

A step that calls :meth:`~ppdm.compute.spark.SparkEngine.run` again inside (the
counting steps look up the engine's partitions that way) stays in its own group: the
inner call's guard does nothing, so it neither moves the thread's Spark jobs to another
group nor clears the group when it returns (which left the step's later Spark jobs in
no group at all, out of reach of the cancel).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from ppdm.errors import SourceError

if TYPE_CHECKING:
    from ppdm.compute.spark import SparkEngine

__all__ = ["GUARD_POLL_S", "JobGuard"]

log = logging.getLogger("ppdm.compute.spark")

_GROUPS = itertools.count(1)
#: The guard of the step this thread runs, if any (a nested ``run`` joins it).
_ACTIVE = threading.local()
#: Seconds between two looks of a job guard at the clock and at the job's end.
GUARD_POLL_S = 0.1


class JobGuard:
    """The job group of one :meth:`SparkEngine.run` call inside a job, and the watcher
    that cancels it (see there). Outside a job (no time limit, no job scope) it does
    nothing."""

    def __init__(self, engine: SparkEngine, what: str) -> None:
        from ppdm.compute.engine import current_job
        from ppdm.sources.limits import current_read_timeout

        self.engine = engine
        self.what = what
        self.limit = current_read_timeout()
        self.scope = current_job()
        self.group: str | None = None
        self._reason: BaseException | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._context: Any = None
        self._outer: JobGuard | None = None

    def __enter__(self) -> JobGuard:
        self._outer = getattr(_ACTIVE, "guard", None)
        if self._outer is not None:  # inside a step's guard: it watches, in its group
            self.group = self._outer.group
            return self
        if self.limit is None and self.scope is None:
            return self
        if self.scope is not None:
            over = self.scope.ended()
            if over is not None:  # the job ended before this step: start no Spark job
                raise over
        session = self.engine.session()
        self._context = session.sparkContext
        job = self.scope.job_id[:32] if self.scope is not None else "local"
        self.group = f"ppdm-{job}-{next(_GROUPS)}"
        # A fixed description: the Spark UI and logs show no job parameter or value.
        self._context.setJobGroup(self.group, "ppdm local work", interruptOnCancel=True)
        self._thread = threading.Thread(
            target=self._watch, name=f"ppdm-spark-guard-{self.group}", daemon=True
        )
        self._thread.start()
        _ACTIVE.guard = self
        return self

    def _watch(self) -> None:
        deadline = None if self.limit is None else time.monotonic() + self.limit
        while not self._stop.wait(GUARD_POLL_S):
            if self.reason is None:
                if deadline is not None and time.monotonic() >= deadline:
                    self.reason = SourceError(
                        "source-timeout",
                        f"the Spark engine ran past the job's timeout ({self.limit:g} s) "
                        f"while {self.what}",
                    )
                elif self.scope is not None:
                    self.reason = self.scope.ended()
                if self.reason is None:
                    continue
                log.warning(
                    "cancelling Spark job group %s (%s) while %s",
                    self.group,
                    "past the job's timeout"
                    if isinstance(self.reason, SourceError)
                    else "the job ended",
                    self.what,
                )
                self.engine.cancelled_groups.append(self.group or "")
            # Again at every look: a Spark job the call starts after the first
            # cancellation is cancelled too.
            with contextlib.suppress(Exception):
                self._context.cancelJobGroup(self.group)

    @property
    def reason(self) -> BaseException | None:
        """Why the call's Spark jobs were cancelled: the exception the call raises (a
        nested call's: its step's)."""
        return self._outer.reason if self._outer is not None else self._reason

    @reason.setter
    def reason(self, value: BaseException | None) -> None:
        self._reason = value

    def __exit__(self, *exc: object) -> None:
        if self._thread is None:
            return
        _ACTIVE.guard = None
        self._stop.set()
        self._thread.join()
        with contextlib.suppress(Exception):
            self._context._jsc.sc().clearJobGroup()
