"""``ppdm simulate JOB ...``: run a job for all parties on the in-process network.

Job-specific sub-commands come from any :mod:`ppdm.cli` module that defines
``register_simulate(subparsers)``; this module adds ``secure-sum``.
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
    psi.add_argument("--sep", default=",", help="CSV field separator")
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
