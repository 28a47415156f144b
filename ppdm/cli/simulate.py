"""``ppdm simulate JOB ...``: run a job for all parties on the in-process network.

Job-specific sub-commands come from any :mod:`ppdm.cli` module that defines
``register_simulate(subparsers)``; this module adds ``secure-sum``.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import ppdm.cli
from ppdm.cli._output import write_json
from ppdm.errors import ConfigError
from ppdm.jobs.document import simulate_job
from ppdm.jobs.registry import PartyContext

DEFAULT_NAMES = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi"]


def party_names(n: int) -> list[str]:
    """Default party names for ``n`` simulated parties."""
    if n < 1:
        raise ConfigError("need at least one party")
    if n <= len(DEFAULT_NAMES):
        return DEFAULT_NAMES[:n]
    return [f"party{i}" for i in range(1, n + 1)]


def simulate_files(
    job: str,
    base_dir: Path,
    key: str,
    files: Mapping[str, str],
    params: Mapping[str, Any],
    *,
    timeout: float = 120.0,
) -> dict[str, Any]:
    """Run ``job`` in process for the parties of ``files``, each reading its own data file
    ``files[party]`` (its ``[data] key`` entry, relative to ``base_dir``); the first
    party's context draws the progress bar on stderr."""
    from ppdm.progress import RichProgress

    progress = RichProgress()
    contexts = {
        name: PartyContext(
            name=name,
            settings={"data": {key: file}},
            base_dir=base_dir,
            progress=progress if i == 0 else None,
        )
        for i, (name, file) in enumerate(files.items())
    }
    try:
        return simulate_job(job, contexts, params, timeout=timeout)
    finally:
        progress.finish()


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "simulate",
        help="run a job for all parties in one process (in-process network)",
        description="Run a job for all parties in one process on the in-process network.",
    )
    jobs = parser.add_subparsers(dest="job", metavar="JOB")
    ss = jobs.add_parser(
        "secure-sum",
        help="secure sum of one private integer per party",
        description="Secure sum (ring protocol) of one private integer per party.",
    )
    ss.add_argument(
        "--values",
        required=True,
        help="comma-separated private values, one per party (e.g. 3,5,9)",
    )
    ss.add_argument("--modulus", type=int, default=None, help="ring modulus (default 2^128)")
    ss.add_argument("--timeout", type=float, default=60.0, help="receive timeout in seconds")
    ss.add_argument("--output", help="also write the JSON document to this file")
    ss.set_defaults(handler=_secure_sum)
    for info in sorted(pkgutil.iter_modules(ppdm.cli.__path__), key=lambda m: m.name):
        if info.name in ("main", "simulate") or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"ppdm.cli.{info.name}")
        hook = getattr(module, "register_simulate", None)
        if hook is not None:
            hook(jobs)
    parser.set_defaults(handler=lambda args: _no_job(parser))


def _no_job(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _secure_sum(args: argparse.Namespace) -> int:
    try:
        values = [int(v) for v in args.values.split(",") if v.strip()]
    except ValueError as exc:
        raise ConfigError(f"--values must be comma-separated integers: {args.values!r}") from exc
    if not values:
        raise ConfigError("--values needs at least one integer")
    names = party_names(len(values))
    contexts = {
        name: PartyContext(name=name, settings={"inputs": {"secure_sum": v}})
        for name, v in zip(names, values, strict=True)
    }
    doc = simulate_job("secure-sum", contexts, {"modulus": args.modulus}, timeout=args.timeout)
    write_json(doc, args.output)
    return 0
