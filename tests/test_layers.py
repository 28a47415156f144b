"""The package map in ``ppdm/README.md`` is the truth: its table lists the layers bottom-up,
and no module imports from a layer listed after its own, nor sits in an import circle.

The layer order is read from the README's table itself (one list, shown to readers and
checked here). Every ``import`` counts, also inside functions (a deferred import is still
a dependency); only imports under ``if TYPE_CHECKING:`` are left out, since they never
run. ``ppdm/__init__.py`` and ``ppdm/__main__.py`` are the package's doors and may point
anywhere.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PPDM = Path(__file__).resolve().parents[1] / "ppdm"
DOORS = {"ppdm", "ppdm.__main__"}


def read_layers(readme: Path) -> list[str]:
    """The first-column names of the README's map table, in order (``ppdm.x``)."""
    names = re.findall(r"^\| `(ppdm(?:\.\w+)*)` \|", readme.read_text(encoding="utf-8"), re.M)
    if not names:
        raise AssertionError(f"no layer table in {readme}")
    return names


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    """Every ``ppdm...`` module name ``tree`` imports (relative imports resolved)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "ppdm")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                if not is_package:
                    base = base[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] == "ppdm":
                # "from package import submodule" depends on the submodule; any other
                # name on the module that defines it (resolved in import_graph).
                found.update(f"{target}.{a.name}" for a in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the ppdm modules it imports (names that are not modules, such as
    ``from ppdm.x import function``, are resolved to the module that defines them)."""
    files = {
        _module_name(root, p): p
        for p in root.rglob("*.py")
        if "proto" not in p.relative_to(root).parts[:1]
    }
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        targets = set()
        for target in _imports(tree, name, path.name == "__init__.py"):
            while target and target not in files:
                target = target.rpartition(".")[0]
            if target and target != name:
                targets.add(target)
        graph[name] = targets
    return graph


def _layer_of(module: str, layers: list[str]) -> int | None:
    best = None
    for i, layer in enumerate(layers):
        inside = module == layer or module.startswith(layer + ".")
        if inside and (best is None or len(layer) > len(layers[best])):
            best = i
    return best


def upward_imports(root: Path, layers: list[str]) -> list[str]:
    """``a -> b`` for every import of a module ``b`` in a layer listed after ``a``'s."""
    graph = import_graph(root)
    problems = []
    for module, targets in sorted(graph.items()):
        if module in DOORS:
            continue
        mine = _layer_of(module, layers)
        if mine is None:
            problems.append(f"{module} is in no layer of the map")
            continue
        for target in sorted(targets):
            theirs = _layer_of(target, layers)
            if theirs is not None and theirs > mine:
                problems.append(f"{module} ({layers[mine]}) imports {target} ({layers[theirs]})")
    return problems


def import_circles(root: Path) -> list[list[str]]:
    """The strongly connected components (more than one module) of the import graph."""
    graph = import_graph(root)
    graph = {m: {t for t in ts if t not in DOORS} for m, ts in graph.items() if m not in DOORS}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    counter = [0]

    def connect(v: str) -> None:  # Tarjan's algorithm (the graph has a few hundred nodes)
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return circles


def test_no_module_imports_from_a_layer_above_it():
    layers = read_layers(PPDM / "README.md")
    assert upward_imports(PPDM, layers) == []


def test_no_import_circles():
    assert import_circles(PPDM) == []


def test_every_package_is_on_the_map():
    layers = set(read_layers(PPDM / "README.md"))
    packages = {
        f"ppdm.{p.stem}"
        for p in PPDM.iterdir()
        if (p.is_dir() and (p / "__init__.py").exists()) or (p.suffix == ".py" and p.stem[0] != "_")
    }
    assert packages - layers == set()
    assert layers - packages == set()


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "ppdm"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    (root / "README.md").write_text(
        "| package | what |\n| --- | --- |\n| `ppdm.low` | a |\n| `ppdm.high` | b |\n",
        encoding="utf-8",
    )
    return root


@pytest.mark.parametrize(
    "text",
    [
        "from ppdm.high.thing import f\n",
        "import ppdm.high.thing\n",
        "def g():\n    from ppdm.high import thing\n",
        "from ..high import thing\n",
    ],
)
def test_the_check_fails_on_a_deliberately_upward_import(tmp_path, text):
    root = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "low/__init__.py": "",
            "low/base.py": text,
            "high/__init__.py": "",
            "high/thing.py": "from ppdm.low import base\ndef f(): pass\n",
        },
    )
    layers = read_layers(root / "README.md")
    assert upward_imports(root, layers) == [
        "ppdm.low.base (ppdm.low) imports ppdm.high.thing (ppdm.high)"
    ]
    assert import_circles(root) == [["ppdm.high.thing", "ppdm.low.base"]]


