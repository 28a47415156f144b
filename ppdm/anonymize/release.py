"""The result of every anonymization algorithm: the released table and how it was made.

Released rows are shuffled with a CSPRNG-backed permutation by default (``rng=None``),
because the row order of the input (often sorted by time of admission or by an
identifier) could otherwise re-identify records. Identifier columns are dropped and
suppressed rows are left out (tuple suppression, Aggarwal 2015, §20.3.1.1).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ppdm.randomness import RandomSource, make_rng

__all__ = ["Release", "jsonable", "make_release"]


@dataclass
class Release:
    """An anonymized table with its provenance and utility metrics.

    Attributes
    ----------
    data : pandas.DataFrame
        The released rows, shuffled; identifier columns dropped, suppressed rows removed.
    class_ids : numpy.ndarray
        Equivalence class (0 .. n_classes-1) of each row of :attr:`data`.
    suppressed : int
        Number of input rows left out.
    algorithm : str
    qi : list of str
    sensitive : str or None
    info : dict
        Algorithm details: chosen node or partitions, nodes checked, runtime_s, ...
    metrics : dict
        Utility metrics (see :mod:`ppdm.anonymize.metrics`), always with the
        suppression rate.
    n_input : int
        Number of input rows.
    """

    data: pd.DataFrame
    class_ids: np.ndarray
    suppressed: int
    algorithm: str
    qi: list[str]
    sensitive: str | None = None
    info: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    n_input: int = 0

    @property
    def n_classes(self) -> int:
        """Number of equivalence classes in the release."""
        return len(np.unique(self.class_ids)) if len(self.class_ids) else 0

    @property
    def suppression_rate(self) -> float:
        """Suppressed rows / input rows."""
        return self.suppressed / self.n_input if self.n_input else 0.0

    def class_sizes(self) -> np.ndarray:
        """Size of each equivalence class (indexed by class id)."""
        return np.bincount(np.asarray(self.class_ids, dtype=np.int64))

    def to_report(self) -> dict[str, Any]:
        """A JSON-ready summary (no row data)."""
        sizes = self.class_sizes()
        report = {
            "algorithm": self.algorithm,
            "qi": list(self.qi),
            "sensitive": self.sensitive,
            "rows_in": int(self.n_input),
            "rows_out": len(self.data),
            "suppressed": int(self.suppressed),
            "suppression_rate": self.suppression_rate,
            "classes": self.n_classes,
            "min_class_size": int(sizes[sizes > 0].min()) if sizes.size and sizes.any() else 0,
            "info": self.info,
            "metrics": self.metrics,
        }
        return jsonable(report)


def jsonable(value: Any) -> Any:
    """Convert numpy scalars/arrays, tuples and non-finite floats for ``json.dumps``."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return [jsonable(v) for v in value.tolist()]
    if isinstance(value, np.bool_ | bool):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating | float):
        f = float(value)
        return f if math.isfinite(f) else None
    return value


def make_release(
    table: pd.DataFrame,
    *,
    qi: Sequence[str],
    released_values: Mapping[str, np.ndarray] | pd.DataFrame,
    class_ids: np.ndarray,
    algorithm: str,
    keep: np.ndarray | None = None,
    sensitive: str | None = None,
    identifiers: Sequence[str] = (),
    info: Mapping[str, Any] | None = None,
    metrics: Mapping[str, Any] | None = None,
    rng: int | RandomSource | None = None,
) -> Release:
    """Build a :class:`Release` from the original table and per-row results.

    Parameters
    ----------
    table : pandas.DataFrame
        The original table (all rows, all columns).
    qi : sequence of str
        Quasi-identifier columns.
    released_values : mapping or DataFrame
        For each column to replace (normally every QI), the released value of every
        input row (length ``len(table)``); e.g. generalized labels or ranges.
    class_ids : numpy.ndarray
        Equivalence class label of every input row (any integers; renumbered).
    algorithm : str
    keep : numpy.ndarray of bool, optional
        Rows to release; the others are suppressed. Default: all rows.
    sensitive : str, optional
    identifiers : sequence of str
        Columns dropped from the release.
    info, metrics : mapping, optional
    rng : int, RandomSource or None
        Randomness for the shuffle (``None``: the OS CSPRNG).

    >>> t = pd.DataFrame({"id": [1, 2, 3], "age": [24, 26, 25], "d": ["x", "y", "x"]})
    >>> r = make_release(t, qi=["age"], released_values={"age": np.array(["2*"] * 3)},
    ...     class_ids=np.zeros(3, dtype=int), algorithm="demo", identifiers=["id"], rng=1)
    >>> list(r.data.columns), r.suppressed, r.n_classes
    (['age', 'd'], 0, 1)
    """
    n = len(table)
    class_ids = np.asarray(class_ids)
    if class_ids.shape != (n,):
        raise ValueError(f"class_ids has shape {class_ids.shape}, expected ({n},)")
    keep_mask = np.ones(n, dtype=bool) if keep is None else np.asarray(keep, dtype=bool)
    if keep_mask.shape != (n,):
        raise ValueError(f"keep has shape {keep_mask.shape}, expected ({n},)")
    columns = [c for c in table.columns if c not in set(identifiers)]
    out = table.loc[:, columns].copy()
    for col in (
        released_values.columns
        if isinstance(released_values, pd.DataFrame)
        else released_values.keys()
    ):
        values = np.asarray(released_values[col])
        if len(values) != n:
            raise ValueError(f"released values of {col!r} have length {len(values)}, expected {n}")
        out[col] = values
    rows = np.flatnonzero(keep_mask)
    order = rows[make_rng(rng).permutation(len(rows))]
    data = out.iloc[order].reset_index(drop=True)
    ids, _ = pd.factorize(class_ids[order])
    return Release(
        data=data,
        class_ids=ids.astype(np.int64),
        suppressed=int(n - len(rows)),
        algorithm=algorithm,
        qi=list(qi),
        sensitive=sensitive,
        info=dict(info or {}),
        metrics=dict(metrics or {}),
        n_input=n,
    )
