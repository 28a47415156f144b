"""Does a released (possibly generalized) value cover an original value?

An attacker who links a public table to a release (Aggarwal 2015, §20.3, tables 20.1-20.3;
Seidl 2016 "Linkage Attack") must decide, for every quasi-identifier, whether the value in
the release -- exact, or generalized by suppression or a hierarchy -- is compatible with
the exact value in the public table. The released labels understood here:

* the exact value (``"26"`` covers 26; integral floats are written without ``.0``);
* ``*`` (fully suppressed) covers everything;
* masks: ``"2*"``, ``"520*"`` cover values starting with the prefix (Seidl 2016); a mask
  with several stars (``"52***"``) also requires the same length;
* intervals: ``"[20, 30]"``, ``"[20, 30)"``, ``"[20, 40["`` (ARX), ``"20-30"``
  (inclusive), and intervals of masks ``"[5206*, 5207*]"`` (Seidl 2016: compare the leading
  digits);
* sets ``"{a, b}"``;
* any label of a value generalization hierarchy (Aggarwal 2015, Fig. 20.1), given as a mapping
  from original value to its ancestors or loaded from an ARX CSV file with
  :func:`load_hierarchy`.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from ppdm.errors import ConfigError

__all__ = ["Hierarchies", "cover_matrix", "covers", "labels", "load_hierarchy"]

Hierarchy = Mapping[str, Iterable[str]]
Hierarchies = Mapping[str, Hierarchy]

_NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_END = rf"(?:{_NUM}|[-+]?\d*\*+|-?inf)"
_INTERVAL = re.compile(rf"^\s*([\[\(\]])\s*({_END})\s*[,;]\s*({_END})\s*([\]\)\[])\s*$")
_DASH = re.compile(rf"^\s*({_NUM})\s*-\s*({_NUM})\s*$")


def labels(values: Iterable[object]) -> np.ndarray:
    """Values as the strings they are compared as (object array; NaN -> ``None``).

    >>> labels([39.0, "02139", None, 7]).tolist()
    ['39', '02139', None, '7']
    """
    out: list[str | None] = []
    for v in values:
        if v is None or (isinstance(v, float) and np.isnan(v)):
            out.append(None)
        elif isinstance(v, float | np.floating) and float(v).is_integer():
            out.append(str(int(v)))
        else:
            out.append(str(v).strip())
    return np.array(out, dtype=object)


def load_hierarchy(path: str | Path, *, sep: str = ";") -> dict[str, tuple[str, ...]]:
    """Read an ARX hierarchy CSV (one row per original value, one column per level).

    Returns ``{original: (level1_label, level2_label, ...)}``.
    """
    mapping: dict[str, tuple[str, ...]] = {}
    with Path(path).open(newline="", encoding="utf-8") as fh:
        for row in csv.reader(fh, delimiter=sep):
            if not row or not row[0].strip():
                continue
            cells = [c.strip() for c in row]
            if cells[0] in mapping:
                raise ConfigError(f"hierarchy {path}: value {cells[0]!r} listed twice")
            mapping[cells[0]] = tuple(cells[1:])
    if not mapping:
        raise ConfigError(f"hierarchy {path} is empty")
    return mapping


def _float(s: str) -> float | None:
    try:
        return float(s)
    except ValueError:
        return None


def _mask_bounds(s: str) -> tuple[str, int] | None:
    if "*" not in s:
        return None
    prefix = s.split("*", 1)[0]
    return prefix, len(prefix)


@lru_cache(maxsize=65536)
def _predicate(label: str) -> Callable[[str], bool] | None:
    """A test for the generalized forms of ``label``; ``None`` if it is a plain value."""
    s = label.strip()
    if s in ("*", ""):
        return lambda v: True
    m = _INTERVAL.match(s)
    if m:
        left, lo, hi, right = m.groups()
        lo_closed = left == "["
        hi_closed = right == "]"
        lo_mask, hi_mask = _mask_bounds(lo), _mask_bounds(hi)
        if lo_mask or hi_mask:
            # Interval of masks: compare the value's leading digits with the prefixes.
            lp = lo_mask[0] if lo_mask else lo
            hp = hi_mask[0] if hi_mask else hi
            width = max(len(lp), len(hp))
            lo_v, hi_v = _float(lp), _float(hp)
            if lo_v is None or hi_v is None:
                return None

            def in_mask_range(v: str) -> bool:
                head = _float(v[:width])
                return head is not None and lo_v <= head <= hi_v

            return in_mask_range
        lo_f, hi_f = float(lo), float(hi)

        def in_interval(v: str) -> bool:
            x = _float(v)
            if x is None:
                return False
            ok_lo = x >= lo_f if lo_closed else x > lo_f
            ok_hi = x <= hi_f if hi_closed else x < hi_f
            return ok_lo and ok_hi

        return in_interval
    m = _DASH.match(s)
    if m:
        lo_f, hi_f = float(m.group(1)), float(m.group(2))
        if lo_f <= hi_f:
            return lambda v: (x := _float(v)) is not None and lo_f <= x <= hi_f
    if s.startswith("{") and s.endswith("}"):
        members = {p.strip() for p in s[1:-1].split(",")}
        return lambda v: v in members
    if "*" in s:
        prefix = s.split("*", 1)[0]
        stars = s[len(prefix) :]
        if set(stars) == {"*"}:
            if len(stars) > 1:
                return lambda v: v.startswith(prefix) and len(v) == len(s)
            return lambda v: v.startswith(prefix)
    return None


def _same(a: str, b: str) -> bool:
    if a == b:
        return True
    fa, fb = _float(a), _float(b)
    return fa is not None and fb is not None and fa == fb


def covers(released: object, original: object, hierarchy: Hierarchy | None = None) -> bool:
    """Whether the released label ``released`` is compatible with ``original``.

    >>> covers("[20, 30]", 26), covers("2*", "29"), covers("[5206*, 5207*]", "52080")
    (True, True, False)
    >>> covers("Northeastern US", "10547", {"10547": ["New York", "Northeastern US"]})
    True
    """
    r, o = labels([released, original]).tolist()
    if r is None or o is None:
        return False
    if _same(r, o):
        return True
    if hierarchy is not None:
        anc = hierarchy.get(o)
        if anc is not None and r in {str(a).strip() for a in anc}:
            return True
    pred = _predicate(r)
    return pred is not None and pred(o)


def cover_matrix(
    released: Sequence[object], original: Sequence[object], hierarchy: Hierarchy | None = None
) -> np.ndarray:
    """Boolean matrix ``M[i, j] = covers(released[i], original[j])`` (inputs distinct)."""
    rel = labels(released)
    orig = labels(original)
    m = np.zeros((len(rel), len(orig)), dtype=bool)
    valid = np.array([o is not None for o in orig], dtype=bool)
    orig_str = np.array(["" if o is None else o for o in orig], dtype=object)
    index = {o: j for j, o in enumerate(orig_str) if valid[j]}
    orig_num = np.array(
        [(_float(o) if v else None) for o, v in zip(orig_str, valid, strict=True)], dtype=object
    )
    orig_f = np.array([np.nan if x is None else x for x in orig_num], dtype=np.float64)
    # Label -> originals below it, from the hierarchy.
    below: dict[str, list[int]] = {}
    if hierarchy is not None:
        for o, anc in hierarchy.items():
            j = index.get(str(o).strip())
            if j is None:
                continue
            for a in anc:
                below.setdefault(str(a).strip(), []).append(j)
    for i, r in enumerate(rel):
        if r is None:
            continue
        j = index.get(r)
        if j is not None:
            m[i, j] = True
        rf = _float(r)
        if rf is not None:
            m[i] |= orig_f == rf
        if r in below:
            m[i, below[r]] = True
        pred = _predicate(r)
        if pred is not None:
            m[i] |= np.fromiter((pred(o) for o in orig_str), dtype=bool, count=len(orig_str))
    m[:, ~valid] = False
    return m


def as_frame_labels(table: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """The ``columns`` of ``table`` as comparison labels (see :func:`labels`)."""
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise ConfigError(f"columns not found: {', '.join(missing)}")
    return pd.DataFrame({c: _column_labels(table[c]) for c in columns}, index=table.index)


def _column_labels(column: pd.Series) -> np.ndarray:
    """:func:`labels` of a column, computed once per distinct value where the column's type
    makes its distinct values exactly the values :func:`labels` tells apart: a numpy
    number column (NaN -> ``None``), pandas' text (NaN -> ``None``) or object text
    without missing values. Other columns (mixed types, where ``1``, ``1.0`` and
    ``True`` are equal keys but not equal labels; ``pd.NA``, labelled ``"<NA>"``) go value
    by value. (A release of Adult has 30,162 rows of a few dozen values.)"""
    dtype = column.dtype
    kind = dtype.kind if isinstance(dtype, np.dtype) else ""
    if isinstance(dtype, pd.StringDtype):  # pandas' str: missing is NaN (-> None) or NA
        text = dtype.na_value is np.nan or not column.hasnans
    else:
        text = kind == "O" and pd.api.types.infer_dtype(column, skipna=False) == "string"
    if kind not in ("b", "i", "u", "f") and not text:
        return labels(column.tolist())
    codes, uniques = pd.factorize(column, use_na_sentinel=True)
    out = np.empty(len(uniques) + 1, dtype=object)
    out[:-1] = labels(uniques.tolist())
    out[-1] = None  # code -1 (NaN) -> the last: None
    return out[codes]
