"""Output helpers shared by command modules: JSON documents."""

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


def write_json(doc: Any, output: str | None, *, echo: bool = True) -> None:
    """Write ``doc`` as JSON to ``output`` (if given) and to stdout (if ``echo``)."""
    for docs in _captured:
        docs.append(doc)
    text = json.dumps(doc, indent=2, sort_keys=False, default=_default) + "\n"
    if output:
        Path(output).write_text(text)
    if echo:
        sys.stdout.write(text)


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
