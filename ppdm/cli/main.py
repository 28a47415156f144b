"""The ``ppdm`` command line.

Each command group lives in its own module of :mod:`ppdm.cli` and exposes
``register(subparsers)``, which adds its sub-commands with ``set_defaults(handler=...)``;
a handler takes the parsed namespace and returns the exit code. Modules are discovered,
so adding a command group means adding a module, not editing this file.

Bad input (:class:`ppdm.errors.PPDMError` from a handler) is reported as one line on
stderr with exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import pkgutil
import sys
from collections.abc import Sequence

import ppdm.cli
from ppdm import __version__
from ppdm.errors import PPDMError
from ppdm.progress import configure_logging

log = logging.getLogger(__name__)


def build_parser() -> argparse.ArgumentParser:
    """Build the full argument parser from every command module in :mod:`ppdm.cli`."""
    parser = argparse.ArgumentParser(
        prog="ppdm",
        description="Privacy-preserving distributed data mining.",
    )
    parser.add_argument("--version", action="version", version=f"ppdm {__version__}")
    parser.add_argument(
        "--log-level",
        default="WARNING",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="logging level on stderr (default: WARNING)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(ppdm.cli.__path__), key=lambda m: m.name):
        if info.name == "main" or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"ppdm.cli.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ppdm`` script; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(args.log_level)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(handler(args) or 0)
    except PPDMError as exc:
        print(f"ppdm: error: {exc}", file=sys.stderr)
        return 2
    except FileNotFoundError as exc:
        print(f"ppdm: error: file not found: {exc.filename}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ppdm: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
