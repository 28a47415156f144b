"""A research testbed: how does a protocol's cost grow with the parties and the data?

The scenario: a researcher compares the cost of the collusion-resistant secure sum
(``ppdm.protocols.additive_sum``: pairwise X25519 keys, then masked vectors all-to-all)
for 3 to 12 parties and vectors of 10 to 100,000 integers. Every run is a simulation on the
in-process network (``ppdm.simulate``), which meters every protocol step at every party
exactly as the gRPC transport does: messages, bytes and wall time.

Writes ``costs.csv`` (one row per run and step) and ``costs.png``: bytes, messages and
time per step against the number of parties, one line per vector size. Run from the
repository root (about 15 s)::

    python examples/research_testbed.py --out testbed-out
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

import ppdm
from ppdm.protocols.additive_sum import additive_sum

PARTIES = [3, 5, 8, 12]
SIZES = [10, 1_000, 100_000]


def run(parties: int, size: int) -> list[dict]:
    """One simulation; the per-step costs summed over the parties (time: the slowest)."""
    rng = np.random.default_rng(parties * 1_000_003 + size)  # inputs only; masks use os.urandom
    inputs = {f"p{i}": rng.integers(-1000, 1000, size) for i in range(parties)}
    sim = ppdm.simulate(additive_sum, inputs)
    expected = np.sum(list(inputs.values()), axis=0)
    assert np.array_equal(sim.results["p0"], expected)  # check the answer, not just the cost
    steps: dict[str, dict] = {}
    for metrics in sim.metrics.values():
        for m in metrics:
            row = steps.setdefault(m["step"], {"bytes": 0, "messages": 0, "time_s": 0.0})
            row["bytes"] += m["bytes_sent"]
            row["messages"] += m["messages_sent"]
            row["time_s"] = max(row["time_s"], m["wall_time_s"])
    return [
        {"parties": parties, "size": size, "step": step.split("/")[-1], **cost}
        for step, cost in steps.items()
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="testbed-out", help="folder for costs.csv/.png")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = [r for p in PARTIES for n in SIZES for r in run(p, n)]
    frame = pd.DataFrame(rows)
    frame.to_csv(out / "costs.csv", index=False)
    print(frame.to_string(index=False))

    fig, axes = plt.subplots(1, 3, figsize=(16, 5), constrained_layout=True)
    panels = [
        ("bytes", "bytes sent, all parties (log scale)", True),
        ("messages", "messages sent, all parties", False),
        ("time_s", "wall time of the slowest party (s, log scale)", True),
    ]
    styles = {"key": "--", "masked": "-"}
    for ax, (col, label, log) in zip(axes, panels, strict=True):
        for (size, step), part in frame.groupby(["size", "step"]):
            ax.plot(
                part["parties"],
                part[col],
                styles.get(str(step), ":"),
                marker="o",
                color=f"C{SIZES.index(int(size))}",
                label=f"{step}, {int(size):,} values",
            )
        ax.set_xlabel("number of parties")
        ax.set_ylabel(label)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if log:
            ax.set_yscale("log")
        ax.grid(True, alpha=0.3)
    axes[0].legend(title="step, vector size", fontsize="small", loc="lower right")
    fig.suptitle("Collusion-resistant secure sum: cost per protocol step")
    fig.savefig(out / "costs.png", dpi=110)
    plt.close(fig)
    print(f"wrote {out}/costs.csv and {out}/costs.png")


if __name__ == "__main__":
    main()
