"""No traceback for any input (issue 13, item 6).

Hundreds of bad command lines for the local commands run through ``ppdm.cli.main.main``
in one subprocess whose address space is capped (so a memory bomb fails fast instead of
taking the machine down) with a per-case alarm. Every case must end with exit code 0 or
with exactly one ``ppdm: error:`` line and exit code 2 -- no traceback, no partial output
file, within its time bound; the cases the issue lists must be refused.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MEMORY_CAP = 6 << 30
# Per command, a deadline that only catches a hang (issue 22: no wall-clock bound in a
# test; how fast the commands are is measured in benchmarks/, not here).
CASE_SECONDS = 300

RUNNER = (
    textwrap.dedent(
        """
    import contextlib, io, json, resource, signal, sys, time, traceback
    resource.setrlimit(resource.RLIMIT_AS, (CAP, CAP))
    from ppdm.cli.main import main

    class Timeout(BaseException):
        pass

    def alarm(*_):
        raise Timeout()

    signal.signal(signal.SIGALRM, alarm)
    cases = json.load(open(sys.argv[1]))
    out = []
    for argv in cases:
        err, std = io.StringIO(), io.StringIO()
        t0 = time.perf_counter()
        escaped = None
        code = None
        signal.alarm(SECONDS)
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(std):
                code = main(argv)
        except Timeout:
            escaped = "timeout"
        except BaseException as exc:
            escaped = "".join(traceback.format_exception(exc))[-800:]
        finally:
            signal.alarm(0)
        out.append({"argv": argv, "code": code, "stderr": err.getvalue()[-2000:],
                    "escaped": escaped, "seconds": time.perf_counter() - t0})
    json.dump(out, open(sys.argv[2], "w"))
    """
    )
    .replace("CAP", str(MEMORY_CAP))
    .replace("SECONDS", str(CASE_SECONDS))
)


@pytest.fixture(scope="module")
def files(tmp_path_factory, adult_dir, fimi_dir):
    root = tmp_path_factory.mktemp("fuzz")
    adult = (adult_dir / "adult.csv").read_text().splitlines()
    (root / "adult.csv").write_text("\n".join(adult[:301]) + "\n")
    lines = (fimi_dir / "mushroom.dat").read_text().splitlines()
    (root / "m.dat").write_text("\n".join(lines[::20]) + "\n")  # 407 varied baskets
    (root / "m1000.dat").write_text("\n".join(lines[:1000]) + "\n")
    rows = ["record_id,x,y"] + [f"{i},{(i * 37) % 101}.5,{(i * 11) % 7}" for i in range(60)]
    (root / "rec.csv").write_text("\n".join(rows) + "\n")
    (root / "empty.csv").write_text("")
    (root / "header_only.csv").write_text("record_id,x,y\n")
    (root / "dup.csv").write_text("age,age,sex\n30,31,M\n40,41,F\n")
    (root / "rules.json").write_text('[{"antecedent": [34], "consequent": [86]}]')
    (root / "rules_str.json").write_text('[{"antecedent": ["34"], "consequent": ["86"]}]')
    (root / "rules_true.json").write_text('[{"antecedent": [true], "consequent": [86]}]')
    (root / "rules_latin1.json").write_bytes(
        '[{"antecedent": [34], "consequent": [86]}] é'.encode("latin-1")
    )
    (root / "rules_deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (root / "adir").mkdir()
    return root


def _bases(f: Path, hdir: Path) -> dict[str, list[str]]:
    a, m, rec = str(f / "adult.csv"), str(f / "m.dat"), str(f / "rec.csv")
    return {
        "anonymize": [
            "anonymize",
            "--input",
            a,
            "--sep",
            ";",
            "--qi",
            "age,sex,race",
            "--k",
            "5",
            "--hierarchies",
            str(hdir),
            "--output",
            "{out}/a.csv",
            "--no-progress",
        ],
        "hide": [
            "hide",
            "--input",
            m,
            "--sensitive",
            str(f / "rules.json"),
            "--min-support",
            "0.5",
            "--min-confidence",
            "0.9",
            "--output",
            "{out}/h.dat",
        ],
        "partition": [
            "partition",
            "--input",
            m,
            "--parties",
            "3",
            "--mode",
            "horizontal",
            "--out",
            "{out}/p",
        ],
        "simulate-assoc": [
            "simulate",
            "assoc",
            "--input",
            m,
            "--parties",
            "3",
            "--min-support",
            "0.5",
            "--output",
            "{out}/s.json",
        ],
        # first-k: a deterministic start on the seeded split (the default coin-tossed start
        # can, rarely, leave a party 1-2 records of a cluster on these 60 records, which the
        # job refuses by design: the valid base line must always work)
        "simulate-kmeans": [
            "simulate",
            "kmeans",
            "--input",
            rec,
            "--parties",
            "3",
            "--k",
            "3",
            "--init",
            "first-k",
            "--output",
            "{out}/k.json",
        ],
        "secure-sum": ["simulate", "secure-sum", "--values", "3,5,9", "--output", "{out}/ss.json"],
        "noise": [
            "perturb",
            "noise",
            "--input",
            rec,
            "--columns",
            "x",
            "--scale",
            "1",
            "--output",
            "{out}/n.csv",
        ],
        "reconstruct": [
            "perturb",
            "reconstruct",
            "--input",
            rec,
            "--column",
            "x",
            "--scale",
            "5",
            "--bins",
            "10",
            "--output",
            "{out}/r.json",
        ],
        # each case its own DP budget (a shared one would run out and refuse, exit 1)
        "dp-count": [
            *("dp", "count", "--input", rec, "--epsilon", "1", "--out", "{out}/d.json"),
            *("--budget-file", "{out}/dp-budget.json"),
        ],
        "dp-median": [
            "dp",
            "median",
            "--input",
            rec,
            "--column",
            "x",
            "--epsilon",
            "1",
            "--candidates",
            "0:101",
            "--out",
            "{out}/dm.json",
            *("--budget-file", "{out}/dp-budget.json"),
        ],
        "dp-histogram": [
            "dp",
            "histogram",
            "--input",
            rec,
            "--column",
            "x",
            "--epsilon",
            "1",
            "--bins",
            "0,25,50,75,100",
            "--out",
            "{out}/dh.json",
            *("--budget-file", "{out}/dp-budget.json"),
        ],
        "risk": ["risk", "--input", a, "--sep", ";", "--qi", "age,sex", "--out", "{out}/risk.json"],
        "reidentify": ["reidentify", "--n", "100", "--known", "2", "--out", "{out}/re.json"],
    }


# Bad values tried on every numeric option of every base command.
BAD_NUMBERS = ["-1", "0", "inf", "nan", "-inf", "1e400", "abc", "", "100000000000000", "1.5"]
BAD_OPTIONS = {
    "anonymize": ["--k", "--suppression", "--seed"],
    "hide": ["--min-support", "--min-confidence", "--time-limit", "--max-vars"],
    "partition": ["--parties", "--seed"],
    "simulate-assoc": ["--parties", "--min-support", "--timeout", "--max-len", "--label-bytes"],
    "simulate-kmeans": ["--parties", "--k", "--max-iter", "--tol", "--fraction-bits"],
    "secure-sum": ["--modulus", "--timeout"],
    "noise": ["--scale", "--seed"],
    "reconstruct": ["--scale", "--bins"],
    "dp-count": ["--epsilon", "--delta"],
    "dp-median": ["--epsilon", "--candidates", "--seed"],
    "dp-histogram": ["--epsilon", "--bins", "--seed"],
    "risk": ["--threshold"],
    "reidentify": ["--n", "--known", "--trials"],
}


def _set(argv: list[str], option: str, value: str) -> list[str]:
    argv = list(argv)
    if option in argv:
        argv[argv.index(option) + 1] = value
    else:
        argv += [option, value]
    return argv


def _cases(f: Path, hdir: Path) -> tuple[list[list[str]], list[list[str]], list[list[str]]]:
    """(valid bases, generated bad cases, cases the issue lists that must be refused)."""
    bases = _bases(f, hdir)
    generated = []
    for name, options in BAD_OPTIONS.items():
        for option in options:
            for value in BAD_NUMBERS:
                generated.append(_set(bases[name], option, value))
    for base in bases.values():
        if "--input" in base:
            generated.append(_set(base, "--input", str(f / "missing.csv")))
            generated.append(_set(base, "--input", str(f / "adir")))
            generated.append(_set(base, "--input", str(f / "empty.csv")))
        for out_opt in ("--output", "--out"):
            if out_opt in base:
                generated.append(_set(base, out_opt, str(f / "no" / "such" / "x.json")))
                generated.append(_set(base, out_opt, str(f / "adir")))
        if "--sep" in base:
            generated.append(_set(base, "--sep", ""))
            generated.append(_set(base, "--sep", "ab"))
    must_fail = [
        _set(bases["secure-sum"], "--modulus", "0"),
        _set(bases["secure-sum"], "--modulus", "1"),
        _set(bases["secure-sum"], "--modulus", "-7"),
        _set(bases["secure-sum"], "--modulus", "4"),  # too small for 3+5+9
        _set(bases["partition"], "--parties", "1000000000"),
        _set(bases["simulate-assoc"], "--parties", "1000000000"),
        [*bases["partition"], "--names", "al ice,bob,carol"],
        [*bases["partition"], "--names", "a/b,bob,carol"],
        _set(bases["reconstruct"], "--bins", "0"),
        _set(bases["reconstruct"], "--bins", "100000000"),
        [*bases["reconstruct"], "--bounds", "5,1"],
        _set(bases["dp-count"], "--epsilon", "inf"),
        _set(bases["dp-count"], "--delta", "2"),
        _set(bases["dp-median"], "--candidates", "0:1000000000000"),  # 10^12 candidates
        _set(bases["dp-histogram"], "--bins", "0:100000000"),
        _set(bases["noise"], "--scale", "inf"),
        _set(bases["hide"], "--time-limit", "-1"),
        [*_set(bases["hide"], "--method", "exact"), "--time-limit", "-1"],
        _set(bases["hide"], "--sensitive", str(f / "rules_true.json")),
        _set(bases["hide"], "--sensitive", str(f / "rules_latin1.json")),
        _set(bases["hide"], "--sensitive", str(f / "rules_deep.json")),
        _set(_set(bases["hide"], "--input", str(f / "m1000.dat")), "--min-support", "0.3"),
        _set(bases["anonymize"], "--input", str(f / "dup.csv")),
        _set(bases["anonymize"], "--sep", ""),
        _set(bases["anonymize"], "--output", str(f / "no" / "x.csv")),
        _set(bases["anonymize"], "--output", str(f / "adir")),
        _set(bases["simulate-kmeans"], "--input", str(f / "header_only.csv")),
        _set(bases["dp-count"], "--input", str(f / "empty.csv")),
    ]
    rr = [
        "perturb",
        "rr",
        "--input",
        str(f / "adult.csv"),
        "--sep",
        ";",
        "--qi",
        "sex",
        "--sensitive",
        "race",
        "--output",
        "{out}/rr.csv",
    ]
    must_fail += [[*rr, "--p", "1.5,0.5"], [*rr, "--p", "-0.1"]]
    return list(bases.values()), generated, must_fail


def _run(cases: list[list[str]], tmp: Path) -> list[dict]:
    concrete = []
    for i, argv in enumerate(cases):
        out = tmp / f"out{i}"
        out.mkdir(parents=True, exist_ok=True)
        concrete.append([a.replace("{out}", str(out)) for a in argv])
    (tmp / "cases.json").write_text(json.dumps(concrete))
    (tmp / "runner.py").write_text(RUNNER)
    proc = subprocess.run(
        [sys.executable, str(tmp / "runner.py"), str(tmp / "cases.json"), str(tmp / "res.json")],
        capture_output=True,
        text=True,
        timeout=3300,  # a hang of the whole run, inside the test's own 3600 s
        env={
            "PYTHONPATH": str(REPO),
            "PATH": "/usr/bin:/bin",
            "PPDM_SHARED": str(REPO.parent / "shared"),
            # one BLAS thread, as everywhere in the suite (tests/conftest.py): a second
            # one only spins beside the other workers on two cores
            "OPENBLAS_NUM_THREADS": "1",
            "OMP_NUM_THREADS": "1",
            # the DP commands' budgets in this run's folder, not the user's state
            "PPDM_STATE_DIR": str(tmp / "state"),
        },
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((tmp / "res.json").read_text())
    for i, r in enumerate(results):
        r["outputs"] = sorted(p.name for p in (tmp / f"out{i}").iterdir())
    return results


def _contract(r: dict) -> str | None:
    """What is wrong with one case's outcome (None: it kept the contract)."""
    if r["escaped"]:
        return f"escaped: {r['escaped']}"
    if r["code"] == 0:
        return None
    if r["code"] != 2:
        return f"exit code {r['code']}"
    err = r["stderr"]
    if not err.startswith("ppdm: error:") or err.strip().count("\n") != 0:
        return f"not one error line: {err[:300]!r}"
    if r["outputs"]:
        return f"wrote {r['outputs']} although it failed"
    return None


