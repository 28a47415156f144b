"""``ppdm ledger``: show and verify a node's tamper-evident ledger (docs/ledger.md)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ppdm.errors import ConfigError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "ledger",
        help="show or verify your node's hash-chained ledger of job decisions",
        description="Show or verify the hash-chained ledger in which your node records "
        "every job request, decision, approval, start and end (docs/ledger.md).",
    )
    sub = parser.add_subparsers(dest="ledger_command", metavar="ACTION")
    sub.required = True

    show = sub.add_parser(
        "show",
        help="print ledger entries (requests, decisions, approvals, starts, ends)",
        description="Print the entries of your node's ledger, oldest first (read-only).",
    )
    _where(show)
    show.add_argument(
        "--job", default=None, help="only the entries of this job (its id or a unique prefix)"
    )
    show.add_argument("--since", type=int, default=0, help="only entries after this number")
    show.add_argument("--limit", type=int, default=None, help="at most this many entries")
    show.add_argument("--json", action="store_true", help="one JSON object per line")
    show.set_defaults(handler=_show)

    verify = sub.add_parser(
        "verify",
        help="check the hash chain and the heads your peers hold: exit 1 on any problem",
        description=(
            "Recompute every entry's hash and link, compare the end of the chain with "
            "the head anchor, and check the state documents and held peer heads against "
            "the chain; report each entry that was edited, deleted or reordered, or "
            "removed from the end. With --settings, also ask every peer for the signed "
            "heads it holds of your party (LedgerHeads) and report a rewrite wherever "
            "your chain does not have exactly that hash at that entry: the only check an "
            "operator who rewrote the whole chain and the anchor cannot pass. "
            "Exit code 0 if the ledger is intact, 1 if not."
        ),
    )
    _where(verify)
    verify.add_argument(
        "--offline",
        action="store_true",
        help="check the local files only (no peer asked; misses a consistent rewrite)",
    )
    verify.add_argument(
        "--timeout",
        type=float,
        default=5.0,
        help="seconds to wait for each peer's answer (default 5)",
    )
    verify.set_defaults(handler=_verify)


def _where(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--settings", help="your party's settings file")
    group.add_argument("--ledger", help="a ledger file (ledger.sqlite)")


def _path(args: argparse.Namespace) -> Path:
    if args.ledger:
        return Path(args.ledger)
    from ppdm.parties.consortium import load_settings
    from ppdm.service.ledger import ledger_path

    return ledger_path(load_settings(args.settings))


def _show(args: argparse.Namespace) -> int:
    from ppdm.service.ledger import read_entries

    if args.since < 0 or (args.limit is not None and args.limit < 1):
        raise ConfigError("--since must be >= 0 and --limit >= 1")
    path = _path(args)
    job_id = args.job
    if job_id is not None:  # a unique prefix of a job id (ledger show prints 12 digits)
        from ppdm.service.history import known_job_ids, resolve_job_id

        job_id = resolve_job_id(job_id, known_job_ids(path), where=str(path))
    entries = read_entries(path, job_id=job_id, since=args.since, limit=args.limit)
    for e in entries:
        if args.json:
            print(json.dumps(e.as_dict(), sort_keys=True))
            continue
        rec = e.record
        what = " ".join(
            f"{k}={json.dumps(rec[k])}"
            for k in (
                "protocol",
                "initiator",
                "parties",
                "decision",
                "rule",
                "state",
                "approved",
                "event",
                "ok",
                "party",
                "key",
            )
            if k in rec and rec[k] not in (None, "")
        )
        job = f" job {e.job_id[:12]}" if e.job_id else ""
        print(f"{e.seq:6d}  {e.time}  {e.kind:9s}{job}  {what}")
    return 0


def _verify(args: argparse.Namespace) -> int:
    from ppdm.service.ledger import verify_file, verify_online

    if not args.timeout > 0:
        raise ConfigError("--timeout must be a positive number of seconds")
    if args.ledger or args.offline:
        report = verify_file(_path(args))
        mode = "offline"
    else:
        from ppdm.parties.consortium import load_settings

        report = verify_online(load_settings(args.settings), timeout=args.timeout)
        mode = "online"
    for line in report.notes:
        print(f"ledger: note: {line}")
    if report.ok:
        held = ", ".join(f"{p} ({n} heads)" for p, n in sorted(report.checked.items()))
        against = f"; matches the heads held by {held}" if held else ""
        print(f"ledger OK: {report.entries} entries, head {report.head} ({mode}{against})")
        return 0
    for line in report.problems:
        print(f"ledger: {line}")
    print(f"ledger NOT intact: {len(report.problems)} problem(s) in {report.entries} entries")
    return 1
