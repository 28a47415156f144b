"""``ppdm simulate JOB ...``: run a job for all parties on the in-process network.

Job-specific sub-commands come from any :mod:`ppdm.cli` module that defines
``register_simulate(subparsers)``; this module adds ``secure-sum`` and ``psi-align``, and
every other job of the registry (:mod:`ppdm.jobs.registry`) gets the generic form

    ppdm simulate JOB [--parties N] [--param KEY=VALUE ...] [--input PARTY.KEY=JSON ...]
                      [--data KEY=FILE,FILE,...] [--output FILE]

``--param`` are the job's public parameters (as in ``ppdm job run``), ``--input`` a
party's private input (its ``[inputs]`` table, e.g. ``--input alice.set_union='["a"]'``)
and ``--data`` one data file per party for the ``[data]`` entry ``KEY``, in party order.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import pkgutil
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ppdm.cli
from ppdm.cli._output import capture_documents, write_json
from ppdm.errors import ConfigError
from ppdm.jobs.registry import PartyContext

if TYPE_CHECKING:
    from ppdm.parties.local import LinkModel

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
    link: LinkModel | None = None,
) -> dict[str, Any]:
    """Run ``job`` in process for the parties of ``files``, each reading its own data file
    ``files[party]`` (its ``[data] key`` entry, relative to ``base_dir``); the first
    party's context draws the progress bar on stderr. ``link``: an emulated WAN link."""
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
    from ppdm.jobs.document import simulate_job

    try:
        return simulate_job(job, contexts, params, timeout=timeout, link=link)
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
    _register_psi_align(jobs)
    for info in sorted(pkgutil.iter_modules(ppdm.cli.__path__), key=lambda m: m.name):
        if info.name in ("main", "simulate") or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"ppdm.cli.{info.name}")
        hook = getattr(module, "register_simulate", None)
        if hook is not None:
            hook(jobs)
    _register_generic(jobs)
    for job_parser in jobs.choices.values():
        add_plot_argument(job_parser)
        add_link_arguments(job_parser)
    parser.set_defaults(handler=lambda args: _no_job(parser))


def add_link_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--link-delay`` and ``--link-bandwidth`` (WAN emulation on the in-process
    network, :class:`ppdm.parties.local.LinkModel`); the handler passes
    :func:`link_from_args` to :func:`simulate_job`."""
    if any(a.dest == "link_delay" for a in parser._actions):
        return
    parser.add_argument(
        "--link-delay",
        metavar="TIME",
        help="emulate a WAN: one-way delay of every message (e.g. 10ms; RTT is twice this)",
    )
    parser.add_argument(
        "--link-bandwidth",
        metavar="RATE",
        help="emulate a WAN: bits per second of each directed link (e.g. 100mbit, 1gbit)",
    )


def link_from_args(args: argparse.Namespace) -> LinkModel | None:
    """The emulated link of ``--link-delay``/``--link-bandwidth`` (``None`` without them)."""
    delay = getattr(args, "link_delay", None)
    bandwidth = getattr(args, "link_bandwidth", None)
    if delay is None and bandwidth is None:
        return None
    from ppdm.parties.local import LinkModel

    return LinkModel.parse(delay, bandwidth)


def add_plot_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--plot FILE`` to a command that writes a job document: the command's handler
    is wrapped so that the document it writes is also drawn (per-step bytes, messages and
    time of every party, :func:`ppdm.cli._plots.plot_job_costs`)."""
    inner = parser.get_default("handler")
    if inner is None or any(a.dest == "plot" for a in parser._actions):
        return
    parser.add_argument(
        "--plot",
        metavar="FILE",
        help="also draw the bytes, messages and time of every protocol step (PNG)",
    )
    parser.set_defaults(handler=functools.partial(_with_plot, inner))


def _with_plot(inner: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    plot = getattr(args, "plot", None)
    if not plot:
        return int(inner(args) or 0)
    with capture_documents() as docs:
        code = int(inner(args) or 0)
    jobs = [d for d in docs if isinstance(d, dict) and "parties" in d]
    if jobs:
        from ppdm.cli._plots import plot_job_costs

        plot_job_costs(jobs[-1], plot)
        print(f"wrote {plot}", file=sys.stderr)
    return code


def _register_psi_align(jobs: argparse._SubParsersAction) -> None:
    psi = jobs.add_parser(
        "psi-align",
        help="private record alignment: the intersection of the parties' id columns",
        description=(
            "Private set intersection of the parties' record ids (KKRT16 OPRF over IKNP, "
            "or the EC path): every party learns the common ids in a common order."
        ),
    )
    source = psi.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--inputs", help="comma-separated records CSV files, one per party (with the id column)"
    )
    source.add_argument("--generate", type=int, help="generate this many ids per party")
    psi.add_argument("--parties", type=int, default=2, help="with --generate: party count")
    psi.add_argument("--overlap", type=float, default=0.5, help="with --generate: common share")
    psi.add_argument("--seed", type=int, default=1, help="with --generate: id offset")
    psi.add_argument("--id-column", default="record_id", help="the id column of the files")
    psi.add_argument(
        "--sep",
        default=None,
        help="CSV field separator (default: sniffed from the input, ';' or ',')",
    )
    psi.add_argument("--method", default="oprf", choices=["oprf", "ec"])
    psi.add_argument("--timeout", type=float, default=120.0, help="receive timeout in seconds")
    psi.add_argument("--output", help="also write the JSON document to this file")
    psi.set_defaults(handler=_psi_align)


