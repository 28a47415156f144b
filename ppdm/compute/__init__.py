"""Where a party's local work runs: the embedded engine (default) or Apache Spark.

A node's ``[compute]`` table (:func:`parse_compute_table`) names its engine; a job asks
:func:`engine_for` with the party's settings and gets the node's engine:

* :class:`EmbeddedEngine` -- in the node's process (memory, DuckDB, streamed scans);
* :class:`~ppdm.compute.spark.SparkEngine` -- the same kernels on a Spark session that
  the node owns: created on the first job that needs it (the JVM starts then, not when
  the node starts), shared by the node's jobs, stopped by :func:`close_engines` when the
  node stops (a Spark driver is one per process, like the worker pools of
  :mod:`ppdm.workers`).

See :mod:`ppdm.compute.engine` for the interface and the fault class of a failure
(``compute-failed``), and ``docs/scale.md`` for when to use which.

Layering: above :mod:`ppdm.sources`, below :mod:`ppdm.jobs`.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from ppdm.compute.embedded import EmbeddedEngine
from ppdm.compute.engine import (
    COMPUTE_FAULT,
    ENGINES,
    ComputeEngine,
    ComputeError,
    ComputeSettings,
    JobScope,
    current_job,
    job_scope,
    parse_compute_table,
)
from ppdm.errors import ConfigError

__all__ = [
    "COMPUTE_FAULT",
    "ENGINES",
    "ComputeEngine",
    "ComputeError",
    "ComputeSettings",
    "EmbeddedEngine",
    "JobScope",
    "close_engines",
    "current_job",
    "engine_for",
    "job_scope",
    "parse_compute_table",
]

_LOCK = threading.Lock()
_EMBEDDED = EmbeddedEngine()
_SPARK: dict[ComputeSettings, ComputeEngine] = {}


def engine_for(settings: Mapping[str, Any] | None, *, party: str = "") -> ComputeEngine:
    """The engine named by the ``[compute]`` table of a party's ``settings`` (the whole
    settings mapping; no table: the embedded engine). One Spark engine per process: a
    second, different Spark configuration is a :class:`ConfigError`."""
    table = (settings or {}).get("compute")
    checked = parse_compute_table(table)
    if checked.engine == "embedded":
        return _EMBEDDED
    with _LOCK:
        engine = _SPARK.get(checked)
        if engine is None:
            if _SPARK:
                raise ConfigError(
                    "one process runs one Spark driver: this node already has a Spark "
                    "engine with other [compute] settings"
                )
            from ppdm.compute.spark import SparkEngine

            engine = _SPARK[checked] = SparkEngine(checked, party=party)
        return engine


def close_engines() -> None:
    """Stop every engine this process started (a node calls this when it stops)."""
    with _LOCK:
        engines = list(_SPARK.values())
        _SPARK.clear()
    for engine in engines:
        engine.close()
