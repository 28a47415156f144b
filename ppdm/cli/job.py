"""``ppdm job``: start a job at every party's node and collect the outcome."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ppdm.cli._output import load_settings, write_json
from ppdm.errors import ConfigError
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
            "runs its side on its own private inputs. Without --output, prints the job "
            "document (JSON, see docs/jobs.md) on stdout and a short summary on stderr; "
            "with --output, writes the document there and prints only the summary (state, "
            "cost per party, the result: for assoc the top rules with support, confidence "
            "and lift when the parties reveal counts). Exit code 0 if every party "
            "succeeded, 1 if not."
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
        help="write the document here (only if it succeeded) instead of the terminal",
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
        description="Ask every node how job JOB_ID stands (JSON on stdout); exit code 2 "
        "when no node knows the job.",
    )
    st.add_argument("job_id")
    st.add_argument("--settings", required=True, help="your party's settings file")
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

    for verb, text in (
        ("approve", "approve a pending job at your own node (it then runs when all agree)"),
        ("reject", "reject a pending job at your own node (it ends at every party)"),
    ):
        cmd = sub.add_parser(verb, help=text, description=text)
        cmd.add_argument("job_id")
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
    if args.output is None:
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
        Path(args.output).write_text(text + "\n")
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


def _status(args: argparse.Namespace) -> int:
    from ppdm.service.client import job_status

    settings = load_settings(args.settings)
    report = job_status(settings, args.job_id)
    write_json(report, None)
    if all(r["state"] == "unknown" for r in report.values()):
        print(f"ppdm: error: no node knows job {args.job_id!r}", file=sys.stderr)
        return 2
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
    from ppdm.service.client import decide_job

    settings = load_settings(args.settings)
    record = decide_job(settings, args.job_id, approve=args.approve, reason=args.reason)
    print(f"job {args.job_id}: {record['state']}")
    return 0
