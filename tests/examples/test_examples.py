"""Every example in ``examples/`` runs as documented (issue 15, item 1).

Each example is a subprocess with a generous deadline that only catches a hang, run
from the repository root as its README section says; the test checks the exit code and what it writes. The examples check their
own results against independent oracles (the pooled computation, scikit-learn), so a
wrong answer fails here too. The two that start real nodes are in the gRPC tier.

The consortium examples (``examples/NAME/``: one folder per organization with its
policy and README, issue 24 item 8) run as their READMEs say, organization by
organization: every ``bash`` block that starts with ``# step N`` runs in step order (the
organizations of one step in the order of the example's table) as one script, with
these mechanical adaptations: ``ppdm party serve F &`` waits until the node answers;
``--base-port`` gets free ports; a ``ppdm job run`` runs in the background (it waits for
the owners' consent that later steps give) and the next command other than ``ppdm job
pending/approve/reject`` waits for it and fails if it failed; ``JOB_ID`` is the job the
command's own node holds for consent (polled); a line followed by ``# REFUSED`` must exit
with code 1. The results are then checked against the pooled computation.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ppdm.testbed.consortia import free_port_range, wait_for_nodes_code

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


# A deadline that only catches a hang (the data-publisher example takes about 15 s on a
# quiet machine; issue 22: no wall-clock bound in a test).
HANG_SECONDS = 1500.0

pytestmark = pytest.mark.timeout(1800)


def _env() -> dict[str, str]:
    """The examples' environment: this checkout first, and one BLAS thread unless the
    caller chose. Their matrix products are small; a second OpenBLAS thread gains
    nothing on them and, beside the suite's other workers on two cores, spins: the data
    publisher took 22 CPU seconds with it and 13 without on a loaded machine, with the
    same output (issue 22, item 7)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def _run(name: str, *args: str, timeout: float = HANG_SECONDS) -> str:
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        cwd=REPO,
        env=_env(),
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
    # issue 24 item 9: the raw table's records above risk 0.2 are counted, not int(share)
    raw = next(line for line in out.splitlines() if line.startswith("raw "))
    count = int(raw.split("records at risk")[1].split("(")[0].replace(",", ""))
    share = float(raw.split("(")[1].split("%")[0]) / 100
    assert count > 1000 and abs(count - share * 30162) < 30162 * 0.001 + 1
    assert "a random sample of 10,000 of the 30,162 records" in out
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


# -- consortium examples, organization by organization ------------------------------------

