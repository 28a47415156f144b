"""The local compute engine of a party node: its interface and its ``[compute]`` settings.

A party's *local work* in a mining job is what it computes on its own data before and
between the protocol's messages: the support counts of candidate itemsets (horizontal and
vertical association rules, and the locally frequent itemsets the horizontal protocol
finds level by level through those counts), the per-cluster sums and counts of Lloyd's
step (k-means), and the encoding of record ids for alignment. A
:class:`ComputeEngine` does that work; the protocols and the messages between parties
do not change with it.

Two engines, chosen per node in its settings file::

    [compute]
    engine = "embedded"            # the default: in memory, or streamed through DuckDB

    [compute]
    engine = "spark"
    master = "local[*]"            # or spark://host:7077, yarn, k8s://...
    executor_memory = "4g"
    driver_memory = "2g"
    conf = { "spark.sql.shuffle.partitions" = "64" }

* :class:`~ppdm.compute.embedded.EmbeddedEngine` -- the party's data sources
  (:mod:`ppdm.sources`) and the numpy kernels, in the node's process;
* :class:`~ppdm.compute.spark.SparkEngine` -- the SAME numpy kernels run on the
  partitions of a Spark DataFrame (``mapInPandas`` over Arrow batches), their partial
  results reduced on the driver; data is read where it lives (Parquet files and
  partitioned datasets, JDBC tables), the candidate-item filter and the column projection
  pushed into the scan.

A failure of the engine itself (a lost executor, a dead driver JVM, a cluster that
refuses the application) is a :class:`ComputeError` with the public fault class
``compute-failed``: the node reports that code, the job ends at every party, and the
engine's message (which may quote data) stays in the node's log.

A job's bounds reach the engine's work: the node runs each job inside
:func:`job_scope` (the job's id and how to learn that it ended) and
:func:`ppdm.sources.read_time_limit` (its timeout ``T``); an engine whose work runs
elsewhere (Spark's executors) cancels that work when a step runs past ``T``
(``source-timeout``) or the job ends at this party first (cancelled, a peer's abort).

Layering: above :mod:`ppdm.sources` (whose sources and kernels it reuses), below
:mod:`ppdm.jobs`.
"""

from __future__ import annotations

import contextvars
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ppdm.errors import ConfigError, SourceError
from ppdm.mining.itemsets import TransactionDB
from ppdm.sources.config import SourceSpec

__all__ = [
    "COMPUTE_FAULT",
    "ENGINES",
    "ComputeEngine",
    "ComputeError",
    "ComputeSettings",
    "JobScope",
    "current_job",
    "job_scope",
    "parse_compute_table",
]

ENGINES = ("embedded", "spark")
#: The public fault class of a failure of the compute engine (``ppdm.errors.ERROR_CODES``).
COMPUTE_FAULT = "compute-failed"

_KEYS = {"engine", "master", "executor_memory", "driver_memory", "conf", "partitions"}
_MEMORY_UNITS = ("k", "m", "g", "t")


class ComputeError(SourceError):
    """The node's compute engine failed (a lost executor, a dead driver, a refused
    application): public fault class ``compute-failed``; the message stays local."""

    def __init__(self, message: str) -> None:
        super().__init__("source-malformed", message)
        self.fault = COMPUTE_FAULT


@dataclass(frozen=True)
class ComputeSettings:
    """The checked ``[compute]`` table of a party's settings (module docstring)."""

    engine: str = "embedded"
    master: str = "local[*]"
    executor_memory: str | None = None
    driver_memory: str | None = None
    #: Extra Spark configuration pairs, sorted by key.
    conf: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    #: Partitions of a counting or k-means scan (``None``: Spark's default parallelism).
    partitions: int | None = None


@dataclass(frozen=True)
class JobScope:
    """The job a thread's local work belongs to (:func:`job_scope`).

    ``ended()`` returns ``None`` while the job runs and, once it is over at this party
    (cancelled by its initiator, aborted by a peer, a peer lost, the node stopping), the
    exception that says why -- what the job's next receive would raise. An engine whose
    work runs outside the node's process (Spark's executors) polls it and cancels that
    work, so an abandoned job does not keep a cluster busy.
    """

    job_id: str
    ended: Callable[[], BaseException | None]


_JOB: contextvars.ContextVar[JobScope | None] = contextvars.ContextVar(
    "ppdm_compute_job", default=None
)


def _running() -> BaseException | None:
    return None


@contextmanager
def job_scope(
    job_id: str, *, ended: Callable[[], BaseException | None] | None = None
) -> Iterator[JobScope]:
    """Within this block, this thread's local work belongs to job ``job_id`` (the node
    enters it around each job it runs, with its endpoint's ``failure``)."""
    scope = JobScope(job_id, ended or _running)
    token = _JOB.set(scope)
    try:
        yield scope
    finally:
        _JOB.reset(token)


