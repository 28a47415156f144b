"""The Spark engine: a party's local work on Apache Spark, same kernels, same numbers.

The node's driver holds one :class:`SparkSession`, started lazily by the first job that
needs it and stopped with the node (:meth:`SparkEngine.close`). Data is read where it
lives -- a Parquet file or (hive-)partitioned Parquet dataset (``kind = "parquet"`` or a
``.parquet`` path), a JDBC table or query (``kind = "sql"``; the JDBC driver jar must be
on the session's class path, e.g. ``conf = { "spark.jars" = "/opt/jdbc/postgresql.jar"
}``) -- with the columns projected and the candidate-item filter pushed into the scan.
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
* k-means (:class:`SparkRecords`): the records range-partitioned by id and sorted, each
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
from ppdm.errors import ConfigError, PPDMError, SourceError
from ppdm.mining.itemsets import TransactionDB, support_counts
from ppdm.sources.base import long_to_database
from ppdm.sources.config import SourceSpec, resolve_password
from ppdm.sources.counting import (
    DEFAULT_CHUNK_ROWS,
    chunk_database,
    label_array,
    pair_counts,
    transaction_chunks,
)

__all__ = ["DEFAULT_CONF", "SparkCounter", "SparkEngine", "SparkRecords"]

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

#: Cells of the ``(rows, k, d)`` distance array built at once in a k-means kernel.
_ASSIGN_CELLS = 1 << 22


def _spark_errors() -> tuple[type[BaseException], ...]:
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    return (Py4JError, PySparkException, ConnectionError, EOFError)


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
                with warnings.catch_warnings():
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
        """``fn()`` with Spark's failures turned into :class:`ComputeError` (the details
        go to this node's log only)."""
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)
                return fn()
        except PPDMError:
            raise
        except _spark_errors() as exc:
            log.error("Spark failed while %s: %s", what, _first_line(exc))
            with self._lock:
                if self._session is not None and not self._alive(self._session):
                    log.warning(
                        "the Spark session of this node was lost; the next job starts a new one"
                    )
                    self._drop()
            raise ComputeError(f"the Spark engine failed while {what}") from None

    def partitions(self) -> int:
        """Partitions of a counting or k-means scan."""
        if self.settings.partitions is not None:
            return self.settings.partitions
        return self.run(
            "starting", lambda: max(1, int(self.session().sparkContext.defaultParallelism))
        )

    # -- reading ---------------------------------------------------------------------------

    def reads(self, spec: SourceSpec) -> bool:
        """Whether Spark reads this entry itself (Parquet, JDBC); FIMI and CSV files are
        read like the embedded engine reads them."""
        if spec.kind in ("parquet", "sql"):
            return True
        path = spec.file_path
        return (
            path.is_dir()
            or spec.format == "parquet"
            or path.suffix.lower()
            in (
                ".parquet",
                ".pq",
            )
        )

    def frame(self, spec: SourceSpec, columns: Sequence[str] | None = None) -> Any:
        """The entry as a Spark DataFrame, only ``columns`` when given (a missing column
        is a :class:`ConfigError` naming it)."""

        def load() -> Any:
            spark = self.session()
            if spec.kind == "sql":
                df = self._jdbc(spark, spec)
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
                df = df.select(*[_col(c) for c in columns])
            return df

        return self.run(f"opening {spec.describe()}", load)

    @staticmethod
    def _jdbc(spark: Any, spec: SourceSpec) -> Any:
        from urllib.parse import urlsplit

        parts = urlsplit(spec.url or "")
        if spec.scheme == "sqlite":
            url = f"jdbc:sqlite:{spec.file_path}"
            reader = spark.read.format("jdbc").option("url", url)
        else:
            host = parts.hostname or "localhost"
            port = f":{parts.port}" if parts.port else ""
            url = f"jdbc:postgresql://{host}{port}{parts.path}"
            reader = spark.read.format("jdbc").option("url", url)
            if parts.username:
                reader = reader.option("user", parts.username)
            reader = reader.option("password", resolve_password(spec))
        if spec.query:
            return reader.option("query", spec.query).load()
        return reader.option("dbtable", spec.table).load()

    # -- the engine interface -------------------------------------------------------------

    def transactions(self, spec: SourceSpec, *, fmt: str = "auto", sep: str = ",") -> TransactionDB:
        if not self.reads(spec):
            return self._embedded.transactions(spec, fmt=fmt, sep=sep)
        t, i = spec.transaction_column, spec.item_column
        df = self.frame(spec, [t, i])
        pdf = self.run(f"reading {spec.describe()}", df.toPandas)
        items = pdf[i]
        valid = items.notna().to_numpy()
        fill = items[valid].iloc[0] if valid.any() else 0
        labels = items.to_numpy() if valid.all() else items.where(valid, fill).to_numpy()
        if pdf[t].isna().any():
            raise ConfigError(f"{spec.describe()}: the transaction id column has empty values")
        return long_to_database(pdf[t].to_numpy(), labels, None if valid.all() else valid)

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
        if not self.reads(spec):
            return self._embedded.local_records(spec, columns, id_column, sep=sep)
        return SparkRecords(self, spec, list(columns), id_column)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:500] if text else type(exc).__name__