@pytest.mark.timeout(3600)
def test_no_traceback_for_any_input(files, adult_dir, tmp_path):
    bases, generated, must_fail = _cases(files, adult_dir)
    results = _run([*bases, *generated, *must_fail], tmp_path)
    assert len(generated) + len(must_fail) >= 200
    base_results = results[: len(bases)]
    for r in base_results:  # the valid command lines work, so the mutations test something
        assert r["code"] == 0, (r["argv"], r["stderr"][-500:], r["escaped"])
    problems = [(r["argv"], why) for r in results if (why := _contract(r))]
    assert not problems, "\n".join(f"{' '.join(a)}\n    -> {w}" for a, w in problems[:25])
    refused = results[len(bases) + len(generated) :]
    accepted = [r["argv"] for r in refused if r["code"] != 2]
    assert not accepted, "accepted although the issue lists it as bad:\n" + "\n".join(
        " ".join(a) for a in accepted
    )


# -- issue 23, item 8: the last bad inputs -------------------------------------------------
#
# Hostile files (a 3 GiB sparse file without a newline, a 17 MiB line, a FIFO, non-UTF-8
# text, a header naming a column twice, a folder) given to every option of every command
# that reads a file, and the bad numbers, names and ranges the issue lists, each in one
# subprocess whose address space is capped at 2 GiB: every line must be refused (exit 2,
# one ``ppdm: error:`` line, no traceback, no hang, no output file or folder left).

