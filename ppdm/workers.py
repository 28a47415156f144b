"""Worker processes for independent big-number work, shared by the whole process.

One registry of :class:`~concurrent.futures.ProcessPoolExecutor` pools per process (a
party node, a simulation), keyed by start method and size:

- **Shared safely.** Concurrent jobs that ask for different sizes get different pools;
  a pool is never shut down while a job may be using it (only by :func:`shutdown_pools`,
  when the node stops, and at exit), so one job's settings cannot cancel another's work.
- **Owned by their parent.** Every worker watches its parent's pid once a second and
  exits when the parent is gone, so a node killed with SIGKILL leaves no worker (and so
  no resource tracker) behind.
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor

__all__ = ["get_pool", "shutdown_pools"]

_pools: dict[tuple[str, int], ProcessPoolExecutor] = {}
_lock = threading.Lock()


def _die_with_parent() -> None:
    """Worker initializer: exit within a second of the process that started this worker.

    A watchdog thread polls the parent pid (a dead parent's children are re-parented).
    Linux's ``PR_SET_PDEATHSIG`` is deliberately not used: it fires when the parent
    *thread* ends, and pool workers are started from whichever job thread submitted
    first, so a finished job would kill workers that another job still uses."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="ppdm-worker-watchdog", daemon=True).start()


def get_pool(workers: int, *, method: str = "spawn") -> ProcessPoolExecutor:
    """The process-wide pool of ``workers`` processes started with ``method``."""
    if workers < 1:
        raise ValueError("workers must be at least 1")
    key = (method, int(workers))
    with _lock:
        pool = _pools.get(key)
        if pool is None:
            pool = ProcessPoolExecutor(
                max_workers=workers,
                mp_context=multiprocessing.get_context(method),
                initializer=_die_with_parent,
            )
            _pools[key] = pool
        return pool


def shutdown_pools(*, wait: bool = True) -> None:
    """Stop every pool (work in progress is cancelled); new ones start on next use."""
    with _lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        pool.shutdown(wait=wait, cancel_futures=True)


atexit.register(shutdown_pools)
