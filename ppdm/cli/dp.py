"""``ppdm dp count|histogram|sum|mean|median``: one differentially private query on a CSV.

Examples::

    ppdm dp count --input adult.csv --sep ';' --epsilon 0.5
    ppdm dp histogram --input adult.csv --sep ';' --column sex --categories Male,Female \\
        --epsilon 1
    ppdm dp mean --input adult.csv --sep ';' --column age --lower 17 --upper 90 --epsilon 1
    ppdm dp median --input adult.csv --sep ';' --column age --candidates 17:91 --epsilon 1
    ppdm dp budget --input adult.csv --set 5 --delta 1e-5

Noise comes from ``os.urandom`` unless ``--seed`` is given (experiments only). The JSON
output names the mechanism and the ``(epsilon, delta)`` spent.

Every data set has one privacy budget that persists between calls
(:mod:`ppdm.dp.budget`: a budget file in the state folder, or
``--budget-file``): a query that would exceed what is left is refused (exit code 1) and
spends nothing. ``ppdm dp budget`` shows the total, what was spent and by which queries;
``--set EPS [--delta D]`` changes the total.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ppdm.cli._args import bounded_int, finite_float
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


#: Most candidates a median may choose among (each is scored against the data).
MAX_CANDIDATES = 1_000_000


def _candidates(text: str) -> np.ndarray:
    """``--candidates``: ``START:STOP[:STEP]`` or a comma list of finite numbers, at most
    :data:`MAX_CANDIDATES` of them (counted before any array is made)."""
    import math

    import numpy as np

    if ":" in text:
        parts = text.split(":")
        try:
            nums = [float(p) for p in parts]
        except ValueError as exc:
            raise ConfigError(f"--candidates START:STOP[:STEP], got {text!r}") from exc
        step = nums[2] if len(nums) > 2 else 1.0
        if step <= 0 or len(nums) not in (2, 3) or not all(math.isfinite(v) for v in nums):
            raise ConfigError(f"--candidates START:STOP[:STEP] of finite numbers, got {text!r}")
        count = math.ceil((nums[1] - nums[0]) / step)
        if not 1 <= count <= MAX_CANDIDATES:
            raise ConfigError(
                f"--candidates {text!r} gives {max(count, 0):,} candidates "
                f"(1 to {MAX_CANDIDATES:,})"
            )
        cands = np.arange(nums[0], nums[1], step)
    else:
        cands = np.asarray(_floats(text, "--candidates"))
        if len(cands) > MAX_CANDIDATES:
            raise ConfigError(f"--candidates: more than {MAX_CANDIDATES:,} values")
    if not np.isfinite(cands).all() or len(np.unique(cands)) != len(cands):
        raise ConfigError("--candidates must be distinct finite numbers")
    return cands


MAX_EPSILON = 100.0


def _budget_file(args: argparse.Namespace, path: Path) -> Any:
    from ppdm.dp.budget import BudgetFile, default_budget_path

    where = Path(args.budget_file) if args.budget_file else default_budget_path(path)
    return BudgetFile(where, dataset=str(path.expanduser().resolve()))


def _budget(args: argparse.Namespace, path: Path) -> int:
    """``ppdm dp budget``: show (or with ``--set``, change) the data set's budget."""
    budget = _budget_file(args, path)
    if args.set is not None:
        budget.set_total(args.set, args.delta if args.delta else None)
    elif args.delta:
        raise ConfigError("--delta with 'dp budget' needs --set (the new total)")
    doc = budget.summary()
    write_json(doc, args.out)
    return 0


