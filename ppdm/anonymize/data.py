"""Microdata tables and attribute roles (Aggarwal 2015, §20.3).

Aggarwal 2015 distinguishes explicit identifiers (removed before release), quasi-identifiers
(generalized so that linkage attacks fail), sensitive attributes (released as they are,
but protected by l-diversity or t-closeness) and, implicitly, the remaining insensitive
attributes, which are released unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ppdm.errors import ConfigError

__all__ = ["DTYPES", "AttributeRoles", "load_table"]


#: Column types :func:`load_table` accepts in ``dtypes``.
DTYPES = ("text", "number")

_CODE = re.compile(r"^[+-]?0\d")  # a leading zero: a code (ZIP, id), not a number


def load_table(
    path: str | Path,
    *,
    sep: str = ",",
    dtypes: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    r"""Read a CSV (with header, separator ``sep``) or Parquet file (by suffix ``.parquet``
    or ``.pq``).

    Only empty cells count as missing (``"NA"`` or ``"?"`` stay values), so categorical
    codes survive unchanged. ``dtypes`` maps columns to ``"text"`` (kept as written:
    ``02139`` stays ``02139``, ``23`` and ``32.1`` stay as written) or ``"number"`` (every
    value must parse, else a :class:`ConfigError` naming the ones that do not). Other CSV
    columns are numbers when every value parses as one and none is written with a leading
    zero (``02139`` is a code), else text.

    >>> import io, tempfile, os
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = os.path.join(d, "t.csv")
    ...     _ = open(p, "w").write("zip,age,code\n02139,23,7\n10598,32.1,8\n")
    ...     t = load_table(p, dtypes={"code": "text"})
    >>> t["zip"].tolist(), t["age"].tolist(), t["code"].tolist()
    (['02139', '10598'], [23.0, 32.1], ['7', '8'])
    """
    path = Path(path)
    wanted = dict(dtypes or {})
    for col, kind in wanted.items():
        if kind not in DTYPES:
            raise ConfigError(f"type of column {col!r} must be text or number, not {kind!r}")
    if not path.is_file():
        raise ConfigError(f"input file {path} does not exist")
    if path.suffix.lower() in (".parquet", ".pq"):
        try:
            frame = pd.read_parquet(path)
        except Exception as exc:  # pyarrow raises several unrelated types
            raise ConfigError(f"cannot read Parquet file {path}: {exc}") from exc
        _check_named(frame, wanted)
        for col, kind in wanted.items():
            frame[col] = (
                _as_number(frame[col].astype(str), col)
                if kind == "number"
                else frame[col].astype(str).where(frame[col].notna())
            )
        return frame
    try:
        frame = pd.read_csv(path, sep=sep, keep_default_na=False, na_values=[""], dtype=str)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read CSV file {path}: {exc}") from exc
    if frame.shape[1] == 1 and sep not in frame.columns[0] and len(frame.columns[0]) > 1:
        for other in (";", ",", "\t"):
            if other != sep and other in str(frame.columns[0]):
                raise ConfigError(
                    f"{path} has one column {frame.columns[0]!r}; is the separator "
                    f"{other!r} rather than {sep!r}?"
                )
    frame.columns = [str(c).strip() for c in frame.columns]
    _check_named(frame, wanted)
    for col in frame.columns:
        want = wanted.get(col)
        if want == "text":
            continue
        if want == "number":
            frame[col] = _as_number(frame[col], col)
            continue
        inferred = _infer(frame[col])
        if inferred is not None:
            frame[col] = inferred
    return frame


def _check_named(frame: pd.DataFrame, wanted: Mapping[str, str]) -> None:
    missing = [c for c in wanted if c not in frame.columns]
    if missing:
        raise ConfigError(
            f"column(s) {', '.join(map(repr, missing))} given a type are not in the table "
            f"(columns: {', '.join(map(str, frame.columns))})"
        )


def _infer(col: pd.Series) -> pd.Series | None:
    """The column as numbers (int64 when all integral and none missing) or bool, or None
    to keep it as text."""
    present = col.dropna().astype(str).str.strip()
    if len(present) == 0:
        return None
    if present.isin(["True", "False"]).all():
        return col.map({"True": True, "False": False})
    nums = pd.to_numeric(present, errors="coerce")
    if nums.isna().any() or present.str.match(_CODE).any():
        return None
    full = pd.to_numeric(col.astype(str).str.strip().where(col.notna()), errors="coerce")
    values = full.to_numpy(dtype=float)
    integral = bool(np.all(np.isfinite(values)) and np.all(values == np.round(values)))
    if integral and not col.isna().any() and np.all(np.abs(values) < 2**53):
        return full.astype(np.int64)
    return full.astype(float)


def _as_number(col: pd.Series, name: str) -> pd.Series:
    nums = pd.to_numeric(col.astype(str).str.strip().where(col.notna()), errors="coerce")
    bad = col[nums.isna() & col.notna()]
    if len(bad):
        shown = ", ".join(repr(str(v)) for v in pd.unique(bad)[:5])
        raise ConfigError(f"column {name!r} is read as numbers but has values {shown}")
    return nums


def _names(value: str | Iterable[str] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(",") if v.strip())
    return tuple(str(v) for v in value)


@dataclass(frozen=True)
class AttributeRoles:
    """The role of every column: identifier (dropped), quasi-identifier, sensitive or
    insensitive (released unchanged).

    >>> r = AttributeRoles.from_columns(["ssn", "age", "zip", "disease"],
    ...     qi=["age", "zip"], sensitive="disease", identifiers="ssn")
    >>> r.insensitive
    ()
    """

    quasi_identifiers: tuple[str, ...]
    sensitive: tuple[str, ...] = ()
    identifiers: tuple[str, ...] = ()
    insensitive: tuple[str, ...] = field(default=())

    @classmethod
    def from_columns(
        cls,
        columns: Sequence[str],
        *,
        qi: str | Iterable[str],
        sensitive: str | Iterable[str] | None = None,
        identifiers: str | Iterable[str] | None = None,
    ) -> AttributeRoles:
        """Roles for a table with ``columns``; columns not named are insensitive."""
        q, s, i = _names(qi), _names(sensitive), _names(identifiers)
        named = set(q) | set(s) | set(i)
        roles = cls(
            quasi_identifiers=q,
            sensitive=s,
            identifiers=i,
            insensitive=tuple(c for c in columns if c not in named),
        )
        roles.validate(columns)
        return roles

    def validate(self, columns: Sequence[str]) -> None:
        """Raise :class:`ConfigError` for unknown columns, overlaps or no QI."""
        if not self.quasi_identifiers:
            raise ConfigError("give at least one quasi-identifier")
        present = set(columns)
        groups = {
            "quasi-identifier": self.quasi_identifiers,
            "sensitive": self.sensitive,
            "identifier": self.identifiers,
            "insensitive": self.insensitive,
        }
        for role, names in groups.items():
            missing = [n for n in names if n not in present]
            if missing:
                raise ConfigError(
                    f"{role} column(s) {', '.join(map(repr, missing))} not in the table "
                    f"(columns: {', '.join(map(str, columns))})"
                )
            dup = sorted({n for n in names if list(names).count(n) > 1})
            if dup:
                raise ConfigError(f"{role} column(s) named twice: {', '.join(dup)}")
        seen: dict[str, str] = {}
        for role, names in groups.items():
            for n in names:
                if n in seen:
                    raise ConfigError(f"column {n!r} is both {seen[n]} and {role}")
                seen[n] = role

    @property
    def released(self) -> tuple[str, ...]:
        """Columns of the release, in role order (identifiers dropped)."""
        return self.quasi_identifiers + self.sensitive + self.insensitive