HOSTILE_CAP = 2 << 30
# A refusal takes about a second: 120 s per case only catches a hang (a FIFO opened by
# mistake blocks until the alarm), so a regression costs minutes, not hours.
HOSTILE_CASE_SECONDS = 120
HOSTILE_RUNNER = RUNNER.replace(
    f"({MEMORY_CAP}, {MEMORY_CAP})", f"({HOSTILE_CAP}, {HOSTILE_CAP})"
).replace(f"signal.alarm({CASE_SECONDS})", f"signal.alarm({HOSTILE_CASE_SECONDS})")
assert f"({HOSTILE_CAP}, {HOSTILE_CAP})" in HOSTILE_RUNNER
assert f"signal.alarm({HOSTILE_CASE_SECONDS})" in HOSTILE_RUNNER
HUGE_BYTES = 3 << 30


@pytest.fixture(scope="module")
def hostile(tmp_path_factory, fimi_dir):
    import os

    root = tmp_path_factory.mktemp("hostile")
    for name in ("huge.dat", "huge.csv", "huge.toml", "huge.json"):
        with open(root / name, "wb") as fh:  # sparse: no disk used, no newline anywhere
            fh.truncate(HUGE_BYTES)
    (root / "long.dat").write_bytes(b"7 " * (17 << 19))  # 17 MiB, one line
    (root / "long.csv").write_bytes(b"a," * (17 << 19))
    os.mkfifo(root / "fifo.csv")
    os.mkfifo(root / "fifo.dat")
    (root / "latin.csv").write_bytes("record_id,x,name\n1,2,Jos\xe9\n".encode("latin-1"))
    (root / "latin.dat").write_bytes(b"1 2 3\n4 \xff 5\n")
    (root / "latin.toml").write_bytes(b'party = "caf\xe9"\n')
    (root / "dup.csv").write_text(
        "record_id,x,x,sex\n" + "".join(f"{i},{i % 7},{i % 5},{'MF'[i % 2]}\n" for i in range(40))
    )
    rows = "".join(f"{i},1.79e308\n" for i in range(60))
    (root / "maxvals.csv").write_text("record_id,x\n" + rows)
    lines = (fimi_dir / "mushroom.dat").read_text().splitlines()
    (root / "m.dat").write_text("\n".join(lines[::20]) + "\n")  # 407 baskets
    body = "".join(f"{i},{(i * 37) % 101}.5,{(i * 11) % 7}\n" for i in range(60))
    (root / "rec.csv").write_text("record_id,x,y\n" + body)
    (root / "rules.json").write_text('[{"antecedent": [34], "consequent": [86]}]')
    (root / "afolder").mkdir()
    (root / "budgets").mkdir()
    return root


