"""``ppdm job``: start a job at every party's node and collect the outcome."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ppdm.cli._output import load_settings, write_json
from ppdm.errors import ConfigError, split_local_cause
from ppdm.jobs.registry import get_job, job_names


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "job",
        help="run jobs on the party network",
        description="Run jobs on the party network, follow them, and give or refuse your "
        "consent to jobs your policy holds (docs/jobs.md, docs/governance.md).",
    )
    sub = parser.add_subparsers(dest="job_command", metavar="ACTION")
    sub.required = True

    run = sub.add_parser(
        "run",
        help="start a job at every node and wait for the results",
        description=(
            "Start job NAME at every party's node as the party of --settings. Every node "
            "runs its side on its own private inputs. Prints a short summary (state, cost "
            "per party, the result: for assoc the top rules with support, confidence and "
            "lift when the parties reveal counts); --output FILE also writes the job "
            "document (JSON, see docs/jobs.md; `ppdm job show FILE` renders it again), "
            "--json prints the document on stdout and the summary on stderr. Exit code 0 "
            "if every party succeeded, 1 if not."
        ),
    )
    add_job_arguments(run)
    run.add_argument(
        "--timeout", type=float, default=None, help="timeout of each receive (seconds)"
    )
    run.add_argument(
        "--deadline", type=float, default=None, help="give up waiting after this many seconds"
    )
    run.add_argument(
        "--output",
        default=None,
        help="also write the job document (JSON) here, only if the job succeeded",
    )
    run.add_argument(
        "--json",
        action="store_true",
        help="print the job document (JSON) on stdout, the summary on stderr",
    )
    run.add_argument(
        "--plot",
        metavar="FILE",
        default=None,
        help="draw the bytes, messages and time of every protocol step (PNG)",
    )
    run.set_defaults(handler=_run)

    ls = sub.add_parser(
        "list",
        help="list the jobs this installation knows",
        description="List the jobs this installation knows, with a one-line summary each.",
    )
    ls.set_defaults(handler=_list)

    st = sub.add_parser(
        "status",
        help="ask every node how a job stands",
        description="Ask every node how job JOB_ID (or a unique prefix of it) stands: one "
        "row per party (--json: each node's record). Your own node tells you, its owner, "
        "the local cause of its refusal or failure; the other nodes give only the public "
        "code. Exit code 2 when no node knows the job or the prefix is unknown or "
        "ambiguous.",
    )
    st.add_argument("job_id", help="the job id or a unique prefix of it")
    st.add_argument("--settings", required=True, help="your party's settings file")
    st.add_argument("--json", action="store_true", help="print each node's record as JSON")
    st.set_defaults(handler=_status)

    pend = sub.add_parser(
        "pending",
        help="list the jobs waiting for your approval at your own node",
        description=(
            "Jobs your node holds because your policy requires your consent "
            "(docs/governance.md): initiator, parties, parameters, what your party would "
            "disclose, and when each expires."
        ),
    )
    pend.add_argument("--settings", required=True, help="your party's settings file")
    pend.add_argument("--json", action="store_true", help="print JSON instead of a table")
    pend.set_defaults(handler=_pending)

    why = sub.add_parser(
        "explain",
        help="why did your node refuse or fail a job? (the local cause, for its owner)",
        description=(
            "Ask your own node about job JOB_ID (or a unique prefix) with your party's "
            "certificate, from the node's host: its state, the deciding rule and, for a "
            "refusal or failure that depends on your data or settings (a typo in [data], "
            "a password in a URL, a database that is down), the precise local cause, which "
            "the other members never see (they get only the public code). Then the job's "
            "entries in your node's ledger, when it is on this host."
        ),
    )
    why.add_argument("job_id", help="the job id or a unique prefix of it")
    why.add_argument("--settings", required=True, help="your party's settings file")
    why.add_argument("--json", action="store_true", help="print JSON")
    why.set_defaults(handler=_explain)

    hist = sub.add_parser(
        "history",
        help="list the jobs your node was asked to run, with their outcome",
        description=(
            "Every job proposed to your node, oldest first, from its ledger "
            "(docs/ledger.md): state, protocol, initiator, parties, the deciding policy "
            "rule, when it was proposed and ended, and its outcome (the public error code "
            "or the digest of the result). Run it on your node's host."
        ),
    )
    hist.add_argument("--settings", required=True, help="your party's settings file")
    hist.add_argument("--limit", type=int, default=None, help="only the last N jobs")
    hist.add_argument("--json", action="store_true", help="print JSON instead of a table")
    hist.set_defaults(handler=_history)

    show = sub.add_parser(
        "show",
        help="render a saved job document (ppdm job run --output FILE)",
        description=(
            "Print the summary of a job document saved by `ppdm job run --output FILE` "
            "(or `ppdm demo --output`): state, cost per party, the result."
        ),
    )
    show.add_argument("file", help="the job document (JSON)")
    show.add_argument("--top", type=int, default=10, help="rules shown (default 10)")
    show.add_argument("--json", action="store_true", help="print the document itself")
    show.set_defaults(handler=_show)

    for verb, text in (
        ("approve", "approve a pending job at your own node (it then runs when all agree)"),
        ("reject", "reject a pending job at your own node (it ends at every party)"),
    ):
        cmd = sub.add_parser(verb, help=text, description=text)
        cmd.add_argument("job_id", help="the job id or a unique prefix of it")
        cmd.add_argument("--settings", required=True, help="your party's settings file")
        cmd.add_argument(
            "--reason",
            default="",
            help="a reason the initiator sees (do not put private data here)",
        )
        cmd.set_defaults(handler=_decide, approve=verb == "approve")


def add_job_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments that name a job and its request: NAME, --settings, --param, --parties
    (``ppdm job run`` and ``ppdm policy check``)."""
    parser.add_argument("name", help="job name (see `ppdm job list`)")
    parser.add_argument("--settings", required=True, help="your party's settings file")
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="job parameter; VALUE is read as JSON if it parses, else as a string",
    )
    parser.add_argument(
        "--parties", default=None, help="comma-separated job members (default: everyone)"
    )


