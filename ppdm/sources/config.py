"""The ``[data]`` entries of a party's settings file, checked, and its credentials.

An entry is either a path (a data file, as before sources existed)::

    [data]
    transactions = "data/alice.dat"

or a table naming the kind of source::

    [data.baskets]
    kind = "parquet"                 # a Parquet file or a (hive-)partitioned directory
    path = "/srv/baskets/"
    transaction_column = "tid"       # the long layout: one row per (transaction, item)
    item_column = "item"

    [data.lake]
    kind = "spark-table"             # a table of the Spark catalog (engine = "spark" only)
    table = "sales.baskets"

    [data.customers]
    kind = "sql"
    url = "postgresql://ppdm_reader@db.example.org:5432/shop"
    password_env = "PPDM_DB_PASSWORD"    # or password_file = "/etc/ppdm/db-password"
    table = "public.customers"           # or query = "SELECT ... FROM ..."

Credentials never appear in the settings text: the URL must not hold a password, and a
``password`` key is refused; the password is read at each job from the named environment
variable, or from a file that only the node's user can read (a file readable by group or
others is refused). :func:`resolve_password` is the only reader; no error names the
password, and :func:`SourceSpec.describe` (what errors and logs show) has the URL without
credentials.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from ppdm.errors import ConfigError

__all__ = [
    "ENGINES",
    "FILE_FORMATS",
    "KINDS",
    "SQL_SCHEMES",
    "SourceSpec",
    "parse_data_entry",
    "parse_data_table",
    "quote_identifier",
    "resolve_password",
]

KINDS = ("file", "parquet", "sql", "spark-table")
FILE_FORMATS = ("auto", "fimi", "basket", "records", "parquet")
ENGINES = ("auto", "memory", "stream")
SQL_SCHEMES = ("postgresql", "postgres", "sqlite")

_COMMON_KEYS = {"kind", "engine", "transaction_column", "item_column"}
_KEYS = {
    "file": _COMMON_KEYS | {"path", "format", "sep"},
    "parquet": _COMMON_KEYS | {"path"},
    "sql": _COMMON_KEYS | {"url", "table", "query", "password_env", "password_file"},
    "spark-table": _COMMON_KEYS | {"table"},
}
_SECRET_KEYS = {"password", "passwd", "pass", "secret", "pwd"}
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def quote_identifier(name: str) -> str:
    """``name`` as a double-quoted SQL identifier (PostgreSQL, SQLite and DuckDB): a
    quote inside is doubled, so a column name from job parameters cannot inject SQL."""
    if not isinstance(name, str) or not name or "\x00" in name:
        raise ConfigError(f"not a column name: {name!r}")
    return '"' + name.replace('"', '""') + '"'


@dataclass(frozen=True)
class SourceSpec:
    """One checked ``[data]`` entry (see the module docstring).

    ``path`` is absolute (resolved against the settings file's folder); ``url`` never
    holds a password. ``format`` and ``sep`` of a file entry are ``None`` when the entry
    leaves them to the job's parameters.
    """

    key: str
    kind: str
    path: Path | None = None
    format: str | None = None
    sep: str | None = None
    url: str | None = None
    table: str | None = None
    query: str | None = None
    password_env: str | None = None
    password_file: Path | None = None
    transaction_column: str = "tid"
    item_column: str = "item"
    engine: str = "auto"

    @property
    def file_path(self) -> Path:
        """The entry's path (files, Parquet datasets, SQLite); :class:`ConfigError` for an
        entry without one."""
        if self.path is None:
            raise ConfigError(f"[data] {self.key}: a {self.kind} source needs a path")
        return self.path

    @property
    def scheme(self) -> str:
        """The SQL URL's scheme (``postgresql`` for ``postgres``)."""
        scheme = urlsplit(self.url or "").scheme.lower()
        return "postgresql" if scheme == "postgres" else scheme

    @property
    def is_table(self) -> bool:
        """Whether the entry is a table (Parquet, SQL, a Spark catalog table, or a file
        entry that is a Parquet dataset) rather than a text file (FIMI, baskets, CSV):
        transactions in it are in the long layout, one row per transaction and item."""
        if self.kind != "file":
            return True
        path = self.file_path
        return (
            path.is_dir() or self.format == "parquet" or path.suffix.lower() in (".parquet", ".pq")
        )

    def describe(self) -> str:
        """What errors and logs may show: the kind and place, never a credential."""
        if self.kind == "sql":
            what = f"table {self.table}" if self.table else "a query"
            return f"data {self.key!r} (sql {self.url}, {what})"
        if self.kind == "spark-table":
            return f"data {self.key!r} (spark-table {self.table})"
        return f"data {self.key!r} ({self.kind} {self.path})"


def _string(entry: Mapping[str, Any], name: str, where: str) -> str | None:
    value = entry.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: {name} must be a non-empty string")
    return value


def _check_url(url: str, where: str) -> str:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in SQL_SCHEMES:
        raise ConfigError(
            f"{where}: url must start with one of {', '.join(s + '://' for s in SQL_SCHEMES)}"
        )
    if scheme != "sqlite":
        # Never echo the URL here: it is the text that may hold a password.
        if parts.password is not None:
            raise ConfigError(
                f"{where}: the url holds a password; put it in password_env or "
                "password_file (a file only the node's user can read) instead"
            )
        if any(k.lower() in ("password", "passfile") for k, _ in parse_qsl(parts.query)):
            raise ConfigError(
                f"{where}: the url names a password; use password_env or password_file"
            )
        if not parts.hostname and "host=" not in parts.query:
            raise ConfigError(f"{where}: the url must name a host (or ?host=/socket/dir)")
        if not parts.path.strip("/"):
            raise ConfigError(f"{where}: the url must name a database (.../dbname)")
    elif not parts.path.strip("/"):
        raise ConfigError(f"{where}: a sqlite url is sqlite:///relative/path or sqlite:////abs")
    return url


def parse_data_entry(key: str, entry: Any, *, base_dir: Path, where: str = "[data]") -> SourceSpec:
    """Check one ``[data]`` entry (a path string or a table) into a :class:`SourceSpec`.

    Raises :class:`ConfigError` naming the entry and the first problem (never the value
    of a credential).
    """
    here = f"{where} {key}"
    if isinstance(entry, str):
        if not entry:
            raise ConfigError(f"{here}: empty path")
        return SourceSpec(key=key, kind="file", path=_absolute(entry, base_dir))
    if not isinstance(entry, Mapping):
        raise ConfigError(f"{here}: must be a file path or a table with a 'kind'")
    secrets = sorted(k for k in entry if str(k).lower() in _SECRET_KEYS)
    if secrets:
        raise ConfigError(
            f"{here}: {secrets[0]!r} is not allowed in the settings; put the password in an "
            "environment variable (password_env) or a file only the node's user can read "
            "(password_file)"
        )
    kind = entry.get("kind", "file")
    if kind not in KINDS:
        raise ConfigError(f"{here}: kind must be one of {', '.join(KINDS)}, not {kind!r}")
    unknown = sorted(set(entry) - _KEYS[kind])
    if unknown:
        raise ConfigError(
            f"{here}: unknown key(s) {', '.join(map(repr, unknown))} for kind {kind!r} "
            f"(known: {', '.join(sorted(_KEYS[kind]))})"
        )
    engine = entry.get("engine", "auto")
    if engine not in ENGINES:
        raise ConfigError(f"{here}: engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    tcol = _string(entry, "transaction_column", here) or "tid"
    icol = _string(entry, "item_column", here) or "item"
    common: dict[str, Any] = {
        "key": key,
        "kind": kind,
        "engine": engine,
        "transaction_column": tcol,
        "item_column": icol,
    }
    if kind in ("file", "parquet"):
        path = _string(entry, "path", here)
        if path is None:
            raise ConfigError(f"{here}: a {kind} source needs a path")
        fmt = _string(entry, "format", here) if kind == "file" else "parquet"
        if fmt is not None and fmt not in FILE_FORMATS:
            raise ConfigError(f"{here}: format must be one of {', '.join(FILE_FORMATS)}")
        sep = _string(entry, "sep", here) if kind == "file" else None
        if sep is not None and (len(sep) != 1 or sep in '\r\n"'):
            raise ConfigError(f"{here}: sep must be one character (not a quote or newline)")
        return SourceSpec(path=_absolute(path, base_dir), format=fmt, sep=sep, **common)
    if kind == "spark-table":
        # A table of the Spark engine's catalog ("name", "db.name", "catalog.db.name"),
        # read by that engine only (docs/scale.md).
        name = _string(entry, "table", here)
        parts = (name or "").split(".")
        if name is None or len(parts) > 3 or not all(_IDENTIFIER.match(p) for p in parts):
            raise ConfigError(f"{here}: table must be a catalog table name such as db.name")
        return SourceSpec(table=name, **common)
    url = _string(entry, "url", here)
    if url is None:
        raise ConfigError(f"{here}: a sql source needs a url")
    _check_url(url, here)
    table = _string(entry, "table", here)
    query = _string(entry, "query", here)
    if (table is None) == (query is None):
        raise ConfigError(f"{here}: a sql source needs exactly one of table and query")
    if table is not None and not all(_IDENTIFIER.match(p) for p in table.split(".")):
        raise ConfigError(f"{here}: table must be a name or schema.name (letters, digits, _)")
    if query is not None:
        query = query.strip().rstrip(";").strip()
        if ";" in query:
            raise ConfigError(f"{here}: query must be one SELECT statement")
    password_env = _string(entry, "password_env", here)
    password_file = _string(entry, "password_file", here)
    if password_env is not None and password_file is not None:
        raise ConfigError(f"{here}: give password_env or password_file, not both")
    if password_env is not None and not _ENV_NAME.match(password_env):
        raise ConfigError(f"{here}: password_env must be an environment variable name")
    if url.lower().startswith("sqlite") and (password_env or password_file):
        raise ConfigError(f"{here}: a sqlite database takes no password")
    sqlite_path = None
    if urlsplit(url).scheme.lower() == "sqlite":
        sqlite_path = _absolute(urlsplit(url).path[1:], base_dir)
    return SourceSpec(
        path=sqlite_path,
        url=url,
        table=table,
        query=query,
        password_env=password_env,
        password_file=_absolute(password_file, base_dir) if password_file else None,
        **common,
    )


def parse_data_table(table: Any, *, base_dir: Path, where: str = "[data]") -> dict[str, SourceSpec]:
    """Check every entry of a settings file's ``[data]`` table."""
    if table is None:
        return {}
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where} must be a table")
    return {
        str(k): parse_data_entry(str(k), v, base_dir=base_dir, where=where)
        for k, v in table.items()
    }


def _absolute(path: str, base_dir: Path) -> Path:
    p = Path(path).expanduser()
    return p if p.is_absolute() else Path(base_dir) / p


def resolve_password(spec: SourceSpec) -> str | None:
    """The password of a SQL source, read now (each job): from ``password_env``, or from
    ``password_file``, which must be a regular file owned by this process's user and not
    readable, writable or executable by group or others (else :class:`ConfigError`).
    ``None`` when the entry names neither (peer or certificate authentication)."""
    here = f"[data] {spec.key}"
    if spec.password_env is not None:
        value = os.environ.get(spec.password_env)
        if value is None or value == "":
            raise ConfigError(
                f"{here}: the environment variable {spec.password_env} (password_env) is not "
                "set for the node"
            )
        return value
    if spec.password_file is None:
        return None
    path = spec.password_file
    try:
        st = os.stat(path)
    except OSError as exc:
        raise ConfigError(f"{here}: password_file {path}: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(f"{here}: password_file {path} is not a regular file")
    if st.st_uid != os.geteuid():
        raise ConfigError(
            f"{here}: password_file {path} belongs to another user; it must be owned by the "
            "node's user"
        )
    if st.st_mode & 0o077:
        raise ConfigError(
            f"{here}: password_file {path} is readable by group or others (mode "
            f"{stat.S_IMODE(st.st_mode):04o}); make it private: chmod 600 {path}"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"{here}: cannot read password_file {path} ({type(exc).__name__})"
        ) from None
    value = text.rstrip("\r\n")
    if not value:
        raise ConfigError(f"{here}: password_file {path} is empty")
    return value
