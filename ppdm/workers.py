"""Worker processes for independent big-number work, shared by the whole process.

One registry of :class:`~concurrent.futures.ProcessPoolExecutor` pools per process (a
party node, a simulation), keyed by start method and size:

- **Shared safely.** Concurrent jobs that ask for different sizes get different pools;
  a pool is never shut down while a job may be using it (only by :func:`shutdown_pools`,
  when the node stops, and at exit), so one job's settings cannot cancel another's work.
- **Owned by their parent.** Every worker asks the kernel to kill it when its parent
  dies (Linux ``PR_SET_PDEATHSIG``) and also watches its parent's pid once a second, so
  a node killed with SIGKILL leaves no worker (and so no resource tracker) behind.
"""

from __future__ import annotations

import atexit
import ctypes
import multiprocessing
import os
import signal
import threading
import time
from concurrent.futures import ProcessPoolExecutor

__all__ = ["get_pool", "shutdown_pools"]

_pools: dict[tuple[str, int], ProcessPoolExecutor] = {}
_lock = threading.Lock()
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Worker initializer: exit as soon as the process that started this worker exits."""
    parent = os.getppid()
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass  # not Linux: the watchdog below still ends the worker within a second
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)

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
