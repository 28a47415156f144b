"""The ledger's file: its tables, how an entry and a state document are hashed, where the
file, its head anchor and its lock live, and reading it without writing to it (``ppdm
ledger show``, the dry run's audit history).

The format is described in :mod:`ppdm.service.ledger` and ``docs/ledger.md``; the writer
is :class:`ppdm.service.ledger.Ledger`, the checks are in :mod:`ppdm.service.ledger_verify`.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import logging
import os
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ppdm.errors import ConfigError

log = logging.getLogger(__name__)

LEDGER_SCHEMA = "ppdm.ledger/2"
_OLD_SCHEMA = "ppdm.ledger/1"  # state not yet chained: migrated on first open
GENESIS = "0" * 64
# The peer_heads table as the LedgerHeads call pages it (:mod:`~ppdm.service.ledger_heads`
# re-exports them; here, the ledger's readers have them without the signing code).
HEAD_PAGE = 512  # heads per LedgerHeads reply
MAX_CONFLICTS_SENT = 256  # conflicts per LedgerHeads reply (the most recent)
MAX_HEAD_SEQ = 2**62

_TABLES = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS entries (
    seq INTEGER NOT NULL,
    time TEXT NOT NULL,
    kind TEXT NOT NULL,
    job_id TEXT NOT NULL,
    record TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS entries_job ON entries (job_id);
CREATE INDEX IF NOT EXISTS entries_kind ON entries (kind);
CREATE TABLE IF NOT EXISTS jobs (
    job_id TEXT PRIMARY KEY,
    updated TEXT NOT NULL,
    record TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS state (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS peer_heads (
    party TEXT NOT NULL,
    seq INTEGER NOT NULL,
    hash TEXT NOT NULL,
    signature TEXT NOT NULL,
    received TEXT NOT NULL,
    PRIMARY KEY (party, seq)
);
CREATE TABLE IF NOT EXISTS peer_head_conflicts (
    party TEXT NOT NULL,
    seq INTEGER NOT NULL,
    hash TEXT NOT NULL,
    signature TEXT NOT NULL,
    reason TEXT NOT NULL,
    received TEXT NOT NULL,
    PRIMARY KEY (party, seq, hash)
);
"""


class StateTampered(ConfigError):
    """A stored ``state`` document does not match the ledger's chain (it was changed,
    added or deleted beside it): :meth:`Ledger.load_state` refuses to hand it out."""


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _canonical(seq: int, time: str, kind: str, job_id: str, record: Any, prev: str) -> bytes:
    return _json([seq, time, kind, job_id, record, prev]).encode()


def entry_hash(seq: int, time: str, kind: str, job_id: str, record: Any, prev: str) -> str:
    return hashlib.sha256(_canonical(seq, time, kind, job_id, record, prev)).hexdigest()


def state_digest(value: Any) -> str:
    """SHA-256 of a state document's canonical JSON (what a ``state`` entry records)."""
    return hashlib.sha256(_json(value).encode()).hexdigest()


@dataclass(frozen=True)
class LedgerEntry:
    """One chained entry (see the module docstring)."""

    seq: int
    time: str
    kind: str
    job_id: str
    record: dict[str, Any]
    prev_hash: str
    hash: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "time": self.time,
            "kind": self.kind,
            "job_id": self.job_id,
            "record": self.record,
            "prev_hash": self.prev_hash,
            "hash": self.hash,
        }


def ledger_path(settings: Any) -> Path:
    """The ledger file of a party: ``[node] state_dir`` of its settings (relative to the
    settings file's folder) or ``state/PARTY``, and ``ledger.sqlite`` in it."""
    node = settings.raw.get("node", {}) if isinstance(settings.raw, Mapping) else {}
    ref = node.get("state_dir") if isinstance(node, Mapping) else None
    if ref is not None and (not isinstance(ref, str) or not ref):
        raise ConfigError(f"{settings.path}: node.state_dir must be a folder path")
    folder = Path(ref) if ref else Path("state") / settings.name
    if not folder.is_absolute():
        folder = settings.base_dir / folder
    return folder / "ledger.sqlite"


def _anchor_path(path: Path) -> Path:
    return path.with_name(path.name + ".head")


def _lock_path(path: Path) -> Path:
    return path.with_name(path.name + ".lock")


