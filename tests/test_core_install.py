"""The core install (issue 25, item 7): a node's packages without the heavy libraries.

A subprocess hides every module an extra installs (an import hook raises
``ModuleNotFoundError`` for them, as on a machine where ``pip install ppdm`` installed only
the core) and then imports the node's packages, runs jobs and commands. A feature that
needs an extra fails with one line naming it. The real install is checked by CI's fresh
virtual environment (README); this test catches the regressions in between: a new
top-level import of a heavy library in the core, or an extra named nowhere.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from ppdm.extras import EXTRAS, MissingExtra, require

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
#: What a core install leaves out (the issue's list).
HEAVY = ("scipy", "pyarrow", "duckdb", "matplotlib", "psycopg", "highspy")
#: The packages a node needs, all importable on the core install.
CORE_PACKAGES = (
    "ppdm.protocols",
    "ppdm.parties",
    "ppdm.service",
    "ppdm.jobs",
    "ppdm.cli",
    "ppdm.mining",
    "ppdm.sources",
    "ppdm.compute",
    "ppdm.anonymize",
    "ppdm.dp",
    "ppdm.testbed",
    "ppdm.hiding.audit",
)

#: Deprecated aliases of packages that need the ``stats`` extra (ppdm.perturb, ppdm.risk).
ALIASES = {"ppdm.anonymize.perturbation", "ppdm.anonymize.risk"}

HIDE = textwrap.dedent(
    """
    import importlib.abc, sys
    HIDDEN = set(sys.argv[1].split(","))
    class Hide(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name.split(".")[0] in HIDDEN:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    sys.meta_path.insert(0, Hide())
    """
)


def _run_without(hidden: tuple[str, ...], body: str, *args: str) -> subprocess.CompletedProcess:
    code = HIDE + textwrap.dedent(body)
    return subprocess.run(
        [sys.executable, "-c", code, ",".join(hidden), *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )


def _requirement_names(reqs: list[str]) -> set[str]:
    names = set()
    for req in reqs:
        name = req.split(";")[0].split("[")[0]
        for op in (">", "<", "=", "!", "~"):
            name = name.split(op)[0]
        names.add(name.strip().lower())
    return names


# What pip installs ------------------------------------------------------------------------


def test_the_core_dependencies_hold_none_of_the_heavy_libraries():
    core = _requirement_names(PYPROJECT["project"]["dependencies"])
    assert not core & {"scipy", "pyarrow", "duckdb", "matplotlib", "psycopg", "highspy"}


@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_each_extra_installs_the_modules_its_errors_promise(extra):
    """``require(module, extra)`` tells the user to install ``ppdm[extra]``: that extra must
    exist and install the module's distribution."""
    optional = PYPROJECT["project"]["optional-dependencies"]
    assert extra in optional
    dists = _requirement_names(optional[extra])
    for module in EXTRAS[extra]:
        assert module in dists, (extra, module)
    assert f"ppdm[{','.join(sorted(EXTRAS, key=list(EXTRAS).index))}]" in optional["all"][0]


def test_every_require_call_names_an_extra_that_installs_its_module():
    """Each ``require("mod", "extra", ...)`` in ppdm names an extra of :data:`EXTRAS` that
    installs ``mod``'s top-level package."""
    calls = 0
    for path in (REPO / "ppdm").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "require"
                and len(node.args) >= 2
                and all(isinstance(a, ast.Constant) for a in node.args[:2])
            ):
                module, extra = node.args[0].value, node.args[1].value
                assert extra in EXTRAS, (path, extra)
                assert module.split(".")[0] in EXTRAS[extra], (path, module, extra)
                calls += 1
    assert calls >= 10


def test_no_heavy_library_is_imported_at_module_level_outside_require():
    """A module-level ``import scipy`` (or any heavy library) would break the core
    install of every package importing that module; inside a function it is first use."""
    offenders = []
    for path in (REPO / "ppdm").rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            else:
                continue
            if any(n.split(".")[0] in HEAVY for n in names):
                offenders.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert offenders == []


