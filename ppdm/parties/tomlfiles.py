"""Reading and writing the consortium's TOML files (:mod:`ppdm.parties.consortium`).

Reading is :mod:`tomllib` with every failure a :class:`ConfigError` naming the file.
Writing keeps an owner's edits: new files get a comment above each setting, and an update
changes only the keys it names, atomically, keeping the file's permissions.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ppdm.errors import ConfigError

__all__ = ["update_toml", "update_toml_file", "write_toml"]


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"file not found: {path}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None


# Writing --------------------------------------------------------------------------------
#
# Settings and consortium files are written with tomlkit, which keeps what it does not
# touch: an update of a file an owner has edited changes only the keys it must and keeps
# the owner's comments, key order and formatting.


def _toml_item(value: Any) -> Any:
    import tomlkit

    if isinstance(value, Mapping):
        table = tomlkit.table()
        for k, v in value.items():
            table.add(k, _toml_item(v))
        return table
    if isinstance(value, tuple):
        value = list(value)
    if not isinstance(value, bool | int | float | str | list):
        raise TypeError(f"cannot write a {type(value).__name__} to TOML")
    return tomlkit.item(value)


def _add_comment(container: Any, text: str | None) -> None:
    import tomlkit

    for line in (text or "").splitlines():
        # a TOML comment may hold no control character but tab: escape the others
        line = "".join(
            f"\\u{ord(c):04x}" if (ord(c) < 0x20 and c != "\t") or ord(c) == 0x7F else c
            for c in line
        )
        container.add(tomlkit.comment(line))


def write_toml(
    doc: Mapping[str, Any],
    *,
    header: str = "",
    comments: Mapping[str, str] | None = None,
) -> str:
    """TOML text of ``doc``: scalars and lists first, then tables and arrays of tables.

    ``header`` becomes comment lines at the top; ``comments`` maps ``"key"``,
    ``"table.key"`` or ``"[table]"`` to comment lines written above that key, or just
    below that table's header (how :func:`init_consortium` explains each setting in the
    files it writes).
    """
    import tomlkit

    notes = dict(comments or {})
    out = tomlkit.document()
    _add_comment(out, header)
    if header:
        out.add(tomlkit.nl())
    tables: list[tuple[str, Mapping[str, Any]]] = []
    arrays: list[tuple[str, list[Mapping[str, Any]]]] = []
    for key, value in doc.items():
        if isinstance(value, Mapping):
            tables.append((key, value))
        elif isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
            arrays.append((key, value))
        else:
            _add_comment(out, notes.get(key))
            out.add(key, _toml_item(value))
    for key, table in tables:
        t = tomlkit.table()
        _add_comment(t, notes.get(f"[{key}]"))
        for k, v in table.items():
            _add_comment(t, notes.get(f"{key}.{k}"))
            t.add(k, _toml_item(v))
        out.add(key, t)
    for key, rows in arrays:
        aot = tomlkit.aot()
        for row in rows:
            aot.append(_toml_item(row))
        out.add(key, aot)
    return tomlkit.dumps(out).lstrip("\n")


def _merge_items(target: Any, updates: Mapping[str, Any], *, only_missing: bool) -> None:
    for key, value in updates.items():
        current = target.get(key)
        if isinstance(value, Mapping) and isinstance(current, Mapping):
            _merge_items(current, value, only_missing=only_missing)
        elif not (only_missing and key in target):
            target[key] = _toml_item(value)


def update_toml(
    text: str,
    updates: Mapping[str, Any],
    *,
    defaults: Mapping[str, Any] | None = None,
    where: str = "TOML text",
) -> str:
    """``text`` with ``updates`` set and ``defaults`` added where missing; nothing else
    changes.

    Tables are merged key by key (a table in ``updates`` replaces only the keys it
    names); any other value replaces the old one in place. The comments, key order and
    formatting of everything not named are kept. A ``text`` that is not valid TOML is a
    :class:`ConfigError` naming ``where``.
    """
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    try:
        doc = tomlkit.parse(text)
    except TOMLKitError as exc:
        raise ConfigError(f"{where}: not valid TOML ({exc})") from None
    _merge_items(doc, updates, only_missing=False)
    _merge_items(doc, defaults or {}, only_missing=True)
    return tomlkit.dumps(doc)


def update_toml_file(
    path: str | os.PathLike[str],
    updates: Mapping[str, Any],
    *,
    defaults: Mapping[str, Any] | None = None,
) -> None:
    """Apply :func:`update_toml` to the file at ``path``, in place and atomically (a
    node reading the file meanwhile sees the old or the new text, never half of it); the
    file keeps its permissions."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path} ({exc})") from None
    new = update_toml(text, updates, defaults=defaults, where=str(path))
    _replace_file(path, new.encode("utf-8"), mode=path.stat().st_mode & 0o7777)


def _replace_file(path: Path, data: bytes, *, mode: int) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