HOSTILE_FILES = ["huge", "long", "fifo", "latin", "afolder"]


def _hostile(h: Path, kind: str, ext: str) -> str:
    if kind == "afolder":
        return str(h / "afolder")
    name = f"{kind}.{ext}"
    if not (h / name).exists():
        name = f"{kind}.csv"
    return str(h / name)


def _file_readers(h: Path) -> list[tuple[list[str], str, str]]:
    """(a command line, the option that names the file, the file's extension)."""
    rec, m, rules = str(h / "rec.csv"), str(h / "m.dat"), str(h / "rules.json")
    budget = ["--budget-file", str(h / "budgets" / "b.json")]
    hide = ["hide", "--input", m, "--sensitive", rules, "--min-support", "0.5"]
    hide += ["--min-confidence", "0.9", "--output", "{out}/h.dat"]
    return [
        (
            ["anonymize", "--input", rec, "--qi", "x", "--k", "2", "--output", "{out}/a.csv"],
            "--input",
            "csv",
        ),
        (hide, "--input", "dat"),
        (hide, "--sensitive", "json"),
        (
            [
                "partition",
                "--input",
                m,
                "--parties",
                "3",
                "--mode",
                "horizontal",
                "--out",
                "{out}/p",
            ],
            "--input",
            "dat",
        ),
        (
            ["simulate", "assoc", "--input", m, "--min-support", "0.5", "--output", "{out}/s.json"],
            "--input",
            "dat",
        ),
        (
            ["simulate", "kmeans", "--input", rec, "--k", "2", "--output", "{out}/k.json"],
            "--input",
            "csv",
        ),
        (
            ["simulate", "psi-align", "--inputs", f"{rec},{rec}", "--output", "{out}/psi.json"],
            "--inputs",
            "csv",
        ),
        (
            [
                "perturb",
                "noise",
                "--input",
                rec,
                "--columns",
                "x",
                "--scale",
                "1",
                "--output",
                "{out}/n.csv",
            ],
            "--input",
            "csv",
        ),
        (
            [
                "perturb",
                "reconstruct",
                "--input",
                rec,
                "--column",
                "x",
                "--scale",
                "1",
                "--output",
                "{out}/r.csv",
            ],
            "--input",
            "csv",
        ),
        (
            [
                "perturb",
                "anatomy",
                "--input",
                rec,
                "--qi",
                "x",
                "--sensitive",
                "y",
                "--l",
                "2",
                "--out",
                "{out}/an",
            ],
            "--input",
            "csv",
        ),
        (
            ["dp", "count", "--input", rec, "--epsilon", "0.1", *budget, "--out", "{out}/d.json"],
            "--input",
            "csv",
        ),
        (["risk", "--input", rec, "--qi", "x", "--out", "{out}/risk.json"], "--input", "csv"),
        (
            ["risk", "--input", rec, "--qi", "x", "--population", rec, "--out", "{out}/r.json"],
            "--population",
            "csv",
        ),
        (
            [
                "reidentify",
                "--known",
                "2",
                "--transactions",
                m,
                "--trials",
                "5",
                "--out",
                "{out}/re.json",
            ],
            "--transactions",
            "dat",
        ),
        (
            ["hierarchy", "intervals", "--input", rec, "--column", "x", "--output", "{out}/h.csv"],
            "--input",
            "csv",
        ),
        (
            ["hierarchy", "mask", "--input", rec, "--column", "y", "--output", "{out}/h.csv"],
            "--input",
            "csv",
        ),
        (
            [
                "evaluate",
                "--input",
                rec,
                "--qi",
                "x",
                "--sensitive",
                "y",
                "--method",
                "rr-both",
                "--values",
                "2",
                "--out",
                "{out}/ev",
            ],
            "--input",
            "csv",
        ),
        (["job", "show", rec], "FILE", "json"),
        (["consortium", "check", rec], "FILE", "toml"),
        (["policy", "validate", rec], "FILE", "toml"),
        (["party", "health", "--settings", rec], "--settings", "toml"),
        (["job", "run", "secure-sum", "--settings", rec], "--settings", "toml"),
    ]