def test_require_names_the_extra_and_passes_other_import_errors_through(monkeypatch):
    with pytest.raises(MissingExtra, match=r"pip install 'ppdm\[plot\]'") as info:
        require("surely_not_a_module_ppdm", "plot", "a plot")
    assert info.value.extra == "plot" and "\n" not in str(info.value)
    assert require("json", "plot", "x") is json


# What runs on the core install ------------------------------------------------------------


def test_a_node_s_packages_import_and_a_job_runs_without_any_extra(tmp_path):
    body = f"""
    import importlib, pkgutil, json, sys
    for name in {CORE_PACKAGES!r}:
        pkg = importlib.import_module(name)
        for m in pkgutil.walk_packages(getattr(pkg, "__path__", []), name + "."):
            if not m.name.endswith("__main__") and m.name not in {ALIASES!r}:
                importlib.import_module(m.name)
    from ppdm.cli.main import main
    code = main(["simulate", "secure-sum", "--values", "3,5,9", "--output", sys.argv[2]])
    assert code == 0, code
    doc = json.load(open(sys.argv[2]))
    assert doc["ok"], doc
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in sys.argv[1].split(","))
    assert loaded == [], loaded
    """
    done = _run_without(HEAVY, body, str(tmp_path / "sum.json"))
    assert done.returncode == 0, done.stderr[-3000:]


def test_the_demo_runs_on_the_core_install():
    done = _run_without(HEAVY, "from ppdm.cli.main import main\nraise SystemExit(main(['demo']))")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "rules" in done.stdout.lower()


@pytest.mark.parametrize(
    ("hidden", "argv", "extra"),
    [
        (("scipy",), ["perturb", "--help"], None),  # help needs nothing
        (("scipy",), ["risk", "--help"], None),
        (
            ("matplotlib",),
            ["simulate", "secure-sum", "--values", "3,5,9", "--plot", "{png}"],
            "plot",
        ),
    ],
)
def test_a_command_without_its_extra_fails_in_one_line_naming_it(tmp_path, hidden, argv, extra):
    argv = [a.format(png=tmp_path / "p.png") for a in argv]
    body = "from ppdm.cli.main import main\nimport sys\nraise SystemExit(main(sys.argv[2:]))"
    done = _run_without(hidden, body, *argv)
    if extra is None:
        assert done.returncode == 0, done.stderr[-2000:]
        return
    assert done.returncode != 0
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, done.stderr[-2000:]
    assert f"pip install 'ppdm[{extra}]'" in lines[0] and "Traceback" not in done.stderr


def test_a_parquet_source_without_duckdb_names_the_files_extra(tmp_path):
    import pandas as pd

    folder = tmp_path / "ds"
    folder.mkdir()
    pd.DataFrame({"tid": [1, 1, 2], "item": [3, 4, 3]}).to_parquet(folder / "part.parquet")
    body = f"""
    from pathlib import Path
    from ppdm.extras import MissingExtra
    from ppdm.sources import open_spec, parse_data_entry
    spec = parse_data_entry("t", {{"kind": "parquet", "path": {str(folder)!r}}},
                            base_dir=Path({str(tmp_path)!r}))
    try:
        with open_spec(spec) as src:
            src.transactions()
    except MissingExtra as exc:
        print(exc)
    else:
        raise SystemExit("read a Parquet dataset without DuckDB")
    """
    done = _run_without(("duckdb", "pyarrow"), body)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "pip install 'ppdm[files]'" in done.stdout


@pytest.mark.parametrize(
    ("package", "extra"),
    [("ppdm.perturb", "stats"), ("ppdm.risk", "stats"), ("ppdm.hiding.api", "hiding")],
)
def test_a_library_package_without_its_extra_names_it(package, extra):
    body = f"""
    import importlib
    from ppdm.extras import MissingExtra
    try:
        importlib.import_module({package!r})
    except MissingExtra as exc:
        print(exc)
    else:
        raise SystemExit("imported without scipy")
    """
    done = _run_without(("scipy",), body)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"pip install 'ppdm[{extra}]'" in done.stdout
