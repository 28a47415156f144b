"""examples/notebook.ipynb runs top to bottom in a real Jupyter kernel (issue 24, item 7).

The notebook calls ``ppdm.mining`` with mlxtend's documented call forms and asserts, in its
own cells, that the frames equal mlxtend's; then it mines the same kind of rules between
three parties in process and shows them with ``.to_frame()``. The test executes it with
nbclient (outputs are not stored in the repository) and checks the last cells' outputs.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOK = Path(__file__).resolve().parents[2] / "examples" / "notebook.ipynb"


def test_notebook_is_stored_without_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(not c.outputs and c.execution_count is None for c in code)


def _this_interpreters_kernel(root: Path) -> str:
    """A kernel spec that starts this very interpreter (never a ``python3`` found
    elsewhere on the machine), under ``root`` on ``JUPYTER_PATH``; returns its name."""
    name = "ppdm-tests"
    spec = root / "kernels" / name
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    spec.joinpath("kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": name, "language": "python"})
    )
    return name


def test_notebook_executes(shared_data: Path, monkeypatch, tmp_path):
    monkeypatch.setenv("PPDM_SHARED", str(shared_data.parent))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))
    kernel = _this_interpreters_kernel(tmp_path)
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        timeout=240,  # per cell: catches a hang, not a speed goal
        kernel_name=kernel,
        resources={"metadata": {"path": str(NOTEBOOK.parent)}},
    )
    client.execute(env=dict(os.environ))
    outputs = {
        i: "".join(o.get("text", "") + o.get("data", {}).get("text/plain", "") for o in c.outputs)
        for i, c in enumerate(nb.cells)
        if c.cell_type == "code"
    }
    assert not any(
        o.output_type == "error" for c in nb.cells if c.cell_type == "code" for o in c.outputs
    )
    text = "\n".join(outputs.values())
    assert "'equal to mlxtend'" in text
    assert "antecedents" in text and "itemsets" in text
