"""``ppdm party``: run a party's node, or ask every node for its health."""

from __future__ import annotations

import argparse
import logging

from ppdm.cli._output import load_settings, write_json


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "party",
        help="run or query party nodes",
        description=(
            "Run this party's node (serve), or ask the consortium's nodes whether they are "
            "up (health). A node serves jobs over gRPC with mutual TLS under its owner's "
            "policy; see docs/deployment.md."
        ),
    )
    sub = parser.add_subparsers(dest="party_command", metavar="ACTION")
    sub.required = True

    serve = sub.add_parser(
        "serve",
        help="run this party's node (mutual TLS) until SIGINT/SIGTERM",
        description=(
            "Run the node of the party whose settings file is given: it serves jobs started "
            "by consortium members, on its own private inputs, as far as the owner's policy "
            "([node] policy in the settings; docs/governance.md) allows. The policy is "
            "checked at start and re-read when it changes or on SIGHUP. Logs go to stderr."
        ),
    )
    serve.add_argument("settings", help="the party's settings file (e.g. DIR/alice.toml)")
    serve.add_argument(
        "--log-level",
        dest="node_log_level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="log level of the node (default: INFO)",
    )
    serve.add_argument(
        "--log-format",
        dest="node_log_format",
        default="text",
        choices=["text", "json"],
        help="text lines, or one JSON object per line with the party and job id (default: text)",
    )
    serve.add_argument(
        "--grace", type=float, default=5.0, help="seconds to finish calls when stopping"
    )
    serve.set_defaults(handler=_serve)

    hl = sub.add_parser(
        "health",
        help="ask every node of the consortium whether it is up",
        description=(
            "Ask every node of the consortium (or, with --self, only your own) for its "
            "health as your party, over mutual TLS. Prints one row per node (up, version, "
            "running jobs, roster version, certificate expiry; --json: one JSON record per "
            "node) and warns 30 days "
            "before any member's certificate expires; exit 1 if a node is not up."
        ),
    )
    hl.add_argument("--settings", required=True, help="your party's settings file")
    hl.add_argument("--timeout", type=float, default=5.0, help="seconds per node")
    hl.add_argument(
        "--self",
        dest="only_self",
        action="store_true",
        help="ask only your own node (a container's or service's health check)",
    )
    hl.add_argument("--json", action="store_true", help="print one JSON record per node")
    hl.set_defaults(handler=_health)


def _serve(args: argparse.Namespace) -> int:
    import gc

    # What a node's start allocates (modules, classes, its settings) lives as long as
    # the node: a collection during the start frees next to nothing and costs ~3% of its
    # instructions. Collection resumes once it serves, with all that frozen (``serve``),
    # or when the start fails.
    gc.disable()
    try:
        from ppdm.service.node import serve

        logging.getLogger("ppdm").setLevel(args.node_log_level)
        settings = load_settings(args.settings)
        if args.node_log_format == "json":
            from ppdm.progress import use_json_logs

            use_json_logs(settings.name, args.node_log_level)
        addons = []
        if settings.console_listen is not None:  # the owner's web console (docs/console.md)
            from ppdm.console import console_addon

            addons.append(console_addon)
        return serve(settings, grace=args.grace, addons=addons)
    finally:
        gc.enable()


def _health(args: argparse.Namespace) -> int:
    import sys

    from ppdm.service.client import certificate_warnings, health

    settings = load_settings(args.settings)
    report = health(settings, timeout=args.timeout, only_self=args.only_self)
    if args.json:
        write_json(report, None)
    else:
        from ppdm.cli._output import print_table

        rows = [
            {
                "party": party,
                "up": "yes" if r["ok"] else "NO",
                "version": r.get("version"),
                "roster": (
                    f"{r['roster_version']}" + ("" if r.get("same_roster") else " (differs)")
                    if "roster_version" in r
                    else None
                ),
                "jobs": len(r.get("running_jobs") or []) if r["ok"] else None,
                "cert": r.get("certificate_days_left"),
                "error": r.get("error"),
            }
            for party, r in report.items()
        ]
        print_table(
            rows,
            [
                ("party", "party"),
                ("up", "up"),
                ("version", "ppdm"),
                ("roster", "roster version"),
                ("jobs", "running jobs"),
                ("cert", "certificate days left"),
                ("error", "error"),
            ],
        )
    for line in certificate_warnings(settings):
        print(f"ppdm: warning: {line}", file=sys.stderr)
    return 0 if all(r["ok"] for r in report.values()) else 1
