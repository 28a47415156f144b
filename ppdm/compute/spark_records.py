"""Horizontal k-means on Spark: a party's records partitioned where they live.

:class:`SparkRecords` is the :class:`ppdm.mining.kmeans.LocalRecords` of a Spark party:
the records range-partitioned by id and sorted, each Lloyd step one Spark job whose
partitions assign their records with :func:`ppdm.mining.kmeans.assign` and return their
labels, per-cluster sums and counts; the driver concatenates the labels in partition
(= id) order and adds the sums. Counts and labels equal the embedded engine's; float
sums are added in another order (partition partials), so they agree to rounding --
exactly on data whose sums are exact in float64.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from ppdm.compute.spark_common import KERNEL_SCHEMA, col, pack, partition_id, unpack
from ppdm.errors import ConfigError
from ppdm.sources.config import SourceSpec

if TYPE_CHECKING:
    from ppdm.compute.spark import SparkEngine

__all__ = ["SparkRecords"]

#: Cells of the ``(rows, k, d)`` distance array built at once in a k-means kernel.
_ASSIGN_CELLS = 1 << 22


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
            {"part": [partition_id()], "n": [n], "bad": [bad], "data": [pack(state)]}
        )

    return kernel


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
        df = df.select(col(id_column), *[col(c).cast("double").alias(c) for c in columns])
        self._df = df.repartitionByRange(
            engine.partitions(df), col(id_column)
        ).sortWithinPartitions(col(id_column))
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
        self._head_frame = df.orderBy(col(id_column))

    def __len__(self) -> int:
        return self.shape[0]

    def _scan(self, what: str, step: Callable[[np.ndarray, np.ndarray], dict[str, Any]]):
        kernel = _records_kernel(self.id_column, self.columns, step)
        self.scans += 1
        rows = self._engine.run(what, lambda: self._df.mapInPandas(kernel, KERNEL_SCHEMA).collect())
        rows = sorted(rows, key=lambda r: r["part"])
        if any(r["bad"] for r in rows):
            raise ConfigError(
                f"{self.where}: the attributes or ids have missing or infinite values"
            )
        out = []
        for r in rows:
            part = unpack(bytes(r["data"]))
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

            pid = partition_id()
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
                {"part": [pid], "n": [n], "bad": [False], "data": [pack({"sums": sums})]}
            )

        self.scans += 1
        try:
            rows = self._engine.run(
                "summing groups", lambda: self._df.mapInPandas(kernel, KERNEL_SCHEMA).collect()
            )
        finally:
            with contextlib.suppress(Exception):
                shared.destroy()
        if sorted(int(r["n"]) for r in rows) != sorted(self._sizes):
            raise ConfigError(f"{self.where}: the records changed during the job")
        sums = np.zeros((k, d))
        for r in rows:
            sums += unpack(bytes(r["data"]))["sums"]
        return sums, np.bincount(labels, minlength=k).astype(np.int64)
