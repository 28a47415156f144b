"""Split a data set among parties: horizontally (rows) or vertically (columns).

Used by ``ppdm partition`` and ``ppdm simulate`` to build test beds from one pooled data
set. A split is a public, reproducible function of ``seed``; it decides nothing secret.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ppdm.randomness import make_rng

__all__ = ["horizontal_split", "vertical_split"]


def horizontal_split(n_rows: int, n_parties: int, *, seed: int = 0) -> list[np.ndarray]:
    """Row indices of each party: a random partition into near-equal parts, each sorted
    (so a party's rows keep the pooled order)."""
    if n_parties < 1:
        raise ValueError("need at least one party")
    if n_rows < n_parties:
        raise ValueError(f"cannot split {n_rows} rows among {n_parties} parties")
    order = make_rng(seed).permutation(n_rows)
    return [np.sort(part) for part in np.array_split(order, n_parties)]


def vertical_split(
    columns: Sequence, n_parties: int, *, seed: int = 0, shuffle: bool = True
) -> list[list]:
    """Columns (items or attributes) owned by each party: near-equal parts, randomly
    assigned when ``shuffle`` (else contiguous), each in the original column order."""
    cols = list(columns)
    if n_parties < 1:
        raise ValueError("need at least one party")
    if len(cols) < n_parties:
        raise ValueError(f"cannot split {len(cols)} columns among {n_parties} parties")
    idx = make_rng(seed).permutation(len(cols)) if shuffle else np.arange(len(cols))
    return [[cols[i] for i in sorted(part)] for part in np.array_split(idx, n_parties)]
