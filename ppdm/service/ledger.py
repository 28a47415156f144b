"""The node's tamper-evident ledger of disclosures, and the job table that survives restarts.

Every node keeps one SQLite file (``state/PARTY/ledger.sqlite`` beside the settings by
default; ``[node] state_dir`` moves it). Its tables:

``entries``
    The append-only, hash-chained record: every job request (initiator, parties,
    parameters, the job's declared leakage, the policy decision and its rule), the
    owner's approvals, every start and end (state, a SHA-256 digest of the result, the
    error code), policy reloads, node starts, every change of a ``state`` document, and
    the ledger heads received from peers. Entry ``seq`` has
    ``hash = sha256(canonical JSON of [seq, time, kind, job_id, record, prev_hash])`` and
    ``prev_hash`` = the hash of entry ``seq - 1`` (64 zeros for the first).
``jobs``
    The last known record of every job at this node (not chained), so a finished job's
    status can still be asked for after a restart.
``state``
    Small documents the node keeps across restarts (the disclosure audit's history).
    Every :meth:`Ledger.save_state` also appends a ``state`` entry
    ``{key, sha256}`` (SHA-256 of the value's canonical JSON), and
    :meth:`Ledger.load_state` refuses (:class:`StateTampered`) a stored value that does
    not match the latest such entry: the audit history is part of the chain.
``peer_heads`` / ``peer_head_conflicts``
    The signed ledger heads other members sent with their jobs (:class:`SignedHead`),
    each also chained as a ``peer-head`` (or ``peer-head-conflict``) entry.

A head anchor file beside the database (``ledger.sqlite.head``: the last ``seq`` and
``hash``, replaced atomically on every append) lets :func:`verify_file` notice entries
removed from the end, which the chain alone cannot show.

What the local check (:meth:`Ledger.verify`, :func:`verify_file`) proves: no entry was
edited, deleted, reordered or cut from the end, and no state document or held peer head
was changed beside the chain, since it was written -- unless whoever changed it also
rewrote every later hash and the anchor. An operator with write access to the files can
do that. Against the operator, every node signs its head ``(seq, hash)`` with its party
key and sends it to its peers with every job (in the ``JobRequest`` as initiator, in its
``ProposeJob`` answer otherwise); the peers check the signature against the roster
certificate and keep every head they accept. :func:`verify_online` asks each peer for
the heads it holds of this party (``LedgerHeads``) and checks that the local chain has
exactly that hash at that ``seq``: a history rewritten after a head went out no longer
matches it, whatever the operator recomputed (``docs/ledger.md``).

Security model: semi-honest peers, an operator who may rewrite its own files. A peer
cannot make a member's verify fail by inventing heads (they must carry the member's
signature); it can withhold heads (then that peer adds no evidence) -- so the check is
as strong as the most recent head held by any honest peer.

This module holds the writer (:class:`Ledger`) and the recording of the heads a job's
peers answered with; :mod:`~ppdm.service.ledger_chain` the file format and its read-only
readers, :mod:`~ppdm.service.ledger_heads` signed heads, and
:mod:`~ppdm.service.ledger_verify` the local and the online check. Every public name of
those is importable from here.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ppdm.errors import ConfigError, ProtocolError
from ppdm.service.ledger_chain import (
    _OLD_SCHEMA,
    _TABLES,
    GENESIS,
    HEAD_PAGE,
    LEDGER_SCHEMA,
    MAX_CONFLICTS_SENT,
    MAX_HEAD_SEQ,
    LedgerEntry,
    StateTampered,
    _anchor_path,
    _checked_state,
    _json,
    _lock_path,
    _now,
    _open_ro,
    _select,
    entry_hash,
    ledger_path,
    read_entries,
    read_state,
    state_digest,
)

if TYPE_CHECKING:  # signing and checking: imported by a first job or check, not a start
    from ppdm.service.ledger_heads import MAX_SIGNATURE_BYTES as MAX_SIGNATURE_BYTES
    from ppdm.service.ledger_heads import SignedHead as SignedHead
    from ppdm.service.ledger_heads import check_head as check_head
    from ppdm.service.ledger_heads import head_from_proto as head_from_proto
    from ppdm.service.ledger_heads import head_payload as head_payload
    from ppdm.service.ledger_heads import head_signed_by as head_signed_by
    from ppdm.service.ledger_heads import head_to_proto as head_to_proto
    from ppdm.service.ledger_heads import sign_head as sign_head
    from ppdm.service.ledger_verify import SHARED_LOCK_WAIT_S as SHARED_LOCK_WAIT_S
    from ppdm.service.ledger_verify import VerifyReport as VerifyReport
    from ppdm.service.ledger_verify import verify_file as verify_file
    from ppdm.service.ledger_verify import verify_online as verify_online

__all__ = [
    "HEAD_PAGE",
    "LEDGER_SCHEMA",
    "Ledger",
    "LedgerEntry",
    "SignedHead",
    "StateTampered",
    "VerifyReport",
    "check_head",
    "entry_hash",
    "head_from_proto",
    "head_payload",
    "head_signed_by",
    "head_to_proto",
    "ledger_path",
    "read_entries",
    "read_state",
    "record_peer_heads",
    "sign_head",
    "signed_head_of_file",
    "state_digest",
    "verify_file",
    "verify_online",
]

log = logging.getLogger(__name__)


class _Closed(Exception):
    """The ledger was closed (a job thread that outlives its stopping node)."""


#: The ledger connection's SQLite page cache, in KiB.
LEDGER_CACHE_KIB = 256


# The ledger ---------------------------------------------------------------------------------


class Ledger:
    """A party node's ledger (module docstring). Thread-safe, and safe to append to from
    several processes at once (the node, and ``ppdm job run`` recording the heads its
    peers answered with): every write takes an exclusive lock on ``ledger.sqlite.lock``
    and continues the chain from the last stored entry. Every write is committed before
    the call returns."""

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
        self._lockfd = os.open(_lock_path(self.path), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA busy_timeout=30000")
            # A bounded page cache: a node's memory must not grow with its ledger (the
            # default is 2 MiB, filled over the first several hundred jobs).
            self._db.execute(f"PRAGMA cache_size=-{LEDGER_CACHE_KIB}")
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_TABLES)
            with self._write():
                self._db.execute(
                    "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema', ?)",
                    (LEDGER_SCHEMA if new else _OLD_SCHEMA,),
                )
                self._migrate()
        except sqlite3.DatabaseError as exc:
            os.close(self._lockfd)
            raise ConfigError(f"{self.path}: not a ppdm ledger ({exc})") from None

    @contextlib.contextmanager
    def _write(self) -> Iterator[None]:
        """Hold the thread lock, the cross-process file lock and one write transaction;
        the head anchor is rewritten before the file lock is released."""
        with self._lock:
            if self._closed:
                raise _Closed
            fcntl.flock(self._lockfd, fcntl.LOCK_EX)
            try:
                self._pending_anchor: tuple[int, str] | None = None
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    yield
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                self._db.execute("COMMIT")
                if self._pending_anchor is not None:
                    self._write_anchor(*self._pending_anchor)
            finally:
                fcntl.flock(self._lockfd, fcntl.LOCK_UN)

    def _migrate(self) -> None:
        """Chain the state documents of a ledger written before state was chained."""
        row = self._db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        if row is None or row[0] != _OLD_SCHEMA:
            return
        for key, text in self._db.execute("SELECT key, value FROM state ORDER BY key").fetchall():
            try:
                value = json.loads(text)
            except (TypeError, json.JSONDecodeError):
                continue  # verify reports it
            self._append_locked(
                "state", {"key": key, "sha256": state_digest(value), "migrated": True}, ""
            )
        self._db.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (LEDGER_SCHEMA,))

    # The chain --------------------------------------------------------------------------

    def _last(self) -> tuple[int, str]:
        row = self._db.execute(
            "SELECT seq, hash FROM entries ORDER BY rowid DESC LIMIT 1"
        ).fetchone()
        return (int(row[0]), str(row[1])) if row else (0, GENESIS)

    def _append_locked(self, kind: str, rec: dict[str, Any], job_id: str) -> LedgerEntry:
        seq, head = self._last()
        seq += 1
        time = _now()
        digest = entry_hash(seq, time, kind, job_id, rec, head)
        self._db.execute(
            "INSERT INTO entries (seq, time, kind, job_id, record, prev_hash, hash) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (seq, time, kind, job_id, _json(rec), head, digest),
        )
        self._pending_anchor = (seq, digest)
        return LedgerEntry(seq, time, kind, job_id, rec, head, digest)

    def append(
        self, kind: str, record: Mapping[str, Any], *, job_id: str = ""
    ) -> LedgerEntry | None:
        """Add one entry to the chain (and move the head anchor); ``None`` once the
        ledger is closed (a job thread that outlives its stopping node)."""
        rec = json.loads(json.dumps(dict(record), default=str))
        try:
            with self._write():
                return self._append_locked(kind, rec, job_id)
        except _Closed:
            log.warning("ledger closed: %s entry for job %s not recorded", kind, job_id)
            return None

    def _write_anchor(self, seq: int, digest: str) -> None:
        anchor = _anchor_path(self.path)
        tmp = anchor.with_name(anchor.name + ".tmp")
        tmp.write_text(json.dumps({"seq": seq, "hash": digest}))
        os.replace(tmp, anchor)

    def head(self) -> tuple[int, str]:
        """The last entry's ``(seq, hash)`` (``(0, GENESIS)`` for an empty ledger)."""
        with self._lock:
            return self._last()

    def signed_head(self, settings: Any) -> SignedHead | None:
        """This ledger's head signed with ``settings``' party key (``None`` while empty)."""
        from ppdm.service.ledger_heads import sign_head

        seq, digest = self.head()
        if seq == 0:
            return None
        return sign_head(
            settings.private_key_pem,
            consortium=settings.consortium.name,
            party=settings.name,
            seq=seq,
            digest=digest,
        )

    def entries(
        self, *, job_id: str | None = None, since: int = 0, limit: int | None = None
    ) -> list[LedgerEntry]:
        """Entries with ``seq > since`` (of one job, if given), oldest first."""
        with self._lock:
            return _select(self._db, job_id=job_id, since=since, limit=limit)

    def verify(self) -> VerifyReport:
        """The local check of the chain, the head anchor, the state documents and the
        held peer heads (module docstring)."""
        from ppdm.service.ledger_verify import _read_all, _read_anchor, _verify_rows

        with self._lock:
            fcntl.flock(self._lockfd, fcntl.LOCK_SH)
            try:
                rows, tables = _read_all(self._db)
                anchor = _read_anchor(self.path)
            finally:
                fcntl.flock(self._lockfd, fcntl.LOCK_UN)
        return _verify_rows(rows, anchor, tables)

    # Peer heads -------------------------------------------------------------------------------

    def receive_head(self, head: SignedHead, *, consortium: Any, sender: str) -> str:
        """Record a head ``sender`` sent (checked with :func:`check_head`). Returns
        ``"accepted"`` (a higher ``seq`` than any held: kept, and chained as a
        ``peer-head`` entry), ``"known"`` (already held), ``"conflict"`` (a lower ``seq``
        than the latest held, or another hash at a held ``seq``: kept apart, chained as a
        ``peer-head-conflict`` entry and logged) or ``"refused"`` (malformed or not signed
        by the sender's roster certificate: logged and chained as ``peer-head-refused``,
        never kept). ``"closed"`` once the ledger is closed."""
        from ppdm.service.ledger_heads import check_head

        try:
            check_head(head, consortium=consortium, sender=sender)
        except ProtocolError as exc:
            log.warning("ledger head from %s refused: %s", sender, exc.reason)
            self.append(
                "peer-head-refused",
                {
                    "party": sender,
                    "seq": head.seq if 0 <= head.seq <= MAX_HEAD_SEQ else -1,
                    "reason": exc.reason,
                },
            )
            return "refused"
        now = _now()
        try:
            return self._receive_checked(head, sender, now)
        except _Closed:
            return "closed"

    def _receive_checked(self, head: SignedHead, sender: str, now: str) -> str:
        with self._write():
            same = self._db.execute(
                "SELECT hash FROM peer_heads WHERE party = ? AND seq = ?", (sender, head.seq)
            ).fetchone()
            if same is not None and same[0] == head.hash:
                return "known"
            (latest,) = self._db.execute(
                "SELECT MAX(seq) FROM peer_heads WHERE party = ?", (sender,)
            ).fetchone()
            if same is None and (latest is None or head.seq > latest):
                self._db.execute(
                    "INSERT INTO peer_heads (party, seq, hash, signature, received) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (sender, head.seq, head.hash, head.signature.hex(), now),
                )
                self._append_locked("peer-head", head.as_record(), "")
                return "accepted"
            reason = "fork" if same is not None else "older"
            held = self._db.execute(
                "SELECT seq, hash FROM peer_heads WHERE party = ? AND seq = ?",
                (sender, head.seq if same is not None else latest),
            ).fetchone()
            known = self._db.execute(
                "SELECT 1 FROM peer_head_conflicts WHERE party = ? AND seq = ? AND hash = ?",
                (sender, head.seq, head.hash),
            ).fetchone()
            if known is not None:
                return "known"
            self._db.execute(
                "INSERT INTO peer_head_conflicts "
                "(party, seq, hash, signature, reason, received) VALUES (?, ?, ?, ?, ?, ?)",
                (sender, head.seq, head.hash, head.signature.hex(), reason, now),
            )
            self._append_locked(
                "peer-head-conflict",
                {**head.as_record(), "reason": reason, "held_seq": held[0], "held_hash": held[1]},
                "",
            )
        log.warning(
            "ledger head conflict from %s: seq %d %s the held head at seq %d (%s)",
            sender,
            head.seq,
            "forks" if reason == "fork" else "is older than",
            held[0],
            "two signed hashes at one entry"
            if reason == "fork"
            else "a rollback, or two concurrent jobs' heads delivered out of order",
        )
        return "conflict"

    def peer_heads(
        self, party: str, *, after_seq: int = 0, limit: int = HEAD_PAGE
    ) -> tuple[list[SignedHead], bool]:
        """Heads of ``party`` this node accepted with ``seq > after_seq``, ascending, at
        most ``limit``; and whether more follow."""
        with self._lock:
            rows = self._db.execute(
                "SELECT seq, hash, signature FROM peer_heads WHERE party = ? AND seq > ? "
                "ORDER BY seq LIMIT ?",
                (party, min(int(after_seq), MAX_HEAD_SEQ), int(limit) + 1),
            ).fetchall()
        heads = [_head_row(party, r) for r in rows[:limit]]
        return heads, len(rows) > limit

    def peer_head_conflicts(
        self, party: str, *, limit: int = MAX_CONFLICTS_SENT
    ) -> list[SignedHead]:
        """The most recent heads of ``party`` recorded as conflicts."""
        with self._lock:
            rows = self._db.execute(
                "SELECT seq, hash, signature FROM peer_head_conflicts WHERE party = ? "
                "ORDER BY rowid DESC LIMIT ?",
                (party, int(limit)),
            ).fetchall()
        return [_head_row(party, r) for r in rows]

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
        """Store a state document and chain a ``state`` entry ``{key, sha256}`` for it,
        in one transaction."""
        doc = json.loads(json.dumps(dict(value), default=str))
        with contextlib.suppress(_Closed), self._write():
            self._db.execute(
                "INSERT INTO state (key, value) VALUES (?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (key, _json(doc)),
            )
            self._append_locked("state", {"key": key, "sha256": state_digest(doc)}, "")

    def load_state(self, key: str) -> dict[str, Any] | None:
        """The state document ``key`` (``None`` if there never was one).

        Raises :class:`StateTampered` (a :class:`~ppdm.errors.ConfigError`) if the
        stored document does not match the latest ``state`` entry of the chain for
        ``key`` -- it was edited, added or deleted beside the chain -- so that, e.g., a
        disclosure audit history with answered queries removed is never used."""
        with self._lock:
            return _checked_state(self._db, key, self.path)

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._db.close()
                os.close(self._lockfd)

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _head_row(party: str, row: tuple[Any, ...]) -> SignedHead:
    from ppdm.service.ledger_heads import SignedHead

    seq, digest, sig = row
    try:
        signature = bytes.fromhex(str(sig))
    except ValueError:
        signature = b""
    return SignedHead(party, int(seq), str(digest), signature)


