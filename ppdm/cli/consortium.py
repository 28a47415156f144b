"""``ppdm consortium``: write a testbed consortium, or check a consortium file."""

from __future__ import annotations

import argparse
import os
import secrets
import sys
from pathlib import Path
from typing import Any

from ppdm.cli._output import load_settings, write_json
from ppdm.errors import ConfigError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "consortium",
        help="create or check a consortium (roster, CA, keys, settings)",
        description=(
            "Write a testbed consortium (init), check a roster or settings file (check), "
            "and change the membership with rosters signed by the consortium CA "
            "(add-party, remove-party, rotate-cert, sign, push); see docs/deployment.md."
        ),
    )
    sub = parser.add_subparsers(dest="consortium_command", metavar="ACTION")
    sub.required = True

    init = sub.add_parser(
        "init",
        help="write a CA, keys, certificates, the roster and one settings file per party",
        description=(
            "Write a ready-to-run consortium for one machine: DIR/consortium.toml (roster), "
            "DIR/ca.crt, DIR/certs/PARTY.crt, DIR/private/PARTY.key and DIR/PARTY.toml "
            "(each party's private settings, with a sample secure-sum input)."
        ),
    )
    init.add_argument("--parties", required=True, help="comma-separated party names")
    init.add_argument("--host", default="127.0.0.1", help="address every node listens on")
    init.add_argument("--base-port", type=int, default=50051, help="port of the first party")
    init.add_argument("--out", required=True, help="output folder")
    init.add_argument("--name", default="ppdm-testbed", help="consortium name")
    init.add_argument(
        "--max-message-bytes",
        type=int,
        default=4 * 1024 * 1024,  # ppdm.parties.consortium.DEFAULT_MAX_MESSAGE_BYTES
        help="largest gRPC message; larger protocol messages are chunked (default 4 MiB)",
    )
    init.add_argument(
        "--job-timeout", type=float, default=60.0, help="default job timeout in seconds"
    )
    init.add_argument(
        "--no-sample-inputs", action="store_true", help="do not add sample private inputs"
    )
    init.add_argument(
        "--ca-passphrase-env",
        metavar="VAR",
        help="keep the CA private key (DIR/private/ca.key, needed to add members and "
        "rotate certificates later) encrypted with the passphrase in this environment "
        "variable: the way to keep it",
    )
    init.add_argument(
        "--keep-ca-key",
        action="store_true",
        help="keep the CA private key; unencrypted unless --ca-passphrase-env (a testbed)",
    )
    init.add_argument("--force", action="store_true", help="overwrite a non-empty folder")
    init.set_defaults(handler=_init)

    def roster_args(cmd: argparse.ArgumentParser) -> None:
        cmd.add_argument("--roster", required=True, help="the consortium file (roster) to change")
        cmd.add_argument(
            "--ca-key", required=True, help="the consortium CA's private key (keep it offline)"
        )
        cmd.add_argument(
            "--ca-passphrase-env",
            metavar="VAR",
            help="environment variable holding the CA key's passphrase",
        )

    add = sub.add_parser(
        "add-party",
        help="issue a key and certificate for a new member and sign the next roster",
        description=(
            "Issue a key and certificate for a new member (OUT/certs/NAME.crt, "
            "OUT/private/NAME.key; OUT defaults to the roster's folder), add it to the "
            "roster, sign the next roster version with the CA key, and write the new "
            "member's settings (OUT/NAME.toml) and data-owner policy (OUT/NAME.policy.toml, "
            "the safe default). Then push the roster to the running nodes (ppdm consortium "
            "push; no restart) and hand the new member its files: it starts with "
            "`ppdm party serve OUT/NAME.toml`."
        ),
    )
    add.add_argument("name", help="the new member's party name (a lower-case DNS label)")
    add.add_argument(
        "--address",
        default=None,
        help="HOST:PORT of the new member's node (default: the last member's host, next "
        "port: a consortium on one machine)",
    )
    add.add_argument(
        "--no-sample-inputs",
        action="store_true",
        help="no sample secure-sum input in the new settings (as for init)",
    )
    add.add_argument(
        "--out", help="folder for the new member's key, certificate, settings and policy"
    )
    add.add_argument(
        "--listen",
        default=None,
        help="HOST:PORT the new node listens on (default: --address)",
    )
    add.add_argument("--days", type=int, default=365, help="certificate lifetime in days")
    roster_args(add)
    add.set_defaults(handler=_add_party)

    rm = sub.add_parser(
        "remove-party",
        help="remove a member and sign the next roster",
        description=(
            "Remove a member from the roster and sign the next roster version: every node "
            "that takes it (ppdm consortium push, or SIGHUP after copying the file) refuses "
            "the member's certificate at once, inbound and outbound."
        ),
    )
    rm.add_argument("name", help="the member to remove")
    roster_args(rm)
    rm.set_defaults(handler=_remove_party)

    rot = sub.add_parser(
        "rotate-cert",
        help="issue a member a new key and certificate and sign the next roster",
        description=(
            "Issue a new key and certificate for a member (written over "
            "OUT/certs/NAME.crt and OUT/private/NAME.key) and sign the next roster "
            "version. Install the new key at the member, reload its node (SIGHUP), then "
            "push the roster: the old certificate stops working at every node that has it."
        ),
    )
    rot.add_argument("name", help="the member whose certificate to replace")
    rot.add_argument("--out", help="folder for the new key and certificate")
    rot.add_argument("--days", type=int, default=365, help="certificate lifetime in days")
    roster_args(rot)
    rot.set_defaults(handler=_rotate_cert)

    sign = sub.add_parser(
        "sign",
        help="sign the next roster version after a change made by hand",
        description="Check the roster file, increment its version and sign it with the CA key.",
    )
    roster_args(sign)
    sign.set_defaults(handler=_sign)

    push = sub.add_parser(
        "push",
        help="hand the roster to every member's node (each takes it only if newer)",
        description=(
            "Send a roster signed by the consortium CA to every node it lists, as your "
            "party. A node takes it only if it is signed, for the same consortium and CA, "
            "and newer than the one it holds; it then pins the new certificates at once. "
            "Prints each node's answer; exit 1 if any node does not hold the version."
        ),
    )
    push.add_argument("--settings", required=True, help="your party's settings file")
    push.add_argument(
        "--roster", help="the roster to push (default: the consortium file of --settings)"
    )
    push.add_argument("--timeout", type=float, default=5.0, help="seconds per node")
    push.add_argument("--json", action="store_true", help="print each node's answer as JSON")
    push.set_defaults(handler=_push)

    check = sub.add_parser(
        "check",
        help="check a consortium file (or a party's settings file) and print its roster",
        description=(
            "Load a consortium file, or a party's settings file and the roster it names, "
            "with every check a node makes at start (certificates, signature, addresses), "
            "and print the roster: name, version, whether it is signed, members. For a "
            "settings file, also check [limits], open every [data] source read-only "
            "(files readable, databases answering within --timeout, credentials readable "
            "and private) and load the policy, matching its [data.KEY] sections with "
            "[data]: each problem with its precise cause. Exit 1 if any check fails."
        ),
    )
    check.add_argument("file", help="consortium.toml, or a party settings file")
    check.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        help="seconds to open each data source of a settings file (default 10)",
    )
    check.add_argument("--json", action="store_true", help="print the report as JSON")
    check.set_defaults(handler=_check)


