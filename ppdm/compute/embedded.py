"""The embedded engine: a party's local work in the node's own process (the default).

Every call opens the ``[data]`` entry afresh through :func:`ppdm.sources.open_spec` and
does what the jobs did before engines existed: the in-memory
:class:`~ppdm.mining.itemsets.TransactionDB` for small inputs, the
:class:`~ppdm.sources.StreamedCounter` (DuckDB, a server-side cursor, a block reader)
above :data:`ppdm.sources.MEMORY_ROWS` rows, and
:class:`~ppdm.sources.StreamedRecords` for large k-means tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ppdm.compute.engine import ComputeEngine
from ppdm.mining.itemsets import TransactionDB
from ppdm.sources import open_spec
from ppdm.sources.config import SourceSpec

__all__ = ["EmbeddedEngine"]


class EmbeddedEngine(ComputeEngine):
    """The party's data sources and numpy kernels, in process (module docstring)."""

    name = "embedded"

    def transactions(self, spec: SourceSpec, *, fmt: str = "auto", sep: str = ",") -> TransactionDB:
        with open_spec(spec, fmt=fmt, sep=sep) as source:
            return source.transactions()

    def local_counter(self, spec: SourceSpec, *, fmt: str = "auto", sep: str = ",") -> Any:
        source = open_spec(spec, fmt=fmt, sep=sep)
        try:
            result = source.local_counter()
        except BaseException:
            source.close()
            raise
        if isinstance(result, TransactionDB):
            source.close()
        return result  # a streamed counter keeps its source open until it is collected

    def column_names(self, spec: SourceSpec, *, sep: str = ",") -> list[str]:
        with open_spec(spec, sep=sep) as source:
            return source.column_names()

    def read_frame(self, spec: SourceSpec, columns: Sequence[str], *, sep: str = ",") -> Any:
        with open_spec(spec, sep=sep) as source:
            return source.read_frame(list(columns))

    def local_records(
        self, spec: SourceSpec, columns: Sequence[str], id_column: str, *, sep: str = ","
    ) -> Any | None:
        source = open_spec(spec, sep=sep)
        try:
            if not source.stream_records():
                source.close()
                return None
            return source.streamed_records(list(columns), id_column)  # the source stays open
        except BaseException:
            source.close()
            raise
