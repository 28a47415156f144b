"""``ppdm anonymize``: anonymize a CSV/Parquet table locally before it is published.

Example (the anonbench setting on Adult)::

    ppdm anonymize --input ../shared/data/adult/adult.csv --sep ';' \\
        --qi age,education,marital-status,native-country,race,salary-class,sex,workclass \\
        --sensitive occupation --hierarchies ../shared/data/adult \\
        --model k-anonymity --k 5 --algorithm optimal \\
        --output adult-5anon.csv --report adult-5anon.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ppdm.cli._args import atomic_file
from ppdm.errors import ConfigError

_ALGORITHMS = (
    "samarati",
    "incognito",
    "optimal",
    "exhaustive",
    "mondrian",
    "mdav",
    "k-member",
    "condensation",
)


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "anonymize",
        help="anonymize a table (k-anonymity, l-diversity, t-closeness)",
        description=(
            "Anonymize a CSV/Parquet table with full-domain generalization (Samarati, "
            "Incognito, optimal search) or partitioning/clustering (Mondrian, MDAV, "
            "k-member, condensation). Rows of the output are shuffled."
        ),
    )
    parser.add_argument("--input", required=True, help="CSV (with header) or Parquet file")
    parser.add_argument(
        "--sep",
        default=None,
        help="CSV separator of the input and output (default: sniffed, ';' or ',')",
    )
    parser.add_argument("--qi", required=True, help="comma-separated quasi-identifiers")
    parser.add_argument("--sensitive", help="sensitive attribute")
    parser.add_argument("--identifiers", help="comma-separated identifiers (dropped)")
    parser.add_argument(
        "--hierarchies",
        help="directory with ';'-separated hierarchy files *_hierarchy_<attribute>.csv",
    )
    parser.add_argument(
        "--dtype",
        action="append",
        default=[],
        metavar="COLUMN=text|number",
        help="read COLUMN as text (codes such as ZIP codes with leading zeros) or as "
        "numbers; repeatable. Default: a column with a hierarchy file is text, any other "
        "is a number when every value is one (and none has a leading zero)",
    )
    parser.add_argument(
        "--model",
        default="k-anonymity",
        help="k-anonymity, l-diversity or t-closeness; combine with '+' "
        "(k is enforced whenever --k is given)",
    )
    parser.add_argument("--k", type=int, help="k of k-anonymity")
    parser.add_argument("--l", type=float, help="l of l-diversity")
    parser.add_argument(
        "--l-variant", default="distinct", choices=["distinct", "entropy", "recursive"]
    )
    parser.add_argument("--c", type=float, help="c of recursive (c,l)-diversity")
    parser.add_argument("--t", type=float, help="t of t-closeness")
    parser.add_argument("--t-distance", default="variational", choices=["variational", "kl", "emd"])
    parser.add_argument(
        "--t-ground",
        choices=["equal", "ordered", "hierarchical"],
        help="EMD ground distance (default: hierarchical with a hierarchy of the sensitive "
        "attribute, ordered for numeric values, else equal)",
    )
    parser.add_argument("--algorithm", default="optimal", choices=list(_ALGORITHMS))
    parser.add_argument(
        "--suppression", type=float, default=0.0, help="MaxSup as a fraction of rows (0.05)"
    )
    parser.add_argument(
        "--metric",
        default="loss",
        choices=["loss", "precision", "ncp", "dm", "cavg", "height"],
        help="utility metric the node choice minimizes (default: loss = ILoss)",
    )
    parser.add_argument("--cm-target", help="class label of the classification metric")
    parser.add_argument("--seed", type=int, help="seed for the output shuffle (tests only)")
    parser.add_argument("--output", required=True, help="anonymized CSV (or .parquet)")
    parser.add_argument("--report", help="JSON report (node, classes, metrics, runtime)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from ppdm.anonymize.api import anonymize
    from ppdm.anonymize.data import load_table
    from ppdm.progress import RichProgress

    if not 0.0 <= args.suppression < 1.0:
        raise ConfigError(f"--suppression must be in [0, 1), got {args.suppression}")
    dtypes = _dtypes(args)
    table = load_table(args.input, sep=args.sep, dtypes=dtypes)
    progress = None if args.no_progress else RichProgress()
    try:
        release = anonymize(
            table,
            qi=args.qi,
            sensitive=args.sensitive,
            identifiers=args.identifiers,
            hierarchies=args.hierarchies,
            model=args.model,
            k=args.k,
            l=args.l,
            l_variant=args.l_variant,
            c=args.c,
            t=args.t,
            t_distance=args.t_distance,
            t_ground=args.t_ground,
            algorithm=args.algorithm,
            suppression=args.suppression,
            metric=args.metric,
            cm_target=args.cm_target,
            rng=args.seed,
            progress=progress,
        )
    finally:
        if progress is not None:
            progress.finish()
    out = Path(args.output)
    with atomic_file(out) as tmp:  # renamed into place only when written whole
        if out.suffix.lower() in (".parquet", ".pq"):
            release.data.to_parquet(tmp, index=False)
        else:
            release.data.to_csv(tmp, sep=args.sep, index=False)
    report = release.to_report()
    report["input"] = str(args.input)
    report["output"] = str(out)
    text = json.dumps(report, indent=2) + "\n"
    if args.report:
        with atomic_file(args.report) as tmp:
            tmp.write_text(text)
    for line in anonymize_summary(report):
        print(line)
    return 0


def anonymize_summary(report: dict[str, Any]) -> list[str]:
    """A few lines of an anonymization report for the terminal: what was released, at
    which generalization, what it cost in utility, and any hierarchy built on the fly."""
    info = report.get("info") or {}
    metrics = report.get("metrics") or {}
    model = (info.get("model") or {}).get("models") or []
    models = ", ".join(
        f"{m.get('model')} ({', '.join(f'{k}={v}' for k, v in m.items() if k != 'model')})"
        for m in model
        if isinstance(m, dict)
    )
    rate = 100 * float(report.get("suppression_rate") or 0)
    lines = [
        f"{report.get('rows_out')} of {report.get('rows_in')} rows released in "
        f"{report.get('classes')} classes of at least {report.get('min_class_size')} rows; "
        f"{report.get('suppressed')} suppressed ({rate:.1f} %)" + (f"; {models}" if models else "")
    ]
    node = info.get("node")
    if isinstance(node, dict) and node:
        levels = ", ".join(f"{col} level {lvl}" for col, lvl in node.items())
        lines.append(f"generalization ({report.get('algorithm')}): {levels}")
    elif report.get("algorithm"):
        lines.append(f"algorithm: {report.get('algorithm')}")
    utility = [
        (label, metrics[key])
        for key, label in (
            ("iloss", "information loss"),
            ("ncp", "NCP"),
            ("precision", "precision"),
            ("avg_class_size", "average class size"),
            ("discernibility", "discernibility"),
        )
        if isinstance(metrics.get(key), int | float)
    ]
    if utility:
        lines.append("utility: " + ", ".join(f"{label} {value:.4g}" for label, value in utility))
    for col, what in info.get("built_hierarchies", {}).items():
        lines.append(f"{col}: no hierarchy given; built {what}")
    return lines


def _dtypes(args: argparse.Namespace) -> dict[str, str]:
    """Column types: ``--dtype`` first, then text for every column with a hierarchy file."""
    out: dict[str, str] = {}
    for spec in args.dtype:
        col, eq, kind = spec.partition("=")
        if not eq or not col.strip() or kind.strip() not in ("text", "number"):
            raise ConfigError(f"--dtype must be COLUMN=text or COLUMN=number, not {spec!r}")
        out[col.strip()] = kind.strip()
    src = Path(args.input)
    if args.hierarchies and src.suffix.lower() not in (".parquet", ".pq") and src.is_file():
        import glob

        import pandas as pd

        try:
            header = pd.read_csv(src, sep=args.sep, nrows=0).columns
        except Exception:  # the full read below reports unreadable files
            return out
        folder = Path(args.hierarchies)
        for col in (str(c).strip() for c in header):
            has_file = (
                any(folder.glob(f"*_hierarchy_{glob.escape(col)}.csv"))
                or (folder / f"hierarchy_{col}.csv").is_file()
            )
            if has_file:
                out.setdefault(col, "text")
    return out
