"""The checks of a ledger: the local one (:func:`verify_file`, and
:meth:`ppdm.service.ledger.Ledger.verify`: the chain, the head anchor, the state documents
and the held peer heads) and the online one (:func:`verify_online`: the heads the peers
hold of this party against the chain). What each proves is in the module docstring of
:mod:`ppdm.service.ledger` and in ``docs/ledger.md``.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import os
import sqlite3
import time as _time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ppdm.errors import ConfigError
from ppdm.service.ledger_chain import (
    _OLD_SCHEMA,
    GENESIS,
    _anchor_path,
    _lock_path,
    _open_ro,
    entry_hash,
    ledger_path,
    state_digest,
)
from ppdm.service.ledger_heads import (
    HEAD_PAGE,
    MAX_CONFLICTS_SENT,
    MAX_HEAD_SEQ,
    head_from_proto,
    head_signed_by,
)

SHARED_LOCK_WAIT_S = 5.0  # a verify waits this long for a writer to finish its append


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
