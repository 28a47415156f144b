"""The Spark engine: a party's local work on Apache Spark, same kernels, same numbers.

The node's driver holds one :class:`SparkSession`, started lazily by the first job that
needs it and stopped with the node (:meth:`SparkEngine.close`). Data is read where it
lives -- a Parquet file or (hive-)partitioned Parquet dataset (``kind = "parquet"`` or a
``.parquet`` path), a table of the session's catalog (``kind = "spark-table"``, ``table =
"db.name"``: a Hive metastore, a Delta or Iceberg catalog configured through ``conf``;
only this engine reads that kind), a JDBC table or query (``kind = "sql"``; the JDBC
driver jar must be on the session's class path, e.g. ``conf = { "spark.jars" =
"/usr/share/java/postgresql.jar" }``) -- with the columns projected and the
candidate-item filter pushed into the scan. A step of the local work ends with its job
(:meth:`SparkEngine.run`, :mod:`ppdm.compute.spark_guard`).
FIMI and CSV files are local files of one host: the engine reads them like the embedded
one.

The kernels are the embedded engine's, run on the DataFrame's partitions through
``mapInPandas`` (Arrow batches, never pickled rows):

* support counting (:class:`SparkCounter`): the rows of the candidates' items,
  repartitioned by transaction id and sorted within each partition, are cut into chunks
  of whole transactions (:func:`~ppdm.sources.counting.transaction_chunks`), each chunk
  becomes a :class:`~ppdm.mining.itemsets.TransactionDB`
  (:func:`~ppdm.sources.counting.chunk_database`) and is counted by
  :func:`~ppdm.sources.counting.pair_counts` or
  :func:`~ppdm.mining.itemsets.support_counts`; the driver adds the partitions' integer
  counts -- exactly the embedded engine's counts;
* record alignment (:class:`~ppdm.compute.spark_ids.SparkIdSet`): the ids range-partitioned and sorted, each
  partition encoded into the 16-byte PSI blocks of
  :class:`ppdm.protocols.psi.ids.IdSet` (hashing long strings) on its executor; the
  driver holds the blocks in id order, never the ids, and fetches only the ids of the
  intersection the protocol outputs;
* k-means (:class:`~ppdm.compute.spark_records.SparkRecords`): the records range-partitioned by id and sorted, each
  partition assigns its records with :func:`ppdm.mining.kmeans.assign` and returns its
  labels, per-cluster sums and counts; the driver concatenates the labels in partition
  (= id) order and adds the sums. Counts and labels equal the embedded engine's; float
  sums are added in another order (partition partials), so they agree to rounding --
  exactly on data whose sums are exact in float64.

What the driver logs and shows: the session runs with ``spark.ui.enabled = false``, the
console progress bar off and the log level WARN; a kernel's error names a fault, never a
value. Everything the executors hold is the party's own data, as the embedded engine
holds it in memory. A Spark failure is a :class:`~ppdm.compute.engine.ComputeError`
(``compute-failed``); a session whose JVM died is dropped, and the next job starts a
new one.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from ppdm.compute.embedded import EmbeddedEngine
from ppdm.compute.engine import ComputeEngine, ComputeError, ComputeSettings
from ppdm.compute.spark_common import KERNEL_SCHEMA, col, pack, partition_id, unpack
from ppdm.compute.spark_guard import JobGuard
from ppdm.errors import ConfigError, PPDMError, SourceError
from ppdm.mining.itemsets import TransactionDB, support_counts
from ppdm.sources.base import frame_labels, long_frame_to_database
from ppdm.sources.config import SourceSpec, resolve_password
from ppdm.sources.counting import (
    DEFAULT_CHUNK_ROWS,
    chunk_database,
    label_array,
    pair_counts,
    transaction_chunks,
)

__all__ = ["DEFAULT_CONF", "SparkCounter", "SparkEngine"]

log = logging.getLogger(__name__)

#: What every session of a node runs with unless its ``conf`` says otherwise: no UI, no
#: console progress, Arrow between the JVM and the Python workers.
DEFAULT_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.eventLog.enabled": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "262144",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.session.timeZone": "UTC",
}


#: Rows of a source per partition of a counting or k-means scan (unless the node's
#: ``partitions`` setting fixes the number): a partition of 4M rows of (id, item) sorts
#: in some hundred MB of an executor's heap.
ROWS_PER_PARTITION = 4_000_000


def _spark_errors() -> tuple[type[BaseException], ...]:
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    return (Py4JError, PySparkException, ConnectionError, EOFError)


# The JVM gateway's start, without Python code between fork and exec. pyspark starts
# ``spark-submit`` with ``Popen(..., preexec_fn=...)`` (to ignore SIGINT in the JVM),
# which forks the node -- a multithreaded gRPC server -- and runs Python in the child
# before ``exec``: unsafe in a threaded process (a fresh-clone run saw the child die with
# gRPC's "epoll_wait error: Bad file descriptor", twice in a row: "Java gateway process
# exited before sending its port number"). The same effect, safely: ``/bin/sh`` ignores
# SIGINT (an ignored signal stays ignored across ``exec``) and execs the command; the JVM
# stays in the node's process group and still dies when the node's end of its stdin pipe
# closes, as pyspark arranges.
_IGNORE_SIGINT_AND_EXEC = 'trap "" INT; exec "$@"'
_GATEWAY_LAUNCH = threading.Lock()


def _popen_without_preexec(popen: Callable[..., Any]) -> Callable[..., Any]:
    def start(command: Sequence[str], **kwargs: Any) -> Any:
        if kwargs.pop("preexec_fn", None) is not None and os.name == "posix":
            command = ["/bin/sh", "-c", _IGNORE_SIGINT_AND_EXEC, "sh", *command]
        return popen(command, **kwargs)

    return start


@contextlib.contextmanager
def _gateway_started_without_preexec() -> Iterator[None]:
    """pyspark's gateway launch with :func:`_popen_without_preexec` (one launch at a
    time in the process: pyspark's module attribute is swapped for its duration)."""
    from pyspark import java_gateway

    if not callable(getattr(java_gateway, "Popen", None)):  # another pyspark: its own way
        yield
        return
    with _GATEWAY_LAUNCH:
        original = java_gateway.Popen
        java_gateway.Popen = _popen_without_preexec(original)  # type: ignore[assignment,misc]
        try:
            yield
        finally:
            java_gateway.Popen = original  # type: ignore[misc]


