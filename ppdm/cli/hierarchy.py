"""``ppdm hierarchy``: build a generalization hierarchy from a column, in ARX's format.

Examples::

    ppdm hierarchy intervals --input ../shared/data/adult/adult.csv --sep ';' \\
        --column age --widths 5,10,20 --output adult_hierarchy_age.csv
    ppdm hierarchy quantiles --input patients.csv --column weight --bins 8 --output h.csv
    ppdm hierarchy mask --input patients.csv --column zip --output patients_hierarchy_zip.csv
    ppdm hierarchy dates --input patients.csv --column visit --levels month,year \\
        --output patients_hierarchy_visit.csv

The file (``;``-separated, no header, one row per distinct value, one column per level,
last level ``*``) is what ``ppdm anonymize --hierarchies FOLDER`` reads when it is named
``<anything>_hierarchy_<column>.csv``.
"""

from __future__ import annotations

import argparse
import math
import re
import sys

from ppdm.cli._args import atomic_file, bounded_int
from ppdm.errors import ConfigError

#: ``[lo, hi)``: an interval label of an interval or quantile hierarchy.
_INTERVAL = re.compile(r"^\[(.*), (.*)\)$")


def _floats(text: str, name: str) -> list[float]:
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ConfigError(f"--{name} must be comma-separated numbers, not {text!r}") from None
    if not values:
        raise ConfigError(f"--{name} is empty")
    if not all(math.isfinite(v) and v > 0 for v in values):
        raise ConfigError(f"--{name} must be positive finite numbers, not {text!r}")
    return values


def _check_intervals(h: object, option: str) -> None:
    """:class:`ConfigError` if a level of ``h`` has an interval whose printed bounds are
    equal (``[2, 2)``: a width below the values' printed precision)."""
    table = h.table  # type: ignore[attr-defined]
    for level in range(1, table.shape[1]):
        for label in table[level].unique():
            m = _INTERVAL.match(str(label))
            if m and m.group(1) == m.group(2):
                raise ConfigError(
                    f"{option}: the interval {label} is empty as written (a width below the "
                    "precision the values are written with)"
                )


def _run(args: argparse.Namespace) -> int:
    from ppdm.anonymize.data import load_table
    from ppdm.anonymize.hierarchy_builders import (
        date_hierarchy,
        interval_hierarchy,
        masking_hierarchy,
        quantile_hierarchy,
        write_hierarchy,
    )

    kind = args.hierarchy_command
    # Read as text, so that level 0 is every value exactly as written in the file (the
    # way ppdm anonymize reads a column that has a hierarchy file).
    table = load_table(args.input, sep=args.sep, dtypes={args.column: "text"})
    if args.column not in table.columns:  # pragma: no cover - load_table checks
        raise ConfigError(f"column {args.column!r} not in the input")
    values = table[args.column]
    if kind == "intervals":
        widths = _floats(args.widths, "widths") if args.widths else None
        h = interval_hierarchy(values, attribute=args.column, widths=widths)
    elif kind == "quantiles":
        if not 1 <= args.bins <= 10_000:  # pragma: no cover - the argument's type checks
            raise ConfigError("--bins must be in [1, 10000]")
        h = quantile_hierarchy(values, attribute=args.column, bins=args.bins)
    elif kind == "mask":
        if args.keep < 0:
            raise ConfigError("--keep must be >= 0")
        h = masking_hierarchy(values, attribute=args.column, mask=args.mask, keep=args.keep)
    else:
        levels = [v.strip() for v in args.levels.split(",") if v.strip()]
        h = date_hierarchy(values, attribute=args.column, levels=levels, date_format=args.format)
    if kind in ("intervals", "quantiles"):
        _check_intervals(h, "--widths" if kind == "intervals" else "--bins")
    with atomic_file(args.output) as tmp:  # renamed into place only when written whole
        write_hierarchy(h, tmp)
    print(f"{args.output}: {len(h.values)} values, {h.height} levels", file=sys.stderr)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``ppdm hierarchy ...``."""
    top = subparsers.add_parser(
        "hierarchy",
        help="build a generalization hierarchy file (intervals, quantiles, masking, dates)",
        description=(
            "Build a value generalization hierarchy for one column of a CSV/Parquet table "
            "and write it in ARX's format (';'-separated, one row per value, last level "
            "'*'), ready for ppdm anonymize --hierarchies."
        ),
    )
    sub = top.add_subparsers(dest="hierarchy_command", metavar="KIND")

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--input", required=True, help="CSV (with header) or Parquet file")
        p.add_argument(
            "--sep",
            default=None,
            help="CSV separator (default: sniffed from the input, ';' or ',')",
        )
        p.add_argument("--column", required=True, help="the column to build it for")
        p.add_argument(
            "--output",
            required=True,
            help="hierarchy file; name it <name>_hierarchy_<column>.csv for --hierarchies",
        )
        p.set_defaults(handler=_run)

    p = sub.add_parser(
        "intervals",
        help="nested fixed-width intervals for numbers",
        description="Numbers into nested intervals [lo, lo + width), one width per level.",
    )
    common(p)
    p.add_argument(
        "--widths",
        help="comma-separated widths, finest first, each a whole multiple of the previous "
        "(default: chosen from the range, doubling)",
    )

    p = sub.add_parser(
        "quantiles",
        help="equal-frequency intervals for numbers",
        description="Numbers into quantile intervals; neighbours merged pairwise per level.",
    )
    common(p)
    p.add_argument(
        "--bins", type=bounded_int(1, 10_000), default=8, help="intervals at the finest level"
    )

    p = sub.add_parser(
        "mask",
        help="mask trailing characters of codes (ZIP codes, ids)",
        description="Codes with one more trailing character replaced by the mask per level "
        "(02139 -> 0213* -> 021** ...). The column is read as text, so leading zeros stay.",
    )
    common(p)
    p.add_argument("--mask", default="*", help="mask character (default '*')")
    p.add_argument(
        "--keep", type=bounded_int(0, 10_000), default=0, help="leading characters never masked"
    )

    p = sub.add_parser(
        "dates",
        help="roll dates up (month, quarter, year, decade)",
        description="Dates rolled up level by level, e.g. day -> month -> year.",
    )
    common(p)
    p.add_argument(
        "--levels",
        default="month,year",
        help="comma-separated, fine to coarse, from month, quarter, year, decade",
    )
    p.add_argument("--format", help="date format of the column, e.g. %%d/%%m/%%Y")

    def _help(_: argparse.Namespace) -> int:
        top.print_help(sys.stderr)
        return 2

    top.set_defaults(handler=_help)


__all__ = ["register"]
