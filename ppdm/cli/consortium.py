"""``ppdm consortium``: write a testbed consortium, or check a consortium file."""

from __future__ import annotations

import argparse
from pathlib import Path

from ppdm.cli._output import write_json
from ppdm.errors import ConfigError
from ppdm.parties.consortium import (
    DEFAULT_MAX_MESSAGE_BYTES,
    init_consortium,
    load_consortium,
    load_settings,
)
from ppdm.service.policy import DEFAULT_POLICY_TOML


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "consortium", help="create or check a consortium (roster, CA, keys, settings)"
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
        default=DEFAULT_MAX_MESSAGE_BYTES,
        help="largest gRPC message; larger protocol messages are chunked (default 4 MiB)",
    )
    init.add_argument(
        "--job-timeout", type=float, default=60.0, help="default job timeout in seconds"
    )
    init.add_argument(
        "--no-sample-inputs", action="store_true", help="do not add sample private inputs"
    )
    init.add_argument(
        "--keep-ca-key",
        action="store_true",
        help="also write the CA private key (DIR/private/ca.key) to issue more certificates",
    )
    init.add_argument("--force", action="store_true", help="overwrite a non-empty folder")
    init.set_defaults(handler=_init)

    check = sub.add_parser(
        "check",
        help="check a consortium file (or a party's settings file) and print its roster",
    )
    check.add_argument("file", help="consortium.toml, or a party settings file")
    check.set_defaults(handler=_check)


def _init(args: argparse.Namespace) -> int:
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
        keep_ca_key=args.keep_ca_key,
        overwrite=args.force,
        policy_text=DEFAULT_POLICY_TOML,
    )
    print(f"wrote consortium {args.name!r} with parties {', '.join(parties)} to {path.parent}")
    for p in parties:
        print(f"  ppdm party serve {path.parent / (p + '.toml')}")
    print(
        "each party's data-owner policy is in PARTY.policy.toml (the safe default; "
        "see docs/governance.md)"
    )
    return 0


def _check(args: argparse.Namespace) -> int:
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
    doc = {
        "consortium": consortium.name,
        "max_message_bytes": consortium.max_message_bytes,
        "parties": [
            {"name": p.name, "address": p.address, "sha256": p.fingerprint}
            for p in consortium.parties
        ],
    }
    if party is not None:
        doc["settings_of"] = party
    write_json(doc, None)
    return 0