def _replace_file(argv: list[str], option: str, path: str) -> list[str]:
    if option == "FILE":
        return [*argv[:2], path, *argv[3:]]
    if option == "--inputs":
        return _set(argv, option, f"{path},{path}")
    return _set(argv, option, path)


def _issue_cases(h: Path) -> list[list[str]]:
    """The bad lines the issue lists, and their classes."""
    rec, m, rules = str(h / "rec.csv"), str(h / "m.dat"), str(h / "rules.json")
    budget = ["--budget-file", str(h / "budgets" / "b.json")]
    hide = ["hide", "--input", m, "--sensitive", rules, "--min-support", "0.5"]
    hide += ["--min-confidence", "0.9", "--output", "{out}/h.dat"]
    assoc = ["simulate", "assoc", "--input", m, "--output", "{out}/s.json"]
    recon = ["perturb", "reconstruct", "--input", rec, "--column", "x", "--scale", "1"]
    recon += ["--output", "{out}/r.csv"]
    median = ["dp", "median", "--input", rec, "--column", "x", "--epsilon", "0.1", *budget]
    median += ["--out", "{out}/dm.json"]
    noise = ["perturb", "noise", "--input", rec, "--columns", "x", "--output", "{out}/n.csv"]
    hier = ["hierarchy", "intervals", "--input", rec, "--column", "x", "--output", "{out}/h.csv"]
    init = ["consortium", "init", "--parties", "alice,bob", "--out", "{out}/c"]
    part = ["partition", "--input", m, "--parties", "3", "--out", "{out}/p"]
    cases = [
        [*hide, "--fallback", "bogus"],  # was checked only after mining
        [*hide, "--fallback", "exact"],
        [*hide, "--time-limit", "nan"],
        [*hide, "--max-vars", "0"],
        [*hide, "--output", m],  # would overwrite its own input
        [*assoc, "--min-support", "1e-9"],  # hung
        [*assoc, "--min-support", "0.0001"],  # below one basket of a party
        [*assoc, "--min-support", "0.001", "--parties", "2"],
        [*assoc, "--min-support", "0.5", "--timeout", "0"],
        [*assoc, "--min-support", "0.5", "--timeout", "1e12"],
        [*recon, "--bins", "100000000"],  # 1.7 GB before
        [*recon, "--bins", "0"],
        [*recon, "--bins", "-3"],
        [*recon, "--scale", "0"],
        [*recon, "--scale", "1e400"],
        [*recon, "--bounds", "1,nan"],
        [*recon, "--bounds", "5"],
        [*recon, "--bounds", "9,1"],
        ["demo", "--min-support", "1e-9"],  # 5.4 GB before
        ["demo", "--min-support", "0"],
        ["demo", "--min-support", "1.5"],
        ["demo", "--parties", "1"],
        [*median, "--candidates", "0,1e12", "--lower", "0", "--upper", "100"],  # gave 1e12
        [*median, "--candidates", "0:100:1e-9"],
        [*median, "--candidates", "0:inf"],
        [*median, "--candidates", "5,5,6"],
        [*median, "--candidates", "0:101", "--lower", "50", "--upper", "10"],
        [*median, "--candidates", "0:101", "--seed", "-1"],
        [
            "dp",
            "mean",
            "--input",
            rec,
            "--column",
            "x",
            "--epsilon",
            "0.1",
            *budget,
            "--lower",
            "nan",
            "--upper",
            "1",
        ],
        [*hier, "--widths", "1e-9"],  # wrote empty intervals
        [*hier, "--widths", "0"],
        [*hier, "--widths", "-5,10"],
        [*hier, "--widths", "inf"],
        [*hier, "--widths", "nan"],
        [
            "hierarchy",
            "quantiles",
            "--input",
            rec,
            "--column",
            "x",
            "--bins",
            "0",
            "--output",
            "{out}/q.csv",
        ],
        [
            "hierarchy",
            "quantiles",
            "--input",
            rec,
            "--column",
            "x",
            "--bins",
            "100001",
            "--output",
            "{out}/q.csv",
        ],
        [
            "hierarchy",
            "mask",
            "--input",
            rec,
            "--column",
            "y",
            "--keep",
            "-1",
            "--output",
            "{out}/k.csv",
        ],
        [*noise, "--scale", "1e308", "--input", str(h / "maxvals.csv")],  # wrote inf
        [*noise, "--scale", "0"],
        [*noise, "--scale", "-1"],
        [*noise, "--scale", "1e309"],
        [*init, "--host", "bad host!"],
        [*init, "--host", ""],
        [*init, "--host", "a..b"],
        [*init, "--host", "300.1.2.3"],
        [*init, "--host", "-lead.example"],
        [*init, "--base-port", "0"],
        [*init, "--base-port", "70000"],
        ["consortium", "add-party", "dave", "--roster", rec, "--address", "bad host!:5"],
        ["consortium", "add-party", "dave", "--roster", rec, "--address", "node:0"],
        ["consortium", "add-party", "dave", "--roster", rec, "--address", "node"],
        ["consortium", "push", "--roster", rec, "--settings", rec, "--timeout", "0"],
        ["party", "health", "--settings", rec, "--timeout", "0"],  # reported every node down
        ["party", "health", "--settings", rec, "--timeout", "-1"],
        ["party", "health", "--settings", rec, "--timeout", "nan"],
        ["job", "run", "secure-sum", "--settings", rec, "--timeout", "0"],
        ["job", "history", "--settings", rec, "--limit", "-5"],
        ["ledger", "show", "--ledger", rec, "--limit", "-1"],
        ["ledger", "show", "--ledger", rec, "--since", "-1"],
        # a header naming a column twice was anonymized silently
        [
            "anonymize",
            "--input",
            str(h / "dup.csv"),
            "--qi",
            "x",
            "--k",
            "2",
            "--output",
            "{out}/a.csv",
        ],
        [
            "perturb",
            "noise",
            "--input",
            str(h / "dup.csv"),
            "--columns",
            "x",
            "--scale",
            "1",
            "--output",
            "{out}/n.csv",
        ],
        ["risk", "--input", str(h / "dup.csv"), "--qi", "x,sex", "--out", "{out}/r.json"],
        [
            "dp",
            "count",
            "--input",
            str(h / "dup.csv"),
            "--epsilon",
            "0.1",
            *budget,
            "--out",
            "{out}/d.json",
        ],
        [
            "simulate",
            "kmeans",
            "--input",
            str(h / "dup.csv"),
            "--k",
            "2",
            "--output",
            "{out}/k.json",
        ],
        # refused after the output folder would have been made: none may be left
        [*part, "--mode", "vertical", "--names", "a,b"],
        # refused by the split itself, after partition_file made its folder
        [*_set(part, "--input", rec), "--mode", "vertical", "--parties", "5"],
        [*_set(part, "--input", rec), "--mode", "horizontal", "--parties", "500"],
        [*_set(part, "--input", rec), "--mode", "horizontal", "--columns", "nosuch"],
        [
            "perturb",
            "anatomy",
            "--input",
            rec,
            "--qi",
            "x",
            "--sensitive",
            "y",
            "--l",
            "1000",
            "--out",
            "{out}/an",
        ],
        [
            "perturb",
            "anatomy",
            "--input",
            rec,
            "--qi",
            "x",
            "--sensitive",
            "y",
            "--l",
            "0",
            "--out",
            "{out}/an",
        ],
        [
            "perturb",
            "ra",
            "--input",
            rec,
            "--qi",
            "x",
            "--lambda",
            "-1",
            "--output",
            "{out}/ra.csv",
        ],
        [
            "perturb",
            "rr",
            "--input",
            rec,
            "--qi",
            "x",
            "--sensitive",
            "y",
            "--l",
            "0.5",
            "--output",
            "{out}/rr.csv",
        ],
        # ranges of the remaining numeric options
        ["reidentify", "--n", "1000000000000", "--known", "2", "--out", "{out}/re.json"],
        ["reidentify", "--n", "100", "--known", "100000", "--out", "{out}/re.json"],
        ["reidentify", "--n", "10000000", "--known", "50", "--out", "{out}/re.json"],
        [
            "reidentify",
            "--n",
            "100",
            "--known",
            "500",
            "--values",
            "1000000000",
            "--out",
            "{out}/re.json",
        ],
        ["reidentify", "--n", "100", "--known", "2", "--values", "1", "--out", "{out}/re.json"],
        ["simulate", "kmeans", "--input", rec, "--k", "1000000000", "--output", "{out}/k.json"],
        [
            "simulate",
            "kmeans",
            "--input",
            rec,
            "--k",
            "2",
            "--max-iter",
            "0",
            "--output",
            "{out}/k.json",
        ],
        [*assoc, "--min-support", "0.5", "--partition", "vertical", "--epsilon", "1e-300"],
        [
            "evaluate",
            "--input",
            rec,
            "--qi",
            "x",
            "--sensitive",
            "y",
            "--method",
            "rr-both",
            "--values",
            "2",
            "--queries",
            "1000000000000",
            "--out",
            "{out}/ev",
        ],
    ]
    return cases


