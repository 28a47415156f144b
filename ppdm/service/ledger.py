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
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import functools
import hashlib
import itertools
import json
import logging
import os
import re
import sqlite3
import threading
import time as _time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ppdm.errors import ConfigError, ProtocolError

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

LEDGER_SCHEMA = "ppdm.ledger/2"
_OLD_SCHEMA = "ppdm.ledger/1"  # state not yet chained: migrated on first open
GENESIS = "0" * 64
HEAD_PAGE = 512  # heads per LedgerHeads reply
MAX_CONFLICTS_SENT = 256  # conflicts per LedgerHeads reply (the most recent)
MAX_SIGNATURE_BYTES = 1024
MAX_HEAD_SEQ = 2**62
SHARED_LOCK_WAIT_S = 5.0  # a verify waits this long for a writer to finish its append
_HEX64 = re.compile(r"[0-9a-f]{64}")
_HEAD_DOMAIN = b"ppdm.ledger-head/1\n"

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


class _Closed(Exception):
    """The ledger was closed (a job thread that outlives its stopping node)."""


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


@dataclass(frozen=True)
class VerifyReport:
    """The outcome of a verification: ``ok`` and one line per problem.

    ``checked`` names the peers whose held heads were compared with the chain (with how
    many heads each), ``notes`` what was not checked or is worth knowing (an unreachable
    peer, a benign conflict); notes do not make ``ok`` false."""

    ok: bool
    entries: int
    problems: list[str]
    head: str
    checked: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


#: The ledger connection's SQLite page cache, in KiB.
LEDGER_CACHE_KIB = 256


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


# Signed heads ------------------------------------------------------------------------------


@dataclass(frozen=True)
class SignedHead:
    """A member's signed statement "my ledger has ``hash`` at entry ``seq``"."""

    party: str
    seq: int
    hash: str
    signature: bytes

    def as_record(self) -> dict[str, Any]:
        return {
            "party": self.party,
            "seq": self.seq,
            "hash": self.hash,
            "signature": self.signature.hex(),
        }


def head_payload(consortium: str, party: str, seq: int, digest: str) -> bytes:
    """The bytes a head's signature covers (domain-separated; the consortium name keeps a
    head from being replayed in another consortium)."""
    return _HEAD_DOMAIN + json.dumps([consortium, party, int(seq), digest]).encode()


@functools.lru_cache(maxsize=8)
def _private_key(pem: bytes) -> Any:
    from cryptography.hazmat.primitives import serialization

    try:
        return serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"the party key cannot sign ledger heads ({exc})") from None


@functools.lru_cache(maxsize=64)
def _public_key(certificate_pem: bytes) -> Any:
    from cryptography import x509

    return x509.load_pem_x509_certificate(certificate_pem).public_key()


def _sign(key: Any, payload: bytes) -> bytes:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, padding, rsa

    if isinstance(key, ec.EllipticCurvePrivateKey):
        return key.sign(payload, ec.ECDSA(hashes.SHA256()))
    if isinstance(key, ed25519.Ed25519PrivateKey | ed448.Ed448PrivateKey):
        return key.sign(payload)
    if isinstance(key, rsa.RSAPrivateKey):
        pss = padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=32)
        return key.sign(payload, pss, hashes.SHA256())
    raise ConfigError(f"a {type(key).__name__} party key cannot sign ledger heads")


def sign_head(
    private_key_pem: bytes, *, consortium: str, party: str, seq: int, digest: str
) -> SignedHead:
    """Sign ``party``'s head ``(seq, digest)`` with its TLS private key (ECDSA P-256 with
    SHA-256 for the keys ``ppdm consortium init`` makes; Ed25519/Ed448 and RSA-PSS too)."""
    key = _private_key(bytes(private_key_pem))
    signature = _sign(key, head_payload(consortium, party, seq, digest))
    return SignedHead(party, int(seq), digest, signature)


