"""Building value generalization hierarchies from the data, as ARX's hierarchy wizards do.

Aggarwal 2015, §20.3.1: full-domain generalization needs a hierarchy per
quasi-identifier. Writing them by hand is the usual stumbling block, so this module builds
the common kinds from a column's values:

* :func:`interval_hierarchy` -- numbers into nested intervals of fixed widths (each width
  a whole multiple of the previous one), e.g. ages ``[35, 40)`` -> ``[30, 40)`` -> ``*``;
  :func:`auto_widths` picks "nice" widths (1, 2 or 5 times a power of ten, doubling) from
  the range, and :func:`default_interval_hierarchy` is what :func:`ppdm.anonymize.api.
  anonymize` builds for a numeric quasi-identifier that has no hierarchy;
* :func:`quantile_hierarchy` -- numbers into (about) equal-frequency intervals, pairs of
  neighbouring intervals merged level by level;
* :func:`masking_hierarchy` -- codes (ZIP codes, ids) with their trailing characters
  replaced by ``*`` one more per level (``02139`` -> ``0213*`` -> ``021**`` ...);
* :func:`date_hierarchy` -- dates rolled up (day -> month -> year, or quarter, decade).

Every builder returns a :class:`~ppdm.anonymize.hierarchy.Hierarchy` (validated: a level
is always a coarsening of the level below) whose last level is ``*``;
:func:`write_hierarchy` writes it in ARX's format (``;``-separated, no header, one row
per original value), which :meth:`Hierarchy.from_csv` and ``ppdm anonymize
--hierarchies`` read. ``ppdm hierarchy`` is the command-line front end.
"""

from __future__ import annotations

import csv
import math
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from ppdm.anonymize.hierarchy import Hierarchy, as_labels
from ppdm.errors import ConfigError

__all__ = [
    "DATE_LEVELS",
    "auto_widths",
    "date_hierarchy",
    "default_interval_hierarchy",
    "interval_hierarchy",
    "masking_hierarchy",
    "quantile_hierarchy",
    "write_hierarchy",
]

#: Roll-up levels of :func:`date_hierarchy`, finest first.
DATE_LEVELS = ("month", "quarter", "year", "decade")


def _numbers(values: object, attribute: str) -> tuple[np.ndarray, np.ndarray]:
    """Distinct labels of a numeric column and their values, sorted by value."""
    raw = pd.Series(values)
    if raw.isna().any():
        raise ConfigError(f"hierarchy of {attribute!r}: the column has missing values")
    labels = as_labels(raw).astype(str)
    nums = pd.to_numeric(pd.Series(labels), errors="coerce")
    if nums.isna().any():
        bad = pd.unique(pd.Series(labels)[nums.isna().to_numpy()])[:5]
        raise ConfigError(
            f"hierarchy of {attribute!r}: non-numeric values {', '.join(map(repr, bad))}"
        )
    uniq, first = np.unique(labels, return_index=True)
    x = nums.to_numpy(dtype=float)[first]
    order = np.argsort(x, kind="stable")
    return uniq[order].astype(object), x[order]


def _nice(x: float) -> float:
    """The smallest of 1, 2, 5 times a power of ten that is >= ``x``."""
    if x <= 0:
        return 1.0
    p = 10.0 ** math.floor(math.log10(x))
    for m in (1.0, 2.0, 5.0, 10.0):
        if m * p >= x * (1 - 1e-12):
            return m * p
    return 10.0 * p  # pragma: no cover - the loop always returns


def auto_widths(
    values: object, *, max_intervals: int = 16, attribute: str = "value"
) -> list[float]:
    """Interval widths for :func:`interval_hierarchy` chosen from the range of ``values``.

    The finest width is the smallest "nice" number (1, 2 or 5 times a power of ten; at
    least 1 for integer data) that cuts the range into at most ``max_intervals``
    intervals; every further level doubles it until one interval spans the range.

    >>> auto_widths([17, 90])
    [5.0, 10.0, 20.0, 40.0, 80.0]
    >>> auto_widths([0.0, 0.5, 1.0], max_intervals=4)
    [0.5, 1.0]
    """
    _, x = _numbers(values, attribute)
    lo, hi = float(x.min()), float(x.max())
    span = hi - lo
    integral = bool(np.all(x == np.round(x)))
    w = _nice(span / max(int(max_intervals), 1)) if span > 0 else 1.0
    if integral:
        w = max(w, 1.0)
    widths = [w]
    while widths[-1] < span:
        widths.append(widths[-1] * 2)
    return widths