def _hostile_cases(h: Path) -> list[list[str]]:
    cases = []
    for argv, option, ext in _file_readers(h):
        for kind in HOSTILE_FILES:
            cases.append(_replace_file(argv, option, _hostile(h, kind, ext)))
    return cases + _issue_cases(h)


def _refused(r: dict) -> str | None:
    """What is wrong with a case that must be refused (None: refused as it should be)."""
    if r["escaped"]:
        return f"escaped: {r['escaped']}"
    if r["code"] != 2:
        return f"exit code {r['code']}: {r['stderr'][-300:]!r}"
    err = r["stderr"]
    if not err.startswith("ppdm: error:") or err.strip().count("\n") != 0:
        return f"not one error line: {err[:300]!r}"
    if "Traceback" in err:
        return "a traceback"
    if r["outputs"]:
        return f"left {r['outputs']} behind although it was refused"
    return None


def _run_capped(cases: list[list[str]], tmp: Path) -> list[dict]:
    concrete = []
    for i, argv in enumerate(cases):
        out = tmp / f"out{i}"
        out.mkdir(parents=True, exist_ok=True)
        concrete.append([a.replace("{out}", str(out)) for a in argv])
    (tmp / "cases.json").write_text(json.dumps(concrete))
    (tmp / "runner.py").write_text(HOSTILE_RUNNER)
    proc = subprocess.run(
        [sys.executable, str(tmp / "runner.py"), str(tmp / "cases.json"), str(tmp / "res.json")],
        capture_output=True,
        text=True,
        timeout=3300,
        env={
            "PYTHONPATH": str(REPO),
            "PATH": "/usr/bin:/bin",
            "PPDM_SHARED": str(REPO.parent / "shared"),
            "PPDM_STATE_DIR": str(tmp / "state"),
            "OPENBLAS_NUM_THREADS": "1",
            "OMP_NUM_THREADS": "1",
        },
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((tmp / "res.json").read_text())
    for i, r in enumerate(results):
        r["outputs"] = sorted(p.name for p in (tmp / f"out{i}").iterdir())
    return results


@pytest.mark.timeout(3600)
def test_hostile_files_and_bad_numbers_are_refused_under_a_2_gib_cap(hostile, tmp_path):
    cases = _hostile_cases(hostile)
    assert len(cases) >= 100 + len(HOSTILE_FILES)
    results = _run_capped(cases, tmp_path)
    problems = [(r["argv"], why) for r in results if (why := _refused(r))]
    assert not problems, f"{len(problems)} of {len(cases)}:\n" + "\n".join(
        f"{' '.join(a)[:300]}\n    -> {w}" for a, w in problems[:30]
    )
    # the hostile files were refused for what they are, not read until memory ran out
    assert not [r for r in results if "more memory" in r["stderr"]]


def test_the_valid_lines_the_hostile_cases_start_from_work(hostile, tmp_path):
    """Each command line the hostile files are put into works on good files, so a
    refusal above is the hostile file's doing."""
    bases = [
        argv for argv, option, _ in _file_readers(hostile) if option not in ("FILE", "--settings")
    ]
    results = _run_capped(bases, tmp_path)
    bad = [(r["argv"], r["stderr"][-300:], r["escaped"]) for r in results if r["code"] != 0]
    assert not bad, bad


@pytest.mark.timeout(600)
def test_unreadable_folders_are_refused(hostile, tmp_path):
    """An input inside a folder its reader may not enter. Skipped as root: root reads
    any folder whatever its mode, so there is nothing to refuse."""
    import os

    if os.geteuid() == 0:
        pytest.skip("running as root: an unreadable folder is readable to root")
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "rec.csv").write_text((hostile / "rec.csv").read_text())
    (locked / "m.dat").write_text((hostile / "m.dat").read_text())
    locked.chmod(0)
    try:
        cases = []
        for argv, option, ext in _file_readers(hostile):
            cases.append(
                _replace_file(argv, option, str(locked / ("m.dat" if ext == "dat" else "rec.csv")))
            )
        results = _run_capped(cases, tmp_path / "run")
    finally:
        locked.chmod(0o700)
    problems = [(r["argv"], why) for r in results if (why := _refused(r))]
    assert not problems, "\n".join(f"{' '.join(a)}\n    -> {w}" for a, w in problems[:30])
