"""Microdata tables and attribute roles (seed 000 section 20.3).

Seed 000 distinguishes explicit identifiers (removed before release), quasi-identifiers
(generalized so that linkage attacks fail), sensitive attributes (released as they are,
but protected by l-diversity or t-closeness) and, implicitly, the remaining insensitive
attributes, which are released unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ppdm.errors import ConfigError

__all__ = ["AttributeRoles", "load_table"]


def load_table(path: str | Path, *, sep: str = ",") -> pd.DataFrame:
    """Read a CSV (with header, separator ``sep``) or Parquet file (by suffix ``.parquet``
    or ``.pq``).

    CSV cells are read with pandas' type inference but only empty cells count as missing
    (``"NA"`` or ``"?"`` stay values), so categorical codes survive unchanged.
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"input file {path} does not exist")
    if path.suffix.lower() in (".parquet", ".pq"):
        try:
            return pd.read_parquet(path)
        except Exception as exc:  # pyarrow raises several unrelated types
            raise ConfigError(f"cannot read Parquet file {path}: {exc}") from exc
    try:
        frame = pd.read_csv(path, sep=sep, keep_default_na=False, na_values=[""])
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
    return frame


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
