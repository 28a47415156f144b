"""What the Spark engine's modules share: column references, and the one row per
partition each kernel sends back to the driver (its arrays as a numpy ``npz`` blob, never
a pickle)."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["KERNEL_SCHEMA", "col", "pack", "partition_id", "unpack"]

#: The schema of a kernel's row: its partition, its rows, a bad-value flag, its arrays.
KERNEL_SCHEMA = "part int, n long, bad boolean, data binary"


def col(name: str) -> Any:
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


def partition_id() -> int:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return int(ctx.partitionId()) if ctx is not None else 0


def pack(state: dict[str, Any]) -> bytes:
    """The arrays of a partition's result as one ``npz`` blob (numpy's own format)."""
    import io

    buf = io.BytesIO()
    np.savez(buf, **{k: np.asarray(v) for k, v in state.items()})  # type: ignore[arg-type]
    return buf.getvalue()


def unpack(blob: bytes) -> dict[str, np.ndarray]:
    import io

    with np.load(io.BytesIO(blob), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}