def _col(name: str) -> Any:
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


def _partition_id() -> int:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return int(ctx.partitionId()) if ctx is not None else 0


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
                items = pdf[i]
                valid = items.notna().to_numpy()
                if valid.all():
                    yield pdf[t].to_numpy(), label_array(items.to_numpy()), None
                else:
                    fill = items[valid].iloc[0] if valid.any() else 0
                    labels = label_array(items.where(valid, fill).to_numpy())
                    yield pdf[t].to_numpy(), labels, valid

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
            {"part": [_partition_id()], "n": [n], "bad": [bad], "data": [_pack(state)]}
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

        def level1() -> list[Any]:
            rows = (
                self._df.repartition(engine.partitions(), _col(t))
                .sortWithinPartitions(_col(t))
                .mapInPandas(_items_kernel(t, i, self.chunk_rows), _KERNEL_SCHEMA)
                .collect()
            )
            return rows

        self.scans += 1
        rows = engine.run(f"counting the items of {spec.describe()}", level1)
        if any(r["bad"] for r in rows):
            raise ConfigError(f"{spec.describe()}: the transaction id column has empty values")
        self.n_transactions = int(sum(int(r["n"]) for r in rows))
        parts = [_unpack(bytes(r["data"])) for r in rows]
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
                self._df.where(_col(i).isin(needed))  # pushed into the Parquet scan
                .repartition(engine.partitions(), _col(t))
                .sortWithinPartitions(_col(t))
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


# ---------------------------------------------------------------------------------------
# k-means


#: Keys of a kernel's step whose arrays are concatenated across batches (one value per
#: record); the other keys are added.
_PER_RECORD = ("ids", "labels")


