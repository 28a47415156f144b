"""Value generalization hierarchies (Aggarwal 2015, §20.3.1, Fig. 20.1 and 20.2).

A value generalization hierarchy maps every original value of an attribute to one label
per generalization level; level 0 is the original value and the last level is usually
``*`` (the value fully suppressed). The hierarchies ppdm reads are in ARX's format: a
``;``-separated CSV file without header, one row per original value, one column per level::

    39;35-39;30-39;20-39;*

Full-domain generalization (Samarati, Incognito; Aggarwal 2015, §20.3.1.1-20.3.1.2) maps
every value of an attribute to the same level, so a level is a function from original
values to labels. ppdm keeps it as an integer lookup array per level (leaf code -> label
code), which makes generalizing a column a single ``numpy`` indexing operation.

Hierarchies are validated when they are built: missing cells, duplicate original values
and labels that would split across two parents (so that a level would not be a
coarsening of the level below it) are rejected with a :class:`~ppdm.errors.ConfigError`
naming the offending values, instead of being silently accepted (see ARX issue #283).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from ppdm.errors import ConfigError

__all__ = ["Hierarchy", "as_labels", "load_hierarchies"]

_MAX_NAMED = 10


def _name_some(values: Iterable[object]) -> str:
    items = [repr(str(v)) for v in values]
    more = len(items) - _MAX_NAMED
    shown = ", ".join(items[:_MAX_NAMED])
    return shown + (f" and {more} more" if more > 0 else "")


def as_labels(values: object) -> np.ndarray:
    """Turn a column into the string labels hierarchies are keyed by (object array).

    Integral floats are written without a decimal point, so a column read as float
    (``39.0``) matches the hierarchy row ``39``. Missing values stay ``None``.

    >>> as_labels(pd.Series([39.0, 40.0, None])).tolist()
    ['39', '40', None]
    """
    s = pd.Series(values) if not isinstance(values, pd.Series) else values
    missing = s.isna().to_numpy()
    if pd.api.types.is_float_dtype(s.dtype):
        arr = s.to_numpy(dtype=float)
        finite = arr[~missing]
        if finite.size and np.all(finite == np.round(finite)):
            out = np.empty(len(s), dtype=object)
            out[~missing] = np.round(finite).astype(np.int64).astype(str)
            out[missing] = None
            return out
    if s.dtype == object:
        out = np.array(
            [
                None
                if m
                else (
                    str(int(v))
                    if isinstance(v, float | np.floating) and float(v).is_integer()
                    else str(v)
                )
                for v, m in zip(s.to_numpy(), missing, strict=True)
            ],
            dtype=object,
        )
        return out
    out = s.astype(str).to_numpy(dtype=object)
    out[missing] = None
    return out


class Hierarchy:
    """A value generalization hierarchy of one attribute.

    Parameters
    ----------
    table : pandas.DataFrame
        One row per original value, one column per level (level 0 = the original value).
        Cells are strings; the index is set to the level-0 column.
    attribute : str
        The attribute (column) this hierarchy generalizes.

    Attributes
    ----------
    attribute : str
    height : int
        Number of levels including the original one (Adult's age hierarchy: 5).
    table : pandas.DataFrame
        Index = original values (str), columns ``0 .. height-1``.
    values : numpy.ndarray
        The original (level-0) values, in file order.

    Examples
    --------
    The ZIP code hierarchy of Aggarwal 2015, Fig. 20.1 (shortened):

    >>> h = Hierarchy.from_rows(
    ...     [["10598", "NY", "Northeastern US", "*"],
    ...      ["10547", "NY", "Northeastern US", "*"],
    ...      ["02139", "MA", "Northeastern US", "*"],
    ...      ["90210", "CA", "Western US", "*"]], attribute="zip")
    >>> h.height
    4
    >>> h.generalize(["10547", "02139", "90210"], 2).tolist()
    ['Northeastern US', 'Northeastern US', 'Western US']
    >>> h.leaves_under("NY", 1)
    ['10598', '10547']
    """

    def __init__(self, table: pd.DataFrame, *, attribute: str) -> None:
        self.attribute = str(attribute)
        table = table.copy()
        table.columns = list(range(table.shape[1]))
        self._validate(table)
        table.index = pd.Index(table[0].to_numpy(dtype=object), name=self.attribute)
        self.table = table
        self.height = int(table.shape[1])
        self.values = table.index.to_numpy(dtype=object)
        self._index = table.index
        # Per level: the distinct labels (first-appearance order) and leaf -> label code.
        self._labels: list[np.ndarray] = []
        self._codes: list[np.ndarray] = []
        for level in range(self.height):
            codes, uniques = pd.factorize(table[level].to_numpy(dtype=object), sort=False)
            self._codes.append(codes.astype(np.int64))
            self._labels.append(np.asarray(uniques, dtype=object))
        self._numeric = self._numeric_leaves()

    # -- construction -------------------------------------------------------------------

    @classmethod
    def from_rows(cls, rows: Sequence[Sequence[object]], *, attribute: str) -> Hierarchy:
        """Build from a list of rows (original value first, then one label per level)."""
        lengths = {len(r) for r in rows}
        if len(lengths) > 1:
            raise ConfigError(
                f"hierarchy of {attribute!r}: rows have different numbers of levels "
                f"({sorted(lengths)})"
            )
        frame = pd.DataFrame([[None if c is None else str(c) for c in r] for r in rows])
        return cls(frame, attribute=attribute)

    @classmethod
    def from_csv(
        cls, path: str | Path, *, attribute: str | None = None, sep: str = ";"
    ) -> Hierarchy:
        """Read an ARX hierarchy file (no header, one row per original value).

        ``attribute`` defaults to the part of the file name after ``_hierarchy_``
        (``adult_hierarchy_age.csv`` -> ``age``), else the file's stem.
        """
        path = Path(path)
        if attribute is None:
            stem = path.stem
            attribute = stem.split("_hierarchy_", 1)[1] if "_hierarchy_" in stem else stem
        try:
            frame = pd.read_csv(
                path,
                sep=sep,
                header=None,
                dtype=str,
                keep_default_na=False,
                na_values=[""],
                skip_blank_lines=True,
                engine="python",
            )
        except pd.errors.ParserError as exc:
            raise ConfigError(f"hierarchy file {path}: cannot parse ({exc})") from exc
        except pd.errors.EmptyDataError as exc:
            raise ConfigError(f"hierarchy file {path} is empty") from exc
        try:
            return cls(frame, attribute=attribute)
        except ConfigError as exc:
            raise ConfigError(f"{exc} (file {path})") from exc

    @classmethod
    def intervals(
        cls,
        values: Iterable[float] | np.ndarray | pd.Series,
        *,
        widths: Sequence[float],
        attribute: str,
        origin: float | None = None,
    ) -> Hierarchy:
        """An interval hierarchy for a numeric attribute.

        Level ``i`` (1 <= i <= len(widths)) puts every value into the half-open interval
        ``[lo, lo + widths[i-1])`` aligned at ``origin`` (default: ``min(values)`` rounded
        down to a multiple of the widest width); a final level ``*`` is added. Each width
        must be a whole multiple of the previous one so that intervals nest (Aggarwal 2015
        section 20.3.1: "a simple hierarchical discretization of the continuous
        attributes").

        >>> h = Hierarchy.intervals([24, 25, 26, 36, 37, 38], widths=[5, 10], attribute="age")
        >>> h.generalize(["24", "26", "38"], 1).tolist()
        ['[20, 25)', '[25, 30)', '[35, 40)']
        >>> h.generalize(["24", "26", "38"], 2).tolist()
        ['[20, 30)', '[20, 30)', '[30, 40)']
        """
        raw = pd.Series(values)
        numeric = pd.to_numeric(raw, errors="coerce")
        bad = raw[numeric.isna()]
        if len(bad):
            raise ConfigError(
                f"interval hierarchy of {attribute!r}: non-numeric or missing values "
                f"{_name_some(pd.unique(bad.astype(str)))}"
            )
        if not widths:
            raise ConfigError(f"interval hierarchy of {attribute!r}: give at least one width")
        ws = [float(w) for w in widths]
        if any(w <= 0 for w in ws):
            raise ConfigError(f"interval hierarchy of {attribute!r}: widths must be > 0")
        for a, b in itertools.pairwise(ws):
            ratio = b / a
            if ratio < 1 or abs(ratio - round(ratio)) > 1e-9:
                raise ConfigError(
                    f"interval hierarchy of {attribute!r}: width {b:g} is not a whole "
                    f"multiple of {a:g}, so intervals would not nest"
                )
        labels = as_labels(raw)
        uniq_labels, first = np.unique(labels.astype(str), return_index=True)
        nums = numeric.to_numpy(dtype=float)[first]
        order = np.argsort(nums, kind="stable")
        uniq_labels, nums = uniq_labels[order], nums[order]
        if origin is None:
            origin = math.floor(nums.min() / ws[-1]) * ws[-1]
        columns: list[np.ndarray] = [uniq_labels.astype(object)]
        for w in ws:
            lo = origin + np.floor((nums - origin) / w) * w
            columns.append(np.array([f"[{_fmt(a)}, {_fmt(a + w)})" for a in lo], dtype=object))
        columns.append(np.full(len(nums), "*", dtype=object))
        frame = pd.DataFrame({i: c for i, c in enumerate(columns)})
        return cls(frame, attribute=attribute)

    # -- validation ---------------------------------------------------------------------

    def _validate(self, table: pd.DataFrame) -> None:
        name = self.attribute
        if table.shape[0] == 0 or table.shape[1] == 0:
            raise ConfigError(f"hierarchy of {name!r} is empty")
        table[:] = table.where(table.isna(), table.astype(str).apply(lambda c: c.str.strip()))
        missing = table.isna() | (table == "")
        if missing.to_numpy().any():
            rows = np.flatnonzero(missing.to_numpy().any(axis=1))
            described = [
                f"row {r + 1} ({table.iloc[r, 0] if not missing.iloc[r, 0] else '<empty>'}) "
                f"level(s) {np.flatnonzero(missing.iloc[r].to_numpy()).tolist()}"
                for r in rows[:_MAX_NAMED]
            ]
            more = f" and {len(rows) - _MAX_NAMED} more rows" if len(rows) > _MAX_NAMED else ""
            raise ConfigError(
                f"hierarchy of {name!r} has missing values: {'; '.join(described)}{more}"
            )
        originals = table[0]
        dup = originals[originals.duplicated(keep=False)]
        if len(dup):
            raise ConfigError(
                f"hierarchy of {name!r} lists original values more than once: "
                f"{_name_some(pd.unique(dup))}"
            )
        for level in range(1, table.shape[1]):
            # A label at level-1 must have one parent at level (a tree / coarsening).
            pairs = table[[level - 1, level]].drop_duplicates()
            split = pairs[pairs[level - 1].duplicated(keep=False)]
            if len(split):
                raise ConfigError(
                    f"hierarchy of {name!r}: label(s) {_name_some(pd.unique(split[level - 1]))} "
                    f"at level {level - 1} generalize to more than one label at level {level}"
                )

    def _numeric_leaves(self) -> np.ndarray | None:
        nums = pd.to_numeric(pd.Series(self.values), errors="coerce")
        if nums.isna().any():
            return None
        return nums.to_numpy(dtype=float)

    # -- queries ------------------------------------------------------------------------

    @property
    def is_numeric(self) -> bool:
        """True when every original value parses as a number."""
        return self._numeric is not None

    def labels(self, level: int) -> np.ndarray:
        """The distinct labels of ``level`` (object array, first-appearance order)."""
        self._check_level(level)
        return self._labels[level]

    def level_map(self, level: int) -> np.ndarray:
        """Leaf code (row of :attr:`table`) -> label code at ``level`` (int64 array)."""
        self._check_level(level)
        return self._codes[level]

    def leaf_codes(self, values: object) -> np.ndarray:
        """Codes (rows of :attr:`table`) of original values; unknown values raise
        :class:`ConfigError` naming them."""
        labels = as_labels(values)
        codes = self._index.get_indexer(labels)
        if (codes < 0).any():
            unknown = pd.unique(pd.Series(labels[codes < 0], dtype=object).astype(str))
            raise ConfigError(
                f"values of {self.attribute!r} not in its hierarchy: {_name_some(unknown)}"
            )
        return codes.astype(np.int64)

    def generalize(self, values: object, level: int) -> np.ndarray:
        """Generalize original values to ``level`` (object array of labels)."""
        self._check_level(level)
        codes = self.leaf_codes(values)
        return self._labels[level][self._codes[level][codes]]

    def leaves_under(self, label: str, level: int) -> list[str]:
        """The original values that the label ``label`` at ``level`` covers."""
        self._check_level(level)
        col = self.table[level].to_numpy(dtype=object)
        return [str(v) for v in self.values[col == str(label)]]

    def leaf_counts(self, level: int) -> np.ndarray:
        """Number of original values covered by each label of ``level`` (by label code)."""
        return np.bincount(self.level_map(level), minlength=len(self.labels(level)))

    def label_ranges(self, level: int) -> tuple[np.ndarray, np.ndarray] | None:
        """(min, max) of the numeric leaves under each label of ``level``; None when the
        attribute is not numeric."""
        if self._numeric is None:
            return None
        codes = self.level_map(level)
        n = len(self.labels(level))
        lo = np.full(n, np.inf)
        hi = np.full(n, -np.inf)
        np.minimum.at(lo, codes, self._numeric)
        np.maximum.at(hi, codes, self._numeric)
        return lo, hi

    def numeric_values(self) -> np.ndarray | None:
        """The original values as floats, or None when not numeric."""
        return None if self._numeric is None else self._numeric.copy()

    def parent_map(self, level: int) -> np.ndarray:
        """Label code at ``level`` -> label code at ``level + 1``."""
        self._check_level(level + 1)
        out = np.empty(len(self._labels[level]), dtype=np.int64)
        out[self._codes[level]] = self._codes[level + 1]
        return out

    def _check_level(self, level: int) -> None:
        if not 0 <= int(level) < self.height:
            raise ValueError(
                f"level {level} out of range for hierarchy of {self.attribute!r} "
                f"(height {self.height})"
            )

    def __repr__(self) -> str:
        return f"Hierarchy({self.attribute!r}, height={self.height}, values={len(self.values)})"


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def load_hierarchies(
    directory: str | Path, attributes: Iterable[str], *, sep: str = ";"
) -> dict[str, Hierarchy]:
    """Find and read ``*_hierarchy_<attribute>.csv`` in ``directory`` for each attribute.

    Attributes without a file are left out of the result (the caller decides whether a
    hierarchy is required); two files for one attribute raise :class:`ConfigError`.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise ConfigError(f"hierarchy directory {directory} does not exist")
    out: dict[str, Hierarchy] = {}
    for attribute in attributes:
        matches = sorted(directory.glob(f"*_hierarchy_{attribute}.csv"))
        if not matches and (directory / f"hierarchy_{attribute}.csv").is_file():
            matches = [directory / f"hierarchy_{attribute}.csv"]
        if len(matches) > 1:
            raise ConfigError(
                f"more than one hierarchy file for {attribute!r} in {directory}: "
                f"{', '.join(m.name for m in matches)}"
            )
        if matches:
            out[attribute] = Hierarchy.from_csv(matches[0], attribute=attribute, sep=sep)
    return out
