"""Issue 25, item 5: ``ppdm party serve`` imports only what it serves with.

The command line imports the one command module that registers ``party`` (not every
command's module); the node imports the job registry, the jobs' declared leakage, the
disclosure audit's exact arithmetic (``fractions``), the CSV reader, the IDNA codec, the
``[data]`` sources' checks (``ppdm.sources``), a job's rules and decision, signed ledger
heads and the ledger's checks only when something needs them, not before it serves. Checked
by the modules a fresh interpreter running the real command has loaded when it logs
"serving", not by timing (the speed goal is printed by ``python benchmarks/startup.py``).
"""

from __future__ import annotations

import argparse
import json
import pkgutil
import subprocess
import sys
import tomllib
from typing import Any

import pytest

import ppdm.cli
from ppdm.cli.main import _command_parser, build_parser
from ppdm.parties.consortium import init_consortium
from ppdm.testbed.consortia import free_ports, kill_tied, spawn_tied

#: The serve command as ``benchmarks/startup.py`` runs it; at the "serving" record the
#: node's modules are printed as one JSON line (the node serves until killed).
_SERVE = """
import json, logging, sys

class AtServing(logging.Handler):
    def emit(self, record):
        if "serving on" in record.getMessage():
            print(json.dumps(sorted(sys.modules)), flush=True)

logging.getLogger("ppdm").addHandler(AtServing())
from ppdm.cli.main import main
sys.exit(main(["party", "serve", sys.argv[1]]))
"""

#: Not imported by a node before it serves: the numerical and data libraries, the job
#: runners' layers, and what the start itself used to import without needing it.
NOT_BEFORE_SERVING = (
    "numpy",
    "pandas",
    "scipy",
    "pyarrow",
    "duckdb",
    "matplotlib",
    "sklearn",
    "prometheus_client",
    "multiprocessing",
    "ctypes",  # the allocator's tuning for the jobs' frames, once the node serves
    "ppdm.mining",
    "ppdm.anonymize",
    "ppdm.protocols",
    "ppdm.compute",
    "ppdm.workers",
    "ppdm.console",
    "ppdm.hiding",
    "ppdm.jobs",  # the job registry, at the first job proposed
    "fractions",  # the disclosure audit's exact rank, at the first audited job
    "csv",  # a job's data file header, at the first job that reads one
    "encodings.idna",  # the port check on an address literal needs no codec
    "ppdm.sources",  # the [data] entries' check, at start when there are entries
    "ppdm.service.policy_decision",  # a job's rules and the decision, at the first job
    "ppdm.service.profiles",  # the jobs' declared leakage, at the first job proposed
    "ppdm.service.statement",
    "ppdm.service.input_versions",
    "ppdm.service.ledger_heads",  # signing and checking heads, at the first job
    "ppdm.service.ledger_verify",  # the ledger's checks, when asked for
)


@pytest.fixture(scope="module")
def serving_modules(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    folder = tmp_path_factory.mktemp("startup")
    init_consortium(folder, ["alice", "bob"], ports=free_ports(2))
    settings = folder / "alice.toml"
    assert tomllib.loads(settings.read_text())["data"] == {}  # the table, with no entries
    proc = spawn_tied(
        [sys.executable, "-c", _SERVE, str(settings)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        line = proc.stdout.readline()  # the node's start is bounded by pytest's timeout
    finally:
        kill_tied(proc)
    assert line, proc.stderr.read()  # the node did not serve: its error
    return set(json.loads(line))


def test_the_probe_saw_a_serving_node(serving_modules: set[str]) -> None:
    assert {"grpc", "cryptography.x509", "ppdm.service.node", "ppdm.cli.party"} <= serving_modules


@pytest.mark.parametrize("module", NOT_BEFORE_SERVING)
def test_a_node_serves_before_importing(serving_modules: set[str], module: str) -> None:
    assert not {m for m in serving_modules if m == module or m.startswith(f"{module}.")}


def test_serve_imports_only_the_party_command_module(serving_modules: set[str]) -> None:
    commands = {m for m in serving_modules if m.startswith("ppdm.cli.")}
    public = {m for m in commands if not m.rpartition(".")[2].startswith("_")}
    assert public == {"ppdm.cli.main", "ppdm.cli.party"}


def _command_modules() -> list[str]:
    return sorted(
        m.name
        for m in pkgutil.iter_modules(ppdm.cli.__path__)
        if m.name != "main" and not m.name.startswith("_")
    )


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction[Any]:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


@pytest.mark.parametrize("name", _command_modules())
def test_one_command_module_parses_as_the_whole_parser(name: str) -> None:
    """A command line that names its module's command gets that command's own parser,
    with the same help (its arguments) as in the parser of every command."""
    line = [name, "--help"]
    ppdm.cli.command_line = line
    try:
        fast = _command_parser(line)
        full = build_parser()
    finally:
        ppdm.cli.command_line = None
    fast_commands, full_commands = _subparsers(fast).choices, _subparsers(full).choices
    assert set(fast_commands) <= set(full_commands)
    if name not in full_commands:  # a module whose commands have other names: every one
        assert set(fast_commands) == set(full_commands)
        return
    assert fast_commands[name].format_help() == full_commands[name].format_help()


@pytest.mark.parametrize(
    "line",
    [
        ["--help"],
        ["--version", "party"],
        ["-h", "party"],
        ["--log-level", "DEBUG"],
        ["no-such-command"],
        ["main"],
        ["_args"],
    ],
)
def test_lines_naming_no_command_module_get_every_command(line: list[str]) -> None:
    ppdm.cli.command_line = line
    try:
        fast = _command_parser(line)
        full = build_parser()
    finally:
        ppdm.cli.command_line = None
    assert list(_subparsers(fast).choices) == list(_subparsers(full).choices)
    assert fast.format_help() == full.format_help()


@pytest.mark.parametrize(
    "line",
    [
        ["party", "serve", "alice.toml"],
        ["--log-level", "DEBUG", "party", "serve", "a.toml", "--log-format", "json"],
        ["--log-level=ERROR", "party", "health", "--settings", "a.toml", "--self"],
    ],
)
def test_the_party_command_parses_as_in_the_whole_parser(line: list[str]) -> None:
    ppdm.cli.command_line = line
    try:
        fast = _command_parser(line)
        full = build_parser()
    finally:
        ppdm.cli.command_line = None
    assert list(_subparsers(fast).choices) == ["party"]
    assert vars(fast.parse_args(line)) == vars(full.parse_args(line))
