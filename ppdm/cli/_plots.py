"""Figures of a job document's costs: per-step bytes, messages and time (``--plot FILE``).

matplotlib is imported on first use (the Agg backend: no display needed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ppdm.errors import ConfigError

__all__ = ["group_steps", "plot_job_costs", "step_costs"]

#: Most rows (steps) a figure shows; more are grouped by their leading path components.
MAX_ROWS = 28
_KEYS = ("bytes_sent", "messages_sent", "wall_time_s")


def step_costs(doc: dict[str, Any]) -> tuple[list[str], list[str], dict[str, dict[str, Any]]]:
    """``(steps in first-seen order, parties, {party: {step: metric record}})``."""
    steps: list[str] = []
    per: dict[str, dict[str, Any]] = {}
    for party, rec in (doc.get("parties") or {}).items():
        per[party] = {}
        for m in (rec or {}).get("metrics") or []:
            step = str(m.get("step"))
            if step not in steps:
                steps.append(step)
            per[party][step] = m
    return steps, list(per), per


def group_steps(
    steps: list[str],
    per: dict[str, dict[str, Any]],
    *,
    max_rows: int = MAX_ROWS,
    wall_times: dict[str, float] | None = None,
) -> tuple[list[str], dict[str, dict[str, Any]], int | None]:
    """Sum the costs of steps that share their first ``depth`` path components (``a/b/c``
    -> ``a/b``), with the deepest ``depth`` giving at most ``max_rows`` rows; returns the
    rows, the summed records and the depth (None when nothing was grouped).

    Bytes and messages add up; wall times do not (the steps of a group overlap when a
    party runs them concurrently or interleaved), so a group's time is the sum of its
    steps' times capped by the party's wall time in ``wall_times`` (when given) -- a bar
    never exceeds the job."""
    if len(steps) <= max_rows:
        return steps, per, None
    depth = max(len(s.split("/")) for s in steps)
    while depth > 1:
        depth -= 1
        keys = list(dict.fromkeys("/".join(s.split("/")[:depth]) for s in steps))
        if len(keys) <= max_rows:
            break
    grouped: dict[str, dict[str, Any]] = {}
    for party, recs in per.items():
        out: dict[str, dict[str, float]] = {}
        for step, m in recs.items():
            row = out.setdefault("/".join(step.split("/")[:depth]), dict.fromkeys(_KEYS, 0.0))
            for k in _KEYS:
                row[k] += float(m.get(k, 0) or 0)
        cap = (wall_times or {}).get(party)
        if cap is not None and cap > 0:
            for row in out.values():
                row["wall_time_s"] = min(row["wall_time_s"], cap)
        grouped[party] = out
    return keys, grouped, depth


def plot_job_costs(doc: dict[str, Any], path: str | Path, *, title: str | None = None) -> Path:
    """Draw bytes sent, messages sent and wall time per protocol step (one bar per party
    and step) into the PNG (or any matplotlib format) ``path``; returns the path."""
    steps, parties, per = step_costs(doc)
    if not steps:
        raise ConfigError("the job document has no per-step costs to plot")
    from ppdm.cli._summary import party_seconds

    wall = float(doc.get("wall_time_s") or 0.0)
    caps = {}
    for party, rec in (doc.get("parties") or {}).items():
        own = party_seconds(rec)
        caps[party] = min(own, wall) if own > 0 and wall > 0 else (own or wall)
    steps, per, depth = group_steps(steps, per, wall_times=caps)
    from ppdm.extras import require

    matplotlib = require("matplotlib", "plot", "--plot")

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    y = np.arange(len(steps))
    height = 0.8 / max(len(parties), 1)
    from matplotlib.ticker import MaxNLocator, NullFormatter

    rows = len(steps) * max(1.0, len(parties) / 3)
    fig, axes = plt.subplots(1, 3, figsize=(15, max(3.5, 1.6 + 0.4 * rows)), sharey=True)
    panels = [
        ("bytes_sent", "bytes sent"),
        ("messages_sent", "messages sent"),
        ("wall_time_s", "wall time (s)"),
    ]
    for ax, (key, label) in zip(axes, panels, strict=True):
        values = []
        for i, party in enumerate(parties):
            vals = [float(per[party].get(s, {}).get(key, 0) or 0) for s in steps]
            values += vals
            ax.barh(y + i * height - 0.4 + height / 2, vals, height=height, label=party)
        positive = [v for v in values if v > 0]
        # a log scale only when the values span more than a decade, and then said so
        if key != "messages_sent" and positive and max(positive) > 20 * min(positive):
            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(NullFormatter())
            label += " (log scale)"
        elif key == "messages_sent":
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel(label)
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(y, steps)
    axes[0].invert_yaxis()
    axes[0].set_ylabel(
        "protocol step" if depth is None else f"protocol step (grouped to {depth} levels)"
    )
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, title="party", loc="upper right", fontsize="small")
    fig.suptitle(
        title
        or f"{doc.get('protocol')}: cost per step and party "
        f"({len(parties)} parties, {float(doc.get('wall_time_s') or 0):.3g} s wall time)"
    )
    fig.tight_layout(rect=(0, 0, 0.92, 1))
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
