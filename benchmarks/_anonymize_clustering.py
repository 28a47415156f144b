"""Clustering anonymizers on Adult: Mondrian, MDAV-generic, greedy k-member, condensation.

Rows (measured in one run, added to the report of ``benchmarks/anonymize.py``):

* Mondrian (strict, ranges), k = 10 on all 30,162 Adult rows with the 8 anonbench QIs
  (age numeric, the others along their ARX hierarchies): goal <= 1 s, and >= 5x faster
  than anjana on the same rows, QIs, hierarchies and k. anjana has no Mondrian; the
  baseline is what it offers for k-anonymity, ``anjana.anonymity.k_anonymity`` (a greedy
  full-domain generalizer: it generalizes the QI with the most distinct values one
  hierarchy level at a time until k holds), run with 0 % suppression;
* MDAV-generic and greedy k-member, k = 10, on 5,000 Adult rows (same QIs): time;
* condensation, static and streaming, k = 10, on Adult's numeric column (age): time.

Every release is checked with pycanon (k as claimed) before its time is reported.

    python benchmarks/_anonymize_clustering.py --quick
    python benchmarks/_anonymize_clustering.py --json clustering.json
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ANONBENCH_QI, Report, Row, load_adult, optional_baseline, parser, timed

from ppdm.anonymize.condensation import condensation
from ppdm.anonymize.hierarchy import load_hierarchies
from ppdm.anonymize.kmember import k_member
from ppdm.anonymize.microaggregation import mdav
from ppdm.anonymize.models import KAnonymity
from ppdm.anonymize.mondrian import mondrian

K = 10


def _cpu_seconds(fn: Callable[[], Any], *, repeat: int = 1) -> float:
    """Best process CPU time of ``repeat`` runs (robust to other jobs on a shared box)."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def _verify_k(data: pd.DataFrame, qi: list[str], k: int, what: str) -> None:
    from pycanon import anonymity

    got = anonymity.k_anonymity(data, qi)
    if got < k:
        raise SystemExit(f"{what}: pycanon finds k = {got} < {k}")


def _anjana_seconds(df: pd.DataFrame, adult: Path, k: int) -> tuple[float, float] | None:
    """anjana's greedy full-domain k-anonymity on the same rows, QIs and hierarchies:
    (wall seconds, CPU seconds)."""
    if importlib.util.find_spec("anjana") is None:
        print("baseline anjana skipped: not installed (pip install '.[bench]')")
        return None
    from anjana.anonymity import k_anonymity

    hierarchies = {
        a: dict(pd.read_csv(adult / f"adult_hierarchy_{a}.csv", sep=";", header=None, dtype=str))
        for a in ANONBENCH_QI
    }
    data = df.astype(str)  # anjana matches values against the hierarchy files' strings
    cpu0 = time.process_time()

    def run() -> tuple[float, Any]:
        got = timed(lambda: k_anonymity(data, [], ANONBENCH_QI, k, 0, hierarchies))
        _verify_k(got[1], ANONBENCH_QI, k, "anjana")
        return got

    got = optional_baseline("anjana", run)
    if got is None:
        return None
    return got[0], time.process_time() - cpu0


def add_rows(report: Report, args: argparse.Namespace) -> None:
    """Add the clustering anonymizers' rows to ``report`` (``args``: --quick, --shared)."""
    adult = Path(args.shared) / "data" / "adult"
    table = load_adult(adult)
    hierarchies = load_hierarchies(adult, [*ANONBENCH_QI, "occupation"])
    model = KAnonymity(K)
    mondrian_rows = table.iloc[:5000] if args.quick else table
    small = table.sample(1000 if args.quick else 5000, random_state=0).reset_index(drop=True)
    setting = f"{len(mondrian_rows):,} rows"

    def run_mondrian() -> Any:
        return mondrian(mondrian_rows, qi=ANONBENCH_QI, model=model, hierarchies=hierarchies, rng=1)

    seconds, rel = timed(run_mondrian, repeat=3)
    cpu = _cpu_seconds(run_mondrian, repeat=3)
    _verify_k(rel.data, ANONBENCH_QI, K, "mondrian")
    anjana = _anjana_seconds(mondrian_rows, adult, K)
    anjana_s = None if anjana is None else anjana[0]
    report.add(
        Row(
            f"mondrian_k{K}_adult_time",
            seconds,
            "s",
            baseline=anjana_s,
            baseline_name="anjana k_anonymity (greedy full-domain; no Mondrian)",
            goal=f"<= 1 s and >= 5x faster ({setting})",
            higher_is_better=False,
        )
    )
    report.add(
        Row(
            f"mondrian_k{K}_adult_rows_per_s",
            len(mondrian_rows) / seconds,
            "rows/s",
            baseline=None if anjana_s is None else len(mondrian_rows) / anjana_s,
            baseline_name="anjana k_anonymity",
        )
    )
    report.add(
        Row(
            f"mondrian_k{K}_adult_cpu_time",
            cpu,
            "s",
            baseline=None if anjana is None else anjana[1],
            baseline_name="anjana k_anonymity, CPU time",
            goal="process CPU time (unaffected by other jobs)",
            higher_is_better=False,
        )
    )
    report.extra["mondrian_classes"] = rel.n_classes
    report.extra["mondrian_ncp"] = rel.metrics["ncp"]

    relaxed_s, rel_relaxed = timed(
        lambda: mondrian(
            mondrian_rows,
            qi=ANONBENCH_QI,
            model=model,
            hierarchies=hierarchies,
            strict=False,
            rng=1,
        ),
        repeat=3,
    )
    _verify_k(rel_relaxed.data, ANONBENCH_QI, K, "relaxed mondrian")
    report.add(
        Row(
            f"mondrian_relaxed_k{K}_adult_time",
            relaxed_s,
            "s",
            goal="report",
            higher_is_better=False,
        )
    )

    for name, fn in (
        ("mdav", lambda: mdav(small, qi=ANONBENCH_QI, model=model, hierarchies=hierarchies, rng=1)),
        (
            "k_member",
            lambda: k_member(small, qi=ANONBENCH_QI, model=model, hierarchies=hierarchies, rng=1),
        ),
    ):
        seconds, rel = timed(fn)
        _verify_k(rel.data, ANONBENCH_QI, K, name)
        report.add(
            Row(
                f"{name}_k{K}_{len(small)}_rows_time",
                seconds,
                "s",
                goal="report",
                higher_is_better=False,
            )
        )
        report.extra[f"{name}_classes"] = rel.n_classes

    numeric = mondrian_rows  # Adult's only numeric column is age
    for streaming in (False, True):
        label = "streaming" if streaming else "static"
        seconds, rel = timed(
            lambda streaming=streaming: condensation(
                numeric, qi=["age"], k=K, rng=1, streaming=streaming
            )
        )
        report.add(
            Row(
                f"condensation_{label}_k{K}_adult_age_time",
                seconds,
                "s",
                goal=f"report ({len(numeric):,} rows)",
                higher_is_better=False,
            )
        )
        report.extra[f"condensation_{label}_groups"] = rel.info["n_groups"]
        report.extra[f"condensation_{label}_il"] = rel.metrics["il"]


if __name__ == "__main__":
    cli = parser(__doc__.splitlines()[0]).parse_args()
    rep = Report("Anonymization: clustering anonymizers on Adult")
    add_rows(rep, cli)
    rep.finish(cli.json)