class SparkEngine(ComputeEngine):
    """Local work on Spark (module docstring); the session is started on first use."""

    name = "spark"

    def __init__(self, settings: ComputeSettings, *, party: str = "") -> None:
        self.settings = settings
        self.party = party
        self._session: Any = None
        self._lock = threading.Lock()
        self._embedded = EmbeddedEngine()
        self.sessions_started = 0
        #: The job groups this engine cancelled (a job past its timeout or ended).
        self.cancelled_groups: list[str] = []

    # -- the session ----------------------------------------------------------------------

    def session(self) -> Any:
        """The node's SparkSession (started once, lazily; a session whose JVM was lost
        is dropped by the job that finds it lost, and the next job starts a new one)."""
        with self._lock:
            if self._session is None:
                self._session = self._start()
            return self._session

    def _start(self) -> Any:
        try:
            from pyspark.sql import SparkSession
        except ImportError:
            raise ConfigError(
                '[compute] engine = "spark" needs pyspark: pip install "ppdm[spark]"'
            ) from None
        # The Python workers run the ppdm kernels: the node's own interpreter.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        s = self.settings
        conf = dict(DEFAULT_CONF)
        if s.executor_memory:
            conf["spark.executor.memory"] = s.executor_memory
        if s.driver_memory:
            conf["spark.driver.memory"] = s.driver_memory
        if s.master.startswith("local"):
            # One host: the driver listens on the loopback interface only.
            conf["spark.driver.host"] = "127.0.0.1"
            conf["spark.driver.bindAddress"] = "127.0.0.1"
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        conf.update(dict(s.conf))
        builder = SparkSession.builder.master(s.master).appName(f"ppdm-{self.party or 'party'}")
        for k, v in conf.items():
            builder = builder.config(k, v)
        failures: tuple[type[BaseException], ...] = (*_spark_errors(), RuntimeError, ValueError)
        for attempt in (1, 2):  # a second try: a JVM start can fail on a loaded host
            try:
                with warnings.catch_warnings(), _gateway_started_without_preexec():
                    warnings.simplefilter("ignore")
                    session = builder.getOrCreate()
                session.sparkContext.setLogLevel("WARN")
                break
            except failures as exc:
                log.error("cannot start Spark (master %s, try %d): %s", s.master, attempt, exc)
                self._forget_pyspark_state()
                if attempt == 2:
                    raise ComputeError(f"cannot start Spark on master {s.master}") from None
        self.sessions_started += 1
        log.info("Spark session started (master %s)", s.master)
        return session

    @staticmethod
    def _alive(session: Any) -> bool:
        try:  # a call into the JVM: any failure means the gateway is gone
            return not session.sparkContext._jsc.sc().isStopped()
        except Exception:
            return False

    def _drop(self) -> None:
        session, self._session = self._session, None
        if session is None:
            return
        with contextlib.suppress(Exception):
            session.stop()
        self._forget_pyspark_state()

    @staticmethod
    def _forget_pyspark_state() -> None:
        """Clear pyspark's process-wide handles: a dead gateway must not be reused by the
        next ``getOrCreate``."""
        with contextlib.suppress(Exception):
            from pyspark import SparkContext

            SparkContext._gateway = None  # type: ignore[attr-defined]
            SparkContext._jvm = None  # type: ignore[attr-defined]
            SparkContext._active_spark_context = None  # type: ignore[attr-defined]
        with contextlib.suppress(Exception):
            from pyspark.sql import SparkSession

            SparkSession._instantiatedSession = None  # type: ignore[attr-defined]
            SparkSession._activeSession = None  # type: ignore[attr-defined]

    def close(self) -> None:
        with self._lock:
            self._drop()

    def run(self, what: str, fn: Callable[[], Any]) -> Any:
        """``fn()`` (the Spark jobs of one step of the local work) with Spark's failures
        turned into :class:`ComputeError` (the details go to this node's log only).

        Inside a job (:func:`~ppdm.compute.engine.job_scope`, and the job's timeout
        ``T`` of :func:`~ppdm.sources.read_time_limit`) the call's Spark jobs run in a
        job group of their own, cancelled with their tasks interrupted (the Python
        workers killed) when the call runs past ``T`` -- then the fault is
        ``source-timeout``, as for a DuckDB scan past ``T`` -- or when the job ends at
        this party first (its initiator cancels it, a peer aborts or is lost, the node
        stops) -- then the job's own failure is raised. An abandoned job does not keep
        the executors busy."""
        guard = JobGuard(self, what)
        try:
            with warnings.catch_warnings(), guard:
                warnings.simplefilter("ignore", FutureWarning)
                out = fn()
        except PPDMError:
            if guard.reason is not None:
                raise guard.reason from None
            raise
        except _spark_errors() as exc:
            if guard.reason is not None:
                log.warning(
                    "the Spark work of job group %s stopped with the cancel: %s",
                    guard.group,
                    _first_line(exc),
                )
                raise guard.reason from None
            log.error("Spark failed while %s: %s", what, _first_line(exc))
            with self._lock:
                if self._session is not None and not self._alive(self._session):
                    log.warning(
                        "the Spark session of this node was lost; the next job starts a new one"
                    )
                    self._drop()
            raise ComputeError(f"the Spark engine failed while {what}") from None
        if guard.reason is not None:  # the job ended (or ran past T) as the call returned
            raise guard.reason
        return out

    def partitions(self, df: Any = None) -> int:
        """Partitions of a counting or k-means scan: the ``partitions`` setting, else
        Spark's parallelism, raised for a DataFrame ``df`` to one partition per
        :data:`ROWS_PER_PARTITION` of its rows. Each partition is shuffled, sorted and
        streamed through a Python worker on its own, so its size -- not the data's --
        is what an executor's memory must hold (at 2 partitions of 500 million rows
        each, a 1 GiB heap ran out while sorting)."""
        if self.settings.partitions is not None:
            return self.settings.partitions
        base = self.run(
            "starting", lambda: max(1, int(self.session().sparkContext.defaultParallelism))
        )
        if df is None:
            return base
        rows = int(self.run("counting the rows", df.count))  # Parquet: from the footers
        return max(base, -(-rows // ROWS_PER_PARTITION))

    # -- reading ---------------------------------------------------------------------------

    def reads(self, spec: SourceSpec) -> bool:
        """Whether Spark reads this entry itself (Parquet, catalog tables, JDBC); FIMI
        and CSV files are read like the embedded engine reads them."""
        return spec.is_table

    def frame(self, spec: SourceSpec, columns: Sequence[str] | None = None) -> Any:
        """The entry as a Spark DataFrame, only ``columns`` when given (a missing column
        is a :class:`ConfigError` naming it)."""

        def load() -> Any:
            spark = self.session()
            if spec.kind == "sql":
                df = self._jdbc(spark, spec)
            elif spec.kind == "spark-table":
                if not spark.catalog.tableExists(spec.table):
                    raise SourceError(
                        "source-unreachable", f"{spec.describe()}: not in the Spark catalog"
                    )
                df = spark.read.table(spec.table)
            else:
                if not spec.file_path.exists():
                    raise SourceError("source-unreachable", f"{spec.describe()}: not found")
                df = spark.read.parquet(str(spec.file_path))
            if columns is not None:
                missing = [c for c in columns if c not in df.columns]
                if missing:
                    raise ConfigError(
                        f"{spec.describe()}: no column(s) {', '.join(map(repr, missing))}"
                    )
                df = df.select(*[col(c) for c in columns])
            return df

        return self.run(f"opening {spec.describe()}", load)

    @staticmethod
    def _jdbc(spark: Any, spec: SourceSpec) -> Any:
        from urllib.parse import urlsplit

        parts = urlsplit(spec.url or "")
        if spec.scheme == "sqlite":
            url = f"jdbc:sqlite:{spec.file_path}"
            reader = (
                spark.read.format("jdbc").option("url", url).option("driver", "org.sqlite.JDBC")
            )
        else:
            host = parts.hostname or "localhost"
            port = f":{parts.port}" if parts.port else ""
            url = f"jdbc:postgresql://{host}{port}{parts.path}"
            # The driver class named: a jar of spark.jars is not seen by DriverManager's
            # own lookup by URL.
            reader = (
                spark.read.format("jdbc")
                .option("url", url)
                .option("driver", "org.postgresql.Driver")
            )
            if parts.username:
                reader = reader.option("user", parts.username)
            password = resolve_password(spec)  # the plan shows it redacted (spark.redaction.regex)
            if password is not None:
                reader = reader.option("password", password)
        if spec.query:
            return reader.option("query", spec.query).load()
        return reader.option("dbtable", spec.table).load()

    # -- the engine interface -------------------------------------------------------------

    def transactions(self, spec: SourceSpec, *, fmt: str = "auto", sep: str = ",") -> TransactionDB:
        if not self.reads(spec):
            return self._embedded.transactions(spec, fmt=fmt, sep=sep)
        df = self.frame(spec, [spec.transaction_column, spec.item_column])
        pdf = self.run(f"reading {spec.describe()}", df.toPandas)
        return long_frame_to_database(pdf, spec)[1]

    def local_counter(self, spec: SourceSpec, *, fmt: str = "auto", sep: str = ",") -> Any:
        if not self.reads(spec):
            return self._embedded.local_counter(spec, fmt=fmt, sep=sep)
        return SparkCounter(self, spec)

    def column_names(self, spec: SourceSpec, *, sep: str = ",") -> list[str]:
        if not self.reads(spec) or spec.kind == "sql":
            return self._embedded.column_names(spec, sep=sep)
        return list(self.frame(spec).columns)

    def read_frame(self, spec: SourceSpec, columns: Sequence[str], *, sep: str = ",") -> Any:
        if not self.reads(spec):
            return self._embedded.read_frame(spec, columns, sep=sep)
        df = self.frame(spec, list(columns))
        return self.run(f"reading {spec.describe()}", df.toPandas)

    def local_records(
        self, spec: SourceSpec, columns: Sequence[str], id_column: str, *, sep: str = ","
    ) -> Any | None:
        from ppdm.compute.spark_records import SparkRecords

        if not self.reads(spec):
            return self._embedded.local_records(spec, columns, id_column, sep=sep)
        return SparkRecords(self, spec, list(columns), id_column)

    def id_set(self, spec: SourceSpec, id_column: str, *, distinct: bool = False) -> Any | None:
        """The entry's ids as PSI inputs encoded on the executors (:class:`SparkIdSet`),
        for entries Spark reads; ``None`` for files this engine reads like the embedded
        one."""
        from ppdm.compute.spark_ids import SparkIdSet

        if not self.reads(spec):
            return None
        return SparkIdSet(self, spec, id_column, distinct=distinct)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:500] if text else type(exc).__name__


# ---------------------------------------------------------------------------------------
# Support counting


def _count_kernel(
    t: str, i: str, wanted: list[tuple], pairs: bool, chunk_rows: int
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The per-partition kernel of :meth:`SparkCounter.count`: the partition's rows are
    sorted by transaction id, so chunks of whole transactions are counted as the
    embedded streamed counter counts them."""

    def kernel(frames: Iterator[Any]) -> Iterator[Any]:
        import pandas as pd

        def batches() -> Iterator[tuple[np.ndarray, np.ndarray, None]]:
            for pdf in frames:
                if len(pdf):
                    yield pdf[t].to_numpy(), label_array(pdf[i].to_numpy()), None

        acc = np.zeros(len(wanted), dtype=np.int64)
        for tids, labels, valid in transaction_chunks(batches(), chunk_rows):
            db = chunk_database(tids, labels, valid)
            acc += pair_counts(db, wanted) if pairs else support_counts(db, wanted)
        yield pd.DataFrame({"counts": [acc.tobytes()]})

    return kernel


def _items_kernel(t: str, i: str, chunk_rows: int) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The per-partition kernel of the first scan: the partition's transactions (rows
    sorted by id; a NULL item marks a transaction without items), its item labels and
    their support counts, as the embedded streamed counter finds them chunk by chunk."""

    def kernel(frames: Iterator[Any]) -> Iterator[Any]:
        import pandas as pd

        bad = False

        def batches() -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray | None]]:
            nonlocal bad
            for pdf in frames:
                if not len(pdf):
                    continue
                if pdf[t].isna().any():
                    bad = True
                    return
                labels, valid = frame_labels(pdf[i])
                yield pdf[t].to_numpy(), label_array(labels), valid

        n = 0
        labels: list[np.ndarray] = []
        counts: list[np.ndarray] = []
        for tids, items, valid in transaction_chunks(batches(), chunk_rows):
            db = chunk_database(tids, items, valid)
            n += db.n_transactions
            labels.append(db.items)
            counts.append(db.item_counts())
        state: dict[str, Any] = {}
        if labels and sum(len(x) for x in labels):
            every = np.concatenate([label_array(x) for x in labels])
            items_u, inverse = np.unique(every, return_inverse=True)
            state["items"] = items_u
            state["counts"] = np.bincount(
                inverse.ravel(), weights=np.concatenate(counts), minlength=len(items_u)
            ).astype(np.int64)
        yield pd.DataFrame(
            {"part": [partition_id()], "n": [n], "bad": [bad], "data": [pack(state)]}
        )

    return kernel