def _init(args: argparse.Namespace) -> int:
    from ppdm.parties.consortium import init_consortium
    from ppdm.service.policy import DEFAULT_POLICY_TOML

    parties = [p.strip() for p in args.parties.split(",") if p.strip()]
    if not parties:
        raise ConfigError("--parties must list at least one party, e.g. alice,bob,carol")
    if args.job_timeout <= 0:
        raise ConfigError("--job-timeout must be positive")
    path = init_consortium(
        Path(args.out),
        parties,
        host=args.host,
        base_port=args.base_port,
        name=args.name,
        max_message_bytes=args.max_message_bytes,
        job_timeout_s=args.job_timeout,
        sample_inputs=not args.no_sample_inputs,
        keep_ca_key=args.keep_ca_key or args.ca_passphrase_env is not None,
        overwrite=args.force,
        policy_text=DEFAULT_POLICY_TOML,
        ca_passphrase=_passphrase(args.ca_passphrase_env),
    )
    print(f"wrote consortium {args.name!r} with parties {', '.join(parties)} to {path.parent}")
    for p in parties:
        print(f"  ppdm party serve {path.parent / (p + '.toml')}")
    print(
        "each party's data-owner policy is in PARTY.policy.toml (the safe default; "
        "see docs/governance.md)"
    )
    key = path.parent / "private" / "ca.key"
    if args.ca_passphrase_env is not None:
        print(f"the CA key is in {key}, encrypted with ${args.ca_passphrase_env}: keep it offline")
    elif args.keep_ca_key:
        print(f"the CA key is in {key}, NOT encrypted: a testbed only; keep it offline")
    else:
        print(
            "the CA private key was not kept: this roster can never change (no add-party, "
            "rotate-cert). To keep it, run init with --ca-passphrase-env VAR (the key is "
            "written encrypted with the passphrase in $VAR to private/ca.key)",
            file=sys.stderr,
        )
    return 0


