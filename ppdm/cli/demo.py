"""``ppdm demo``: an end-to-end scenario on the in-process network with shipped data.

Three supermarket chains each hold a third of the shipped retail baskets
(:func:`ppdm.data.retail_sample`). They agree on a public product catalogue and learn the
pooled sales count of every product by secure sum, without showing each other their own
counts.
"""

from __future__ import annotations

import argparse

import numpy as np

from ppdm.cli._output import cost_table, write_json
from ppdm.data import retail_sample
from ppdm.errors import ConfigError
from ppdm.jobs.document import simulate_job
from ppdm.jobs.registry import PartyContext


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "demo",
        help="run the end-to-end demo on the in-process network with shipped data",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--parties", type=int, default=3, help="number of chains (default 3)")
    parser.add_argument(
        "--catalogue", type=int, default=40, help="products in the public catalogue (default 40)"
    )
    parser.add_argument("--output", help="write the job document as JSON to this file")
    parser.set_defaults(handler=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from ppdm.cli.simulate import party_names

    if not 2 <= args.parties <= 8:
        raise ConfigError("--parties must be between 2 and 8")
    if args.catalogue < 1:
        raise ConfigError("--catalogue must be positive")
    console = Console()
    names = party_names(args.parties)
    with Progress(
        SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console
    ) as progress:
        task = progress.add_task("loading the shipped retail baskets", total=3)
        baskets = retail_sample()
        progress.advance(task)
        progress.update(task, description="splitting baskets among the chains")
        shares = np.array_split(np.arange(len(baskets)), len(names))
        catalogue = np.arange(args.catalogue)
        contexts = {}
        local_counts = {}
        for name, rows in zip(names, shares, strict=True):
            counts = np.zeros(args.catalogue, dtype=np.int64)
            for r in rows:
                items = np.fromiter((i for i in baskets[r] if i < args.catalogue), dtype=np.int64)
                np.add.at(counts, np.unique(items), 1)
            local_counts[name] = counts
            contexts[name] = PartyContext(
                name=name, settings={"inputs": {"secure_sum": counts.tolist()}}
            )
        progress.advance(task)
        progress.update(task, description="secure sum of the product counts (ring protocol)")
        doc = simulate_job("secure-sum", contexts, {})
        progress.advance(task)
        progress.update(task, description="done")
    pooled = np.asarray(doc["parties"][names[0]]["result"]["sum"])
    if not np.array_equal(pooled, sum(local_counts.values())):
        raise RuntimeError("secure sum disagrees with the plain sum")  # cannot happen
    console.print(
        f"\n[bold]{len(names)} chains, {len(baskets):,} baskets, "
        f"a public catalogue of {args.catalogue} products[/bold]"
    )
    table = Table(title="What each chain contributed (private; shown here because the demo "
                  "simulates all chains) and what all of them learned")
    table.add_column("product")
    for n in names:
        table.add_column(f"{n} (private)", justify="right")
    table.add_column("pooled count (learned by all)", justify="right", style="bold")
    top = np.argsort(-pooled, kind="stable")[:10]
    for item in top:
        table.add_row(
            str(catalogue[item]), *(str(local_counts[n][item]) for n in names), str(pooled[item])
        )
    console.print(table)
    console.print(
        "Each chain learned only the pooled counts; the ring mask hides every partial sum "
        "(two colluding neighbours could learn the chain between them: see docs/security.md)."
    )
    console.print(cost_table(doc))
    if args.output:
        write_json(doc, args.output, echo=False)
    return 0