def current_job() -> JobScope | None:
    """The innermost :func:`job_scope` of this thread, if any."""
    return _JOB.get()


def _memory(value: Any, where: str) -> str | None:
    if value is None:
        return None
    text = str(value).strip().lower() if isinstance(value, str) else ""
    digits = text[:-1] if text.endswith(_MEMORY_UNITS) else text
    if not digits.isdigit() or int(digits) == 0:
        raise ConfigError(f'{where} must be a size such as "2g" or "512m", not {value!r}')
    return text


def parse_compute_table(table: Any, *, where: str = "[compute]") -> ComputeSettings:
    """Check a ``[compute]`` table (``None`` or empty: the embedded engine).

    >>> parse_compute_table({"engine": "spark", "master": "local[2]"}).master
    'local[2]'
    >>> parse_compute_table(None).engine
    'embedded'
    """
    if table is None:
        return ComputeSettings()
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where} must be a table")
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}")
    engine = table.get("engine", "embedded")
    if engine not in ENGINES:
        raise ConfigError(f"{where}: engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    master = table.get("master", "local[*]")
    if not isinstance(master, str) or not master.strip():
        raise ConfigError(f'{where}: master must be a Spark master URL such as "local[*]"')
    conf = table.get("conf", {})
    if not isinstance(conf, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str | int | float | bool) for k, v in conf.items()
    ):
        raise ConfigError(f"{where}: conf must be a table of Spark configuration pairs")
    pairs = tuple(
        sorted((k, str(v).lower() if isinstance(v, bool) else str(v)) for k, v in conf.items())
    )
    partitions = table.get("partitions")
    if partitions is not None and (
        isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1
    ):
        raise ConfigError(f"{where}: partitions must be a positive integer")
    if engine == "embedded" and set(table) - {"engine"}:
        raise ConfigError(
            f'{where}: {", ".join(sorted(set(table) - {"engine"}))} apply to engine = "spark" only'
        )
    return ComputeSettings(
        engine=engine,
        master=master.strip(),
        executor_memory=_memory(table.get("executor_memory"), f"{where}: executor_memory"),
        driver_memory=_memory(table.get("driver_memory"), f"{where}: driver_memory"),
        conf=pairs,
        partitions=partitions,
    )


class ComputeEngine(ABC):
    """How a node does a party's local work (module docstring).

    Every method takes the checked ``[data]`` entry (:class:`SourceSpec`) it reads, and
    for files the job's ``fmt``/``sep`` where the entry leaves them open.
    """

    #: ``"embedded"`` or ``"spark"``.
    name: str

    @abstractmethod
    def transactions(self, spec: SourceSpec, *, fmt: str = "auto", sep: str = ",") -> TransactionDB:
        """The whole transaction database in memory (vertical association rules)."""

    @abstractmethod
    def local_counter(self, spec: SourceSpec, *, fmt: str = "auto", sep: str = ",") -> Any:
        """What horizontal association rules count on: an object with
        ``n_transactions``, ``n_items``, ``items``, ``item_counts()`` and
        ``count(candidates)`` (a :class:`TransactionDB`, a streamed counter, or a counter
        whose scans run on the engine)."""

    @abstractmethod
    def column_names(self, spec: SourceSpec, *, sep: str = ",") -> list[str]:
        """The columns of a records table."""

    @abstractmethod
    def read_frame(self, spec: SourceSpec, columns: Sequence[str], *, sep: str = ",") -> Any:
        """A pandas DataFrame of ``columns`` (records held in memory: vertical k-means,
        alignment)."""

    @abstractmethod
    def local_records(
        self, spec: SourceSpec, columns: Sequence[str], id_column: str, *, sep: str = ","
    ) -> Any | None:
        """The records behind horizontal k-means' local seam
        (:class:`ppdm.mining.kmeans.LocalRecords`: per-cluster sums and counts computed
        by the engine), or ``None`` when this engine keeps them in memory."""

    def id_set(self, spec: SourceSpec, id_column: str, *, distinct: bool = False) -> Any | None:
        """The entry's record ids as PSI inputs encoded by the engine (the interface of
        :class:`ppdm.protocols.psi.ids.IdSet` that :func:`ppdm.protocols.psi.align`
        uses, plus ``rows_of(ids, columns)``: the rows of the common ids after the
        alignment), or ``None`` when the ids are read into the node's memory as a column
        (the embedded engine). ``distinct``: the distinct values of the column (the
        transaction ids of a long layout)."""
        return None

    def close(self) -> None:  # noqa: B027 -- engines without a session keep it
        """Release what the engine started (the node calls this when it stops)."""
