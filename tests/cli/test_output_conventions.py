"""The command line's output conventions (issue 24, items 6, 7 and 9): text for people by
default and the document with ``--json``, ``--sep`` sniffed from the input, no broken
pipe and no gRPC log lines on stderr, readable ``hide``/``anonymize`` summaries, and the
numbers of job summaries and plots (each party's own time; grouped steps never longer
than the job)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ppdm.cli._output import render_document, sniff_sep
from ppdm.cli._plots import group_steps
from ppdm.cli._summary import job_summary, party_seconds
from ppdm.cli.main import main

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("PPDM_SHARED", REPO.parent / "shared"))
HANG_S = 300  # only catches a hang


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GRPC_", "GLOG_", "ABSL_"))}
    env["PYTHONPATH"] = str(REPO)
    return env


def test_no_broken_pipe_into_head():
    proc = subprocess.Popen(
        [sys.executable, "-m", "ppdm.cli.main", "job", "list"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()  # what `| head -1` does after one line
    err = proc.stderr.read().decode()
    proc.wait(HANG_S)
    assert first.strip()
    assert "BrokenPipeError" not in err and "Traceback" not in err, err


@pytest.mark.grpc
def test_no_grpc_log_lines_on_stderr(tmp_path):
    """Nodes that are down: the only stderr lines are the command's own."""
    assert main(["consortium", "init", "--parties", "a,b,c", "--out", str(tmp_path / "n")]) == 0
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ppdm.cli.main",
            "party",
            "health",
            "--settings",
            str(tmp_path / "n" / "a.toml"),
            "--timeout",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=HANG_S,
        env=_env(),
    )
    assert proc.returncode == 1
    stray = [ln for ln in proc.stderr.splitlines() if ln.strip() and not ln.startswith("ppdm:")]
    assert stray == [], proc.stderr
    assert "NO" in proc.stdout and "{" not in proc.stdout  # a table, not JSON


def test_sep_is_sniffed(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PPDM_STATE_DIR", str(tmp_path / "state"))
    semi = tmp_path / "semi.csv"
    semi.write_text("age;sex\n" + "".join(f"{30 + i % 20};F\n" for i in range(200)))
    comma = tmp_path / "comma.csv"
    comma.write_text("age,sex\n30,F\n")
    assert sniff_sep(semi) == ";" and sniff_sep(comma) == "," and sniff_sep(None) == ","
    args = ["dp", "mean", "--column", "age", "--lower", "0", "--upper", "100", "--json"]
    assert main([*args, "--input", str(semi), "--epsilon", "1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert 20 < doc["result"] < 60  # the age column was found: the file was read with ';'


def test_documents_are_text_by_default_and_json_on_request(capsys):
    argv = ["simulate", "secure-sum", "--values", "3,5,9"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "sum = 17" in out and "{" not in out and len(out.splitlines()) < 10
    assert main([*argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["parties"]["alice"]["result"]["sum"] == 17
    text = render_document({"a": 1, "b": {"c": [1, 2], "d": None}, "rows": [{"x": 1}] * 30})
    assert "a:" in text and "c: [1, 2]" in text.replace("  ", " ") and "18 more" in text


@pytest.fixture
def adult() -> Path:
    path = SHARED / "data" / "adult" / "adult.csv"
    if not path.is_file():
        pytest.skip("the shared Adult data set is not here")
    return path


def test_anonymize_summary_has_utility_and_no_dict_repr(adult, tmp_path, capsys):
    code = main(
        [
            "anonymize",
            "--input",
            str(adult),
            "--qi",
            "age,sex,race",
            "--hierarchies",
            str(adult.parent),
            "--k",
            "5",
            "--output",
            str(tmp_path / "a.csv"),
            "--no-progress",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "{'" not in out and "rows released" in out and "utility:" in out
    assert "age level" in out


def test_hide_summary_names_dropped_rules_and_side_effects(tmp_path, capsys):
    data = tmp_path / "d.dat"
    data.write_text("1 2 3\n1 2\n1 2 4\n2 3\n1 3\n1 2 3 4\n" * 5)
    rules = tmp_path / "s.json"
    rules.write_text(json.dumps([{"antecedent": [1], "consequent": [2]}]))
    code = main(
        [
            "hide",
            "--input",
            str(data),
            "--sensitive",
            str(rules),
            "--min-support",
            "0.3",
            "--min-confidence",
            "0.6",
            "--output",
            str(tmp_path / "o.dat"),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "hid 1 sensitive rule" in out and "rules:" in out and "fewer" in out
    assert "side effects:" in out and "ghost rules" in out and "misses cost" in out


def _doc(n_steps: int) -> dict:
    steps = [
        {"step": f"job/phase/{i}", "bytes_sent": 10, "messages_sent": 1, "wall_time_s": 0.9}
        for i in range(n_steps)
    ]
    return {
        "job_id": "j",
        "protocol": "p",
        "state": "succeeded",
        "wall_time_s": 1.0,
        "parties": {
            "a": {
                "wall_time_s": 1.0,
                "metrics": steps,
                "totals": {"messages_sent": n_steps, "bytes_sent": 10 * n_steps},
            }
        },
    }


def test_summary_shows_each_partys_own_time():
    doc = _doc(3)
    assert party_seconds(doc["parties"]["a"]) == 1.0
    line = next(ln for ln in job_summary(doc).splitlines() if ln.strip().startswith("a:"))
    assert line.endswith("1.00 s")


def test_grouped_steps_never_exceed_the_wall_time():
    doc = _doc(60)  # 60 overlapping steps of 0.9 s in a 1 s job: more than MAX_ROWS
    per = {"a": {m["step"]: m for m in doc["parties"]["a"]["metrics"]}}
    steps = list(per["a"])
    rows, grouped, depth = group_steps(steps, per, wall_times={"a": 1.0})
    assert depth is not None and len(rows) < len(steps)
    assert all(r["wall_time_s"] <= 1.0 for r in grouped["a"].values())
    assert sum(r["bytes_sent"] for r in grouped["a"].values()) == 600  # counts still add up