def _check(args: argparse.Namespace) -> int:
    from ppdm.parties.consortium import load_consortium

    path = Path(args.file)
    if not path.exists():
        raise ConfigError(f"file not found: {path}")
    import tomllib

    try:
        is_settings = "party" in tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    party = None
    if is_settings:
        settings = load_settings(path)
        consortium, party = settings.consortium, settings.name
    else:
        consortium = load_consortium(path)
    doc: dict[str, Any] = {
        "consortium": consortium.name,
        "version": consortium.version,
        "signed": consortium.signed,
        "max_message_bytes": consortium.max_message_bytes,
        "parties": [
            {"name": p.name, "address": p.address, "sha256": p.fingerprint}
            for p in consortium.parties
        ],
    }
    if party is not None:
        from ppdm.service.selfcheck import check_party

        if not args.timeout > 0:
            raise ConfigError("--timeout must be positive")
        doc["settings_of"] = party
        try:
            doc["checks"] = check_party(settings, timeout=args.timeout)
        finally:
            if "ppdm.compute" in sys.modules:  # a spark-table entry started the party's engine
                from ppdm.compute import close_engines

                close_engines()
    ok = all(c["ok"] for c in doc.get("checks", []))
    if args.json:
        write_json(doc, None)
        return 0 if ok else 1
    from ppdm.cli._output import print_fields, print_table

    signed = "signed" if doc["signed"] else "NOT signed"
    print_fields(
        [
            ("consortium", f"{doc['consortium']} (version {doc['version']}, {signed})"),
            ("max message", f"{doc['max_message_bytes']:,} bytes"),
        ]
    )
    print_table(
        doc["parties"],
        [("name", "member"), ("address", "address"), ("sha256", "certificate sha256")],
    )
    if party is not None:
        rows = [{**c, "ok": "ok" if c["ok"] else "PROBLEM"} for c in doc["checks"]]
        print_table(rows, [("what", "check"), ("ok", "result"), ("detail", "detail")])
        print(
            f"{party}'s settings, data and policy are ready"
            if ok
            else f"{sum(not c['ok'] for c in doc['checks'])} problem(s) in {party}'s settings"
        )
    return 0 if ok else 1


def _passphrase(var: str | None) -> bytes | None:
    if var is None:
        return None
    value = os.environ.get(var)
    if not value:
        raise ConfigError(f"environment variable {var} is not set or empty")
    return value.encode()


def _ca_key(args: argparse.Namespace) -> Any:
    from ppdm.parties.roster import load_ca_key

    return load_ca_key(args.ca_key, _passphrase(args.ca_passphrase_env))


def _report(what: str, consortium: Any) -> int:
    print(
        f"{what}: roster {consortium.name!r} is now version {consortium.version} "
        f"(members: {', '.join(consortium.names)}); hand it to every node: "
        "ppdm consortium push --settings YOUR_SETTINGS"
    )
    return 0


def _check_days(days: int) -> None:
    if not 1 <= days <= 3650:
        raise ConfigError("--days must be between 1 and 3650")


def _add_party(args: argparse.Namespace) -> int:
    from ppdm.parties.roster import add_party

    _check_days(args.days)
    from ppdm.parties.consortium import load_consortium
    from ppdm.parties.roster import next_address
    from ppdm.service.policy import DEFAULT_POLICY_TOML

    address = args.address or next_address(load_consortium(args.roster))
    sample = {"secure_sum": secrets.randbelow(1000)}  # like init's sample inputs
    new = add_party(
        args.roster,
        _ca_key(args),
        args.name,
        address,
        out=args.out,
        validity_days=args.days,
        policy_text=DEFAULT_POLICY_TOML,
        listen=args.listen,
        inputs=None if args.no_sample_inputs else sample,
    )
    folder = Path(args.out or Path(args.roster).parent)
    _report(f"added {args.name!r} at {address}", new)
    print(
        f"wrote {folder / (args.name + '.toml')} and {folder / (args.name + '.policy.toml')} "
        f"with {folder / 'certs' / (args.name + '.crt')} and "
        f"{folder / 'private' / (args.name + '.key')}; hand them (and the roster) to "
        f"{args.name!r}, who starts its node with: ppdm party serve "
        f"{folder / (args.name + '.toml')}"
    )
    return 0


def _remove_party(args: argparse.Namespace) -> int:
    from ppdm.parties.roster import remove_party

    return _report(f"removed {args.name!r}", remove_party(args.roster, _ca_key(args), args.name))


def _rotate_cert(args: argparse.Namespace) -> int:
    from ppdm.parties.roster import rotate_certificate

    _check_days(args.days)
    new = rotate_certificate(
        args.roster, _ca_key(args), args.name, out=args.out, validity_days=args.days
    )
    return _report(f"new certificate for {args.name!r}", new)


def _sign(args: argparse.Namespace) -> int:
    from ppdm.parties.roster import sign_roster

    return _report("signed", sign_roster(args.roster, _ca_key(args)))


def _push(args: argparse.Namespace) -> int:
    from ppdm.parties.consortium import load_consortium
    from ppdm.service.client import push_roster

    if not args.timeout > 0:
        raise ConfigError("--timeout must be positive")
    settings = load_settings(args.settings, verify_own_certificate=False)
    roster = load_consortium(args.roster) if args.roster else settings.consortium
    report = push_roster(settings, roster, timeout=args.timeout)
    if args.json:
        write_json(report, None)
    else:
        from ppdm.cli._output import print_table

        rows = [
            {
                "party": party,
                "holds": "yes" if r["ok"] else "NO",
                "version": r.get("version"),
                "why": r.get("error") or r.get("reason") or None,
            }
            for party, r in report.items()
        ]
        print_table(
            rows,
            [("party", "party"), ("holds", "holds it"), ("version", "version"), ("why", "why")],
            title=f"roster {roster.name!r} version {roster.version}",
        )
    return 0 if all(r["ok"] for r in report.values()) else 1
