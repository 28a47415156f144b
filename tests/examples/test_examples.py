"""Every example in ``examples/`` runs as documented (issue 15, item 1).

Each example is a subprocess with a generous deadline that only catches a hang, run
from the repository root as its README section says; the test checks the exit code and what it writes. The examples check their
own results against independent oracles (the pooled computation, scikit-learn), so a
wrong answer fails here too. The two that start real nodes are in the gRPC tier.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


# A deadline that only catches a hang (the data-publisher example takes about 70 s on a
# quiet machine; issue 22: no wall-clock bound in a test).
HANG_SECONDS = 1500.0

pytestmark = pytest.mark.timeout(1800)


def _run(name: str, *args: str, timeout: float = HANG_SECONDS) -> str:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert proc.returncode == 0, f"{name} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def _png_ok(path: Path, min_width: int = 600) -> None:
    import matplotlib.image as mpimg

    img = mpimg.imread(path)
    assert img.shape[1] >= min_width and img.shape[0] >= 300
    assert float(img[..., :3].std()) > 0.02  # not blank


def test_every_example_has_a_readme_section():
    readme = (EXAMPLES / "README.md").read_text()
    for script in sorted(EXAMPLES.glob("*.py")):
        assert f"python examples/{script.name}" in readme, script.name


def test_banks(shared_data):
    out = _run("banks.py", "--banks", "12", "--epsilon", "0.5")
    assert "30162 customers" in out and "DP count" in out


@pytest.mark.slow
def test_data_publisher(shared_data, tmp_path):
    out = _run("data_publisher.py", "--out", str(tmp_path))
    assert "5-anonymity" in out and "0.3-closeness" in out
    _png_ok(tmp_path / "privacy_utility.png")
    assert (tmp_path / "adult-5-anonymity.csv").stat().st_size > 100_000


def test_research_testbed(tmp_path):
    _run("research_testbed.py", "--out", str(tmp_path))
    _png_ok(tmp_path / "costs.png")
    rows = (tmp_path / "costs.csv").read_text().splitlines()
    assert len(rows) == 1 + 4 * 3 * 2  # parties x sizes x steps


@pytest.mark.grpc
def test_supermarket(tmp_path):
    out = _run("supermarket.py", "--out", str(tmp_path))
    assert "the 2 sensitive rules are hidden" in out
    published = json.loads((tmp_path / "rules_published.json").read_text())
    assert len(published) > 10


@pytest.mark.grpc
def test_hospitals():
    out = _run("hospitals.py")
    assert "centres equal scikit-learn" in out and "refused" in out
