"""``ppdm job``: start a job at every party's node and collect the outcome."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ppdm.cli._output import write_json
from ppdm.errors import ConfigError
from ppdm.jobs.registry import get_job, job_names
from ppdm.parties.consortium import load_settings


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("job", help="run jobs on the party network")
    sub = parser.add_subparsers(dest="job_command", metavar="ACTION")
    sub.required = True

    run = sub.add_parser(
        "run",
        help="start a job at every node and wait for the results",
        description=(
            "Start job NAME at every party's node as the party of --settings. Every node "
            "runs its side on its own private inputs. Prints the job document (JSON, see "
            "docs/jobs.md) on stdout; exit code 0 if every party succeeded, 1 if not."
        ),
    )
    run.add_argument("name", help="job name (see `ppdm job list`)")
    run.add_argument("--settings", required=True, help="your party's settings file")
    run.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="job parameter; VALUE is read as JSON if it parses, else as a string",
    )
    run.add_argument(
        "--timeout", type=float, default=None, help="timeout of each receive (seconds)"
    )
    run.add_argument(
        "--deadline", type=float, default=None, help="give up waiting after this many seconds"
    )
    run.add_argument(
        "--parties", default=None, help="comma-separated job members (default: everyone)"
    )
    run.add_argument(
        "--output", default=None, help="also write the document here (only if it succeeded)"
    )
    run.set_defaults(handler=_run)

    ls = sub.add_parser("list", help="list the jobs this installation knows")
    ls.set_defaults(handler=_list)

    st = sub.add_parser("status", help="ask every node how a job stands")
    st.add_argument("job_id")
    st.add_argument("--settings", required=True, help="your party's settings file")
    st.set_defaults(handler=_status)


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
    from ppdm.parties.node import run_job

    settings = load_settings(args.settings)
    params = parse_params(args.param)
    get_job(args.name).params(params)  # unknown job or parameter: one-line error, exit 2
    if args.timeout is not None and args.timeout <= 0:
        raise ConfigError("--timeout must be positive")
    if args.deadline is not None and args.deadline <= 0:
        raise ConfigError("--deadline must be positive")
    parties = [p.strip() for p in args.parties.split(",")] if args.parties else None
    if args.output is not None and not Path(args.output).parent.exists():
        raise ConfigError(f"--output folder {Path(args.output).parent} does not exist")
    doc = run_job(
        settings,
        args.name,
        params,
        timeout=args.timeout,
        parties=parties,
        deadline=args.deadline,
    )
    text = json.dumps(doc, indent=2)
    print(text)
    if doc["state"] != "succeeded":
        print(f"ppdm: job {doc['job_id']} failed: {doc['error']}", file=sys.stderr)
        return 1
    if args.output is not None:
        Path(args.output).write_text(text + "\n")
    return 0


def _list(args: argparse.Namespace) -> int:
    for name in job_names():
        print(f"{name:24s} {get_job(name).summary}")
    return 0


def _status(args: argparse.Namespace) -> int:
    from ppdm.parties.node import job_status

    settings = load_settings(args.settings)
    write_json(job_status(settings, args.job_id), None)
    return 0
