"""``ppdm policy``: check a data-owner policy, and dry-run a job against it."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

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
        "for every job, the rules that apply (a table; --json for the document). "
        "One-line error and exit 2 if it is not valid.",
    )
    validate.add_argument("file", help="a policy file (e.g. alice.policy.toml)")
    validate.add_argument("--json", action="store_true", help="print the rules as JSON")
    validate.set_defaults(handler=_validate)

    allow = sub.add_parser(
        "allow",
        help="allow a disclosure-changing job parameter (e.g. reveal_counts) in your policy",
        description=(
            "Edit your policy file so that your node accepts PARAM, a parameter that "
            "changes what your party discloses (reveal_counts, report_local, "
            "include_labels, ...), at a value other than its safe default: writes "
            "`PARAM = { values = [SAFE, VALUE...] }` under [jobs.JOB.params], keeping "
            "every comment and other line of the file. A running node picks the change "
            "up within a second and records it in its ledger. For a yes/no parameter the "
            "value allowed is the other one (reveal_counts: true). See docs/governance.md."
        ),
    )
    allow.add_argument("param", help="the parameter, e.g. reveal_counts")
    allow.add_argument("--job", default=None, help="the job (needed when several jobs have PARAM)")
    allow.add_argument(
        "--value",
        action="append",
        default=[],
        help="a value to allow (JSON if it parses; repeat for several)",
    )
    where = allow.add_mutually_exclusive_group(required=True)
    where.add_argument("--settings", help="your party's settings file (its [node] policy)")
    where.add_argument("--file", help="the policy file itself")
    allow.set_defaults(handler=_allow)


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
        if report.get("cause"):
            print(f"local cause (only you see it): {report['cause']}")
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
    rows: dict[str, dict[str, Any]] = {}
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
    if args.json:
        print(json.dumps({"policy": str(args.file), "valid": True, "jobs": rows}, indent=2))
        return 0
    from ppdm.cli._output import print_table

    table = []
    for name, row in rows.items():
        who = row["initiators"]
        table.append(
            {
                "job": name,
                "allowed": "yes" if row["allow"] else "no",
                "parties": f"{row['min_parties']}-{row['max_parties']}",
                "consent": "owner" if row["consent"] else "-",
                "results": row["results"],
                "initiators": "any" if "*" in who else ", ".join(who),
                "params": "; ".join(f"{k} {v}" for k, v in row["params"].items()) or "-",
            }
        )
    allowed = sum(bool(row["allow"]) for row in rows.values())
    print(f"{args.file}: valid; {allowed} of {len(rows)} jobs allowed")
    print_table(
        table,
        [
            ("job", "job"),
            ("allowed", "allowed"),
            ("parties", "parties"),
            ("consent", "consent"),
            ("results", "results to"),
            ("initiators", "initiators"),
            ("params", "parameter rules"),
        ],
    )
    return 0


def _allow(args: argparse.Namespace) -> int:
    from ppdm.cli.job import parse_params
    from ppdm.service.policy_edit import allow_parameter

    if args.file:
        path = args.file
    else:
        from ppdm.service.node import policy_path

        settings = load_settings(args.settings)
        path = policy_path(settings)
        if path is None:
            raise ConfigError(
                f"{args.settings} names no policy file ([node] policy): your node runs the "
                "default policy; write one (docs/governance.md) and name it there, or pass "
                "--file"
            )
    values = [parse_params([f"v={v}"])["v"] for v in args.value]
    job, line = allow_parameter(path, args.param, job=args.job, values=values)
    print(f"{path}: [jobs.{job}.params] {line}")
    print(
        "a running node picks this up within a second (and records it in its ledger); "
        f"jobs may now ask for it, e.g. `ppdm job run {job} --param {args.param}="
        f"{json.dumps(values[0]) if values else 'true'}`"
    )
    return 0