def _records_kernel(
    id_column: str, columns: list[str], step: Callable[[np.ndarray, np.ndarray], dict[str, Any]]
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """A per-partition kernel over ``(ids, x)`` batches in id order: ``step`` maps each
    batch to arrays that are added (sums, counts) or concatenated (per record); one row
    per partition, tagged with its index. Missing or infinite values set ``bad`` (the
    driver names the fault; no value leaves the executor in an error)."""

    def kernel(frames: Iterator[Any]) -> Iterator[Any]:
        import pandas as pd

        added: dict[str, Any] = {}
        joined: dict[str, list[np.ndarray]] = {}
        n, bad = 0, False
        for pdf in frames:
            if not len(pdf):
                continue
            if pdf[id_column].isna().any():
                bad = True
                break
            ids = pdf[id_column].to_numpy()
            x = pdf[columns].to_numpy(dtype=np.float64) if columns else np.zeros((len(pdf), 0))
            if not np.all(np.isfinite(x)):
                bad = True
                break
            n += len(x)
            for key, value in step(ids, x).items():
                if key in _PER_RECORD:
                    joined.setdefault(key, []).append(np.asarray(value))
                else:
                    added[key] = added[key] + value if key in added else value
        state = {**added, **{k: np.concatenate(v) for k, v in joined.items()}}
        yield pd.DataFrame(
            {"part": [_partition_id()], "n": [n], "bad": [bad], "data": [_pack(state)]}
        )

    return kernel


def _pack(state: dict[str, Any]) -> bytes:
    """The arrays of a partition's result as one ``npz`` blob (numpy's own format)."""
    import io

    buf = io.BytesIO()
    np.savez(buf, **{k: np.asarray(v) for k, v in state.items()})  # type: ignore[arg-type]
    return buf.getvalue()


def _unpack(blob: bytes) -> dict[str, np.ndarray]:
    import io

    with np.load(io.BytesIO(blob), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


_KERNEL_SCHEMA = "part int, n long, bad boolean, data binary"


class SparkRecords:
    """A party's records for horizontal k-means on Spark
    (:class:`ppdm.mining.kmeans.LocalRecords`, module docstring): range-partitioned by
    id, every Lloyd step one Spark job; only the ids and each record's label come back to
    the driver (8 bytes a record each, as in the embedded streamed path)."""

    def __init__(self, engine: SparkEngine, spec: SourceSpec, columns: list[str], id_column: str):
        self._engine = engine
        self.where = spec.describe()
        self.columns = columns
        self.id_column = id_column
        df = engine.frame(spec, [id_column, *columns])
        df = df.select(_col(id_column), *[_col(c).cast("double").alias(c) for c in columns])
        self._df = df.repartitionByRange(engine.partitions(), _col(id_column)).sortWithinPartitions(
            _col(id_column)
        )
        self.scans = 0
        d = len(columns)

        def first(ids: np.ndarray, x: np.ndarray) -> dict[str, Any]:
            return {
                "s_abs": np.abs(x).sum(axis=0),
                "s": x.sum(axis=0),
                "s2": (x**2).sum(axis=0),
                "ids": ids,
            }

        parts = self._scan("reading the records", first)
        ids = [p["ids"] for p in parts if "ids" in p]
        self.ids = np.concatenate(ids) if ids else np.zeros(0)
        if len(self.ids) > 1 and np.any(self.ids[1:] == self.ids[:-1]):
            raise ConfigError(f"{self.where}: the id column has duplicate ids")
        self._sizes = [int(p["__n"]) for p in parts]
        self.shape = (len(self.ids), d)
        zero = np.zeros(d)
        self._sums = tuple(
            sum((p.get(k, zero) for p in parts), zero.copy()) for k in ("s_abs", "s", "s2")
        )
        self._head_frame = df.orderBy(_col(id_column))

    def __len__(self) -> int:
        return self.shape[0]

    def _scan(self, what: str, step: Callable[[np.ndarray, np.ndarray], dict[str, Any]]):
        kernel = _records_kernel(self.id_column, self.columns, step)
        self.scans += 1
        rows = self._engine.run(
            what, lambda: self._df.mapInPandas(kernel, _KERNEL_SCHEMA).collect()
        )
        rows = sorted(rows, key=lambda r: r["part"])
        if any(r["bad"] for r in rows):
            raise ConfigError(
                f"{self.where}: the attributes or ids have missing or infinite values"
            )
        out = []
        for r in rows:
            part = _unpack(bytes(r["data"]))
            part["__n"] = np.asarray(r["n"], dtype=np.int64)
            out.append(part)
        if hasattr(self, "_sizes") and [int(p["__n"]) for p in out] != self._sizes:
            raise ConfigError(f"{self.where}: the records changed during the job")
        return out

    def head(self, k: int) -> np.ndarray:
        pdf = self._engine.run("reading the first records", self._head_frame.limit(k).toPandas)
        return pdf[self.columns].to_numpy(dtype=np.float64)

    def column_sums(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self._sums  # type: ignore[return-value]

    def cluster_sums(self, centers: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        from ppdm.mining.kmeans import assign

        centers = np.asarray(centers, dtype=np.float64)
        k, d = centers.shape
        step_rows = max(1, _ASSIGN_CELLS // max(1, k * d))

        def step(ids: np.ndarray, x: np.ndarray) -> dict[str, Any]:
            sums = np.zeros((k, d))
            labels = np.empty(len(x), dtype=np.int64)
            d2_sum = 0.0
            for lo in range(0, len(x), step_rows):
                part = x[lo : lo + step_rows]
                lab, d2 = assign(part, centers)
                labels[lo : lo + len(part)] = lab
                np.add.at(sums, lab, part)
                d2_sum += float(d2.sum())
            return {
                "sums": sums,
                "counts": np.bincount(labels, minlength=k).astype(np.int64),
                "labels": labels,
                "d2": np.float64(d2_sum),
            }

        parts = self._scan("assigning records to centers", step)
        sums = np.zeros((k, d))
        counts = np.zeros(k, dtype=np.int64)
        d2_sum = 0.0
        labels = []
        for p in parts:
            if "sums" in p:
                sums += p["sums"]
                counts += p["counts"]
                d2_sum += float(p["d2"])
                labels.append(p["labels"])
        lab = np.concatenate(labels) if labels else np.zeros(0, dtype=np.int64)
        return lab, sums, counts, d2_sum

    def project(self, u: np.ndarray) -> np.ndarray:
        """``x @ u`` for every record, in id order (one Spark job)."""
        u = np.asarray(u, dtype=np.float64)
        parts = self._scan("projecting the records", lambda ids, x: {"labels": x @ u})
        vals = [p["labels"] for p in parts if "labels" in p]
        return np.concatenate(vals) if vals else np.zeros(0)

    def group_sums(self, labels: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Per-group sums and counts of the records labelled ``labels`` (in id order)."""
        labels = np.asarray(labels, dtype=np.int64)
        if len(labels) != self.shape[0]:
            raise ValueError("one label per record is needed")
        offsets = np.concatenate([[0], np.cumsum(self._sizes)]).astype(np.int64)
        d, columns = self.shape[1], self.columns
        shared = self._engine.run(
            "sharing the labels", lambda: self._engine.session().sparkContext.broadcast(labels)
        )

        # The group sums need each record's position: the partition's offset plus the
        # rows it has passed (the kernel keeps that count).
        def kernel(frames: Iterator[Any]) -> Iterator[Any]:
            import pandas as pd

            pid = _partition_id()
            at = int(offsets[pid]) if pid < len(offsets) else 0
            sums = np.zeros((k, d))
            n = 0
            for pdf in frames:
                if not len(pdf):
                    continue
                x = pdf[columns].to_numpy(dtype=np.float64) if columns else np.zeros((len(pdf), 0))
                lab = shared.value[at + n : at + n + len(x)]
                np.add.at(sums, lab, x)
                n += len(x)
            yield pd.DataFrame(
                {"part": [pid], "n": [n], "bad": [False], "data": [_pack({"sums": sums})]}
            )

        self.scans += 1
        try:
            rows = self._engine.run(
                "summing groups", lambda: self._df.mapInPandas(kernel, _KERNEL_SCHEMA).collect()
            )
        finally:
            with contextlib.suppress(Exception):
                shared.destroy()
        if sorted(int(r["n"]) for r in rows) != sorted(self._sizes):
            raise ConfigError(f"{self.where}: the records changed during the job")
        sums = np.zeros((k, d))
        for r in rows:
            sums += _unpack(bytes(r["data"]))["sums"]
        return sums, np.bincount(labels, minlength=k).astype(np.int64)
