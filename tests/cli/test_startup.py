"""Start-up stays light (issue 16, item 4): ``ppdm --help`` imports no numerical,
data-frame, plotting, RPC or certificate library, and a node (``ppdm party serve``) none
of pandas, scipy, matplotlib, DuckDB or scikit-learn. Checked by the modules a fresh
interpreter has loaded, not by timing (the speed goal is printed by
``python benchmarks/startup.py``)."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ["numpy", "pandas", "scipy", "matplotlib", "duckdb", "sklearn", "pyarrow", "grpc"]


def _loaded(code: str) -> list[str]:
    probe = (
        f"import sys\n{code}\nimport json\n"
        f"print(json.dumps([m for m in {[*HEAVY, 'cryptography']!r} if m in sys.modules]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_help_loads_nothing_heavy():
    """``ppdm --help`` (and any command but ``simulate``, which describes every job)."""
    assert _loaded("from ppdm.cli.main import main\nmain(['--help'])") == []
    assert _loaded("from ppdm.cli.main import main\nmain(['job', '--help'])") == []


def test_import_ppdm_is_light():
    assert _loaded("import ppdm") == []


def test_a_node_loads_only_what_it_serves_with():
    loaded = _loaded("import ppdm.cli.party, ppdm.service.node")
    assert not {"pandas", "scipy", "matplotlib", "duckdb", "sklearn", "pyarrow"} & set(loaded)
