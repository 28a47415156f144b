"""Record alignment on Spark: a party's ids encoded into PSI blocks on the executors.

:class:`SparkIdSet` is what :func:`ppdm.protocols.psi.align` uses of
:class:`ppdm.protocols.psi.ids.IdSet`, for ids that stay where the data live: the ids
range-partitioned and sorted, each partition encoded by ``IdSet``'s own code on its
executor (short ids copied, long ones hashed), the node holding the 16-byte blocks in id
order -- never the ids -- and reading back only the ids of the intersection the protocol
outputs (:meth:`SparkIdSet.common`) and the positions of the leader's common ids
(:meth:`SparkIdSet.locate`). Same blocks as the embedded engine's ``IdSet`` on the sorted
ids, so the same PSI messages and the same alignment.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ppdm.compute.spark_common import KERNEL_SCHEMA, col, pack, partition_id, unpack
from ppdm.errors import ConfigError
from ppdm.sources.config import SourceSpec

if TYPE_CHECKING:
    from ppdm.compute.spark import SparkEngine

__all__ = ["SparkIdSet"]

_ID_KINDS = {
    "tinyint": "int",
    "smallint": "int",
    "int": "int",
    "bigint": "int",
    "string": "str",
    "binary": "bytes",
}


def _id_values(column: Any, kind: str) -> Any:
    """A pandas column of ids as what :class:`IdSet` takes (int64 array, str or bytes
    list)."""
    if kind == "int":
        return column.to_numpy(dtype=np.int64)
    if kind == "str":
        return [str(v) for v in column.tolist()]
    return [bytes(v) for v in column.tolist()]


class SparkIdSet:
    """A party's record ids as PSI inputs, encoded where the data live (module
    docstring): the interface :func:`ppdm.protocols.psi.align` uses of
    :class:`ppdm.protocols.psi.ids.IdSet` (``kind``, ``len``, ``blocks``, ``locate``,
    ``common``), the set in the ids' natural order (the common order of an alignment).

    The blocks are :class:`IdSet`'s, computed by its own code on each partition: equal
    to ``IdSet.of(sorted(ids)).blocks()``. A missing or repeated id is refused without
    the id (a flag from the executor); with ``distinct`` (the transaction ids of a long
    layout, one row per item) the set is the distinct ids, a missing one still refused.
    After the alignment, :meth:`rows_of` reads the rows of the common ids only."""

    def __init__(
        self, engine: SparkEngine, spec: SourceSpec, id_column: str, *, distinct: bool = False
    ) -> None:
        from ppdm.protocols.psi.ids import IdSet

        self._engine = engine
        self._spec = spec
        self.where = spec.describe()
        df = engine.frame(spec, [id_column])
        partitions = engine.partitions(df)  # by the source's rows (the distinct ids' bound)
        if distinct:
            df = df.distinct()
        kind = _ID_KINDS.get(dict(df.dtypes)[id_column])
        if kind is None:
            raise ConfigError(
                f"{self.where}: the id column {id_column!r} must hold integers, strings "
                "or byte strings"
            )
        self.kind = kind
        self._column = id_column
        self._df = df.repartitionByRange(partitions, col(id_column)).sortWithinPartitions(
            col(id_column)
        )

        def kernel(frames: Iterator[Any]) -> Iterator[Any]:
            import pandas as pd

            parts, bad = [], False
            for pdf in frames:
                column = pdf[id_column]
                if column.isna().any():
                    bad = True
                    break
                parts.append(column)
            blocks = np.zeros((0, 16), dtype=np.uint8)
            n = sum(len(c) for c in parts)
            if parts and not bad:
                # Equal ids share a partition (range partitioning), so a repeat is seen here.
                try:
                    blocks = IdSet.of(_id_values(pd.concat(parts), kind)).blocks()
                except (TypeError, ValueError):
                    bad = True
            yield pd.DataFrame(
                {"part": [partition_id()], "n": [n], "bad": [bad], "data": [pack({"b": blocks})]}
            )

        rows = engine.run(
            f"encoding the ids of {self.where}",
            lambda: self._df.mapInPandas(kernel, KERNEL_SCHEMA).collect(),
        )
        rows = sorted(rows, key=lambda r: r["part"])
        if any(r["bad"] for r in rows):
            raise ConfigError(f"{self.where}: the id column has missing or repeated ids")
        self._sizes = [int(r["n"]) for r in rows]
        self._offsets = np.concatenate([[0], np.cumsum(self._sizes)]).astype(np.int64)
        parts = [unpack(bytes(r["data"]))["b"] for r in rows]
        self._blocks = (
            np.concatenate(parts).astype(np.uint8) if parts else np.zeros((0, 16), np.uint8)
        )

    def __len__(self) -> int:
        return len(self._blocks)

    def blocks(self) -> np.ndarray:
        """``(n, 16)`` uint8 blocks in id order (as :meth:`IdSet.blocks`)."""
        return self._blocks.copy()

    def item_bytes(self) -> list[bytes]:
        return [bytes(b[:15]) for b in self._blocks]

    def sorted(self, values: Sequence[Any]) -> list[Any]:
        if self.kind == "int":
            return np.sort(np.asarray(values, dtype=np.int64)).tolist()
        return sorted(values)

    def _positions(self, kernel_for: Callable[[Any], Any], what: str) -> list[Any]:
        rows = self._engine.run(
            what, lambda: self._df.mapInPandas(kernel_for(self._offsets), KERNEL_SCHEMA).collect()
        )
        return [unpack(bytes(r["data"])) for r in sorted(rows, key=lambda r: r["part"])]

    def common(self, rows: np.ndarray) -> tuple[list[Any], np.ndarray]:
        """The ids at positions ``rows`` in the common order, and those positions: one
        Spark job that returns only those ids (the intersection the party learns)."""
        picked = np.unique(np.asarray(rows, dtype=np.int64))
        if len(picked) != len(np.asarray(rows)):
            raise ValueError("rows must be distinct")
        if len(picked) and (picked[0] < 0 or picked[-1] >= len(self)):
            raise ValueError("a row is outside the id set")
        column, kind = self._column, self.kind

        def kernel_for(offsets: np.ndarray) -> Any:
            def kernel(frames: Iterator[Any]) -> Iterator[Any]:
                import pandas as pd

                pid = partition_id()
                lo = int(offsets[pid]) if pid < len(offsets) else 0
                at, out = lo, []
                for pdf in frames:
                    local = picked[(picked >= at) & (picked < at + len(pdf))] - at
                    if len(local):
                        out.append(pdf[column].iloc[local])
                    at += len(pdf)
                values = _id_values(pd.concat(out), kind) if out else []
                if kind == "int":
                    state = {"v": np.asarray(values, dtype=np.int64)}
                else:  # lengths and the bytes joined (numpy's bytes type drops NULs)
                    raw = [_raw(v) for v in values]
                    state = {
                        "len": np.fromiter(map(len, raw), dtype=np.int64, count=len(raw)),
                        "blob": np.frombuffer(b"".join(raw), dtype=np.uint8),
                    }
                yield pd.DataFrame(
                    {"part": [pid], "n": [at - lo], "bad": [False], "data": [pack(state)]}
                )

            return kernel

        parts = self._positions(kernel_for, "reading the common ids")
        if self.kind == "int":
            ids: list[Any] = [int(v) for p in parts for v in p["v"].tolist()]
        else:
            raw = []
            for p in parts:
                blob, at = p["blob"].tobytes(), 0
                for n in p["len"].tolist():
                    raw.append(blob[at : at + n])
                    at += n
            ids = [b.decode("utf-8", "surrogatepass") for b in raw] if self.kind == "str" else raw
        if len(ids) != len(picked):
            raise ConfigError(f"{self.where}: the ids changed during the job")
        return ids, picked

    def locate(self, ids: Sequence[Any] | np.ndarray) -> np.ndarray | None:
        """The position of each of ``ids`` (distinct, of this kind) in this set, or
        ``None`` if one is not in it: one Spark job."""
        want = list(ids.tolist() if isinstance(ids, np.ndarray) else ids)
        if not want:
            return np.zeros(0, dtype=np.int64)
        column, kind = self._column, self.kind
        index = {v: j for j, v in enumerate(want)}

        def kernel_for(offsets: np.ndarray) -> Any:
            def kernel(frames: Iterator[Any]) -> Iterator[Any]:
                import pandas as pd

                pid = partition_id()
                lo = int(offsets[pid]) if pid < len(offsets) else 0
                at, js, pos = lo, [], []
                for pdf in frames:
                    for k, v in enumerate(_id_values(pdf[column], kind)):
                        j = index.get(v.item() if isinstance(v, np.generic) else v)
                        if j is not None:
                            js.append(j)
                            pos.append(at + k)
                    at += len(pdf)
                state = {"j": np.asarray(js, dtype=np.int64), "p": np.asarray(pos, np.int64)}
                yield pd.DataFrame(
                    {"part": [pid], "n": [at - lo], "bad": [False], "data": [pack(state)]}
                )

            return kernel

        out = np.full(len(want), -1, dtype=np.int64)
        for part in self._positions(kernel_for, "locating the common ids"):
            out[part["j"]] = part["p"]
        return None if (out < 0).any() else out

    def rows_of(self, ids: Sequence[Any], columns: Sequence[str]) -> Any:
        """The rows of the source whose id is one of ``ids`` (the common ids of an
        alignment), as a pandas DataFrame of the id column and ``columns``, in no
        particular order: one Spark job, a left-semi join of the source with ``ids``
        (sent to the executors as a broadcast table), so the node receives the rows of
        the common ids only -- what the embedded engine keeps of its records after the
        alignment."""
        import pandas as pd
        from pyspark.sql import functions as F

        names = [self._column, *[c for c in columns if c != self._column]]
        engine, kind = self._engine, self.kind

        source = engine.frame(self._spec, names)
        if kind == "int":
            wanted = pd.DataFrame({self._column: np.asarray(ids, dtype=np.int64)})
        else:
            wanted = pd.DataFrame({self._column: pd.Series(list(ids), dtype=object)})

        def job() -> Any:
            keys = engine.session().createDataFrame(wanted)
            return source.join(F.broadcast(keys), on=self._column, how="left_semi").toPandas()

        return engine.run(f"reading the common rows of {self.where}", job)


def _raw(v: Any) -> bytes:
    return v.encode("utf-8", "surrogatepass") if isinstance(v, str) else bytes(v)
