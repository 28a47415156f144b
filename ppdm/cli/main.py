"""The ``ppdm`` command line.

Each command group lives in its own module of :mod:`ppdm.cli` and exposes
``register(subparsers)``, which adds its sub-commands with ``set_defaults(handler=...)``;
a handler takes the parsed namespace and returns the exit code. Modules are discovered,
so adding a command group means adding a module, not editing this file; a command line
whose command is named like its module (``ppdm party serve``) imports only that module.

Bad input is reported as one ``ppdm: error:`` line on stderr with exit code 2, never a
traceback: argument errors, :class:`ppdm.errors.PPDMError` from a handler (the commands
validate their arguments up front) and, as a last line of defence, any other exception
(its traceback goes to the log at DEBUG).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import math
import pkgutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

import ppdm.cli
from ppdm import __version__
from ppdm.errors import ConfigError, PPDMError
from ppdm.progress import configure_logging

log = logging.getLogger(__name__)


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one ``ppdm: error:`` line (exit code 2), like
    every other bad input, instead of argparse's usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"ppdm: error: {self.prog}: {message} (see --help)\n")


class _Unreached:
    """Stands in for the parser of a command the command line being parsed does not name
    (:data:`ppdm.cli.command_line`): it takes every call a command module makes and
    describes nothing. Building every command's arguments costs ~35 ms of CPU per call of
    :func:`main` (argparse's formatter and gettext look-ups per argument); a command that
    is not on the line is never parsed, and its name and help still list under ``--help``
    and in the invalid-choice error."""

    _actions: tuple[()] = ()

    def __init__(self, **_kwargs: object) -> None:
        self.choices: dict[str, _Unreached] = {}

    def __getattr__(self, _name: str) -> Callable[..., _Unreached]:
        return lambda *_a, **_k: self

    def get_default(self, _dest: str) -> None:
        return None


class _Commands(argparse._SubParsersAction):  # type: ignore[type-arg]
    """The top-level ``COMMAND`` choices: a command the command line does not name gets
    an :class:`_Unreached` parser (its name and help are recorded as usual)."""

    def add_parser(self, name: str, **kwargs: Any) -> Any:
        line = ppdm.cli.command_line
        names = (name, *kwargs.get("aliases", ()))
        if line is None or any(n in line for n in names):
            return super().add_parser(name, **kwargs)
        real, self._parser_class = self._parser_class, _Unreached
        try:
            return super().add_parser(name, **kwargs)
        finally:
            self._parser_class = real


def build_parser() -> argparse.ArgumentParser:
    """Build the full argument parser from every command module in :mod:`ppdm.cli`."""
    names = sorted(info.name for info in pkgutil.iter_modules(ppdm.cli.__path__))
    parser, _ = _build([n for n in names if n != "main" and not n.startswith("_")])
    return parser


def _build(
    modules: Sequence[str],
) -> tuple[argparse.ArgumentParser, argparse._SubParsersAction[Any]]:
    """A parser with the commands the given modules of :mod:`ppdm.cli` register."""
    parser = _Parser(
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
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", action=_Commands)
    for name in modules:
        module = importlib.import_module(f"ppdm.cli.{name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(sub)
    _add_json_flags(parser)
    return parser, sub


def _named_command(line: Sequence[str]) -> str | None:
    """The command a command line names when nothing but ``--log-level`` precedes it
    (``--help`` or ``--version`` there describe every command: ``None``)."""
    skip = False
    for arg in line:
        if skip:
            skip = False
        elif arg == "--log-level":
            skip = True
        elif not arg.startswith("--log-level="):
            return None if arg.startswith("-") else arg
    return None


def _command_parser(line: Sequence[str]) -> argparse.ArgumentParser:
    """The parser for ``line``: when the command it names is registered by the command
    module of the same name (``ppdm party serve``: :mod:`ppdm.cli.party`), only that
    module is imported; a node starts without importing every other command's module
    (~10 ms). Anything else gets the whole parser, as :func:`build_parser` makes it."""
    name = _named_command(line)
    if name is not None and name.isidentifier() and name != "main" and not name.startswith("_"):
        try:
            parser, sub = _build([name])
        except ModuleNotFoundError as exc:
            if exc.name != f"ppdm.cli.{name}":
                raise
        else:
            if name in sub.choices:
                return parser
    return build_parser()


#: Command modules whose commands print a JSON document: each gets ``--json`` (text for
#: people without it, see :func:`ppdm.cli._output.render_document`).
DOCUMENT_MODULES = ("dp", "mining", "risk", "simulate")


def _leaves(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return [parser]
    return [leaf for a in subs for p in dict.fromkeys(a.choices.values()) for leaf in _leaves(p)]


def _add_json_flags(parser: argparse.ArgumentParser) -> None:
    for leaf in _leaves(parser):
        handler = leaf.get_default("handler")
        module = getattr(getattr(handler, "func", handler), "__module__", "") or ""
        if module.rpartition(".")[2] not in DOCUMENT_MODULES:
            continue
        if "--json" not in leaf._option_string_actions:
            leaf.add_argument(
                "--json", action="store_true", help="print the JSON document instead of text"
            )


MAX_PARTIES = 1000  # parties of a simulation or partition (each a thread or a file)
MAX_TRIALS = 1_000_000


def _check_common(args: argparse.Namespace) -> None:
    """Checks every command shares, before it reads or writes anything: one-character
    separators, existing output folders and no output path that is a folder, finite
    numbers, a sane party count and non-negative seeds."""
    values = vars(args)
    for name in ("sep", "hierarchy_sep"):
        v = values.get(name)
        if isinstance(v, str) and len(v) != 1:
            raise ConfigError(f"--{name.replace('_', '-')} must be exactly one character")
    for name in ("output", "report", "out", "plot"):
        v = values.get(name)
        if not isinstance(v, str) or not v:
            continue
        path = Path(v)
        if not path.resolve().parent.is_dir():
            raise ConfigError(f"--{name}: folder {path.parent} does not exist")
        if name != "out" and path.is_dir():
            raise ConfigError(f"--{name}: {path} is a folder, not a file")
    for name, v in values.items():
        if isinstance(v, float) and not math.isfinite(v):
            raise ConfigError(f"--{name.replace('_', '-')} must be a finite number")
    parties = values.get("parties")
    if (
        isinstance(parties, int)
        and not isinstance(parties, bool)
        and not 1 <= parties <= MAX_PARTIES
    ):
        raise ConfigError(f"--parties must be in [1, {MAX_PARTIES}]")
    seed = values.get("seed")
    if isinstance(seed, int) and not isinstance(seed, bool) and seed < 0:
        raise ConfigError("--seed must be >= 0")
    trials = values.get("trials")
    if isinstance(trials, int) and not 1 <= trials <= MAX_TRIALS:
        raise ConfigError(f"--trials must be in [1, {MAX_TRIALS}]")
    from ppdm.cli._args import check_arguments

    check_arguments(args)  # input files: regular, readable, bounded first line (_args.py)


def _default_sep(args: argparse.Namespace) -> None:
    """``--sep`` left out: sniffed from the first line of ``--input`` (``;`` or ``,``)."""
    if "sep" in vars(args) and args.sep is None:
        from ppdm.cli._output import sniff_sep

        first = getattr(args, "input", None) or getattr(args, "inputs", None)
        first = first.split(",")[0] if isinstance(first, str) else None
        args.sep = sniff_sep(first)


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush does not fail
    again on a closed pipe (the recipe of the Python docs, ``signal`` module, SIGPIPE)."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a file (e.g. captured by a test)
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ppdm`` script; returns the process exit code."""
    line = list(sys.argv[1:] if argv is None else argv)
    ppdm.cli.command_line = line
    try:
        parser = _command_parser(line)
    finally:
        ppdm.cli.command_line = None
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a one-line argument error (2)
        return int(exc.code) if isinstance(exc.code, int) else 2
    configure_logging(args.log_level)
    handler = getattr(args, "handler", None)
    if handler is None:  # the help of every command, even when the line named one
        ppdm.cli.command_line = line
        try:
            build_parser().print_help(sys.stderr)
        finally:
            ppdm.cli.command_line = None
        return 2
    from ppdm.cli._output import set_json_mode

    set_json_mode(getattr(args, "json", False) is True)
    try:
        _default_sep(args)
        _check_common(args)
        code = int(handler(args) or 0)
        sys.stdout.flush()  # here, not at exit: a closed pipe is caught below
        return code
    except BrokenPipeError:  # `ppdm ... | head`: the reader has what it wanted
        _silence_stdout()
        return 141  # as if killed by SIGPIPE, like other Unix tools
    except PPDMError as exc:
        print(f"ppdm: error: {exc}", file=sys.stderr)
        return 2
    except FileNotFoundError as exc:
        print(f"ppdm: error: file not found: {exc.filename}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ppdm: interrupted", file=sys.stderr)
        return 130
    except MemoryError:
        print("ppdm: error: the input needs more memory than this machine has", file=sys.stderr)
        return 2
    except RecursionError:
        print("ppdm: error: the input is nested too deeply", file=sys.stderr)
        return 2
    except Exception as exc:  # no traceback for any input: one line, details at DEBUG
        log.debug("unexpected error", exc_info=True)
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        name = type(exc).__name__
        if isinstance(exc, IsADirectoryError | NotADirectoryError | PermissionError):
            first = f"{exc.strerror}: {exc.filename}"
        print(f"ppdm: error: {name}: {first}" if first else f"ppdm: error: {name}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
