"""Categorical encoding and contingency tables shared by the perturbation methods.

Every method of :mod:`ppdm.perturb` works on integer codes: attribute
``A_i`` with ``d_i`` categories is coded ``0 .. d_i - 1`` (Guo, Ying & Wu 2011, §III), and a
table of ``n`` records over ``s`` attributes is an ``(n, s)`` int64 array. The
contingency table is the ``s``-dimensional array of counts (or proportions) whose C-order
ravel is the vector ``pi`` of Guo, Ying & Wu 2011 ("arranged in a fixed order").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ppdm.errors import ConfigError

__all__ = ["MAX_CELLS", "Encoded", "contingency", "encode"]

#: Largest contingency table (number of cells) the dense methods agree to build.
MAX_CELLS = 20_000_000


@dataclass(frozen=True)
class Encoded:
    """A table coded as integers: ``codes[:, j]`` indexes ``categories[j]``."""

    codes: np.ndarray
    columns: tuple[str, ...]
    categories: tuple[tuple[str, ...], ...]

    @property
    def dims(self) -> tuple[int, ...]:
        """Number of categories ``d_j`` of every column."""
        return tuple(len(c) for c in self.categories)

    def decode(self, codes: np.ndarray | None = None) -> pd.DataFrame:
        """Turn codes (default: ``self.codes``) back into a DataFrame of labels."""
        codes = self.codes if codes is None else codes
        data = {
            col: np.asarray(cats, dtype=object)[codes[:, j]]
            for j, (col, cats) in enumerate(zip(self.columns, self.categories, strict=True))
        }
        return pd.DataFrame(data)


def encode(
    table: pd.DataFrame,
    columns: Sequence[str],
    *,
    categories: Sequence[Sequence[str]] | None = None,
) -> Encoded:
    """Code ``columns`` of ``table`` as integers (categories sorted as strings).

    Parameters
    ----------
    table : pandas.DataFrame
        The records; values are compared as strings.
    columns : sequence of str
        The columns to code, in the order of the contingency table's axes.
    categories : sequence of sequences of str, optional
        The domain of every column (to code a release over the original's domain);
        a value outside it raises :class:`~ppdm.errors.ConfigError`.

    >>> e = encode(pd.DataFrame({"g": ["M", "F", "F"]}), ["g"])
    >>> e.codes[:, 0].tolist(), e.categories
    ([1, 0, 0], (('F', 'M'),))
    """
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise ConfigError(f"columns not in the table: {', '.join(missing)}")
    if len(set(columns)) != len(columns):
        raise ConfigError("a column is named twice")
    n = len(table)
    codes = np.empty((n, len(columns)), dtype=np.int64)
    cats_out: list[tuple[str, ...]] = []
    for j, col in enumerate(columns):
        values = table[col].astype(str).to_numpy()
        if categories is None:
            inv, cats = pd.factorize(values, sort=True)
            cats_out.append(tuple(str(c) for c in cats))
            codes[:, j] = inv
        else:
            cats_t = tuple(str(c) for c in categories[j])
            lookup = {c: i for i, c in enumerate(cats_t)}
            uniq, inv = np.unique(values, return_inverse=True)
            unknown = [u for u in uniq if u not in lookup]
            if unknown:
                raise ConfigError(f"column {col!r} has values outside its domain: {unknown[:5]}")
            codes[:, j] = np.array([lookup[u] for u in uniq], dtype=np.int64)[inv]
            cats_out.append(cats_t)
    return Encoded(codes, tuple(columns), tuple(cats_out))


def contingency(codes: np.ndarray, dims: Sequence[int]) -> np.ndarray:
    """Counts of every cell of the contingency table of ``codes`` (shape ``dims``).

    >>> contingency(np.array([[0, 1], [0, 1], [1, 0]]), (2, 2)).tolist()
    [[0.0, 2.0], [1.0, 0.0]]
    """
    dims = tuple(int(d) for d in dims)
    size = int(np.prod(dims, dtype=np.float64))
    if size > MAX_CELLS:
        raise ConfigError(
            f"contingency table of {size:,} cells is too large (limit {MAX_CELLS:,}); "
            "generalize or drop attributes with many categories first"
        )
    codes = np.asarray(codes, dtype=np.int64)
    if codes.ndim != 2 or codes.shape[1] != len(dims):
        raise ValueError(f"codes must have shape (n, {len(dims)})")
    if codes.size and (codes.min() < 0 or np.any(codes.max(axis=0) >= np.array(dims))):
        raise ValueError("a code is outside its attribute's domain")
    flat = np.ravel_multi_index(tuple(codes.T), dims) if len(codes) else np.empty(0, np.int64)
    return np.bincount(flat, minlength=size).astype(np.float64).reshape(dims)
