"""``ppdm demo``: the supermarket scenario of Aggarwal 2015, §20.5 (figure 20.6).

Three supermarket chains each hold their own customers' baskets: a random third of the
shipped retail baskets (:func:`ppdm.data.retail_sample`, 6,000 Belgian market baskets).
They find the association rules of the pooled baskets with Kantarcioglu & Clifton's
protocol for horizontally partitioned data (job ``assoc``, on the in-process network),
without showing each other their baskets or their own support counts. The demo prints
the rules found, what each chain revealed, and the cost of every protocol phase.
"""

from __future__ import annotations

import argparse
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

from ppdm.cli._output import check_output_folder, write_json
from ppdm.errors import ConfigError


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "demo",
        help="supermarket chains mine association rules together (in-process network)",
        description=(
            "Three supermarket chains each hold their own customers' baskets (a random "
            "third of 6,000 shipped Belgian retail baskets). They find the association "
            "rules of the pooled baskets with Kantarcioglu & Clifton's protocol for "
            "horizontally partitioned data (the assoc job, on the in-process network), "
            "without showing each other their baskets or their own support counts. The "
            "demo prints the rules found, what each chain revealed, and the cost of every "
            "protocol phase."
        ),
    )
    parser.add_argument("--parties", type=int, default=3, help="number of chains (default 3)")
    parser.add_argument(
        "--min-support", type=float, default=0.01, help="minimum support (default 0.01)"
    )
    parser.add_argument(
        "--min-confidence", type=float, default=0.5, help="minimum confidence (default 0.5)"
    )
    parser.add_argument("--top", type=int, default=10, help="rules to show (default 10)")
    parser.add_argument(
        "--private-counts",
        action="store_true",
        help="do not publish the global support counts: frequent itemsets and rules are "
        "decided by secure comparisons (rules are then shown without measures)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the split among chains")
    parser.add_argument("--output", help="write the job document as JSON to this file")
    parser.set_defaults(handler=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    from rich.console import Console

    from ppdm.cli._args import check_support_budget
    from ppdm.cli.simulate import party_names, simulate_files
    from ppdm.data import retail_sample
    from ppdm.jobs.mining import write_transactions
    from ppdm.mining.partition import horizontal_split
    from ppdm.mining.readers import from_transactions

    if not 2 <= args.parties <= 8:
        raise ConfigError("--parties must be between 2 and 8")
    if not 0.0 < args.min_support <= 1.0:
        raise ConfigError("--min-support must be in (0, 1]")
    if not 0.0 <= args.min_confidence <= 1.0:
        raise ConfigError("--min-confidence must be in [0, 1]")
    if args.top < 0:
        raise ConfigError("--top must be non-negative")
    check_output_folder(args.output)
    console = Console()
    names = party_names(args.parties)
    with console.status("loading the shipped retail baskets"):
        pooled = from_transactions(retail_sample())
    # Before any chain starts: a support below one of a chain's baskets, or one that
    # makes an exponential number of itemsets frequent, is refused (issue 23, item 8).
    check_support_budget(pooled, args.min_support, smallest=pooled.n_transactions // len(names))
    rows = horizontal_split(pooled.n_transactions, len(names), seed=args.seed)
    local = {name: pooled.subset(r) for name, r in zip(names, rows, strict=True)}
    console.print(
        f"[bold]{len(names)} supermarket chains[/bold] hold "
        + ", ".join(f"{n}: {local[n].n_transactions:,}" for n in names)
        + f" of {pooled.n_transactions:,} shipped retail baskets "
        f"({pooled.n_items:,} products). They mine association rules of the pooled baskets "
        f"(min support {args.min_support:g}, min confidence {args.min_confidence:g}) with "
        "Kantarcioglu & Clifton's protocol, each on its own baskets.\n"
    )
    params = {
        "mode": "horizontal",
        "min_support": args.min_support,
        "min_confidence": args.min_confidence,
        "reveal_counts": not args.private_counts,
        "format": "fimi",
    }
    with tempfile.TemporaryDirectory(prefix="ppdm-demo-") as tmp:
        for name in names:
            write_transactions(local[name], Path(tmp) / f"{name}.dat", fmt="fimi")
        files = {name: f"{name}.dat" for name in names}
        doc = simulate_files("assoc", Path(tmp), "transactions", files, params)
    result = doc["parties"][names[0]]["result"]
    found = {frozenset(e["items"]) for e in result["frequent_itemsets"]}
    oracle, central = _centralized(pooled, args.min_support)
    same = found == central
    console.print(
        f"Found {len(found)} frequent itemsets and {len(result['rules'])} rules in "
        f"{doc['wall_time_s']:.1f} s; identical to centralized mining of the pooled "
        f"baskets with {oracle}: {'[green]yes[/green]' if same else '[red]NO[/red]'}\n"
    )
    console.print(_rules_table(result, args.top))
    console.print(_revealed(result, local, names, args))
    console.print(_cost_table(doc))
    if args.output:
        write_json(doc, args.output, echo=False)
    return 0 if same else 1


def _items(items: list[Any]) -> str:
    return "{" + ", ".join(str(x) for x in items) + "}"


def _centralized(pooled: Any, min_support: float) -> tuple[str, set[frozenset]]:
    """The frequent itemsets of the pooled baskets by an independent miner: pyfim
    (Borgelt's C implementation, in the ``dev`` extra) when it is installed, else ppdm's
    own local miner (and the demo says which)."""
    from ppdm.mining.itemsets import frequent_itemsets, min_count

    try:
        import fim
    except ImportError:
        return "ppdm's local miner (pip install pyfim for an independent check)", set(
            frequent_itemsets(pooled, min_support)
        )
    tx = [list(t) for t in pooled.transactions()]
    # pyfim leaves out items present in every basket; one empty basket changes no count.
    threshold = min_count(min_support, pooled.n_transactions)
    found = fim.fpgrowth([*tx, []], target="s", supp=-threshold, zmin=1, report="a")
    return "pyfim (independent)", {frozenset(items) for items, _ in found}


def _rules_table(result: dict[str, Any], top: int) -> Any:
    from rich.table import Table

    rules = result["rules"]
    if result["counts_revealed"]:
        rules = sorted(
            rules, key=lambda r: (-r["lift"], -r["confidence"], r["antecedent"], r["consequent"])
        )
        title = f"Top {min(top, len(rules))} of {len(rules)} rules by lift (products by id)"
    else:
        title = f"{min(top, len(rules))} of {len(rules)} rules (counts kept private)"
    table = Table(title=title)
    table.add_column("if a basket has")
    table.add_column("it also has")
    for col in ("support", "confidence", "lift"):
        table.add_column(col, justify="right")
    for r in rules[:top]:
        measures = (
            (f"{r['support']:.4f}", f"{r['confidence']:.3f}", f"{r['lift']:.2f}")
            if r["support"] is not None
            else ("-", "-", "-")
        )
        table.add_row(_items(r["antecedent"]), _items(r["consequent"]), *measures)
    return table


def _revealed(
    result: dict[str, Any], local: dict[str, Any], names: list[str], args: argparse.Namespace
) -> Any:
    """What the protocol disclosed (Kantarcioglu & Clifton's accepted leakage), and, since
    the demo plays every chain, a check of the union of locally large itemsets against
    the chains' own data (which stays private in a real run)."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    from ppdm.mining.itemsets import apriori_gen, min_count, support_counts

    n_total = result["n_transactions"]
    frequent = {frozenset(e["items"]) for e in result["frequent_itemsets"]}
    table = Table(title="What the chains revealed to each other, per Apriori level")
    table.add_column("level", justify="right")
    table.add_column("union of locally large itemsets (anonymous)", justify="right")
    table.add_column("globally large", justify="right")
    table.add_column("e.g. locally large somewhere, not globally")
    prev: list[tuple] = []
    for level in result["levels"]:
        k = level["k"]
        union: set[tuple] = set()
        for name in names:
            db = local[name]
            cands = [(x,) for x in db.items.tolist()] if k == 1 else apriori_gen(prev)
            if not cands or not db.n_transactions:
                continue
            counts = support_counts(db, cands)
            need = min_count(args.min_support, db.n_transactions)
            union.update(c for c, n in zip(cands, counts, strict=True) if n >= need)
        if len(union) != level["candidates_union"]:
            raise RuntimeError("the protocol's union differs from the chains' data")
        only_local = sorted(c for c in union if frozenset(c) not in frequent)
        table.add_row(
            str(k),
            str(level["candidates_union"]),
            str(level["frequent"]),
            ", ".join(_items(list(c)) for c in only_local[:3]) or "-",
        )
        prev = sorted(c for c in union if frozenset(c) in frequent)
    counts_line = (
        "the global support count of every itemset in the union (the chains agreed to publish them)"
        if result["counts_revealed"]
        else "no support count: whether an itemset or rule passes is decided by a secure "
        "comparison on masked sums"
    )
    own = Table(title="What stayed private at each chain")
    own.add_column("chain")
    own.add_column("its baskets", justify="right")
    own.add_column("its own support counts")
    own.add_column("which locally large itemsets it contributed")
    for name in names:
        own.add_row(name, f"{local[name].n_transactions:,}", "never sent", "hidden in the union")

    return Group(
        Text.from_markup(
            f"\n[bold]Revealed to all chains[/bold]: the pooled number of baskets N = "
            f"{n_total:,} (secure sum); per level, the union of the itemsets that are "
            "locally large at some chain (secure union with commutative encryption and "
            "fake itemsets: who contributed what is hidden; the first chain, which merges "
            "the encrypted sets, learns how many itemsets each group of chains shares, "
            f"not which) and which of them are globally large; {counts_line}."
        ),
        table,
        own,
    )


def _cost_table(doc: dict[str, Any]) -> Any:
    """Messages and bytes per protocol phase (steps grouped by their first three
    components, e.g. ``assoc/level2/union``), summed over the chains; the time is the
    longest of the chains' summed step times."""
    from rich.table import Table

    phases: dict[str, dict[str, float]] = defaultdict(
        lambda: {"messages": 0, "bytes": 0, "time": 0.0}
    )
    for entry in doc["parties"].values():
        spent: dict[str, float] = defaultdict(float)
        for m in entry["metrics"]:
            key = "/".join(m["step"].split("/")[:3])
            ph = phases[key]
            ph["messages"] += m["messages_sent"]
            ph["bytes"] += m["bytes_sent"]
            spent[key] += m["wall_time_s"]
        for key, t in spent.items():
            phases[key]["time"] = max(phases[key]["time"], t)
    table = Table(title="Cost per protocol phase (all chains)")
    table.add_column("phase")
    table.add_column("messages", justify="right")
    table.add_column("bytes", justify="right")
    table.add_column("time s", justify="right")
    for key, ph in phases.items():
        table.add_row(key, f"{int(ph['messages']):,}", f"{int(ph['bytes']):,}", f"{ph['time']:.3f}")
    table.add_row(
        "[bold]total[/bold]",
        f"{int(sum(p['messages'] for p in phases.values())):,}",
        f"{int(sum(p['bytes'] for p in phases.values())):,}",
        f"{doc['wall_time_s']:.3f} (wall)",
    )
    return table
