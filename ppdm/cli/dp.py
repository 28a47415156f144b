"""``ppdm dp count|histogram|sum|mean|median``: one differentially private query on a CSV.

Examples::

    ppdm dp count --input adult.csv --sep ';' --epsilon 0.5
    ppdm dp histogram --input adult.csv --sep ';' --column sex --categories Male,Female \\
        --epsilon 1
    ppdm dp mean --input adult.csv --sep ';' --column age --lower 17 --upper 90 --epsilon 1
    ppdm dp median --input adult.csv --sep ';' --column age --candidates 17:91 --epsilon 1

Noise comes from ``os.urandom`` unless ``--seed`` is given (experiments only). The JSON
output names the mechanism and the ``(epsilon, delta)`` spent.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ppdm.cli._output import write_json
from ppdm.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np


__all__ = ["register"]


def _floats(text: str, what: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise ConfigError(f"{what} must be comma-separated numbers: {text!r}") from exc


def _candidates(text: str) -> np.ndarray:
    import numpy as np

    if ":" in text:
        parts = text.split(":")
        try:
            nums = [float(p) for p in parts]
        except ValueError as exc:
            raise ConfigError(f"--candidates START:STOP[:STEP], got {text!r}") from exc
        step = nums[2] if len(nums) > 2 else 1.0
        if step <= 0 or len(nums) not in (2, 3):
            raise ConfigError(f"--candidates START:STOP[:STEP], got {text!r}")
        return np.arange(nums[0], nums[1], step)
    return np.asarray(_floats(text, "--candidates"))


MAX_EPSILON = 100.0


def _run(args: argparse.Namespace) -> int:
    import numpy as np
    import pandas as pd

    from ppdm.anonymize.dp import (
        BudgetAccountant,
        dp_count,
        dp_histogram,
        dp_mean,
        dp_median,
        dp_sum,
    )

    path = Path(args.input)
    if not path.is_file():
        raise ConfigError(f"file not found: {path}")
    if args.epsilon > MAX_EPSILON:
        raise ConfigError(
            f"--epsilon above {MAX_EPSILON:g} gives no privacy (and the exact samplers "
            "would need astronomically precise arithmetic)"
        )
    if not args.epsilon > 0:
        raise ConfigError("--epsilon must be positive")
    table = pd.read_csv(path, sep=args.sep, dtype=str, keep_default_na=False, na_values=[""])
    query = args.query
    if query != "count" and not args.column:
        raise ConfigError(f"dp {query} needs --column")
    if args.column and args.column not in table.columns:
        raise ConfigError(f"column {args.column!r} not in {path}")
    column: pd.Series = table[args.column] if args.column else pd.Series(dtype=object)
    acct = BudgetAccountant(args.epsilon, args.delta)
    common: dict[str, Any] = {"epsilon": args.epsilon, "accountant": acct, "rng": args.seed}
    numeric = query in ("sum", "mean", "median")
    values = pd.Series(dtype=np.float64)
    if numeric:
        values = pd.to_numeric(column, errors="coerce")
        if values.isna().any():
            raise ConfigError(f"column {args.column!r} has non-numeric values")
    try:
        if query == "count":
            result: Any = dp_count(
                column.notna().to_numpy() if args.column else table,
                delta=args.delta,
                mechanism=args.mechanism,
                **common,
            )
        elif query == "histogram":
            if (args.categories is None) == (args.bins is None):
                raise ConfigError("dp histogram needs exactly one of --categories and --bins")
            data = column if args.categories else pd.to_numeric(column, errors="coerce")
            hist = dp_histogram(
                data,
                categories=[c.strip() for c in args.categories.split(",")]
                if args.categories
                else None,
                bins=_floats(args.bins, "--bins") if args.bins else None,
                delta=args.delta,
                mechanism=args.mechanism,
                non_negative=args.non_negative,
                **common,
            )
            result = {str(k): int(v) for k, v in hist.items()}
        elif query in ("sum", "mean"):
            if args.lower is None or args.upper is None:
                raise ConfigError(f"dp {query} needs --lower and --upper (public bounds)")
            fn = dp_sum if query == "sum" else dp_mean
            result = fn(
                values,
                lower=args.lower,
                upper=args.upper,
                delta=args.delta,
                mechanism=args.mechanism,
                **common,
            )
        else:
            if not args.candidates:
                raise ConfigError("dp median needs --candidates (public)")
            cands = _candidates(args.candidates).tolist()
            result = dp_median(values, candidates=cands, **common)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    doc = {
        "query": query,
        "column": args.column,
        "mechanism": "exponential" if query == "median" else args.mechanism,
        "result": result,
        "budget": acct.summary(),
        "randomness": "seeded (not for release)" if args.seed is not None else "os.urandom",
    }
    write_json(doc, args.out)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "dp",
        help="one differentially private query (count, histogram, sum, mean, median)",
        description="Differentially private queries with exact discrete noise (discrete Laplace or "
        "Gaussian, no floating-point leaks).",
    )
    p.add_argument("query", choices=["count", "histogram", "sum", "mean", "median"])
    p.add_argument("--input", required=True, help="CSV file")
    p.add_argument("--sep", default=",", help="CSV separator (default ',')")
    p.add_argument("--column", help="column to query")
    p.add_argument("--epsilon", type=float, required=True)
    p.add_argument("--delta", type=float, default=0.0, help="for --mechanism gaussian")
    p.add_argument(
        "--mechanism",
        choices=["laplace", "discrete_laplace", "gaussian"],
        default="laplace",
        help="laplace (default: discrete Laplace / snapping), discrete_laplace, gaussian",
    )
    p.add_argument("--categories", help="histogram: public categories, comma-separated")
    p.add_argument("--bins", help="histogram: public numeric bin edges, comma-separated")
    p.add_argument("--non-negative", action="store_true", help="clip noisy counts at 0")
    p.add_argument("--lower", type=float, help="sum/mean: public lower bound")
    p.add_argument("--upper", type=float, help="sum/mean: public upper bound")
    p.add_argument("--candidates", help="median: START:STOP[:STEP] or a comma list")
    p.add_argument("--seed", type=int, help="seed (reproducible experiments only)")
    p.add_argument("--out", help="also write the JSON to this file")
    p.set_defaults(handler=_run)
