"""``ppdm risk`` (risk report for a release) and ``ppdm reidentify`` (Aggarwal 2015 ex. 14-16).

``ppdm risk --input RELEASE.csv --qi age,zip [--sensitive disease] [--population POP.csv]
[--public VOTERS.csv] [--hierarchy zip=zip.csv] [--out report.json]`` prints a JSON report:
prosecutor/journalist/marketer re-identification risk, homogeneity and background
knowledge checks, and a linkage attack against a public table.

``ppdm reidentify --n 10000 --known 20 [--values 2] [--trials 200]`` puts the
closed-form collision probability of Aggarwal 2015, exercises 14-15 beside the rate measured by
running the re-identification program (exercise 16) on random databases;
``--transactions FILE`` measures uniqueness of ``--known`` purchased items on a FIMI file.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ppdm.cli._args import bounded_int
from ppdm.errors import ConfigError

#: Largest ``reidentify --n`` and ``--known``, and cells (n x known) one simulated
#: database may have.
MAX_INDIVIDUALS = 100_000_000
MAX_KNOWN = 10_000
MAX_SIMULATED_CELLS = 100_000_000

if TYPE_CHECKING:
    import pandas as pd


__all__ = ["register"]


def _write(doc: Any, out: str | None) -> None:
    text = json.dumps(doc, indent=2, default=str) + "\n"
    if out:
        from ppdm.cli._args import atomic_file

        with atomic_file(out) as tmp:  # whole or not at all
            tmp.write_text(text)
    from ppdm.cli._output import json_mode, render_document

    sys.stdout.write(text if json_mode() else render_document(json.loads(text)) + "\n")


def _read_table(path: str, sep: str) -> pd.DataFrame:
    import pandas as pd

    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"file not found: {path}")
    try:
        return pd.read_csv(p, sep=sep, dtype=str, keep_default_na=False, na_values=[""])
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from exc


def _names(text: str | None) -> list[str]:
    return [c.strip() for c in (text or "").split(",") if c.strip()]


def _run_risk(args: argparse.Namespace) -> int:
    from ppdm.risk import load_hierarchy, risk_report

    release = _read_table(args.input, args.sep)
    qi = _names(args.qi)
    if not qi:
        raise ConfigError("--qi needs at least one column")
    hierarchies = {}
    for spec in args.hierarchy or []:
        attr, sep, path = spec.partition("=")
        if not sep or not attr or not path:
            raise ConfigError(f"--hierarchy expects ATTRIBUTE=FILE, got {spec!r}")
        if not Path(path).is_file():
            raise ConfigError(f"hierarchy file not found: {path}")
        hierarchies[attr] = load_hierarchy(path, sep=args.hierarchy_sep)
    population = _read_table(args.population, args.sep) if args.population else None
    public = _read_table(args.public, args.sep) if args.public else None
    if public is not None and args.public_id:
        if args.public_id not in public.columns:
            raise ConfigError(f"--public-id column {args.public_id!r} not in {args.public}")
        public = public.set_index(args.public_id)
    if not 0 < args.threshold <= 1:
        raise ConfigError("--threshold must be in (0, 1]")
    report = risk_report(
        release,
        qi=qi,
        sensitive=args.sensitive,
        population=population,
        public=public,
        hierarchies=hierarchies or None,
        threshold=args.threshold,
        statements=args.statements,
    )
    report["input"] = str(args.input)
    _write(report, args.out)
    return 0


def _run_reidentify(args: argparse.Namespace) -> int:
    from ppdm.risk import (
        collision_bound,
        collision_probability,
        simulate_reidentification,
        transaction_uniqueness,
    )

    if args.known < 0 or args.values < 2:
        raise ConfigError("--known must be >= 0 and --values >= 2")
    seed = args.seed
    if args.transactions:
        path = Path(args.transactions)
        if not path.is_file():
            raise ConfigError(f"file not found: {path}")
        with path.open() as fh:
            baskets = [[int(x) for x in line.split()] for line in fh if line.strip()]
        share = transaction_uniqueness(baskets, args.known, targets=args.trials, rng=seed)
        _write(
            {
                "transactions": str(path),
                "records": len(baskets),
                "known_items": args.known,
                "targets": args.trials,
                "unique_share": share,
            },
            args.out,
        )
        return 0
    if args.n is None or args.n < 0:
        raise ConfigError("--n (number of other individuals) is required and >= 0")
    if args.trials > 0 and (args.n + 1) * max(args.known, 1) > MAX_SIMULATED_CELLS:
        raise ConfigError(
            f"--n x --known above {MAX_SIMULATED_CELLS:,} values per simulated database: "
            "lower them, or pass --trials 0 for the closed forms only"
        )
    try:
        doc: dict[str, Any] = {
            "n": args.n,
            "known": args.known,
            "values": args.values,
            "closed_form_collision": collision_probability(args.n, args.known, args.values),
            "union_bound": collision_bound(args.n, args.known, args.values),
        }
    except OverflowError:
        raise ConfigError(
            "--values to the power --known is beyond floating point: lower them"
        ) from None
    if args.trials > 0:
        sim = simulate_reidentification(
            args.n, args.known, args.values, trials=args.trials, rng=seed
        )
        doc["simulation"] = sim.to_dict()
    _write(doc, args.out)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "risk",
        help="re-identification and attribute-disclosure risk report for a release",
        description="Prosecutor/journalist/marketer risk, homogeneity and background-"
        "knowledge checks, and a linkage attack against an identified public table.",
    )
    p.add_argument("--input", required=True, help="the released table (CSV)")
    p.add_argument("--qi", required=True, help="quasi-identifier columns, comma-separated")
    p.add_argument("--sensitive", help="sensitive column (attribute disclosure checks)")
    p.add_argument("--population", help="population table for journalist/marketer risk")
    p.add_argument("--public", help="identified public table for a linkage attack")
    p.add_argument("--public-id", help="column naming the individuals of --public")
    p.add_argument(
        "--sep",
        default=None,
        help="CSV separator (default: sniffed from the input, ';' or ',')",
    )
    p.add_argument(
        "--hierarchy",
        action="append",
        metavar="ATTR=FILE",
        help="ARX hierarchy of a quasi-identifier (repeatable)",
    )
    p.add_argument("--hierarchy-sep", default=";", help="hierarchy CSV separator (default ';')")
    p.add_argument("--threshold", type=float, default=0.2, help="risk threshold tau (0.2)")
    p.add_argument(
        "--statements", type=int, default=1, help="negative facts the attacker knows (1)"
    )
    p.add_argument("--output", dest="out", help="also write the JSON document to this file")
    p.add_argument("--out", dest="out", help=argparse.SUPPRESS)  # the old spelling
    p.set_defaults(handler=_run_risk)

    q = subparsers.add_parser(
        "reidentify",
        help="re-identification chance when B attributes of a person are known",
        description="Closed form 1-(1-R^-B)^n and bound n/R^B beside a simulation.",
    )
    q.add_argument("--n", type=bounded_int(0, MAX_INDIVIDUALS), help="number of other individuals")
    q.add_argument(
        "--known",
        type=bounded_int(0, MAX_KNOWN),
        required=True,
        help="known attributes/items B",
    )
    q.add_argument(
        "--values", type=bounded_int(2, 2**62), default=2, help="values per attribute R (2)"
    )
    q.add_argument("--trials", type=int, default=200, help="simulated databases/targets")
    q.add_argument("--transactions", help="FIMI file: measure uniqueness of B known items")
    q.add_argument("--seed", type=int, help="seed (reproducible simulation)")
    q.add_argument("--output", dest="out", help="also write the JSON document to this file")
    q.add_argument("--out", dest="out", help=argparse.SUPPRESS)  # the old spelling
    q.set_defaults(handler=_run_reidentify)
