"""``ppdm evaluate``: privacy-utility trade-off of one method over a parameter range.

Example (the ESGRO setting of Adult: education, salary class, sex, race)::

    ppdm evaluate --input ../shared/data/adult/adult.csv --sep ';' \\
        --qi education,salary-class,sex,race --sensitive occupation \\
        --method rr-both --param l --values 2,3,4,5 --out DIR

writes ``DIR/results.csv``, ``DIR/results.json`` and ``DIR/plot.png``
(:mod:`ppdm.perturb.evaluate`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ppdm.cli._args import bounded_int
from ppdm.errors import ConfigError


def _values(text: str) -> list[float]:
    try:
        vals = [float(v) for v in text.split(",") if v.strip()]
    except ValueError as exc:
        raise ConfigError(f"--values must be comma-separated numbers, not {text!r}") from exc
    if not vals:
        raise ConfigError("--values is empty")
    return vals


def _evaluate(args: argparse.Namespace) -> int:
    import pandas as pd

    from ppdm.perturb.evaluate import METHODS, evaluate, write_results
    from ppdm.progress import RichProgress

    methods = [m.strip() for m in args.method.split(",") if m.strip()]
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ConfigError(
            f"unknown method(s) {', '.join(unknown)}; choose from {', '.join(METHODS)}"
        )
    expected = {"ra": "lambda"}
    for m in methods:
        if args.param != expected.get(m, "l"):
            raise ConfigError(f"method {m} takes --param {expected.get(m, 'l')}, not {args.param}")
    path = Path(args.input)
    if not path.is_file():
        raise ConfigError(f"input file not found: {path}")
    table = pd.read_csv(path, sep=args.sep, dtype=str, keep_default_na=False)
    qi = [c.strip() for c in args.qi.split(",") if c.strip()]
    hierarchies = None
    if args.hierarchies:
        from ppdm.anonymize.hierarchy import load_hierarchies

        hierarchies = load_hierarchies(args.hierarchies, qi)
    rows = []
    progress = RichProgress()
    for m in methods:
        rows.extend(
            evaluate(
                table,
                qi=qi,
                sensitive=args.sensitive,
                method=m,
                values=_values(args.values),
                hierarchies=hierarchies,
                queries=args.queries,
                estimator=args.estimator,
                rng=args.seed,
                progress=progress,
            )
        )
    paths = write_results(rows, args.out, title=f"{', '.join(methods)} on {path.name}")
    for r in rows:
        print(
            f"{r.method:12s} {r.param}={r.value:g}  KL {r.kl:.4f}  KL(q||p) {r.kl_reverse:.4f}  chi2 {r.chi2:.4f}  "
            f"cube err {r.cube_query_error:.3f}  rules {r.rule_recovery:.2f}  "
            f"risk {r.max_risk:.3f}  {r.seconds:.2f}s"
        )
    print(f"wrote {paths['csv']}, {paths['json']}, {paths['png']}", file=sys.stderr)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``ppdm evaluate``."""
    p = subparsers.add_parser(
        "evaluate",
        help="privacy-utility evaluation (CSV, JSON, PNG)",
        description="Run one or more release methods (randomized response, anatomy, "
        "l-diversity, RA) over a range of one parameter on a table and measure privacy "
        "(risk) and utility of every release; writes DIR/results.csv, DIR/results.json "
        "and the figure DIR/plot.png (one panel per measure against the parameter, and "
        "risk against utility).",
    )
    p.add_argument("--input", required=True, help="CSV file of the original records")
    p.add_argument(
        "--sep",
        default=None,
        help="CSV separator (default: sniffed from the input, ';' or ',')",
    )
    p.add_argument("--qi", required=True, help="comma-separated quasi-identifiers")
    p.add_argument("--sensitive", required=True)
    p.add_argument(
        "--method",
        required=True,
        help="rr-both, rr-s, rr-qi, anatomy, l-diversity or ra (comma-separated)",
    )
    p.add_argument("--param", default="l", choices=["l", "lambda"])
    p.add_argument("--values", required=True, help="comma-separated parameter values")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--hierarchies", help="folder of *_hierarchy_<attr>.csv (l-diversity)")
    p.add_argument(
        "--queries", type=bounded_int(1, 1_000_000), default=1000, help="random count queries"
    )
    p.add_argument(
        "--estimator",
        choices=["inverse", "em"],
        default="inverse",
        help="RR reconstruction: P^-1 lambda or maximum likelihood",
    )
    p.add_argument("--seed", type=int, help="reproducible randomness (experiments only)")
    p.set_defaults(handler=_evaluate)


__all__ = ["register"]
