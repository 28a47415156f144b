"""A node's past jobs, read from its ledger (``ppdm job history``), and job id prefixes.

The ledger (:mod:`ppdm.service.ledger`, docs/ledger.md) chains a ``request`` entry for
every job proposed to the node, then ``approval``, ``start`` and ``finish`` entries as the
job moves on. :func:`job_history` folds them into one row per job: its state, initiator,
parties, the policy rule that decided it, when it was proposed and ended, and its outcome
(the public error code, or the SHA-256 of the result). Nothing private is in it: the
ledger holds only public parameters and digests.

Job ids are 32 hex digits; every command that takes one accepts any unique prefix
(:func:`resolve_job_id`): ``ledger show`` prints 12.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ppdm.errors import ConfigError
from ppdm.service.ledger import read_entries

__all__ = ["MIN_PREFIX", "job_history", "known_job_ids", "resolve_job_id"]

#: The shortest prefix a command resolves (shorter ones match too much to be useful).
MIN_PREFIX = 4


def resolve_job_id(prefix: str, known: Iterable[str], *, where: str = "this node") -> str:
    """The one id of ``known`` that starts with ``prefix`` (an exact id always wins).

    :class:`ConfigError` (the CLI's exit code 2) when none or several match:

    >>> resolve_job_id("3fa9", ["3fa9c0", "77aa01"])
    '3fa9c0'
    >>> resolve_job_id("77", ["3fa9c0", "77aa01", "77ab02"])
    Traceback (most recent call last):
    ...
    ppdm.errors.ConfigError: job id prefix '77' is too short: give at least 4 characters
    """
    text = prefix.strip().lower()
    ids = list(dict.fromkeys(known))
    if text in ids:
        return text
    if len(text) < MIN_PREFIX:
        raise ConfigError(
            f"job id prefix {prefix!r} is too short: give at least {MIN_PREFIX} characters"
        )
    hits = [i for i in ids if i.startswith(text)]
    if not hits:
        raise ConfigError(f"no node knows job {prefix!r}: no job id at {where} starts with it")
    if len(hits) > 1:
        shown = ", ".join(h[:12] for h in hits[:5]) + (", ..." if len(hits) > 5 else "")
        raise ConfigError(
            f"job id prefix {prefix!r} is ambiguous at {where}: {len(hits)} jobs match "
            f"({shown}); give more characters"
        )
    return hits[0]


def known_job_ids(path: str | os.PathLike[str]) -> list[str]:
    """Every job id a ledger file mentions, oldest first."""
    return list(dict.fromkeys(e.job_id for e in read_entries(Path(path)) if e.job_id))


def _outcome(rec: dict[str, Any]) -> str:
    err = rec.get("error")
    if isinstance(err, dict) and err.get("code"):
        who = f" ({err['party']})" if err.get("party") else ""
        return f"{err['code']}{who}"
    if rec.get("result_sha256"):
        return f"result sha256 {str(rec['result_sha256'])[:12]}"
    return ""


def job_history(path: str | os.PathLike[str], *, limit: int | None = None) -> list[dict[str, Any]]:
    """One row per job of the ledger file ``path``, oldest first (the last ``limit``):
    ``job_id``, ``protocol``, ``state``, ``initiator``, ``parties``, ``decision``,
    ``rule``, ``proposed``, ``started``, ``ended`` (UTC ISO times, ``None`` if not yet),
    ``approved`` (``None`` unless the owner decided), ``wall_time_s`` and ``outcome``."""
    rows: dict[str, dict[str, Any]] = {}
    for e in read_entries(Path(path)):
        if not e.job_id:
            continue
        rec = e.record if isinstance(e.record, dict) else {}
        row = rows.setdefault(
            e.job_id,
            {
                "job_id": e.job_id,
                "protocol": "",
                "state": "",
                "initiator": "",
                "parties": [],
                "decision": "",
                "rule": "",
                "proposed": None,
                "started": None,
                "ended": None,
                "approved": None,
                "wall_time_s": None,
                "outcome": "",
            },
        )
        if e.kind == "request":
            row["protocol"] = str(rec.get("protocol") or "")
            row["initiator"] = str(rec.get("initiator") or "")
            row["parties"] = [str(p) for p in rec.get("parties") or []]
            row["decision"] = str(rec.get("decision") or "")
            row["rule"] = str(rec.get("rule") or "")
            row["proposed"] = e.time
            row["state"] = {
                "accept": "accepted",
                "pending": "pending",
                "refuse": "refused",
                "invalid": "refused",
            }.get(row["decision"], row["decision"])
        elif e.kind == "approval":
            row["approved"] = bool(rec.get("approved"))
            row["state"] = "accepted" if row["approved"] else "refused"
        elif e.kind == "start":
            row["started"] = e.time
            row["state"] = "running"
        elif e.kind == "finish":
            row["ended"] = e.time
            row["state"] = str(rec.get("state") or row["state"])
            if rec.get("rule"):
                row["rule"] = str(rec["rule"])
            if rec.get("wall_time_s") is not None:
                row["wall_time_s"] = float(rec["wall_time_s"])
            row["outcome"] = _outcome(rec) or row["outcome"]
    out = list(rows.values())
    for row in out:
        if not row["outcome"] and row["state"] == "refused":
            row["outcome"] = f"refused by rule {row['rule']}" if row["rule"] else "refused"
    return out[-limit:] if limit else out