BLOCK = re.compile(r"^```bash[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
STEP = re.compile(r"^# step (\d+)")


def _flow_blocks(example: str) -> list[tuple[int, int, str, str]]:
    """``(step, organization order, README, block)`` of every ``# step N`` block."""
    folder = EXAMPLES / example
    main_readme = (folder / "README.md").read_text()
    orgs = re.findall(r"\]\((\w+)/README\.md\)", main_readme)
    order = {name: i for i, name in enumerate(dict.fromkeys(orgs))}
    out = []
    for readme in sorted(folder.rglob("README.md")):
        org = readme.parent.name if readme.parent != folder else ""
        for m in BLOCK.finditer(readme.read_text()):
            body = textwrap.dedent(m.group(1))
            step = STEP.match(body)
            if step:
                rank = order.get(org, -1)
                out.append((int(step.group(1)), rank, str(readme.relative_to(REPO)), body))
    return sorted(out, key=lambda b: (b[0], b[1]))


def _logical_lines(text: str) -> list[str]:
    lines: list[str] = []
    buf = ""
    for raw in text.splitlines():
        buf = f"{buf}\n{raw}" if buf else raw
        if raw.rstrip().endswith("\\") and not raw.lstrip().startswith("#"):
            continue
        lines.append(buf)
        buf = ""
    if buf:
        lines.append(buf)
    return lines


#: The wait for the nodes just started (settings files as arguments): one process asks
#: each node in turn for its own health (``ppdm party health --self``'s call) every 0.1 s
#: until it answers; a group not up after HANG_SECONDS / 5 (a hang) fails the script
#: naming the silent node. (A ``ppdm party health`` start per try cost 0.7 CPU seconds, and
#: a node starting beside the suite's other workers took dozens of tries: issue 22, item 7.)
WAIT_FOR_NODES = wait_for_nodes_code(HANG_SECONDS / 5)
#: The first job the node of settings ``argv[1]`` holds for consent (``ppdm job pending``'s
#: call), asked every 0.1 s by one process; none after HANG_SECONDS / 5 fails the script.
PENDING_ID = f"""
import sys, time
from ppdm.cli._output import load_settings
from ppdm.service.client import pending_jobs
settings = load_settings(sys.argv[1])
deadline = time.monotonic() + {HANG_SECONDS / 5}
while True:
    last = "none pending"
    try:
        jobs = pending_jobs(settings)
    except Exception as exc:
        jobs, last = [], exc
    if jobs:
        print(jobs[0]["job_id"])
        break
    if time.monotonic() > deadline:
        sys.exit(f"no pending job at {{sys.argv[1]}}: {{last}}")
    time.sleep(0.1)
"""

PRELUDE = f"""set -e
trap 'rc=$?; kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; exit $rc' EXIT
RUNS=""
wait_runs() {{ for p in $RUNS; do wait $p || {{ echo "job run $p failed"; exit 98; }}; done; RUNS=""; }}
pending_id() {{  # the first job the node of settings $1 holds for consent (polled)
  python -c '{PENDING_ID}' "$1"
}}
"""


def _flow_script(blocks: list[tuple[int, int, str, str]]) -> str:
    out = [PRELUDE]
    serving: list[str] = []
    for _, _, readme, text in blocks:
        out.append(f"echo '--- {readme}'")
        lines = _logical_lines(text)
        for i, line in enumerate(lines):
            stripped = line.strip()
            if not stripped or stripped.startswith("#"):
                continue
            m = re.match(r"^ppdm party serve (\S+)", stripped)
            if m:
                serving.append(m.group(1))
                # the node dies with this script (and the script with the test)
                tie = "setpriv --pdeathsig KILL " if shutil.which("setpriv") else ""
                out.append(f"{tie}ppdm party serve {m.group(1)} >> serve-$$.log 2>&1 &")
                continue
            if serving:  # every node started so far answers first
                out.append(f"python -c '{WAIT_FOR_NODES}' {' '.join(serving)}")
            serving = []
            consent = re.match(r"^ppdm job (pending|approve|reject) ", stripped)
            if not consent:
                out.append("wait_runs")
            if "JOB_ID" in line:
                settings = re.search(r"--settings (\S+)", line)
                assert settings, line
                line = line.replace("JOB_ID", f"$(pending_id {settings.group(1)})")
            nxt = next((x.strip() for x in lines[i + 1 :] if x.strip()), "")
            if nxt.startswith("# REFUSED"):
                out.append(
                    f"if {line}; then echo 'expected a refusal'; exit 99; else test $? -eq 1; fi"
                )
            elif stripped.startswith("ppdm job run "):
                out.append(f'{line} &\nRUNS="$RUNS $!"')
            else:
                out.append(line)
    out.append("wait_runs")
    script = "\n".join(out) + "\n"
    for port in set(re.findall(r"--base-port (\d+)", script)):
        script = script.replace(f"--base-port {port}", f"--base-port {free_port_range(8)}")
    return script


def _run_flow(example: str, tmp_path: Path) -> Path:
    """Run the example's steps in ``tmp_path/work`` (laid out like a checkout: ``examples``
    is the repository's); return the folder."""
    from ppdm.testbed.consortia import kill_tied, spawn_tied

    work = tmp_path / "work"
    work.mkdir()
    (work / "examples").symlink_to(EXAMPLES, target_is_directory=True)
    script = _flow_script(_flow_blocks(example))
    (work / "flow.sh").write_text(script)
    env = _env()
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env["PPDM_STATE_DIR"] = str(work / "state")
    proc = spawn_tied(
        ["bash", str(work / "flow.sh")],
        cwd=work,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, err = proc.communicate(timeout=HANG_SECONDS)
    finally:
        kill_tied(proc)  # the nodes too (they are in the script's process group)
    logs = "".join(p.read_text() for p in work.glob("serve-*.log"))
    assert proc.returncode == 0, (
        f"{example} flow failed (exit {proc.returncode})\n--- script\n{script}\n--- stdout\n"
        f"{out[-4000:]}\n--- stderr\n{err[-4000:]}\n--- nodes\n{logs[-3000:]}"
    )
    (work / "stdout.txt").write_text(out)
    return work


#: The examples with one folder per organization.
CONSORTIUM_EXAMPLES = ("hospitals", "supermarket", "banks")


def test_consortium_examples_have_steps_for_every_organization():
    for example in CONSORTIUM_EXAMPLES:
        blocks = _flow_blocks(example)
        readmes = {b[2] for b in blocks}
        orgs = [d for d in (EXAMPLES / example).iterdir() if d.is_dir()]
        for org in orgs:
            assert any(f"/{org.name}/README.md" in r for r in readmes), org
            assert (org / f"{org.name}.policy.toml").is_file(), org
        assert [b[0] for b in blocks] == sorted(b[0] for b in blocks)


@pytest.mark.grpc
def test_hospitals_consortium_flow(tmp_path):
    """The hospitals example, organization by organization, against scikit-learn."""
    import numpy as np
    import pandas as pd
    from sklearn.cluster import KMeans

    work = _run_flow("hospitals", tmp_path)
    doc = json.loads((work / "centres.json").read_text())
    assert doc["state"] == "succeeded"
    tables = {
        name: pd.read_csv(work / "hospitals-data" / f"{name}.csv")
        for name in ("general", "laboratory", "clinic")
    }
    common = sorted(set.intersection(*(set(t["record_id"]) for t in tables.values())))
    columns = ["age", "sex", "bmi", "bp", "s1", "s2", "s3", "s4", "s5", "s6"]
    pooled = pd.concat([t.set_index("record_id").loc[common] for t in tables.values()], axis=1)
    x = pooled[columns].to_numpy(dtype=float)
    parties = doc["parties"]
    start = np.concatenate(
        [np.asarray(parties[h]["result"]["initial_centers"]) for h in tables], axis=1
    )
    ref = KMeans(2, init=start, n_init=1, max_iter=100, tol=0.0, algorithm="lloyd").fit(x)
    ours = np.concatenate([np.asarray(parties[h]["result"]["centers"]) for h in tables], axis=1)
    assert np.allclose(ours, ref.cluster_centers_, rtol=1e-6, atol=1e-6)
    # every hospital sees the centres on its own columns only
    assert parties["clinic"]["result"]["columns"] == ["s4", "s5", "s6"]


@pytest.mark.grpc
def test_supermarket_consortium_flow(tmp_path):
    """The supermarket example, chain by chain: the sensitive rules are minable before the
    chains hide them and not after, and the rules equal the pooled computation."""
    from ppdm.data import retail_sample
    from ppdm.mining.itemsets import frequent_itemsets
    from ppdm.mining.readers import from_transactions
    from ppdm.mining.rules import association_rules

    work = _run_flow("supermarket", tmp_path)

    def rules(name: str) -> set[tuple[tuple, tuple]]:
        doc = json.loads((work / name).read_text())
        assert doc["state"] == "succeeded"
        sets = [
            {
                (tuple(sorted(r["antecedent"])), tuple(sorted(r["consequent"])))
                for r in rec["result"]["rules"]
            }
            for rec in doc["parties"].values()
        ]
        assert all(x == sets[0] for x in sets)  # every chain learned the same rules
        return sets[0]

    baskets = retail_sample()
    pooled = association_rules(
        frequent_itemsets(from_transactions(baskets), 0.02), len(baskets), min_confidence=0.4
    )
    want = {(tuple(sorted(r.antecedent)), tuple(sorted(r.consequent))) for r in pooled}
    before, after = rules("rules.json"), rules("published.json")
    assert before == want
    sensitive = {
        (tuple(r["antecedent"]), tuple(r["consequent"]))
        for r in json.loads((EXAMPLES / "supermarket" / "sensitive-rules.json").read_text())
    }
    assert sensitive <= before and not sensitive & after


@pytest.mark.grpc
def test_banks_consortium_flow(tmp_path):
    """The banks example, bank by bank: the exact totals equal the pooled books, the DP
    count is near the exact one, every report was charged to its bank's persistent
    budget, and the second sum (step 5, after bank2's books changed) was refused by the
    audit."""
    import math

    import pandas as pd

    work = _run_flow("banks", tmp_path)
    books = {i: pd.read_csv(work / "banks-data" / f"bank{i}.csv", sep=";") for i in range(1, 5)}
    pooled = pd.concat(books.values())
    adult = pd.read_csv(REPO.parent / "shared" / "data" / "adult" / "adult.csv", sep=";")
    # every customer at exactly one bank, but for the three who join banks 1, 3 and 4 next
    # month (bank2's joined in step 4, after the first sum: it is not in the totals)
    assert len(pooled) == len(adult) - 3
    joined = pd.read_csv(work / "banks-data" / "bank2-next.csv", sep=";", header=None)
    assert len(joined) == 1 and books[2].iloc[-1].tolist() == joined.iloc[0].tolist()
    pooled = pd.concat([books[1], books[2].iloc[:-1], books[3], books[4]])
    high = int((pooled["salary-class"] == ">50K").sum())
    totals = json.loads((work / "totals.json").read_text())
    sums = {tuple(r["result"]["sum"]) for r in totals["parties"].values()}
    assert len(sums) == 1
    customers, ages, noisy = sums.pop()
    assert (customers, ages) == (len(pooled), int(pooled["age"].sum()))
    q = math.exp(-0.5)
    std = math.sqrt(4 * 2 * q / (1 - q) ** 2)  # four banks' discrete Laplace noise
    assert abs(noisy - high) < 8 * std + 1
    spent = {}
    for path in (work / "state" / "dp-budgets").glob("bank*.json"):
        ledger = json.loads(path.read_text())["ledger"]
        spent[path.name.split(".csv")[0]] = [c["epsilon"] for c in ledger]
    assert spent == {"bank1": ["1/2"], "bank2": ["1/2", "1/2"], "bank3": ["1/2"], "bank4": ["1/2"]}
