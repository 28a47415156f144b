"""Every command and snippet of README.md and docs/*.md runs as written (issue 15, item 4).

The test extracts the fenced ``bash``/``sh`` and ``python`` blocks and runs them in a
fresh folder laid out like a checkout (``../shared`` is the shared data), so relative
paths mean what they mean for a reader. The shell blocks of one page run in order as one
``bash -e`` script (a failing command fails the test; later blocks may use the files and
nodes of earlier ones); the python blocks of one page run in order as one script (later
snippets use the names of earlier ones). Unlabelled blocks are synopses or output, not
commands, and are not run.

Adaptations, all mechanical:

* ``ppdm party serve FILE`` (with or without ``&``) starts the node in the background;
  the script waits until every node answers ``ppdm party health --self``'s call before the
  next command (one waiting process per group of nodes, :data:`WAIT_FOR_NODES`, not one
  ``ppdm`` start per node and try) and the nodes are killed afterwards;
* ``--base-port N`` gets free ports (other tests may use the documented ones);
* a line followed by a ``# REFUSED ...`` comment must exit with code 1, as documented;
* ``JOB_ID`` is the id of the last job the block ran with ``--output FILE``;
* a page that uses a consortium folder it never creates (``net/``) gets one first
  (``consortium init`` with the parties it names, the nodes started, one job run).

Skipped, with the reason in :data:`SKIPPED`: the install-and-test line of the README (it is
this test suite), ``job approve`` / ``job reject`` of a made-up job id (they need a job
held for the owner's consent), the vertical block whose data files live on each party's
host, the Docker and systemd deployment blocks (they need a Docker host or root), and
the roster-change block of the deployment page (a placeholder CA passphrase).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ppdm.testbed.consortia import free_port_range, wait_for_nodes_code

# Deadlines that only catch a hang (issue 22: no wall-clock bound in a test).
HANG_SECONDS = 900.0
pytestmark = pytest.mark.timeout(1200)

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("PPDM_SHARED", REPO.parent / "shared"))
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
BLOCK = re.compile(r"^[ \t]*```(bash|sh|python)[ \t]*\n(.*?)^[ \t]*```[ \t]*$", re.S | re.M)

#: (page, a fragment of the block or line) -> why it is not run.
SKIPPED = {
    ("README.md", "python -m pytest"): "runs the whole test suite, of which this test is part",
    ("docs/mining.md", "/data/hospital.csv"): "each party's records file lives on its own host",
    ("docs/deployment.md", "docker "): "builds and runs Docker containers (needs a Docker host)",
    ("docs/deployment.md", "systemctl "): "installs a systemd service (needs root and systemd)",
    ("docs/deployment.md", "CA_PASSPHRASE=..."): "a placeholder passphrase and a CA key kept "
    "on the CA's host by an earlier `consortium init --keep-ca-key`",
}
#: Lines not run (the rest of their block is): pattern -> reason.
SKIPPED_LINES = {
    r"^ppdm job (approve|reject) ": "needs a job held for the owner's consent",
}
#: The wait for the nodes just started (settings files as arguments): the health call of
#: ``ppdm party health --self`` for each node in turn, every 0.1 s, until it answers; a
#: group not up after HANG_SECONDS / 3 (a hang) fails the script naming the silent node.
WAIT_FOR_NODES = wait_for_nodes_code(HANG_SECONDS / 3)

#: Pages that use a consortium folder they never create: folder -> its parties.
PRELUDES = {
    "docs/governance.md": ("net", "alice,bob,carol,mallory"),
    "docs/ledger.md": ("net", "alice,bob,carol"),
}


def _blocks() -> list[tuple[str, int, str, str]]:
    out = []
    for page in PAGES:
        text = page.read_text()
        rel = page.relative_to(REPO).as_posix()
        for m in BLOCK.finditer(text):
            body = textwrap.dedent(m.group(2))  # blocks inside list items are indented
            out.append((rel, text[: m.start()].count("\n") + 1, m.group(1), body))
    return out


BLOCKS = _blocks()
SHELL = [b for b in BLOCKS if b[2] in ("bash", "sh")]
PYTHON_PAGES = sorted({b[0] for b in BLOCKS if b[2] == "python"})


def _workdir(tmp_path: Path) -> Path:
    """``tmp/work`` with ``tmp/shared`` -> the shared data: ``../shared/data`` works."""
    (tmp_path / "shared").symlink_to(SHARED, target_is_directory=True)
    work = tmp_path / "work"
    work.mkdir()
    return work


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    env.setdefault("MPLBACKEND", "Agg")
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    return env


def _logical_lines(text: str) -> list[str]:
    lines: list[str] = []
    buf = ""
    for raw in text.splitlines():
        if buf:
            buf += "\n" + raw
        else:
            buf = raw
        if raw.rstrip().endswith("\\") and not raw.lstrip().startswith("#"):
            continue
        lines.append(buf)
        buf = ""
    if buf:
        lines.append(buf)
    return lines


def _shell_script(page: str, text: str, skipped: list[str]) -> str:
    """The block as a bash script with the adaptations of the module docstring."""
    out = [
        "set -e",
        "trap 'rc=$?; kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; exit $rc' EXIT",
    ]
    lines = _logical_lines(text)
    serving: list[str] = []
    last_output = None
    for i, line in enumerate(lines):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        reason = next((r for p, r in SKIPPED_LINES.items() if re.search(p, stripped)), None)
        if reason:
            skipped.append(f"{stripped.splitlines()[0]}: {reason}")
            continue
        m = re.match(r"^ppdm party serve (\S+)", stripped)
        if m:
            serving.append(m.group(1))
            out.append(f"ppdm party serve {m.group(1)} >> serve-$$.log 2>&1 &")
            continue
        if serving:  # wait for every node started so far before the next command
            out.append(f"python -c '{WAIT_FOR_NODES}' {' '.join(serving)}")
            serving = []
        if "JOB_ID" in line and last_output:
            line = line.replace(
                "JOB_ID",
                "$(python -c \"import json;print(json.load(open('"
                + last_output
                + "'))['job_id'])\")",
            )
        jm = re.search(r"ppdm job run .*--output (\S+)", line, re.S)
        if jm:
            last_output = jm.group(1)
        nxt = next((x.strip() for x in lines[i + 1 :] if x.strip()), "")
        if nxt.startswith("# REFUSED"):
            line = re.sub(r"\s+#[^'\"]*$", "", line)  # a trailing comment would eat the `then`
            line = f"if {line}; then echo 'expected a refusal'; exit 99; else test $? -eq 1; fi"
        out.append(line)
    script = "\n".join(out) + "\n"
    ports = re.findall(r"--base-port (\d+)", script)
    for p in set(ports):
        script = script.replace(f"--base-port {p}", f"--base-port {free_port_range(8)}")
    return script


def _prelude(page: str) -> str:
    if page not in PRELUDES:
        return ""
    folder, parties = PRELUDES[page]
    first = parties.split(",")[0]
    names = parties.split(",")
    lines = [
        f"ppdm consortium init --parties {parties} --host 127.0.0.1 --base-port 50051 "
        f"--out {folder}",
        *[f"ppdm party serve {folder}/{p}.toml &" for p in names],
        f"ppdm job run secure-sum --settings {folder}/{first}.toml --output prelude.json",
    ]
    return "\n".join(lines) + "\n"


def _run_shell(page: str, text: str, tmp_path: Path, timeout: float = HANG_SECONDS) -> list[str]:
    skipped: list[str] = []
    script = _shell_script(page, _prelude(page) + text, skipped)
    work = _workdir(tmp_path)
    env = _env()
    env["PPDM_STATE_DIR"] = str(tmp_path / "state")  # the page's own DP budgets
    proc = subprocess.run(
        ["bash", "-c", script],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    logs = "".join(p.read_text() for p in work.glob("serve-*.log"))
    assert proc.returncode == 0, (
        f"{page}: block failed (exit {proc.returncode})\n--- script\n{script}\n--- stdout\n"
        f"{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-3000:]}\n--- nodes\n{logs[-2000:]}"
    )
    return skipped


def _skip_reason(page: str, text: str) -> str | None:
    """Why a block is not run (a key of :data:`SKIPPED`), or None."""
    return next((r for (p, frag), r in SKIPPED.items() if p == page and frag in text), None)


def _needs_nodes(text: str, page: str) -> bool:
    return "ppdm party serve" in text or page in PRELUDES


SHELL_PAGES = sorted({b[0] for b in SHELL}, key=lambda p: (p != "README.md", p))
#: Pages whose shell blocks take long (an evaluation over Adult, mining mushroom twice).
SLOW_PAGES = {"docs/perturbation.md", "docs/mining.md"}


def _page_marks(page: str) -> list[pytest.MarkDecorator]:
    texts = [t for p, _, _, t in SHELL if p == page]
    if any(_needs_nodes(t, page) for t in texts):
        return [pytest.mark.grpc, pytest.mark.slow]
    return [pytest.mark.slow] if page in SLOW_PAGES else []


@pytest.mark.parametrize("page", [pytest.param(p, marks=_page_marks(p), id=p) for p in SHELL_PAGES])
def test_shell_blocks(page, tmp_path):
    """The page's shell blocks in order, as one reader would type them."""
    texts = []
    for p, line, _, text in SHELL:
        if p != page or _skip_reason(page, text):
            continue
        if page == "README.md" and text.startswith("pip install . && "):
            text = text.replace("pip install . && ", "")  # installed already (editable)
        if "openssl" in text and shutil.which("openssl") is None:
            continue  # (the deployment page's manual PKI: only where openssl exists)
        texts.append(f"# --- {page}:{line}\n{text}")
    _run_shell(page, "\n".join(texts), tmp_path)


@pytest.mark.parametrize("page", PYTHON_PAGES)
def test_python_snippets(page, tmp_path):
    code = "\n\n".join(t for p, _, lang, t in BLOCKS if p == page and lang == "python")
    work = _workdir(tmp_path)
    (work / "snippets.py").write_text(code)
    # hiding.md's Python reads the rules file its command-line block writes
    if page == "docs/hiding.md":
        (work / "rules.json").write_text(
            '[{"antecedent": [34, 86], "consequent": [85]},\n'
            ' {"antecedent": [2], "consequent": [39, 90]}]\n'
        )
    proc = subprocess.run(
        [sys.executable, "snippets.py"],
        cwd=work,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=HANG_SECONDS,
        check=False,
    )
    assert proc.returncode == 0, f"{page}:\n{code}\n--- stderr\n{proc.stderr[-3000:]}"


def test_every_page_block_is_found():
    """The extraction sees the blocks the pages have (so a test cannot silently vanish)."""
    assert len(SHELL) >= 15 and len(PYTHON_PAGES) >= 4
    assert len(SKIPPED) + len(SKIPPED_LINES) <= 7
