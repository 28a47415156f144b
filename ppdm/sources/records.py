"""Records streamed from a data source for horizontal k-means, in bounded memory.

:class:`StreamedRecords` is the :class:`ppdm.mining.kmeans.LocalRecords` of a table too
large to load: every call scans the source once (``SELECT id, <columns> ... ORDER BY
id``: DuckDB over Parquet, a server-side cursor over PostgreSQL) and does Lloyd's local
step batch by batch -- assign each record to its closest center, add it to its cluster's
sum -- so only the per-record cluster labels (8 bytes a record) and the ids stay in
memory. The first scan (at construction) counts the records, checks them (numeric, finite,
ids present and unique) and computes the column sums the protocol's precision agreement
and ``tol`` need; it keeps the first rows for ``init = "first-k"``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from ppdm.errors import ConfigError
from ppdm.mining.kmeans import assign

__all__ = ["HEAD_ROWS", "RecordBatch", "StreamedRecords"]

#: One batch: the ids and the ``(rows, d)`` float64 attributes, in id order.
RecordBatch = tuple[np.ndarray, np.ndarray]
#: First records kept from the first scan (``init = "first-k"`` needs ``k`` of them).
HEAD_ROWS = 4096
#: Cells of the ``(rows, k, d)`` distance array built at once.
_ASSIGN_CELLS = 1 << 22


class StreamedRecords:
    """Records behind the k-means seam (module docstring).

    Parameters
    ----------
    scan
        Scans the source once per call, yielding :data:`RecordBatch` es in a fixed order.
    d
        Number of attribute columns.
    where
        The source, for error messages.
    """

    def __init__(self, scan: Callable[[], Iterator[RecordBatch]], d: int, where: str) -> None:
        self._scan = scan
        self._d = d
        self.where = where
        self.scans = 0
        n = 0
        ids: list[np.ndarray] = []
        heads: list[np.ndarray] = []
        s_abs, s, s2 = np.zeros(d), np.zeros(d), np.zeros(d)
        last = None
        for b_ids, x in self._batches():
            if len(b_ids) == 0:
                continue
            if (last is not None and b_ids[0] == last) or np.any(b_ids[1:] == b_ids[:-1]):
                raise ConfigError(f"{where}: the id column has duplicate ids")
            last = b_ids[-1]
            n += len(x)
            ids.append(b_ids)
            if sum(len(h) for h in heads) < HEAD_ROWS:
                heads.append(x[:HEAD_ROWS])
            s_abs += np.abs(x).sum(axis=0)
            s += x.sum(axis=0)
            s2 += (x**2).sum(axis=0)
        self.shape = (n, d)
        self.ids = np.concatenate(ids) if ids else np.zeros(0)
        self._head = np.concatenate(heads)[:HEAD_ROWS] if heads else np.zeros((0, d))
        self._sums = (s_abs, s, s2)

    def __len__(self) -> int:
        return self.shape[0]

    def _batches(self) -> Iterator[RecordBatch]:
        self.scans += 1
        for ids, x in self._scan():
            if x.ndim != 2 or x.shape[1] != self._d:
                raise ConfigError(f"{self.where}: a batch has the wrong number of columns")
            if not np.all(np.isfinite(x)):
                raise ConfigError(f"{self.where}: the attributes have missing or infinite values")
            yield ids, x

    def head(self, k: int) -> np.ndarray:
        if k <= len(self._head):
            return self._head[:k]
        rows: list[np.ndarray] = []
        got = 0
        for _, x in self._batches():
            rows.append(x[: k - got])
            got += len(rows[-1])
            if got >= k:
                break
        return np.concatenate(rows) if rows else np.zeros((0, self.shape[1]))

    def column_sums(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self._sums

    def cluster_sums(self, centers: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        k, d = centers.shape
        sums = np.zeros((k, d))
        counts = np.zeros(k, dtype=np.int64)
        labels = np.empty(self.shape[0], dtype=np.int64)
        d2_sum = 0.0
        at = 0
        step = max(1, _ASSIGN_CELLS // max(1, k * d))
        for _, x in self._batches():
            for lo in range(0, len(x), step):
                part = x[lo : lo + step]
                lab, d2 = assign(part, centers)
                if at + len(part) > len(labels):
                    raise ConfigError(f"{self.where}: the records changed during the job")
                labels[at : at + len(part)] = lab
                at += len(part)
                np.add.at(sums, lab, part)
                counts += np.bincount(lab, minlength=k)
                d2_sum += float(d2.sum())
        if at != len(labels):
            raise ConfigError(f"{self.where}: the records changed during the job")
        return labels, sums, counts, d2_sum

    def project(self, u: np.ndarray) -> np.ndarray:
        """``x @ u`` for every record, in order (one scan; for ``init="random-slabs"``)."""
        out = np.empty(self.shape[0])
        at = 0
        for _, x in self._batches():
            if at + len(x) > len(out):
                raise ConfigError(f"{self.where}: the records changed during the job")
            out[at : at + len(x)] = x @ u
            at += len(x)
        if at != len(out):
            raise ConfigError(f"{self.where}: the records changed during the job")
        return out

    def group_sums(self, labels: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Per-group coordinate sums and counts of the records labelled ``labels`` (one
        scan; for ``init="random-partition"`` and ``"random-slabs"``)."""
        sums = np.zeros((k, self.shape[1]))
        at = 0
        for _, x in self._batches():
            if at + len(x) > len(labels):
                raise ConfigError(f"{self.where}: the records changed during the job")
            np.add.at(sums, labels[at : at + len(x)], x)
            at += len(x)
        if at != len(labels):
            raise ConfigError(f"{self.where}: the records changed during the job")
        return sums, np.bincount(labels, minlength=k).astype(np.int64)