def parse_params(items: list[str]) -> dict[str, Any]:
    """``["k=v", ...]`` -> dict; values parse as JSON when they can, else stay strings."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--param expects KEY=VALUE, got {item!r}")
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out


def _run(args: argparse.Namespace) -> int:
    from ppdm.service.client import run_job

    settings = load_settings(args.settings)
    params = parse_params(args.param)
    merged = get_job(args.name).params(params)  # unknown job or parameter: one line, exit 2
    if get_job(args.name).name in ("assoc", "kmeans"):
        from ppdm.jobs.mining import check_params

        check_params(args.name, merged)  # bad values are caught here, before any node
    if args.timeout is not None and args.timeout <= 0:
        raise ConfigError("--timeout must be positive")
    if args.deadline is not None and args.deadline <= 0:
        raise ConfigError("--deadline must be positive")
    parties = None
    if args.parties is not None:
        parties = [p.strip() for p in args.parties.split(",") if p.strip()]
        if not parties:
            raise ConfigError("--parties must name at least one party")
        settings.consortium.order(parties)  # names outside the roster: one-line error
    if args.output is not None and not Path(args.output).parent.exists():
        raise ConfigError(f"--output folder {Path(args.output).parent} does not exist")
    doc = run_job(
        settings,
        args.name,
        params,
        timeout=args.timeout,
        parties=parties,
        deadline=args.deadline,
        on_wait=_Waiting(),
    )
    from ppdm.cli._summary import job_summary

    text = json.dumps(doc, indent=2)
    summary = job_summary(doc)
    if args.json:
        print(text)
        print(summary, file=sys.stderr)
    else:
        print(summary)
    if args.plot is not None and any(
        (rec or {}).get("metrics") for rec in (doc.get("parties") or {}).values()
    ):
        from ppdm.cli._plots import plot_job_costs

        plot_job_costs(doc, args.plot)
        print(f"wrote {args.plot}", file=sys.stderr)
    if doc["state"] == "refused":
        print(f"ppdm: job {doc['job_id']} refused: {doc['error']}", file=sys.stderr)
        return 1
    if doc["state"] != "succeeded":
        print(f"ppdm: job {doc['job_id']} failed: {doc['error']}", file=sys.stderr)
        return 1
    if args.output is not None:
        from ppdm.cli._args import atomic_file

        with atomic_file(args.output) as tmp:  # whole or not at all
            tmp.write_text(text + "\n")
        print(f"wrote {args.output}", file=sys.stderr)
    return 0


def _list(args: argparse.Namespace) -> int:
    for name in job_names():
        print(f"{name:24s} {get_job(name).summary}")
    return 0


class _Waiting:
    """Tell the user (on stderr, every few seconds) whose approval the job waits for."""

    def __init__(self) -> None:
        self._last: tuple[tuple[str, ...], int] | None = None

    def __call__(self, parties: list[str], waited: float) -> None:
        key = (tuple(parties), int(waited // 5))
        if key != self._last:
            self._last = key
            print(
                f"ppdm: waiting {waited:.0f} s for approval by {', '.join(parties)} "
                "(their owners run `ppdm job approve ID`)",
                file=sys.stderr,
            )


def _history(args: argparse.Namespace) -> int:
    from ppdm.cli._output import print_table
    from ppdm.service.history import job_history
    from ppdm.service.ledger import ledger_path

    if args.limit is not None and args.limit < 1:
        raise ConfigError("--limit must be >= 1")
    rows = job_history(ledger_path(load_settings(args.settings)), limit=args.limit)
    if args.json:
        write_json(rows, None)
        return 0
    for r in rows:
        r["id"] = r["job_id"][:12]
        r["when"] = (r["proposed"] or "").replace("T", " ")[:19]
        r["took"] = f"{r['wall_time_s']:.2f} s" if r["wall_time_s"] is not None else None
    print_table(
        rows,
        [
            ("id", "job"),
            ("when", "proposed (UTC)"),
            ("protocol", "protocol"),
            ("state", "state"),
            ("initiator", "initiator"),
            ("parties", "parties"),
            ("rule", "rule"),
            ("took", "took"),
            ("outcome", "outcome"),
        ],
        empty="no job was proposed to this node yet",
    )
    return 0


def _show(args: argparse.Namespace) -> int:
    from ppdm.cli._summary import job_summary

    path = Path(args.file)
    try:
        doc = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not a JSON job document ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("parties"), dict):
        raise ConfigError(f"{path}: not a job document (no 'parties'; see docs/jobs.md)")
    if args.top < 1:
        raise ConfigError("--top must be >= 1")
    if args.json:
        write_json(doc, None)
        return 0
    print(job_summary(doc, top=args.top))
    return 0


def resolve_job(settings: Any, prefix: str, *, pending: list[str] | None = None) -> str:
    """The full job id a prefix names, from this node's ledger (when it is on this host)
    and the jobs pending at the node; a whole 32-hex id is taken as it is. An unknown or
    ambiguous prefix is a :class:`ConfigError` (exit code 2)."""
    from ppdm.service.history import known_job_ids, resolve_job_id
    from ppdm.service.ledger import ledger_path

    known = list(pending or [])
    path = ledger_path(settings)
    if path.is_file():
        known += known_job_ids(path)
    elif len(prefix) == 32 and prefix not in known:
        return prefix  # the ledger is on another host: a whole id goes to the nodes as is
    return resolve_job_id(prefix, known, where=f"{settings.name}'s node")


def _explain(args: argparse.Namespace) -> int:
    from ppdm.cli._output import print_fields
    from ppdm.service.client import job_status
    from ppdm.service.ledger import ledger_path, read_entries

    settings = load_settings(args.settings)
    job_id = resolve_job(settings, args.job_id)
    record = job_status(settings, job_id, parties=[settings.name])[settings.name]
    path = ledger_path(settings)
    entries = [e.as_dict() for e in read_entries(path, job_id=job_id)] if path.is_file() else []
    if args.json:
        write_json({"job_id": job_id, "party": settings.name, **record, "ledger": entries}, None)
        return 0 if record["state"] != "unknown" else 2
    if record["state"] == "unknown" and not entries:
        raise ConfigError(f"{settings.name}'s node does not know job {job_id}")
    error, cause = split_local_cause(record.get("error") or "")
    fields: list[tuple[str, object]] = [("state", record["state"])]
    if record.get("rule"):
        fields.append(("rule", record["rule"]))
    if error:
        fields.append(("public error", error))
    if cause:
        fields.append(("local cause", cause))
    elif record["state"] in ("refused", "failed"):
        fields.append(("local cause", "none recorded: see the node's log"))
    print_fields(fields, title=f"job {job_id} at {settings.name}'s node")
    if entries:
        print("ledger:")
        for e in entries:
            rec = e["record"]
            what = ", ".join(
                f"{k}={rec[k]}"
                for k in ("decision", "rule", "approved", "state", "reason")
                if rec.get(k) not in (None, "")
            )
            print(f"  {e['seq']:>6}  {e['time']}  {e['kind']:<8} {what}")
    return 0


def _status(args: argparse.Namespace) -> int:
    from ppdm.cli._output import print_table
    from ppdm.service.client import job_status

    settings = load_settings(args.settings)
    job_id = resolve_job(settings, args.job_id)
    report = job_status(settings, job_id)
    if all(r["state"] == "unknown" for r in report.values()):
        print(f"ppdm: error: no node knows job {args.job_id!r}", file=sys.stderr)
        return 2
    if args.json:
        write_json(report, None)
        return 0
    rows = []
    for party, r in report.items():
        rows.append(
            {
                "party": party,
                "state": r["state"],
                "rule": r.get("rule"),
                "took": f"{r['wall_time_s']:.2f} s" if r.get("wall_time_s") else None,
                "error": r.get("error"),
            }
        )
    print_table(
        rows,
        [
            ("party", "party"),
            ("state", "state"),
            ("rule", "rule"),
            ("took", "took"),
            ("error", "error / cause"),
        ],
        title=f"job {job_id}",
    )
    return 0


def _pending(args: argparse.Namespace) -> int:
    from ppdm.service.client import pending_jobs

    settings = load_settings(args.settings)
    jobs = pending_jobs(settings)
    if args.json:
        write_json(jobs, None)
        return 0
    if not jobs:
        print("no job is waiting for your approval")
        return 0
    for j in jobs:
        print(
            f"{j['job_id']}  {j['protocol']}  from {j['initiator']}  with "
            f"{', '.join(j['parties'])}  (expires in {j['expires_in_s']:.0f} s)"
        )
        print(f"    parameters: {json.dumps(j['params'])}")
        print(f"    you would disclose: {j['leakage']}")
    return 0


def _decide(args: argparse.Namespace) -> int:
    from ppdm.service.client import decide_job, pending_jobs

    settings = load_settings(args.settings)
    pending = [j["job_id"] for j in pending_jobs(settings)]
    job_id = resolve_job(settings, args.job_id, pending=pending)
    record = decide_job(settings, job_id, approve=args.approve, reason=args.reason)
    print(f"job {job_id}: {record['state']}")
    return 0