def interval_hierarchy(
    values: object,
    *,
    attribute: str,
    widths: Sequence[float] | None = None,
    origin: float | None = None,
) -> Hierarchy:
    """Nested fixed-width intervals (``widths`` finest first; default :func:`auto_widths`),
    then ``*``. See :meth:`Hierarchy.intervals`.

    >>> h = interval_hierarchy([23, 27, 31, 38, 45], attribute="age", widths=[5, 10])
    >>> h.generalize(["23", "38"], 1).tolist(), h.generalize(["23", "38"], 2).tolist()
    (['[20, 25)', '[35, 40)'], ['[20, 30)', '[30, 40)'])
    """
    labels, _ = _numbers(values, attribute)
    ws = list(widths) if widths is not None else auto_widths(labels, attribute=attribute)
    return Hierarchy.intervals(labels, widths=ws, attribute=attribute, origin=origin)


def default_interval_hierarchy(values: object, *, attribute: str) -> Hierarchy:
    """The hierarchy :func:`ppdm.anonymize.api.anonymize` builds for a numeric
    quasi-identifier without one: :func:`interval_hierarchy` with :func:`auto_widths`."""
    return interval_hierarchy(values, attribute=attribute)


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.6g}"


def quantile_hierarchy(values: object, *, attribute: str, bins: int = 8) -> Hierarchy:
    """Equal-frequency intervals: ``bins`` quantile intervals at level 1 (fewer when
    values repeat), neighbouring pairs merged at every further level, then ``*``.

    Interval bounds are data values (the "higher" quantiles); intervals are ``[lo, hi)``
    and the last one of every level is closed ``[lo, hi]``.

    >>> h = quantile_hierarchy(range(1, 9), attribute="x", bins=4)
    >>> h.labels(1).tolist()
    ['[1, 3)', '[3, 5)', '[5, 7)', '[7, 8]']
    >>> h.labels(2).tolist(), h.height
    (['[1, 5)', '[5, 8]'], 5)
    """
    if int(bins) < 1:
        raise ConfigError(f"quantile hierarchy of {attribute!r}: bins must be >= 1")
    labels, x = _numbers(values, attribute)
    raw = pd.to_numeric(pd.Series(as_labels(pd.Series(values)).astype(str)), errors="coerce")
    edges = np.unique(
        np.quantile(raw.to_numpy(dtype=float), np.linspace(0, 1, int(bins) + 1), method="higher")
    )
    if len(edges) < 2:
        edges = np.array([x.min(), x.max()])
    columns: list[np.ndarray] = [labels]
    level_edges = edges
    while True:
        m = len(level_edges) - 1
        pos = np.clip(np.searchsorted(level_edges, x, side="right") - 1, 0, max(m - 1, 0))
        names = [
            f"[{_fmt(level_edges[i])}, {_fmt(level_edges[i + 1])}{']' if i == m - 1 else ')'}"
            for i in range(m)
        ]
        columns.append(np.array([names[p] for p in pos], dtype=object))
        if m <= 1:
            break
        level_edges = np.append(level_edges[:-1:2], level_edges[-1])
    columns.append(np.full(len(x), "*", dtype=object))
    return Hierarchy(pd.DataFrame(dict(enumerate(columns))), attribute=attribute)


def masking_hierarchy(
    values: object, *, attribute: str, mask: str = "*", keep: int = 0
) -> Hierarchy:
    """Codes with one more trailing character replaced by ``mask`` per level (ARX's
    redaction), then ``*``.

    Values are taken as text (read ZIP codes as text so that leading zeros stay); codes
    of different lengths are masked from their own right end. ``keep`` leading characters
    are never masked before the final ``*`` level.

    >>> h = masking_hierarchy(["02139", "02138", "10598"], attribute="zip")
    >>> h.generalize(["02139", "02138"], 1).tolist(), h.generalize(["02139"], 3).tolist()
    (['0213*', '0213*'], ['02***'])
    >>> h.height
    7
    """
    if len(mask) != 1:
        raise ConfigError("mask must be one character")
    raw = pd.Series(values)
    if raw.isna().any():
        raise ConfigError(f"hierarchy of {attribute!r}: the column has missing values")
    labels = pd.unique(pd.Series(as_labels(raw).astype(str))).astype(object)
    longest = max((len(v) for v in labels), default=0)
    columns: list[np.ndarray] = [np.asarray(labels, dtype=object)]
    for i in range(1, max(longest - int(keep), 0) + 1):
        columns.append(
            np.array(
                [
                    v[: max(len(v) - i, min(int(keep), len(v)))]
                    + mask * (len(v) - max(len(v) - i, min(int(keep), len(v))))
                    for v in labels
                ],
                dtype=object,
            )
        )
    columns.append(np.full(len(labels), "*", dtype=object))
    return Hierarchy(pd.DataFrame(dict(enumerate(columns))), attribute=attribute)