# Signing this node's head, recording the heads peers answered with -----------------------------


def signed_head_of_file(settings: Any) -> SignedHead | None:
    """The head of ``settings``' party's ledger file (read-only), signed with its key;
    ``None`` if there is no ledger there (the initiator runs away from its node) or it
    is empty."""
    p = ledger_path(settings)
    if not p.is_file():
        return None
    try:
        db = _open_ro(p)
        try:
            row = db.execute("SELECT seq, hash FROM entries ORDER BY rowid DESC LIMIT 1").fetchone()
        finally:
            db.close()
    except sqlite3.DatabaseError:
        return None
    if row is None:
        return None
    from ppdm.service.ledger_heads import sign_head

    return sign_head(
        settings.private_key_pem,
        consortium=settings.consortium.name,
        party=settings.name,
        seq=int(row[0]),
        digest=str(row[1]),
    )


def record_peer_heads(settings: Any, heads: Mapping[str, Any]) -> dict[str, str]:
    """Record in ``settings``' party's ledger the heads its peers answered with (``heads``:
    peer -> ``LedgerHead`` message or :class:`SignedHead`; unset ones are skipped, so is
    this party's own). Returns each peer's outcome (:meth:`Ledger.receive_head`). Does
    nothing (and returns ``{}``) if the party's ledger is not on this machine."""
    from ppdm.service.ledger_heads import SignedHead, head_from_proto

    p = ledger_path(settings)
    wanted = {}
    for peer, msg in heads.items():
        head = msg if isinstance(msg, SignedHead) else head_from_proto(msg)
        if head is not None and peer != settings.name:
            wanted[peer] = head
    if not wanted or not p.is_file():
        return {}
    with Ledger(p) as led:
        return {
            peer: led.receive_head(head, consortium=settings.consortium, sender=peer)
            for peer, head in wanted.items()
        }


_HEADS = (
    "MAX_SIGNATURE_BYTES",
    "SignedHead",
    "check_head",
    "head_from_proto",
    "head_payload",
    "head_signed_by",
    "head_to_proto",
    "sign_head",
)
_CHECKS = ("SHARED_LOCK_WAIT_S", "VerifyReport", "verify_file", "verify_online")


def __getattr__(name: str) -> Any:
    """The public names of signed heads (:mod:`~ppdm.service.ledger_heads`) and of the
    checks (:mod:`~ppdm.service.ledger_verify`), imported at first use: a node writes
    its ledger from its start, signs heads from its first job and checks only when
    asked."""
    if name in _HEADS:
        from ppdm.service import ledger_heads

        return getattr(ledger_heads, name)
    if name in _CHECKS:
        from ppdm.service import ledger_verify

        return getattr(ledger_verify, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