def test_the_check_ignores_type_checking_imports_and_finds_circles_in_one_layer(tmp_path):
    root = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "low/__init__.py": "",
            "low/a.py": "from ppdm.low import b\n",
            "low/b.py": "from ppdm.low.a import x\n",
            "high/__init__.py": "",
            "high/thing.py": "",
            "low/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import ppdm.high.thing\n",
        },
    )
    assert upward_imports(root, read_layers(root / "README.md")) == []
    assert import_circles(root) == [["ppdm.low.a", "ppdm.low.b"]]


MOVED = {
    "ppdm.anonymize.dp": ("ppdm.dp", "mechanisms", "DiscreteLaplaceMechanism"),
    "ppdm.anonymize.risk": ("ppdm.risk", "linkage", None),
    "ppdm.anonymize.perturbation": ("ppdm.perturb", "randomized_response", "randomize_codes"),
    "ppdm.service.testbed": ("ppdm.testbed.consortia", None, "GrpcTestbed"),
    "ppdm.service.netns": ("ppdm.testbed.netns", None, None),
}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_import_paths_still_work_with_a_deprecation_warning(old):
    """Each moved package imports from its new path silently and from its old path (and
    its submodules, ``from old.sub import name``) with one DeprecationWarning."""

    new, sub, name = MOVED[old]
    # One interpreter for both paths: the new one first, alone (its warnings are what
    # stderr holds before the marker line), then the old one.
    lines = [f"import {new}", f"print({MARK!r}, file=sys.stderr, flush=True)"]
    if sub:
        lines.append(f"from {old}.{sub} import {name or '*'}")
        lines.append(f"assert sys.modules['{old}.{sub}'] is sys.modules['{new}.{sub}']")
    elif name:
        lines.append(f"from {old} import {name}")
    else:
        lines.append(f"import {old}")
    lines.append(f"assert sys.modules['{old}'] is sys.modules['{new}']")
    run = _python("import sys, warnings\nwarnings.simplefilter('always')\n" + "\n".join(lines))
    assert run.returncode == 0, run.stderr
    new_part, marked, old_part = run.stderr.partition(MARK)
    assert marked and "moved to" not in new_part, run.stderr
    assert old_part.count(f"DeprecationWarning: {old} moved to {new}") == 1, run.stderr


#: The line a moved-package check writes to stderr between the new and the old import.
MARK = "-- the new path imported --"


def _python(code: str):
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=PPDM.parent
    )


# Module size (issue 26, item 1) -----------------------------------------------------------

#: A module past this many lines holds more than one responsibility, unless the README's
#: "Modules kept whole" list names it with the reason.
MAX_LINES = 800


def kept_whole(readme: Path) -> set[str]:
    """The modules ``ppdm/README.md`` lists under "Modules kept whole" (``ppdm/x/y.py``)."""
    text = readme.read_text()
    if "## Modules kept whole" not in text:
        return set()
    section = text.split("## Modules kept whole", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^- `(ppdm/[\w/]+\.py)`", section, re.M))


def oversized(root: Path, allowed: set[str]) -> list[str]:
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).as_posix()
        if "/proto/" in rel or rel in allowed:
            continue
        lines = len(path.read_text().splitlines())
        if lines > MAX_LINES:
            out.append(f"{rel}: {lines} lines")
    return out


def test_no_module_is_over_the_size_of_one_responsibility():
    readme = PPDM / "README.md"
    allowed = kept_whole(readme)
    assert oversized(PPDM, allowed) == []
    for rel in allowed:  # a module kept whole exists and really is long
        assert len((PPDM.parent / rel).read_text().splitlines()) > MAX_LINES, rel


def test_the_size_check_fails_on_a_long_module(tmp_path):
    root = tmp_path / "ppdm"
    root.mkdir()
    (root / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    (root / "README.md").write_text("# map\n\n## Modules kept whole\n\n- `ppdm/other.py`: why\n")
    assert oversized(root, kept_whole(root / "README.md")) == [
        f"ppdm/long.py: {MAX_LINES + 1} lines"
    ]
    (root / "README.md").write_text("## Modules kept whole\n\n- `ppdm/long.py`: one algorithm\n")
    assert oversized(root, kept_whole(root / "README.md")) == []