def _psi_align(args: argparse.Namespace) -> int:
    params: dict[str, Any] = {"method": args.method, "id_column": args.id_column, "sep": args.sep}
    if args.inputs is not None:
        paths = [f.strip() for f in args.inputs.split(",") if f.strip()]
        if len(paths) < 2:
            raise ConfigError("--inputs needs at least two files")
        missing = [f for f in paths if not Path(f).is_file()]
        if missing:
            raise ConfigError(f"no such file: {missing[0]}")
        files = dict(zip(party_names(len(paths)), paths, strict=True))
        doc = simulate_files(
            "psi-align",
            Path.cwd(),
            "records",
            files,
            params,
            timeout=args.timeout,
            link=link_from_args(args),
        )
    else:
        if not 2 <= args.parties <= 64 or not 0 <= args.generate <= 10_000_000:
            raise ConfigError("need --parties in [2, 64] and --generate in [0, 10000000]")
        if not 0.0 <= args.overlap <= 1.0:
            raise ConfigError("--overlap must lie in [0, 1]")
        params.update(generate_n=args.generate, overlap=args.overlap, seed=args.seed)
        from ppdm.jobs.document import simulate_job

        contexts = {name: PartyContext(name=name) for name in party_names(args.parties)}
        doc = simulate_job(
            "psi-align", contexts, params, timeout=args.timeout, link=link_from_args(args)
        )
    write_json(doc, args.output)
    return 0


def _register_generic(jobs: argparse._SubParsersAction) -> None:
    """``ppdm simulate JOB`` for every registered job without its own sub-command."""
    line = ppdm.cli.command_line
    if line is not None and "simulate" not in line:
        return  # not reachable from this command line: keep the start light
    from ppdm.jobs.registry import get_job, job_names

    for name in job_names():
        if name in jobs.choices:
            continue
        spec = get_job(name)
        known = ", ".join(f"{k}={v!r}" for k, v in sorted(spec.defaults.items())) or "none"
        cmd = jobs.add_parser(
            name,
            help=spec.summary,
            description=f"{spec.summary[:1].upper()}{spec.summary[1:]}, every party on the "
            f"in-process network. Parameters and their defaults: {known}.",
        )
        cmd.add_argument("--parties", type=int, default=None, help="party count (default 3)")
        cmd.add_argument(
            "--param",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="job parameter; VALUE is read as JSON if it parses, else as a string",
        )
        cmd.add_argument(
            "--input",
            action="append",
            default=[],
            metavar="PARTY.KEY=JSON",
            help="a party's private input (its [inputs] table), e.g. alice.secure_sum=3",
        )
        cmd.add_argument(
            "--data",
            action="append",
            default=[],
            metavar="KEY=FILE,FILE,...",
            help="one data file per party (in party order) for the [data] entry KEY",
        )
        cmd.add_argument("--timeout", type=float, default=120.0, help="receive timeout (s)")
        cmd.add_argument("--output", help="also write the JSON document to this file")
        cmd.set_defaults(handler=functools.partial(_generic, name))


def _generic_contexts(args: argparse.Namespace) -> dict[str, PartyContext]:
    """The parties' contexts of the generic form: names, [inputs] and [data] tables."""
    import json

    data: dict[str, list[str]] = {}
    for item in args.data:
        key, sep, files = item.partition("=")
        paths = [f.strip() for f in files.split(",") if f.strip()]
        if not sep or not key.strip() or not paths:
            raise ConfigError(f"--data expects KEY=FILE,FILE,..., got {item!r}")
        missing = [f for f in paths if not Path(f).is_file()]
        if missing:
            raise ConfigError(f"no such file: {missing[0]}")
        data[key.strip()] = paths
    counts = {len(v) for v in data.values()}
    if len(counts) > 1:
        raise ConfigError("every --data entry needs the same number of files (one per party)")
    n = args.parties if args.parties is not None else (counts.pop() if counts else 3)
    if not 2 <= n <= 64:
        raise ConfigError("need --parties in [2, 64]")
    if data and any(len(v) != n for v in data.values()):
        raise ConfigError(f"--data needs one file per party ({n})")
    names = party_names(n)
    inputs: dict[str, dict[str, Any]] = {p: {} for p in names}
    for item in args.input:
        target, sep, raw = item.partition("=")
        party, dot, key = target.partition(".")
        if not sep or not dot or not key:
            raise ConfigError(f"--input expects PARTY.KEY=JSON, got {item!r}")
        if party not in inputs:
            raise ConfigError(f"--input names {party!r}, not one of {', '.join(names)}")
        try:
            inputs[party][key] = json.loads(raw)
        except json.JSONDecodeError:
            inputs[party][key] = raw
    return {
        p: PartyContext(
            name=p,
            settings={"inputs": inputs[p], "data": {k: v[i] for k, v in data.items()}},
            base_dir=Path.cwd(),
        )
        for i, p in enumerate(names)
    }


def _generic(name: str, args: argparse.Namespace) -> int:
    from ppdm.cli.job import parse_params
    from ppdm.jobs.document import simulate_job
    from ppdm.jobs.registry import get_job

    if not args.timeout > 0:
        raise ConfigError("--timeout must be positive")
    params = get_job(name).params(parse_params(args.param))  # unknown names: one line
    contexts = _generic_contexts(args)
    doc = simulate_job(name, contexts, params, timeout=args.timeout, link=link_from_args(args))
    write_json(doc, args.output)
    return 0


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
    from ppdm.jobs.document import simulate_job

    doc = simulate_job(
        "secure-sum",
        contexts,
        {"modulus": args.modulus},
        timeout=args.timeout,
        link=link_from_args(args),
    )
    write_json(doc, args.output)
    return 0
