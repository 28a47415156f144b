"""Output helpers shared by command modules: human output by default, JSON on request.

Every command prints for a person first: a table (:func:`print_table`) or a few
``key: value`` lines (:func:`print_fields`), drawn with rich when stdout is a terminal
and as plain aligned text when it is a pipe. ``--json`` prints the command's document
instead (:func:`write_json`), and ``--output FILE`` writes the document to FILE.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ppdm.errors import ConfigError

if TYPE_CHECKING:
    from ppdm.parties.consortium import PartySettings

_captured: list[list[Any]] = []


@contextmanager
def capture_documents() -> Iterator[list[Any]]:
    """Collect every document :func:`write_json` writes inside the block (what
    ``--plot`` draws from)."""
    docs: list[Any] = []
    _captured.append(docs)
    try:
        yield docs
    finally:
        _captured.remove(docs)


_json_mode = False


def set_json_mode(on: bool) -> None:
    """``--json`` of the running command: :func:`write_json` prints JSON, not text."""
    global _json_mode
    _json_mode = bool(on)


def json_mode() -> bool:
    """Whether the running command was given ``--json``."""
    return _json_mode


def write_json(doc: Any, output: str | None, *, echo: bool = True) -> None:
    """Write ``doc`` as JSON to ``output`` (if given) and show it on stdout (if ``echo``):
    as JSON under ``--json``, else as text for people (:func:`render_document`)."""
    for docs in _captured:
        docs.append(doc)
    text = json.dumps(doc, indent=2, sort_keys=False, default=_default) + "\n"
    if output:
        from ppdm.cli._args import atomic_file

        with atomic_file(output) as tmp:  # whole or not at all
            tmp.write_text(text)
    if echo:
        sys.stdout.write(text if _json_mode else render_document(json.loads(text)) + "\n")


#: Longest list a text rendering shows in full (the rest: ``--json``).
MAX_SHOWN = 12


def _scalar(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _flat_list(value: Any) -> bool:
    return isinstance(value, list) and all(not isinstance(v, dict | list) for v in value)


def _scalar_or_list(value: Any) -> str:
    if isinstance(value, list):
        shown = ", ".join(_scalar_or_list(v) for v in value[:MAX_SHOWN])
        more = f", ... ({len(value) - MAX_SHOWN} more)" if len(value) > MAX_SHOWN else ""
        return f"[{shown}{more}]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={_scalar_or_list(v)}" for k, v in value.items()) + "}"
    return _scalar(value)


def _render(value: Any, indent: int, lines: list[str], key: str) -> None:
    pad = "  " * indent
    if isinstance(value, dict):
        if not value:
            lines.append(f"{pad}{key}: -")
            return
        if key:
            lines.append(f"{pad}{key}:")
        inner = indent + 1 if key else indent
        width = max(len(str(k)) for k in value) + 1
        for k, v in value.items():
            if isinstance(v, dict | list) and v and not _flat_list(v):
                _render(v, inner, lines, str(k))
            else:
                lines.append(f"{'  ' * inner}{str(k) + ':':<{width}} {_scalar_or_list(v)}")
        return
    if isinstance(value, list):
        cut = " (the first shown)" if len(value) > MAX_SHOWN else ""
        lines.append(f"{pad}{key}: {len(value)} entries{cut}")
        for r in value[:MAX_SHOWN]:
            if isinstance(r, dict):
                items = ", ".join(f"{k}={_scalar_or_list(v)}" for k, v in r.items())
                lines.append(f"{pad}  - {items}")
            else:
                lines.append(f"{pad}  - {_scalar_or_list(r)}")
        if len(value) > MAX_SHOWN:
            lines.append(f"{pad}  ... {len(value) - MAX_SHOWN} more (--json shows all)")
        return
    lines.append(f"{pad}{key}: {_scalar(value)}" if key else f"{pad}{_scalar(value)}")


def render_document(doc: Any) -> str:
    """A command's JSON document as a few lines for people: a job document as its
    summary (:func:`ppdm.cli._summary.job_summary`), a differentially private answer as
    one line and its budget, anything else as aligned ``key: value`` lines with long lists
    cut (``--json`` prints the whole document)."""
    if isinstance(doc, dict) and isinstance(doc.get("parties"), dict) and "protocol" in doc:
        from ppdm.cli._summary import job_summary

        return job_summary(doc)
    if isinstance(doc, dict) and "query" in doc and "result" in doc:
        return _dp_lines(doc)
    lines: list[str] = []
    _render(doc, 0, lines, "")
    return "\n".join(lines)


def _dp_lines(doc: dict[str, Any]) -> str:
    what = f"{doc['query']}({doc['column']})" if doc.get("column") else str(doc["query"])
    result = doc["result"]
    shown = f"{result:.6g}" if isinstance(result, float) else _scalar_or_list(result)
    budget = doc.get("budget") or {}
    eps = (budget.get("this_query") or {}).get("epsilon", doc.get("epsilon"))
    lines = [f"{what} = {shown}  ({doc.get('mechanism', '')} noise, epsilon {eps})"]
    if budget:
        lines.append(
            f"privacy budget of {budget.get('dataset', 'the data set')}: "
            f"{budget.get('epsilon_spent')} of {budget.get('epsilon_budget')} spent, "
            f"{budget.get('epsilon_remaining')} left ({budget.get('budget_file')})"
        )
    return "\n".join(lines)


def add_json_flag(parser: Any, *, help: str = "print the JSON document instead of text") -> None:
    """The ``--json`` flag every command with a document shares."""
    parser.add_argument("--json", action="store_true", help=help)


def _console() -> Any:
    from rich.console import Console

    # soft_wrap: a long cell is not cut at a pipe's (unknown) width
    return Console(highlight=False, soft_wrap=not sys.stdout.isatty())


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list | tuple | set | frozenset):
        return ", ".join(_cell(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}={_cell(v)}" for k, v in value.items())
    return str(value)


def print_table(
    rows: list[dict[str, Any]],
    columns: list[tuple[str, str]],
    *,
    title: str | None = None,
    empty: str = "nothing to show",
) -> None:
    """Print ``rows`` as a table of ``columns`` (``(key, heading)`` pairs): rich's box
    on a terminal, plain aligned columns on a pipe (so ``| head`` and ``| grep`` work)."""
    if not rows:
        print(empty)
        return
    cells = [[_cell(r.get(k)) for k, _ in columns] for r in rows]
    if sys.stdout.isatty():
        from rich.table import Table

        table = Table(title=title, title_justify="left")
        for _, heading in columns:
            table.add_column(heading)
        for row in cells:
            table.add_row(*row)
        _console().print(table)
        return
    if title:
        print(title)
    widths = [
        max([len(h) for _, h in columns][i : i + 1] + [len(c[i]) for c in cells])
        for i in range(len(columns))
    ]
    print("  ".join(h.ljust(w) for (_, h), w in zip(columns, widths, strict=True)).rstrip())
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def print_fields(fields: list[tuple[str, Any]], *, title: str | None = None) -> None:
    """Print ``label: value`` lines (values as in a table cell), labels aligned."""
    if title:
        print(title)
    width = max((len(k) for k, _ in fields), default=0)
    indent = "  " if title else ""
    for k, v in fields:
        print(f"{indent}{k + ':':<{width + 1}} {_cell(v)}")


def sniff_sep(path: str | Path | None) -> str:
    """The field separator of a CSV file: ``;`` when its first line has more semicolons
    than commas (every data set shipped in ``../shared`` uses ``;``), else ``,`` (also for
    a missing, binary or Parquet file: the reader reports those)."""
    if not path or not Path(path).is_file():  # a FIFO would block the open (issue 23)
        return ","
    try:
        with open(path, "rb") as f:
            head = f.readline(64 * 1024)
    except OSError:
        return ","
    return ";" if head.count(b";") > head.count(b",") else ","


def check_output_folder(output: str | None) -> None:
    """:class:`ConfigError` unless the folder of ``output`` (when given) exists."""
    if output is not None and not Path(output).resolve().parent.is_dir():
        raise ConfigError(f"--output folder {Path(output).parent} does not exist")


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


def load_settings(path: str | Path, **options: Any) -> PartySettings:
    """:func:`ppdm.parties.consortium.load_settings`, imported on first use (it loads the
    certificate library, which ``ppdm --help`` does not need)."""
    from ppdm.parties.consortium import load_settings as load

    return load(path, **options)
