"""The suite relies on nothing outside the environment running it (issue 22, item 1).

A fresh virtual environment holds exactly what ``pip install -e '.[dev]'`` put there:
ppdm's dependencies and the dev extras, with their own dependencies. A test that imports
anything else, or that starts a Python other than the one running the tests (the base
interpreter, whose site-packages a fresh venv does not see), passes only on a machine
where that package happens to be installed. Both are checked here on every run, on any
machine, so a green run on a well-stocked machine cannot hide them.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"


def _declared_closure() -> set[str]:
    """Every distribution ``pip install -e '.[dev]'`` installs: ppdm's requirements and
    the dev extras, followed through the installed distributions' own requirements."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    todo = [(Requirement(r), ()) for r in project["dependencies"]]
    todo += [(Requirement(r), ()) for r in project["optional-dependencies"]["dev"]]
    seen: set[str] = set()
    visited: set[tuple[str, frozenset[str]]] = set()  # ppdm[all] after ppdm: new extras
    while todo:
        req, _ = todo.pop()
        name = canonicalize_name(req.name)
        if (name, frozenset(req.extras)) in visited:
            continue
        visited.add((name, frozenset(req.extras)))
        seen.add(name)
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue  # reported by the test below
        for text in dist.requires or ():
            sub = Requirement(text)
            envs = [{"extra": e} for e in req.extras] or [{"extra": ""}]
            if sub.marker is None or any(sub.marker.evaluate(e) for e in envs):
                todo.append((sub, ()))
    return seen


def _local_modules() -> set[str]:
    """Module names the tests may import from the checkout itself."""
    names = {"ppdm", "tests", "conftest"}
    for folder in (TESTS, ROOT / "benchmarks", ROOT / "examples"):
        if folder.is_dir():
            names |= {p.stem for p in folder.rglob("*.py")}
    return names


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_every_declared_requirement_is_installed_in_the_running_environment() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    missing = []
    for text in [*project["dependencies"], *project["optional-dependencies"]["dev"]]:
        req = Requirement(text)
        try:
            version = importlib.metadata.version(req.name)
        except importlib.metadata.PackageNotFoundError:
            missing.append(f"{req.name} (not installed)")
            continue
        if not req.specifier.contains(version, prereleases=True):
            missing.append(f"{req.name} {version} does not satisfy {req.specifier}")
    assert not missing, f"run pip install -e '.[dev]': {missing}"


def test_tests_import_only_what_the_dev_install_provides() -> None:
    declared = _declared_closure()
    by_module = importlib.metadata.packages_distributions()
    local = _local_modules()
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    undeclared: dict[str, set[str]] = {}
    for path in sorted(TESTS.rglob("*.py")):
        for name in _imports(path) - stdlib - local:
            dists = {canonicalize_name(d) for d in by_module.get(name, ())}
            if not dists & declared:
                undeclared.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    assert not undeclared, (
        "tests import modules that pip install -e '.[dev]' does not provide (declare them "
        f"in the dev extras): {undeclared}"
    )


# What starts a Python other than the running one, or borrows the base interpreter's
# packages: a test must use sys.executable (or an environment built from it that sees
# only the running environment, as tests/deploy/test_runtime_nonroot.py does).
_FOREIGN = re.compile(
    r"_base_executable|system-site-packages|system_site_packages|"
    r"[\"']/usr(/local)?/bin/python|[\"']python3?[\"']\s*,"
)
_CHECKED = [
    *sorted(TESTS.rglob("*.py")),
    ROOT / "ppdm" / "service" / "testbed.py",
    ROOT / "ppdm" / "service" / "netns.py",
]


def test_no_test_starts_a_python_outside_the_running_environment() -> None:
    this = Path(__file__).resolve()
    hits = []
    for path in _CHECKED:
        if path.resolve() == this or not path.is_file():
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if _FOREIGN.search(line) and not line.lstrip().startswith("#"):
                hits.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not hits, "use sys.executable, not another interpreter:\n" + "\n".join(hits)


def test_the_checks_above_can_fail(tmp_path: Path) -> None:
    """The import scan sees an undeclared import, and the pattern sees a base
    interpreter: neither check is vacuous."""
    probe = tmp_path / "test_probe.py"
    probe.write_text(
        "import numpy\nimport anjana\nfrom sklearn import cluster\n"
        "cmd = [sys._base_executable, '-m', 'venv', '--system-site-packages', d]\n"
    )
    assert {"numpy", "anjana", "sklearn"} <= _imports(probe)
    declared = _declared_closure()
    assert "numpy" in declared and "scikit-learn" in declared
    assert "anjana" not in declared  # the bench extra, not the dev one
    assert _FOREIGN.search(probe.read_text().splitlines()[-1])
    assert not _FOREIGN.search("cmd = [sys.executable, '-m', 'ppdm']")


def test_a_tier_that_cannot_run_fails_under_ci(tmp_path: Path) -> None:
    """``tier_unavailable`` (tests/conftest.py) skips on a workstation, lists the tier at
    the end of the run, and fails when ``CI`` is true."""
    import os
    import subprocess

    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text((TESTS / "conftest.py").read_text())
    (suite / "test_tier.py").write_text(
        "def test_needs_a_service(tier_unavailable):\n"
        "    tier_unavailable('imaginary', 'the service is not installed')\n"
    )

    def run(ci: str | None) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k != "CI"}
        if ci is not None:
            env["CI"] = ci
        env["PPDM_SHARED"] = str(tmp_path)
        return subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider"],
            cwd=suite,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    local = run(None)
    assert local.returncode == 0 and "1 skipped" in local.stdout, local.stdout
    assert "imaginary tier not run: the service is not installed" in local.stdout
    ci = run("true")
    assert ci.returncode == 1 and "1 failed" in ci.stdout, ci.stdout
    assert "CI=true: every tier must run" in ci.stdout