def _state_entries(db: sqlite3.Connection, key: str) -> tuple[Any, ...] | None:
    """The latest ``state`` entry of the chain for ``key`` (a full row)."""
    for row in db.execute(
        "SELECT seq, time, kind, job_id, record, prev_hash, hash FROM entries "
        "WHERE kind = 'state' ORDER BY rowid DESC"
    ):
        try:
            rec = json.loads(row[4])
        except (TypeError, json.JSONDecodeError):
            continue
        if isinstance(rec, dict) and rec.get("key") == key:
            return tuple(row)
    return None


def _checked_state(db: sqlite3.Connection, key: str, where: Path) -> dict[str, Any] | None:
    stored = db.execute("SELECT value FROM state WHERE key = ?", (key,)).fetchone()
    entry = _state_entries(db, key)
    if stored is None and entry is None:
        return None

    def tampered(why: str) -> StateTampered:
        log.error("ledger %s: state %r %s", where, key, why)
        return StateTampered(
            f"{where}: the stored state {key!r} {why}; it was changed beside the ledger's "
            "chain (run `ppdm ledger verify`)"
        )

    if entry is None:
        raise tampered("has no entry in the chain")
    seq, time, kind, job_id, text, prev, digest = entry
    record = json.loads(text)
    if entry_hash(int(seq), str(time), str(kind), str(job_id), record, str(prev)) != digest:
        raise tampered(f"is chained by entry {seq}, which was edited")
    if stored is None:
        raise tampered(f"was deleted (entry {seq} records it)")
    try:
        value = json.loads(stored[0])
    except (TypeError, json.JSONDecodeError):
        raise tampered("is unreadable") from None
    if not isinstance(value, dict) or state_digest(value) != record.get("sha256"):
        raise tampered(f"does not match entry {seq}")
    return value


def _select(
    db: sqlite3.Connection, *, job_id: str | None, since: int, limit: int | None
) -> list[LedgerEntry]:
    sql = "SELECT seq, time, kind, job_id, record, prev_hash, hash FROM entries WHERE seq > ?"
    args: list[Any] = [since]
    if job_id is not None:
        sql += " AND job_id = ?"
        args.append(job_id)
    sql += " ORDER BY rowid"
    if limit is not None:
        sql += " LIMIT ?"
        args.append(int(limit))
    return [_entry(r) for r in db.execute(sql, args).fetchall()]


def _entry(row: tuple[Any, ...]) -> LedgerEntry:
    seq, time, kind, job_id, text, prev, digest = row
    try:
        record = json.loads(text)
    except (TypeError, json.JSONDecodeError):
        record = {"unreadable": str(text)[:200]}
    return LedgerEntry(int(seq), str(time), str(kind), str(job_id), record, str(prev), str(digest))


def _open_ro(p: Path) -> sqlite3.Connection:
    if not p.is_file():
        raise ConfigError(f"no ledger at {p}")
    return sqlite3.connect(f"file:{p}?mode=ro", uri=True)


def read_entries(
    path: str | os.PathLike[str],
    *,
    job_id: str | None = None,
    since: int = 0,
    limit: int | None = None,
) -> list[LedgerEntry]:
    """Entries of a ledger file, read-only (``ppdm ledger show``)."""
    p = Path(path)
    try:
        db = _open_ro(p)
        try:
            return _select(db, job_id=job_id, since=since, limit=limit)
        finally:
            db.close()
    except sqlite3.DatabaseError as exc:
        raise ConfigError(f"{p}: not a ppdm ledger ({exc})") from None


def read_state(path: str | os.PathLike[str], key: str) -> dict[str, Any] | None:
    """One state document of a ledger file, read-only (the dry run's audit history),
    checked against the chain like :meth:`Ledger.load_state` (raises
    :class:`StateTampered`)."""
    p = Path(path)
    if not p.is_file():
        return None
    try:
        db = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
        try:
            schema = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            if schema is not None and schema[0] == _OLD_SCHEMA:
                row = db.execute("SELECT value FROM state WHERE key = ?", (key,)).fetchone()
                return json.loads(row[0]) if row else None
            return _checked_state(db, key, p)
        finally:
            db.close()
    except sqlite3.DatabaseError:
        return None