def head_signed_by(head: SignedHead, *, consortium: str, certificate_pem: bytes) -> bool:
    """Whether ``head`` carries a valid signature by the key of ``certificate_pem``."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, padding, rsa

    try:
        public = _public_key(bytes(certificate_pem))
    except ValueError:
        return False
    payload = head_payload(consortium, head.party, head.seq, head.hash)
    try:
        if isinstance(public, ec.EllipticCurvePublicKey):
            public.verify(head.signature, payload, ec.ECDSA(hashes.SHA256()))
        elif isinstance(public, ed25519.Ed25519PublicKey | ed448.Ed448PublicKey):
            public.verify(head.signature, payload)
        elif isinstance(public, rsa.RSAPublicKey):
            pss = padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=32)
            public.verify(head.signature, payload, pss, hashes.SHA256())
        else:
            return False
    except (InvalidSignature, ValueError):
        return False
    return True


def check_head(head: SignedHead, *, consortium: Any, sender: str) -> None:
    """Validate a head ``sender`` sent (peer input): it must be the sender's own, well
    formed, and signed by the key of the sender's roster certificate. Raises
    :class:`~ppdm.errors.ProtocolError` with a fixed reason."""
    if head.party != sender:
        raise ProtocolError(sender, "ledger-head", "the head is not the sender's own")
    if not 1 <= head.seq <= MAX_HEAD_SEQ or not _HEX64.fullmatch(head.hash):
        raise ProtocolError(sender, "ledger-head", "malformed head")
    if not 0 < len(head.signature) <= MAX_SIGNATURE_BYTES:
        raise ProtocolError(sender, "ledger-head", "malformed signature")
    try:
        cert = consortium.party(sender).certificate_pem
    except ConfigError:
        raise ProtocolError(sender, "ledger-head", "the sender is not on the roster") from None
    if not head_signed_by(head, consortium=consortium.name, certificate_pem=cert):
        raise ProtocolError(
            sender, "ledger-head", "the signature is not by the sender's roster certificate"
        )


def head_to_proto(head: SignedHead) -> Any:
    from ppdm.proto.ppdm.v1 import party_pb2 as pb

    return pb.LedgerHead(party=head.party, seq=head.seq, hash=head.hash, signature=head.signature)


def head_from_proto(msg: Any) -> SignedHead | None:
    """A ``LedgerHead`` message as a :class:`SignedHead`; ``None`` if it is unset."""
    if msg is None or (not msg.party and not msg.seq and not msg.hash and not msg.signature):
        return None
    return SignedHead(str(msg.party), int(msg.seq), str(msg.hash), bytes(msg.signature))


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
    seq, digest, sig = row
    try:
        signature = bytes.fromhex(str(sig))
    except ValueError:
        signature = b""
    return SignedHead(party, int(seq), str(digest), signature)


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


def _read_all(db: sqlite3.Connection) -> tuple[list[tuple[Any, ...]], dict[str, list[Any]]]:
    # One read transaction: a consistent snapshot of every table.
    db.execute("BEGIN")
    try:
        return _read_snapshot(db)
    finally:
        db.execute("ROLLBACK")


def _read_snapshot(
    db: sqlite3.Connection,
) -> tuple[list[tuple[Any, ...]], dict[str, list[Any]]]:
    rows = db.execute(
        "SELECT seq, time, kind, job_id, record, prev_hash, hash FROM entries ORDER BY rowid"
    ).fetchall()
    tables: dict[str, list[Any]] = {}
    queries = {
        "state": "SELECT key, value FROM state",
        "peer_heads": "SELECT party, seq, hash FROM peer_heads",
        "peer_head_conflicts": "SELECT party, seq, hash FROM peer_head_conflicts",
    }
    for name, sql in queries.items():
        try:
            tables[name] = db.execute(sql).fetchall()
        except sqlite3.OperationalError:  # a ledger from before the table existed
            tables[name] = []
    try:
        row = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        tables["schema"] = [row[0] if row else None]
    except sqlite3.OperationalError:
        tables["schema"] = [None]
    return rows, tables


def _verify_rows(
    rows: list[tuple[Any, ...]],
    anchor_state: tuple[dict[str, Any] | None, bool],
    tables: Mapping[str, list[Any]] | None = None,
) -> VerifyReport:
    anchor, unreadable = anchor_state
    problems: list[str] = []
    stored: dict[int, tuple[str, str]] = {}  # seq -> (prev_hash, hash)
    order: list[int] = []
    records: list[tuple[int, str, Any]] = []  # (seq, kind, record) of readable entries
    for row in rows:
        seq, time, kind, job_id, text, prev, digest = row
        try:
            seq = int(seq)
            record = json.loads(text)
            good = entry_hash(seq, str(time), str(kind), str(job_id), record, str(prev))
            records.append((seq, str(kind), record))
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
    if tables is not None:
        problems += _table_problems(records, tables)
    return VerifyReport(ok=not problems, entries=len(rows), problems=problems, head=head)


def _table_problems(
    records: list[tuple[int, str, Any]], tables: Mapping[str, list[Any]]
) -> list[str]:
    """The state documents and held peer heads against the chain entries that record
    them."""
    problems: list[str] = []
    chained_state: dict[str, tuple[int, Any]] = {}
    heads: dict[tuple[str, int, str], int] = {}
    conflicts: dict[tuple[str, int, str], int] = {}
    for seq, kind, rec in records:
        if not isinstance(rec, dict):
            continue
        if kind == "state" and isinstance(rec.get("key"), str):
            chained_state[rec["key"]] = (seq, rec.get("sha256"))
        elif kind in ("peer-head", "peer-head-conflict"):
            ident = (str(rec.get("party")), rec.get("seq"), str(rec.get("hash")))
            (heads if kind == "peer-head" else conflicts)[ident] = seq  # type: ignore[index]
    old = tables.get("schema", [None])[0] == _OLD_SCHEMA
    state_rows = {str(k): v for k, v in tables.get("state", [])}
    for key, text in sorted(state_rows.items()):
        chained = chained_state.get(key)
        if chained is None:
            if not old:
                problems.append(f"state {key!r} has no entry in the chain (added beside it)")
            continue
        try:
            digest = state_digest(json.loads(text))
        except (TypeError, json.JSONDecodeError):
            digest = ""
        if digest != chained[1]:
            problems.append(
                f"state {key!r} does not match entry {chained[0]} (changed beside the chain)"
            )
    for key, (seq, _digest) in sorted(chained_state.items()):
        if key not in state_rows:
            problems.append(f"state {key!r} was deleted (entry {seq} records it)")
    for table, by_entry, what in (
        ("peer_heads", heads, "peer-head"),
        ("peer_head_conflicts", conflicts, "peer-head-conflict"),
    ):
        held = {(str(p), int(s), str(h)) for p, s, h in tables.get(table, [])}
        for party, seq, _digest in sorted(held - set(by_entry)):
            problems.append(
                f"the held head of {party!r} at seq {seq} has no {what} entry (added beside "
                "the chain)"
            )
        for ident in sorted(set(by_entry) - held, key=lambda i: by_entry[i]):
            problems.append(
                f"the head of {ident[0]!r} at seq {ident[1]} recorded by entry "
                f"{by_entry[ident]} was deleted"
            )
    return problems


def _open_ro(p: Path) -> sqlite3.Connection:
    if not p.is_file():
        raise ConfigError(f"no ledger at {p}")
    return sqlite3.connect(f"file:{p}?mode=ro", uri=True)


def verify_file(path: str | os.PathLike[str]) -> VerifyReport:
    """The local check of a ledger file, without writing to it (``ppdm ledger verify
    --offline``)."""
    p = Path(path)
    with _shared_lock(p):
        try:
            db = _open_ro(p)
            try:
                rows, tables = _read_all(db)
            finally:
                db.close()
        except sqlite3.DatabaseError as exc:
            raise ConfigError(f"{p}: not a ppdm ledger ({exc})") from None
        anchor = _read_anchor(p)
    return _verify_rows(rows, anchor, tables)


@contextlib.contextmanager
def _shared_lock(path: Path) -> Iterator[None]:
    """Hold off writers (of any process) while the chain and the anchor are read, so that
    a verify of a serving node's ledger sees them agree; without a lock file (a ledger
    copied elsewhere) nothing to wait for."""
    try:
        fd = os.open(_lock_path(path), os.O_RDONLY)
    except OSError:
        yield
        return
    try:
        deadline = _time.monotonic() + SHARED_LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if _time.monotonic() > deadline:  # a writer stopped mid-append: read anyway
                    break
                _time.sleep(0.01)
        yield
    finally:
        os.close(fd)


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


# The online check -------------------------------------------------------------------------------


def _fetch_heads(stub: Any, *, timeout: float) -> tuple[list[Any], list[Any]]:
    """Every head a peer holds of the caller (paged), and its conflicts; raises
    ``grpc.RpcError`` or :class:`ValueError` (a malformed reply)."""
    from ppdm.proto.ppdm.v1 import party_pb2 as pb

    heads: list[Any] = []
    conflicts: list[Any] = []
    after = 0
    for page in range(100_000):
        reply = stub.LedgerHeads(pb.LedgerHeadsRequest(after_seq=after), timeout=timeout)
        if page == 0:
            conflicts = list(reply.conflicts)[:MAX_CONFLICTS_SENT]
        got = list(reply.heads)[:HEAD_PAGE]
        heads += got
        if not reply.more:
            return heads, conflicts
        if not got or got[-1].seq <= after:
            raise ValueError("the reply pages do not advance")
        after = got[-1].seq
    raise ValueError("too many pages")


def verify_online(
    settings: Any, *, timeout: float = 5.0, peers: Iterable[str] | None = None
) -> VerifyReport:
    """The local check of the party's ledger, and then, for each peer (default: every
    other roster member), the heads it holds of this party (``LedgerHeads``): each must
    carry this party's signature, and the local chain must have exactly its hash at its
    ``seq`` (and so be at least that long). A mismatch is reported as a rewrite naming
    the peer and the entry. An unreachable peer is a note: the check then rests on the
    others (and on the local check alone if none answers)."""
    import grpc

    from ppdm.parties.grpc_net import open_channel
    from ppdm.proto.ppdm.v1 import party_pb2_grpc

    path = ledger_path(settings)
    local = verify_file(path)
    db = _open_ro(path)
    try:
        chain = {int(s): str(h) for s, h in db.execute("SELECT seq, hash FROM entries")}
    finally:
        db.close()
    last = max(chain) if chain else 0
    me = settings.name
    consortium = settings.consortium
    cert = consortium.party(me).certificate_pem
    problems = list(local.problems)
    notes = list(local.notes)
    checked: dict[str, int] = {}
    names = [p for p in (peers if peers is not None else consortium.names) if p != me]
    for peer in names:
        channel = open_channel(settings, peer)
        try:
            held, conflicts = _fetch_heads(party_pb2_grpc.PartyStub(channel), timeout=timeout)
        except grpc.RpcError as exc:
            code = exc.code() if hasattr(exc, "code") else None  # type: ignore[attr-defined]
            notes.append(
                f"{peer} not asked ({code.name if code else 'UNAVAILABLE'}): the heads it "
                "holds were not checked"
            )
            continue
        except ValueError as exc:
            problems.append(f"{peer} answered with a malformed list of heads ({exc})")
            continue
        finally:
            channel.close()
        checked[peer] = len(held) + len(conflicts)
        unsigned = 0
        for msg, conflict in [(h, False) for h in held] + [(c, True) for c in conflicts]:
            head = head_from_proto(msg)
            if head is None or head.party != me or not 1 <= head.seq <= MAX_HEAD_SEQ:
                problems.append(f"{peer} answered with a malformed head")
                continue
            if not head_signed_by(head, consortium=consortium.name, certificate_pem=cert):
                unsigned += 1
                continue
            if head.seq > last:
                problems.append(
                    f"rewrite: {peer} holds this party's signed head at entry {head.seq}, but "
                    f"the ledger ends at entry {last} (entries were removed)"
                )
            elif chain.get(head.seq) != head.hash:
                problems.append(
                    f"rewrite: entry {head.seq} is not the one this party signed and sent "
                    f"to {peer} (entries up to {head.seq} were rewritten)"
                )
            elif conflict:
                notes.append(
                    f"{peer} recorded the head at seq {head.seq} as out of order; it matches "
                    "the chain (two concurrent jobs' heads crossed)"
                )
        if unsigned:
            # Not evidence either way: a peer cannot fail a member's check with heads the
            # member never signed (forged by the peer, or signed with a rotated key).
            notes.append(
                f"{peer} holds {unsigned} head(s) without this party's current signature "
                "(forged by the peer, or signed with a key since rotated): not checked"
            )
            checked[peer] -= unsigned
    if not checked and names:
        notes.append("no peer answered: only the local check was done")
    return VerifyReport(
        ok=not problems,
        entries=local.entries,
        problems=problems,
        head=local.head,
        checked=checked,
        notes=notes,
    )
