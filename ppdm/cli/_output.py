"""Output helpers shared by command modules: JSON documents and cost tables."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def write_json(doc: Any, output: str | None, *, echo: bool = True) -> None:
    """Write ``doc`` as JSON to ``output`` (if given) and to stdout (if ``echo``)."""
    text = json.dumps(doc, indent=2, sort_keys=False, default=_default) + "\n"
    if output:
        Path(output).write_text(text)
    if echo:
        sys.stdout.write(text)


def _default(obj: Any) -> Any:
    import numpy as np

    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, set | frozenset):
        return sorted(obj)
    raise TypeError(f"not JSON-serializable: {type(obj).__name__}")


def cost_table(doc: Mapping[str, Any], *, title: str = "cost per party and step") -> Any:
    """A rich Table of the per-step metrics in a job document."""
    from rich.table import Table

    table = Table(title=title)
    for col in ("party", "step", "msgs sent", "msgs recv", "bytes sent", "bytes recv", "time s"):
        table.add_column(col, justify="left" if col in ("party", "step") else "right")
    for party, entry in doc["parties"].items():
        for m in entry.get("metrics", []):
            table.add_row(
                party,
                m["step"],
                f"{m['messages_sent']:,}",
                f"{m['messages_received']:,}",
                f"{m['bytes_sent']:,}",
                f"{m['bytes_received']:,}",
                f"{m['wall_time_s']:.4f}",
            )
    return table
