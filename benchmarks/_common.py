"""Helpers shared by the benchmark scripts: argument parsing, timing, the table, JSON.

Every benchmark prints a table whose rows name the measured figure, ppdm's value, the
baseline named in its issue measured in the same run, and their ratio; ``--quick`` runs
small, ``--json FILE`` writes the same figures as one flat JSON object (rates named
``..._per_s``).
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SHARED = Path(__file__).resolve().parent.parent.parent / "shared"

#: The quasi-identifiers of the anonymization benchmark setting on Adult (ARX's anonbench;
#: ``../shared/data/README.md``); occupation is the sensitive attribute.
ANONBENCH_QI = [
    "age",
    "education",
    "marital-status",
    "native-country",
    "race",
    "salary-class",
    "sex",
    "workclass",
]


def load_adult(adult_dir: str | Path) -> Any:
    """The shared Adult table (``adult.csv``, ``;``-separated) as a DataFrame."""
    import pandas as pd

    return pd.read_csv(Path(adult_dir) / "adult.csv", sep=";")


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--quick", action="store_true", help="run small (CI smoke test)")
    p.add_argument("--json", metavar="FILE", help="write the figures as a flat JSON object")
    p.add_argument("--shared", default=str(SHARED), help="path of the shared/ folder")
    return p


def optional_baseline(name: str, fn: Callable[[], Any]) -> Any:
    """Run a third-party baseline; if it is missing or breaks (e.g. under a newer pandas),
    print why and return ``None`` so the benchmark goes on without that column."""
    try:
        return fn()
    except Exception as exc:  # a baseline's own failure must not end ppdm's benchmark
        first = (str(exc).strip().splitlines() or [""])[0]
        print(f"baseline {name} skipped: {type(exc).__name__}: {first}"[:300])
        return None


def timed(fn: Callable[[], Any], *, repeat: int = 1) -> tuple[float, Any]:
    """Best wall time of ``repeat`` runs of ``fn`` and the last result."""
    best = float("inf")
    result: Any = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


@dataclass
class Row:
    name: str
    value: float
    unit: str
    baseline: float | None = None
    baseline_name: str = ""
    goal: str = ""
    higher_is_better: bool = True

    @property
    def ratio(self) -> float | None:
        if self.baseline is None or self.baseline == 0 or self.value == 0:
            return None
        if self.higher_is_better:
            return self.value / self.baseline
        return self.baseline / self.value


@dataclass
class Report:
    title: str
    rows: list[Row] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def add(self, row: Row) -> Row:
        self.rows.append(row)
        return row

    def print(self) -> None:
        from rich.console import Console
        from rich.table import Table

        table = Table(title=self.title)
        for col in ("figure", "ppdm", "unit", "baseline", "baseline value", "ratio", "goal"):
            table.add_column(
                col, justify="right" if col in ("ppdm", "baseline value", "ratio") else "left"
            )
        for r in self.rows:
            ratio = r.ratio
            table.add_row(
                r.name,
                f"{r.value:,.4g}",
                r.unit,
                r.baseline_name or "-",
                "-" if r.baseline is None else f"{r.baseline:,.4g}",
                "-" if ratio is None else f"{ratio:,.2f}x",
                r.goal,
            )
        Console(width=160).print(table)
        print(
            f"machine: {platform.machine()} {platform.python_implementation()} "
            f"{platform.python_version()}"
        )

    def flat(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for r in self.rows:
            out[r.name] = r.value
            if r.baseline is not None:
                out[f"{r.name}__baseline"] = r.baseline
            if r.ratio is not None:
                out[f"{r.name}__ratio"] = r.ratio
        out.update(self.extra)
        return out

    def finish(self, json_path: str | None) -> None:
        self.print()
        if json_path:
            Path(json_path).write_text(json.dumps(self.flat(), indent=2, sort_keys=True) + "\n")
