"""A node's start does not load what only a job needs (issue 25, item 5: a node serving
within 0.3 s of start). Each check runs a fresh interpreter and lists the modules an
import pulls in."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def _loaded_after(statement: str) -> set[str]:
    code = f"import sys\n{statement}\nimport json\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300
    )
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_the_data_table_check_does_not_load_the_readers_or_the_miners():
    """The node checks its [data] table at start through ppdm.sources.config."""
    loaded = _loaded_after("import ppdm.sources.config")
    for heavy in ("ppdm.mining", "ppdm.sources.files", "ppdm.sources.sql", "duckdb", "pandas"):
        assert heavy not in loaded


def test_the_paillier_jobs_load_gmpy2_only_when_they_run():
    loaded = _loaded_after("import ppdm.jobs.paillier")
    assert "gmpy2" not in loaded and "ppdm.protocols.dot_product_paillier" not in loaded


@pytest.mark.parametrize(
    "name", ["DataSource", "FileSource", "SqlSource", "StreamedCounter", "MEMORY_ROWS"]
)
def test_lazy_names_still_resolve(name):
    import ppdm.sources

    assert getattr(ppdm.sources, name) is not None


def test_unknown_names_raise_attribute_error():
    import ppdm.sources

    with pytest.raises(AttributeError):
        ppdm.sources.NoSuchThing  # noqa: B018
