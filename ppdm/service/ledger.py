"""The node's tamper-evident ledger of disclosures, and the job table that survives restarts.

Every node keeps one SQLite file (``state/PARTY/ledger.sqlite`` beside the settings by
default; ``[node] state_dir`` moves it). Three tables:

``entries``
    The append-only, hash-chained record: every job request (initiator, parties,
    parameters, the job's declared leakage, the policy decision and its rule), the
    owner's approvals, every start and end (state, a SHA-256 digest of the result, the
    error code), policy reloads and node starts. Entry ``seq`` has
    ``hash = sha256(canonical JSON of [seq, time, kind, job_id, record, prev_hash])`` and
    ``prev_hash`` = the hash of entry ``seq - 1`` (64 zeros for the first).
``jobs``
    The last known record of every job at this node (not chained), so a finished job's
    status can still be asked for after a restart.
``state``
    Small documents the node keeps across restarts (the disclosure audit's history).

A head anchor file beside the database (``ledger.sqlite.head``: the last ``seq`` and
``hash``, replaced atomically on every append) lets :func:`verify_file` notice entries
removed from the end, which the chain alone cannot show.

What :meth:`Ledger.verify` proves: no entry was edited (its hash no longer matches its
contents), deleted (a gap in ``seq`` or a broken link), reordered (links or ``seq`` out of
order) or cut from the end (the anchor is ahead of the table) since it was written —
unless whoever changed it also rewrote every later hash and the anchor. An operator with
write access to both files can do that; publishing the head hash elsewhere (to the other
members, or a notary) turns the ledger into evidence against its own operator too
(``docs/ledger.md``).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import itertools
import json
import logging
import os
import sqlite3
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ppdm.errors import ConfigError

__all__ = [
    "LEDGER_SCHEMA",
    "Ledger",
    "LedgerEntry",
    "VerifyReport",
    "ledger_path",
    "read_entries",
    "read_state",
    "verify_file",
]

log = logging.getLogger(__name__)

LEDGER_SCHEMA = "ppdm.ledger/1"
GENESIS = "0" * 64

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
CREATE TABLE IF NOT EXISTS jobs (
    job_id TEXT PRIMARY KEY,
    updated TEXT NOT NULL,
    record TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS state (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def _canonical(seq: int, time: str, kind: str, job_id: str, record: Any, prev: str) -> bytes:
    return json.dumps(
        [seq, time, kind, job_id, record, prev],
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    ).encode()


def entry_hash(seq: int, time: str, kind: str, job_id: str, record: Any, prev: str) -> str:
    return hashlib.sha256(_canonical(seq, time, kind, job_id, record, prev)).hexdigest()


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


@dataclass(frozen=True)
class VerifyReport:
    """The outcome of :meth:`Ledger.verify`: ``ok`` and one line per problem."""

    ok: bool
    entries: int
    problems: list[str]
    head: str


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


class Ledger:
    """A party node's ledger (module docstring). Thread-safe; every write is committed
    before the call returns."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            os.chmod(self.path.parent, 0o700)
        new = not self.path.exists()
        if new:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600)
            os.close(fd)
        self._lock = threading.Lock()
        self._closed = False
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_TABLES)
            self._db.execute(
                "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema', ?)", (LEDGER_SCHEMA,)
            )
        except sqlite3.DatabaseError as exc:
            raise ConfigError(f"{self.path}: not a ppdm ledger ({exc})") from None
        row = self._db.execute(
            "SELECT seq, hash FROM entries ORDER BY rowid DESC LIMIT 1"
        ).fetchone()
        self._seq, self._head = (int(row[0]), str(row[1])) if row else (0, GENESIS)

    # The chain --------------------------------------------------------------------------

    def append(
        self, kind: str, record: Mapping[str, Any], *, job_id: str = ""
    ) -> LedgerEntry | None:
        """Add one entry to the chain (and move the head anchor); ``None`` once the
        ledger is closed (a job thread that outlives its stopping node)."""
        rec = json.loads(json.dumps(dict(record), default=str))
        with self._lock:
            if self._closed:
                log.warning("ledger closed: %s entry for job %s not recorded", kind, job_id)
                return None
            seq = self._seq + 1
            time = _now()
            digest = entry_hash(seq, time, kind, job_id, rec, self._head)
            text = json.dumps(rec, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            self._db.execute(
                "INSERT INTO entries (seq, time, kind, job_id, record, prev_hash, hash) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (seq, time, kind, job_id, text, self._head, digest),
            )
            entry = LedgerEntry(seq, time, kind, job_id, rec, self._head, digest)
            self._seq, self._head = seq, digest
            self._write_anchor(seq, digest)
        return entry

    def _write_anchor(self, seq: int, digest: str) -> None:
        anchor = _anchor_path(self.path)
        tmp = anchor.with_name(anchor.name + ".tmp")
        tmp.write_text(json.dumps({"seq": seq, "hash": digest}))
        os.replace(tmp, anchor)

    def head(self) -> tuple[int, str]:
        with self._lock:
            return self._seq, self._head

    def entries(
        self, *, job_id: str | None = None, since: int = 0, limit: int | None = None
    ) -> list[LedgerEntry]:
        """Entries with ``seq > since`` (of one job, if given), oldest first."""
        with self._lock:
            return _select(self._db, job_id=job_id, since=since, limit=limit)

    def verify(self) -> VerifyReport:
        """Check the whole chain and the head anchor (module docstring)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT seq, time, kind, job_id, record, prev_hash, hash FROM entries ORDER BY rowid"
            ).fetchall()
        return _verify_rows(rows, _read_anchor(self.path))

    # Job records and state ------------------------------------------------------------------

    def save_job(self, job_id: str, record: Mapping[str, Any]) -> None:
        text = json.dumps(dict(record), default=str)
        with self._lock:
            if self._closed:
                return
            self._db.execute(
                "INSERT INTO jobs (job_id, updated, record) VALUES (?, ?, ?) "
                "ON CONFLICT(job_id) DO UPDATE SET updated = excluded.updated, "
                "record = excluded.record",
                (job_id, _now(), text),
            )

    def load_job(self, job_id: str) -> dict[str, Any] | None:
        with self._lock:
            if self._closed:
                return None
            row = self._db.execute("SELECT record FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
        return json.loads(row[0]) if row else None

    def jobs(self, *, states: Iterable[str] | None = None) -> list[dict[str, Any]]:
        wanted = set(states) if states is not None else None
        with self._lock:
            rows = self._db.execute("SELECT record FROM jobs ORDER BY rowid").fetchall()
        out = [json.loads(r[0]) for r in rows]
        return [r for r in out if wanted is None or r.get("state") in wanted]

    def save_state(self, key: str, value: Mapping[str, Any]) -> None:
        text = json.dumps(dict(value), default=str)
        with self._lock:
            if self._closed:
                return
            self._db.execute(
                "INSERT INTO state (key, value) VALUES (?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (key, text),
            )

    def load_state(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM state WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._db.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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


def _read_anchor(path: Path) -> tuple[dict[str, Any] | None, bool]:
    """The head anchor beside ``path`` and whether it is unreadable."""
    anchor = _anchor_path(path)
    if not anchor.exists():
        return None, False
    try:
        doc = json.loads(anchor.read_text())
    except (OSError, json.JSONDecodeError):
        return None, True
    if not isinstance(doc, dict) or not isinstance(doc.get("seq"), int):
        return None, True
    return doc, False


def _verify_rows(
    rows: list[tuple[Any, ...]], anchor_state: tuple[dict[str, Any] | None, bool]
) -> VerifyReport:
    anchor, unreadable = anchor_state
    problems: list[str] = []
    stored: dict[int, tuple[str, str]] = {}  # seq -> (prev_hash, hash)
    order: list[int] = []
    for row in rows:
        seq, time, kind, job_id, text, prev, digest = row
        try:
            seq = int(seq)
            record = json.loads(text)
            good = entry_hash(seq, str(time), str(kind), str(job_id), record, str(prev))
        except (TypeError, ValueError):
            good = ""
        if good != digest:
            problems.append(f"entry {seq} was edited (its hash does not match its contents)")
        if seq in stored:
            problems.append(f"entry {seq} appears twice")
        stored[seq] = (str(prev), str(digest))
        order.append(seq)
    for a, b in itertools.pairwise(order):
        if b < a:
            problems.append(f"entries {a} and {b} are out of order")
    last = max(order) if order else 0
    missing = [i for i in range(1, last + 1) if i not in stored]
    for i in missing:
        problems.append(f"entry {i} is missing (deleted)")
    for seq in sorted(stored):
        prev_hash = GENESIS if seq == 1 else stored.get(seq - 1, (None, None))[1]
        if prev_hash is not None and stored[seq][0] != prev_hash:
            problems.append(
                f"entry {seq} does not link to entry {seq - 1} (entry {seq - 1} was changed "
                "or replaced)"
            )
    head = stored[last][1] if order else GENESIS
    if unreadable:
        problems.append("the head anchor file is unreadable")
    elif anchor is None:
        if rows:
            problems.append("the head anchor file is missing")
    else:
        aseq, ahash = anchor["seq"], anchor.get("hash")
        if aseq > last:
            problems.append(
                f"the last {aseq - last} entries were removed (the head anchor says {aseq}, "
                f"the ledger ends at {last})"
            )
        elif aseq < last:
            problems.append(
                f"entries after {aseq} were added behind the node's back (the head anchor "
                f"says {aseq}, the ledger ends at {last})"
            )
        elif ahash != head:
            problems.append(f"entry {last} does not match the head anchor")
    return VerifyReport(ok=not problems, entries=len(rows), problems=problems, head=head)


def verify_file(path: str | os.PathLike[str]) -> VerifyReport:
    """Verify a ledger file without writing to it (``ppdm ledger verify``)."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"no ledger at {p}")
    try:
        db = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
        try:
            rows = db.execute(
                "SELECT seq, time, kind, job_id, record, prev_hash, hash FROM entries ORDER BY rowid"
            ).fetchall()
        finally:
            db.close()
    except sqlite3.DatabaseError as exc:
        raise ConfigError(f"{p}: not a ppdm ledger ({exc})") from None
    return _verify_rows(rows, _read_anchor(p))


def read_entries(
    path: str | os.PathLike[str],
    *,
    job_id: str | None = None,
    since: int = 0,
    limit: int | None = None,
) -> list[LedgerEntry]:
    """Entries of a ledger file, read-only (``ppdm ledger show``)."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"no ledger at {p}")
    try:
        db = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
        try:
            return _select(db, job_id=job_id, since=since, limit=limit)
        finally:
            db.close()
    except sqlite3.DatabaseError as exc:
        raise ConfigError(f"{p}: not a ppdm ledger ({exc})") from None


def read_state(path: str | os.PathLike[str], key: str) -> dict[str, Any] | None:
    """One state document of a ledger file, read-only (the dry run's audit history)."""
    p = Path(path)
    if not p.is_file():
        return None
    try:
        db = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
        try:
            row = db.execute("SELECT value FROM state WHERE key = ?", (key,)).fetchone()
        finally:
            db.close()
    except sqlite3.DatabaseError:
        return None
    return json.loads(row[0]) if row else None
