"""``ppdm partition`` and ``ppdm simulate assoc|kmeans``: distributed mining test beds.

``ppdm partition`` splits one pooled data set into party files (horizontally by rows or
vertically by items/columns; vertical record files keep a common ``record_id``) and can
point each party's settings file at its file, ready for ``ppdm job run assoc|kmeans``.
``ppdm simulate assoc|kmeans`` partitions into a temporary folder and runs the same job
code for every party on the in-process network (see ``docs/mining.md``).
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from ppdm.cli._args import (
    atomic_folder,
    bounded_int,
    check_support_budget,
    finite_float,
    seconds,
)
from ppdm.cli._output import check_output_folder, write_json
from ppdm.errors import ConfigError


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "partition",
        help="split a data set into party files (horizontal or vertical)",
        description=(
            "Split a pooled data set into one file per party: horizontally (random rows "
            "per party) or vertically (random items or columns per party, every row kept). "
            "Transaction files (FIMI .dat, basket CSV) keep the line order in vertical "
            "mode, so the line number is the common transaction id; record tables keep "
            "(or get) a common record id column. Writes DIR/<party>.dat|.csv and "
            "DIR/partition.json, and prints the manifest."
        ),
    )
    parser.add_argument("--input", required=True, help="the pooled data file")
    parser.add_argument("--parties", type=int, required=True, help="number of parties (>= 2)")
    parser.add_argument("--mode", required=True, choices=["horizontal", "vertical"])
    parser.add_argument("--seed", type=int, default=0, help="seed of the random split")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument(
        "--format",
        default="auto",
        choices=["auto", "fimi", "basket", "records"],
        help="input format (auto: .dat is FIMI, .csv a records table with a header)",
    )
    parser.add_argument(
        "--sep",
        default=None,
        help="CSV field separator (default: sniffed from the input, ';' or ',')",
    )
    parser.add_argument(
        "--id-column", default="record_id", help="common record id column of record tables"
    )
    parser.add_argument(
        "--columns", default=None, help="records: comma-separated attribute columns to keep"
    )
    parser.add_argument(
        "--names", default=None, help="comma-separated party names (default alice,bob,...)"
    )
    parser.add_argument(
        "--settings-dir",
        default=None,
        help="folder of the parties' settings files (DIR/<party>.toml, as written by "
        "`ppdm consortium init`): set each party's [data] entry to its file",
    )
    parser.set_defaults(handler=_partition)


def register_simulate(jobs: argparse._SubParsersAction) -> None:
    """Add ``ppdm simulate assoc`` and ``ppdm simulate kmeans``."""
    assoc = jobs.add_parser(
        "assoc",
        help="distributed association rules (Kantarcioglu-Clifton / Vaidya-Clifton)",
        description=(
            "Partition a transaction file among the parties and mine the association rules "
            "of the pooled data on the in-process network: horizontal partitioning with "
            "Kantarcioglu & Clifton's protocol, vertical with Vaidya & Clifton's."
        ),
    )
    _common(assoc, "transactions (.dat FIMI or basket CSV)")
    assoc.add_argument(
        "--min-support", type=float, required=True, help="in (0, 1], at least one basket"
    )
    assoc.add_argument("--min-confidence", type=float, default=0.8, help="in [0, 1]")
    assoc.add_argument(
        "--reveal-counts",
        action="store_true",
        help="horizontal: publish the global support counts (else only which itemsets "
        "and rules pass, decided by secure comparisons)",
    )
    assoc.add_argument(
        "--method",
        default="ot",
        choices=["ot", "gilboa", "paillier"],
        help="two-party vertical support counts (gilboa: the older, heavier OT path)",
    )
    assoc.add_argument(
        "--multiparty",
        default="gmw",
        choices=["gmw", "intersection"],
        help="vertical support counts over 3+ parties (intersection: the EC protocol)",
    )
    assoc.add_argument("--max-len", type=int, default=None, help="largest itemset size")
    assoc.add_argument(
        "--format", default="auto", choices=["auto", "fimi", "basket"], help="input format"
    )
    assoc.add_argument(
        "--label-bytes", type=int, default=None, help="horizontal: bytes per item label"
    )
    assoc.add_argument(
        "--min-aggregate",
        type=int,
        default=10,
        help="release an itemset only if it covers at least this many transactions "
        "(horizontally also without any --colluders parties' baskets; 0: off; default 10)",
    )
    assoc.add_argument(
        "--colluders",
        type=int,
        default=1,
        help="horizontal: how many parties' baskets --min-aggregate must hold without (default 1)",
    )
    assoc.add_argument(
        "--protect",
        default="dp",
        choices=["dp", "exact"],
        help="vertical: support counts across parties opened with each owner's noise (dp, "
        "the default) or exact (only for partners an owner names)",
    )
    assoc.add_argument(
        "--epsilon",
        type=finite_float(1e-6, 100.0),
        default=1.0,
        help="vertical dp: privacy loss per job (default 1)",
    )
    assoc.add_argument(
        "--max-shared-candidates",
        type=int,
        default=256,
        help="vertical dp: the counts the epsilon is split over (default 256)",
    )
    assoc.set_defaults(handler=_simulate_assoc)

    km = jobs.add_parser(
        "kmeans",
        help="distributed k-means (horizontal secure sums / vertical secure argmin)",
        description=(
            "Partition a records CSV (header, numeric columns) among the parties and run "
            "Lloyd's k-means of the pooled records on the in-process network."
        ),
    )
    _common(km, "records CSV with a header")
    km.add_argument("--k", type=bounded_int(1, 100_000), required=True, help="number of clusters")
    km.add_argument(
        "--init",
        default="aggregate",
        choices=["aggregate", "random-slabs", "random-partition", "first-k", "kmeans++", "random"],
        help="initial centers: aggregate (the default: means of every party's quantile slabs "
        "along a coin-tossed direction horizontally, of random groups vertically; no record "
        "is revealed), random-slabs, random-partition, or records: the first k pooled "
        "records, k-means++ (horizontal) or k random records (vertical), from --seed",
    )
    km.add_argument(
        "--min-cluster-size",
        type=int,
        default=10,
        help="fewest pooled records behind a released centre (default 10; 0: off)",
    )
    km.add_argument(
        "--min-party-records",
        type=int,
        default=3,
        help="horizontal: a party holding 1 to N-1 records of a released centre stops the "
        "job (default 3; 0: off)",
    )
    km.add_argument("--max-iter", type=bounded_int(1, 1_000_000), default=300)
    km.add_argument("--tol", type=float, default=0.0, help="relative shift tolerance")
    km.add_argument("--columns", default=None, help="comma-separated attribute columns")
    km.add_argument("--id-column", default="record_id", help="common record id column")
    km.add_argument("--fraction-bits", type=int, default=32, help="horizontal fixed point")
    km.add_argument(
        "--include-labels", action="store_true", help="add every party's cluster labels"
    )
    km.set_defaults(handler=_simulate_kmeans)


def _common(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--input", required=True, help=f"the pooled data: {what}")
    parser.add_argument("--parties", type=int, default=3, help="number of parties (default 3)")
    parser.add_argument("--partition", default="horizontal", choices=["horizontal", "vertical"])
    parser.add_argument("--seed", type=int, default=0, help="seed of the split (and init)")
    parser.add_argument(
        "--sep",
        default=None,
        help="CSV field separator (default: sniffed from the input, ';' or ',')",
    )
    parser.add_argument("--timeout", type=seconds, default=600.0, help="receive timeout in seconds")
    parser.add_argument(
        "--output", help="write the JSON document here (else it is printed on stdout)"
    )


def _names(count: int, names: str | None) -> list[str]:
    from ppdm.cli.simulate import party_names

    if names is None:
        if count < 2:
            raise ConfigError("--parties must be at least 2")
        return party_names(count)
    out = [n.strip() for n in names.split(",") if n.strip()]
    if len(out) != count:
        raise ConfigError(f"--names lists {len(out)} parties, --parties says {count}")
    bad = [n for n in out if not _PARTY_NAME.match(n)]
    if bad:
        raise ConfigError(
            f"--names: {bad[0]!r} is not a party name (lower-case letters, digits and '-', "
            "at most 63, no spaces or slashes)"
        )
    if len(set(out)) != len(out):
        raise ConfigError("--names repeats a name")
    return out


_PARTY_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


def _check_input(path: str) -> None:
    if not Path(path).is_file():
        raise ConfigError(f"input file not found: {path}")
    if Path(path).stat().st_size == 0:
        raise ConfigError(f"input file {path} is empty")


def _partition(args: argparse.Namespace) -> int:
    from ppdm.jobs.mining import partition_file, set_party_data

    _check_input(args.input)
    names = _names(args.parties, args.names)
    if args.settings_dir is not None:
        missing = [n for n in names if not (Path(args.settings_dir) / f"{n}.toml").is_file()]
        if missing:
            raise ConfigError(f"no settings file for {', '.join(missing)} in {args.settings_dir}")
    with atomic_folder(args.out) as out:  # no folder left behind by a refused split
        manifest = partition_file(
            args.input,
            out,
            parties=names,
            mode=args.mode,
            seed=args.seed,
            fmt=args.format,
            sep=args.sep,
            id_column=args.id_column,
            columns=[c.strip() for c in args.columns.split(",") if c.strip()]
            if args.columns
            else None,
        )
    if args.settings_dir is not None:
        key = "records" if manifest["format"] == "records" else "transactions"
        for n in names:
            set_party_data(
                Path(args.settings_dir) / f"{n}.toml",
                key,
                Path(args.out) / manifest["parties"][n]["file"],
            )
        manifest["settings_key"] = key
    write_json(manifest, None)
    return 0


def _run(
    job: str,
    args: argparse.Namespace,
    fmt: str,
    key: str,
    params: dict[str, Any],
) -> dict[str, Any]:
    """Partition ``args.input`` into a temporary folder and run ``job`` for every party
    (the first party's context draws the progress bar on stderr)."""
    from ppdm.cli.simulate import link_from_args, simulate_files
    from ppdm.jobs.mining import partition_file

    _check_input(args.input)
    if args.timeout <= 0:
        raise ConfigError("--timeout must be positive")
    names = _names(args.parties, None)
    with tempfile.TemporaryDirectory(prefix="ppdm-simulate-") as tmp:
        manifest = partition_file(
            args.input,
            tmp,
            parties=names,
            mode=args.partition,
            seed=args.seed,
            fmt=fmt,
            sep=args.sep,
            **(
                {"id_column": args.id_column, "columns": params["columns"]}
                if key == "records"
                else {}
            ),
        )
        files = {name: manifest["parties"][name]["file"] for name in names}
        return simulate_files(
            job, Path(tmp), key, files, params, timeout=args.timeout, link=link_from_args(args)
        )


def _emit(doc: dict[str, Any], output: str | None, summary: str) -> None:
    write_json(doc, output, echo=output is None)
    if output is not None:
        print(f"wrote {output}: {summary}", file=sys.stderr)


def _simulate_assoc(args: argparse.Namespace) -> int:
    from ppdm.jobs.mining import check_params, read_transactions

    check_output_folder(args.output)
    fmt = args.format
    if fmt == "auto":
        fmt = "fimi" if Path(args.input).suffix.lower() == ".dat" else "basket"
    params = {
        "mode": args.partition,
        "min_support": args.min_support,
        "min_confidence": args.min_confidence,
        "reveal_counts": args.reveal_counts,
        "method": args.method,
        "multiparty": args.multiparty,
        "max_len": args.max_len,
        "label_bytes": args.label_bytes,
        "format": fmt,
        "sep": args.sep,
        "min_aggregate": args.min_aggregate,
        "colluders": args.colluders,
        "protect": args.protect,
        "epsilon": args.epsilon,
        "max_shared_candidates": args.max_shared_candidates,
        # In a simulation one user holds every party's data: per-party counts reveal nothing.
        "report_local": True,
    }
    check_params("assoc", params)
    _check_input(args.input)
    pooled = read_transactions(args.input, fmt=fmt, sep=args.sep)
    # Before any party starts: a support this low would make the parties mine (and
    # exchange) an exponential number of itemsets.
    horizontal = args.partition == "horizontal"
    check_support_budget(
        pooled,
        args.min_support,
        smallest=pooled.n_transactions // max(args.parties, 1) if horizontal else None,
        max_len=args.max_len,
    )
    del pooled
    doc = _run("assoc", args, fmt, "transactions", params)
    first = next(iter(doc["parties"].values()))["result"]
    _emit(
        doc,
        args.output,
        f"{len(first['frequent_itemsets'])} frequent itemsets, {len(first['rules'])} rules "
        f"over {first['n_transactions']} transactions",
    )
    return 0


def _simulate_kmeans(args: argparse.Namespace) -> int:
    from ppdm.jobs.mining import check_params, read_records

    check_output_folder(args.output)
    columns = None
    if args.columns is not None:
        columns = [c.strip() for c in args.columns.split(",") if c.strip()]
        if not columns:
            raise ConfigError("--columns lists no column")
    params = {
        "mode": args.partition,
        "k": args.k,
        "init": args.init,
        "seed": args.seed,
        "max_iter": args.max_iter,
        "tol": args.tol,
        "fraction_bits": args.fraction_bits,
        "columns": columns,
        "id_column": args.id_column,
        "sep": args.sep,
        "include_labels": args.include_labels,
        "min_cluster_size": args.min_cluster_size,
        "min_party_records": args.min_party_records,
        "report_local": True,
    }
    check_params("kmeans", params)
    _check_input(args.input)
    # Check the pooled table (numeric columns, unique ids) before splitting it.
    read_records(args.input, sep=args.sep, id_column=args.id_column, columns=columns)
    doc = _run("kmeans", args, "records", "records", params)
    first = next(iter(doc["parties"].values()))["result"]
    _emit(
        doc,
        args.output,
        f"k={args.k}, {first['iterations']} iterations, converged={first['converged']}",
    )
    return 0