class SparkCounter:
    """The local counter of horizontal association rules on Spark (the interface of
    :class:`ppdm.sources.StreamedCounter`): level 1 and every later level by one
    counting job each (the later ones over the rows of the candidates' items only)."""

    def __init__(self, engine: SparkEngine, spec: SourceSpec, *, chunk_rows: int | None = None):
        self._engine = engine
        self._spec = spec
        self.chunk_rows = DEFAULT_CHUNK_ROWS if chunk_rows is None else int(chunk_rows)
        self.scans = 0
        t, i = spec.transaction_column, spec.item_column
        self._df = engine.frame(spec, [t, i])
        self._partitions = engine.partitions(self._df)

        def level1() -> list[Any]:
            rows = (
                self._df.repartition(self._partitions, col(t))
                .sortWithinPartitions(col(t))
                .mapInPandas(_items_kernel(t, i, self.chunk_rows), KERNEL_SCHEMA)
                .collect()
            )
            return rows

        self.scans += 1
        rows = engine.run(f"counting the items of {spec.describe()}", level1)
        if any(r["bad"] for r in rows):
            raise ConfigError(f"{spec.describe()}: the transaction id column has empty values")
        self.n_transactions = int(sum(int(r["n"]) for r in rows))
        parts = [unpack(bytes(r["data"])) for r in rows]
        parts = [p for p in parts if "items" in p and len(p["items"])]
        if parts:
            every = np.concatenate([label_array(p["items"]) for p in parts])
            self.items, inverse = np.unique(every, return_inverse=True)
            self._item_counts = np.bincount(
                inverse.ravel(),
                weights=np.concatenate([p["counts"] for p in parts]),
                minlength=len(self.items),
            ).astype(np.int64)
        else:
            self.items = np.zeros(0, dtype=np.int64)
            self._item_counts = np.zeros(0, dtype=np.int64)
        self._single = {
            x: int(c) for x, c in zip(self.items.tolist(), self._item_counts, strict=True)
        }

    @property
    def n_items(self) -> int:
        return len(self.items)

    def item_counts(self) -> np.ndarray:
        """Support count of every label of :attr:`items`."""
        return self._item_counts.copy()

    def candidate_rows(self, items: Sequence[Any]) -> Any:
        """The rows of ``items`` (a DataFrame): the ``item IN (...)`` filter is pushed
        into the scan of a Parquet dataset or catalog table (``PushedFilters`` of its
        plan) and into a JDBC query's ``WHERE``."""
        return self._df.where(col(self._spec.item_column).isin(list(items)))

    def count(self, candidates: Sequence[tuple]) -> np.ndarray:
        """Support counts of ``candidates`` (tuples of labels), in order, as ``int64``."""
        out = np.zeros(len(candidates), dtype=np.int64)
        longer = [j for j, c in enumerate(candidates) if len(set(c)) > 1]
        for j, c in enumerate(candidates):
            s = set(c)
            if not s:
                out[j] = self.n_transactions
            elif len(s) == 1:
                out[j] = self._single.get(_native(next(iter(s))), 0)
        if not longer:
            return out
        wanted = [tuple(_native(x) for x in candidates[j]) for j in longer]
        needed = sorted({x for c in wanted for x in c}, key=_order_key)
        pairs = all(len(set(c)) == 2 and len(c) == 2 for c in wanted)
        t, i = self._spec.transaction_column, self._spec.item_column
        engine = self._engine

        def job() -> list[Any]:
            sub = (
                self.candidate_rows(needed)
                .repartition(self._partitions, col(t))
                .sortWithinPartitions(col(t))
            )
            kernel = _count_kernel(t, i, wanted, pairs, self.chunk_rows)
            return sub.mapInPandas(kernel, "counts binary").collect()

        self.scans += 1
        rows = engine.run(f"counting {len(wanted)} itemsets", job)
        acc = np.zeros(len(wanted), dtype=np.int64)
        for r in rows:
            part = np.frombuffer(bytes(r["counts"]), dtype=np.int64)
            if len(part) != len(wanted):
                raise ComputeError("a Spark partition returned a malformed count vector")
            acc += part
        out[np.array(longer, dtype=np.int64)] = acc
        log.debug("counted %d itemsets on Spark in scan %d", len(wanted), self.scans)
        return out


def _native(x: Any) -> Any:
    return x.item() if isinstance(x, np.generic) else x


def _order_key(x: Any) -> tuple[int, Any]:
    return (0, x) if isinstance(x, int) else (1, str(x))