def _run(args: argparse.Namespace) -> int:
    import numpy as np
    import pandas as pd

    from ppdm.dp import BudgetExceededError

    path = Path(args.input)
    if not path.is_file():
        raise ConfigError(f"file not found: {path}")
    if args.out and Path(args.out).is_dir():  # before any budget is spent
        raise ConfigError(f"--out: {args.out} is a folder, not a file")
    if args.query == "budget":
        return _budget(args, path)
    if args.epsilon is None:
        raise ConfigError(f"dp {args.query} needs --epsilon")
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
    numeric = query in ("sum", "mean", "median")
    values = pd.Series(dtype=np.float64)
    if numeric:
        values = pd.to_numeric(column, errors="coerce")
        if values.isna().any():
            raise ConfigError(f"column {args.column!r} has non-numeric values")
    budget = _budget_file(args, path)
    try:
        with budget.accountant(query=query, column=args.column) as acct:
            before = acct.spent()
            result = _query(args, table, column, values, acct)
            after = acct.spent()
    except BudgetExceededError as exc:
        left = budget.summary()
        print(
            f"ppdm: refused: not enough privacy budget left for {path.name} "
            f"({exc}; budget file {left['budget_file']}); 'ppdm dp budget' shows it",
            file=sys.stderr,
        )
        return 1
    spent = budget.summary()
    spent["this_query"] = {
        "epsilon": float(after[0] - before[0]),
        "delta": float(after[1] - before[1]),
    }
    doc = {
        "query": query,
        "column": args.column,
        "mechanism": "exponential" if query == "median" else args.mechanism,
        "result": result,
        "budget": {k: v for k, v in spent.items() if k != "ledger"},
        "randomness": "seeded (not for release)" if args.seed is not None else "os.urandom",
    }
    write_json(doc, args.out)
    return 0


def _query(args: argparse.Namespace, table: Any, column: Any, values: Any, acct: Any) -> Any:
    """Run the query (charging ``acct`` before any noise is drawn)."""
    import pandas as pd

    from ppdm.dp import dp_count, dp_histogram, dp_mean, dp_median, dp_sum

    query = args.query
    common: dict[str, Any] = {"epsilon": args.epsilon, "accountant": acct, "rng": args.seed}
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
            # --lower/--upper with a median: the public range every candidate must lie in
            # (a candidate outside it would be a possible, and wrong, answer)
            lo = -float("inf") if args.lower is None else args.lower
            hi = float("inf") if args.upper is None else args.upper
            if not lo <= hi:
                raise ConfigError("--lower must not exceed --upper")
            if any(not lo <= c <= hi for c in cands):
                raise ConfigError(
                    f"--candidates must lie within --lower {args.lower} and --upper {args.upper}"
                )
            result = dp_median(values, candidates=cands, **common)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    return result


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "dp",
        help="one differentially private query (count, histogram, sum, mean, median)",
        description="Differentially private queries with exact discrete noise (discrete Laplace or "
        "Gaussian, no floating-point leaks).",
    )
    p.add_argument(
        "query",
        choices=["count", "histogram", "sum", "mean", "median", "budget"],
        help="a query, or 'budget' to show (--set: change) the data set's privacy budget",
    )
    p.add_argument("--input", required=True, help="CSV file")
    p.add_argument(
        "--sep",
        default=None,
        help="CSV separator (default: sniffed from the input, ';' or ',')",
    )
    p.add_argument("--column", help="column to query")
    p.add_argument("--epsilon", type=float, help="what this query spends (queries only)")
    p.add_argument(
        "--delta",
        type=float,
        default=0.0,
        help="for --mechanism gaussian; with budget --set: total",
    )
    p.add_argument(
        "--budget-file",
        help="the data set's budget file (default: one per data set in the state folder, "
        "$PPDM_STATE_DIR or ~/.local/state/ppdm)",
    )
    p.add_argument("--set", type=float, metavar="EPS", help="budget: the new total epsilon")
    p.add_argument(
        "--mechanism",
        choices=["laplace", "discrete_laplace", "gaussian"],
        default="laplace",
        help="laplace (default: discrete Laplace / snapping), discrete_laplace, gaussian",
    )
    p.add_argument("--categories", help="histogram: public categories, comma-separated")
    p.add_argument("--bins", help="histogram: public numeric bin edges, comma-separated")
    p.add_argument("--non-negative", action="store_true", help="clip noisy counts at 0")
    p.add_argument(
        "--lower", type=finite_float(), help="sum/mean: public lower bound (median: of candidates)"
    )
    p.add_argument(
        "--upper", type=finite_float(), help="sum/mean: public upper bound (median: of candidates)"
    )
    p.add_argument("--candidates", help="median: START:STOP[:STEP] or a comma list")
    p.add_argument(
        "--seed", type=bounded_int(0, 2**63 - 1), help="seed (reproducible experiments only)"
    )
    p.add_argument("--output", dest="out", help="also write the JSON document to this file")
    p.add_argument("--out", dest="out", help=argparse.SUPPRESS)  # the old spelling
    p.set_defaults(handler=_run)
