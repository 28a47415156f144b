"""Small data sets shipped with ppdm (see README.md here for their sources)."""

from __future__ import annotations

import gzip
from importlib import resources

__all__ = ["retail_sample"]


def retail_sample() -> list[list[int]]:
    """The shipped retail baskets (6,000 transactions of integer item ids)."""
    raw = resources.files(__name__).joinpath("retail_sample.dat.gz").read_bytes()
    text = gzip.decompress(raw).decode("ascii")
    return [[int(tok) for tok in line.split()] for line in text.splitlines() if line.strip()]
