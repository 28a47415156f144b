"""``ppdm policy``: check a data-owner policy, and dry-run a job against it."""

from __future__ import annotations

import argparse
import json
import sys

from ppdm.cli._output import load_settings, write_json
from ppdm.cli.job import add_job_arguments
from ppdm.errors import ConfigError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "policy",
        help="check your node's data-owner policy, or whether it would run a job",
        description="Validate a data-owner policy file, or dry-run a job request against "
        "your node's policy to see whether it would be accepted and by which rule "
        "(docs/governance.md).",
    )
    sub = parser.add_subparsers(dest="policy_command", metavar="ACTION")
    sub.required = True

    check = sub.add_parser(
        "check",
        help="would your node accept this job? (a dry run: nothing is sent or recorded)",
        description=(
            "Decide on job NAME exactly as your node would when a member proposes it: the "
            "policy ([node] policy in the settings), the parameters against your own data, "
            "and the disclosure audit of your earlier jobs. Prints the decision, the rule "
            "that decided and what your party would disclose. Exit code 0 if the job would "
            "be accepted, 1 if refused or waiting for your approval. See docs/governance.md."
        ),
    )
    add_job_arguments(check)
    check.add_argument(
        "--initiator", default=None, help="the member who starts the job (default: you)"
    )
    check.add_argument("--json", action="store_true", help="print JSON")
    check.set_defaults(handler=_check)

    validate = sub.add_parser(
        "validate",
        help="check a policy file and print its effective rules per job",
        description="Load a policy file (as `ppdm party serve` does at start) and print, "
        "for every job, the rules that apply. One-line error and exit 2 if it is not valid.",
    )
    validate.add_argument("file", help="a policy file (e.g. alice.policy.toml)")
    validate.set_defaults(handler=_validate)


def _check(args: argparse.Namespace) -> int:
    from ppdm.cli.job import parse_params
    from ppdm.jobs.registry import get_job
    from ppdm.service.node import dry_run

    settings = load_settings(args.settings)
    params = get_job(args.name).params(parse_params(args.param))
    names = settings.consortium.names
    parties = list(names)
    if args.parties is not None:
        parties = [p.strip() for p in args.parties.split(",") if p.strip()]
        unknown = [p for p in parties if p not in names]
        if not parties or unknown:
            raise ConfigError(f"--parties must name roster parties (unknown: {unknown})")
    initiator = args.initiator or settings.name
    if initiator not in names:
        raise ConfigError(f"--initiator {initiator!r} is not on the roster")
    report = dry_run(settings, args.name, params, parties=parties, initiator=initiator)
    if args.json:
        write_json(report, None)
    else:
        verdict = {"accept": "ACCEPTED", "pending": "PENDING your approval", "refuse": "REFUSED"}[
            report["decision"]
        ]
        rule = f" by rule {report['rule']!r}" if report["rule"] else ""
        print(f"{verdict}{rule}" + (f": {report['reason']}" if report["reason"] else ""))
        leak = report.get("leakage") or {}
        if leak.get("leakage"):
            print(f"you would disclose: {leak['leakage']}")
        if leak.get("reads"):
            print(f"reads: {', '.join(leak['reads'])}")
        for out in leak.get("outputs") or []:
            print(f"  {out['kind']}: {out['what']}")
        print(f"policy: {report['policy']}")
    sys.stdout.flush()
    return 0 if report["decision"] == "accept" else 1


def _validate(args: argparse.Namespace) -> int:
    from ppdm.jobs.registry import job_names
    from ppdm.service.policy import load_policy

    policy = load_policy(args.file)
    rows = {}
    for name in job_names():
        r = policy.rules(name)
        rows[name] = {
            "allow": r.allow,
            "min_parties": r.min_parties,
            "max_parties": r.max_parties,
            "consent": r.consent,
            "results": r.results,
            "initiators": list(r.initiators),
            "params": {k: v.describe() for k, v in r.params.items()},
        }
    print(json.dumps({"policy": str(args.file), "valid": True, "jobs": rows}, indent=2))
    return 0