def date_hierarchy(
    values: object,
    *,
    attribute: str,
    levels: Iterable[str] = ("month", "year"),
    date_format: str | None = None,
) -> Hierarchy:
    """Dates rolled up level by level (from :data:`DATE_LEVELS`, finest first), then ``*``.

    Level 0 is the value as written; ``month`` is ``2024-03``, ``quarter`` ``2024-Q1``,
    ``year`` ``2024`` and ``decade`` ``2020s``.

    >>> h = date_hierarchy(["2024-03-15", "2024-03-02", "2023-12-31"], attribute="visit")
    >>> h.generalize(["2024-03-15", "2023-12-31"], 1).tolist()
    ['2024-03', '2023-12']
    >>> h.generalize(["2024-03-15", "2023-12-31"], 2).tolist()
    ['2024', '2023']
    """
    names = [str(v).strip().lower() for v in levels]
    if not names:
        raise ConfigError(f"date hierarchy of {attribute!r}: give at least one level")
    unknown = [v for v in names if v not in DATE_LEVELS]
    if unknown:
        raise ConfigError(
            f"date hierarchy of {attribute!r}: unknown level {unknown[0]!r} "
            f"(choose from {', '.join(DATE_LEVELS)})"
        )
    rank = [DATE_LEVELS.index(v) for v in names]
    if rank != sorted(set(rank)):
        raise ConfigError(
            f"date hierarchy of {attribute!r}: levels must go from fine to coarse without "
            f"repeats ({', '.join(DATE_LEVELS)})"
        )
    raw = pd.Series(values)
    if raw.isna().any():
        raise ConfigError(f"hierarchy of {attribute!r}: the column has missing values")
    labels = pd.unique(pd.Series(as_labels(raw).astype(str))).astype(object)
    series = pd.Series(labels)
    if date_format is not None:
        parsed = pd.to_datetime(series, format=date_format, errors="coerce")
    else:
        parsed = pd.to_datetime(series, format="ISO8601", errors="coerce")
        if parsed.isna().any():
            with warnings.catch_warnings():  # "could not infer format": per-element parse
                warnings.simplefilter("ignore", UserWarning)
                parsed = pd.to_datetime(series, format="mixed", errors="coerce")
    if parsed.isna().any():
        bad = pd.Series(labels)[parsed.isna().to_numpy()].tolist()[:5]
        raise ConfigError(
            f"date hierarchy of {attribute!r}: cannot read {', '.join(map(repr, bad))} as "
            "dates (give the format, e.g. %d/%m/%Y)"
        )
    columns: list[np.ndarray] = [np.asarray(labels, dtype=object)]
    for name in names:
        if name == "month":
            col = parsed.dt.strftime("%Y-%m")
        elif name == "quarter":
            col = parsed.dt.year.astype(str) + "-Q" + parsed.dt.quarter.astype(str)
        elif name == "year":
            col = parsed.dt.year.astype(str)
        else:
            col = (parsed.dt.year // 10 * 10).astype(str) + "s"
        columns.append(col.to_numpy(dtype=object))
    columns.append(np.full(len(labels), "*", dtype=object))
    return Hierarchy(pd.DataFrame(dict(enumerate(columns))), attribute=attribute)


def write_hierarchy(hierarchy: Hierarchy, path: str | Path, *, sep: str = ";") -> Path:
    """Write ``hierarchy`` in ARX's format (no header, one row per original value, one
    column per level); returns the path. :meth:`Hierarchy.from_csv` reads it back."""
    path = Path(path)
    if not path.resolve().parent.is_dir():
        raise ConfigError(f"folder {path.parent} does not exist")
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh, delimiter=sep, lineterminator="\n")
        for row in hierarchy.table.itertuples(index=False):
            writer.writerow([str(v) for v in row])
    return path
