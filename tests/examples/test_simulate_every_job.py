"""``ppdm simulate`` runs every registered job (issue 24, item 8).

The test walks the job registry (:func:`ppdm.jobs.registry.job_names`): every job must
have a ``ppdm simulate`` sub-command and a case here (a new job without one fails
:func:`test_every_registered_job_has_a_case`), and each case runs the command line with
small parameters and checks the answer against a plain computation on the same inputs
(the generated inputs are public functions of the seed and the party name).
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ppdm.cli.main import build_parser, main
from ppdm.jobs.ot import generated_bits, generated_values
from ppdm.jobs.paillier import generated_input
from ppdm.jobs.registry import job_names
from ppdm.jobs.set_ops import generated_ids

pytestmark = pytest.mark.timeout(900)  # a hang only (issue 22: no wall-clock bound)

Doc = dict[str, Any]


def _results(doc: Doc) -> dict[str, Doc]:
    return {p: rec["result"] for p, rec in doc["parties"].items()}


def _check_secure_sum(doc: Doc, tmp: Path) -> None:
    assert {r["sum"] for r in _results(doc).values()} == {3 + 5 + 9}


def _check_shared_sum(doc: Doc, tmp: Path) -> None:
    assert {r["sum"] for r in _results(doc).values()} == {3 + 5 + 9}


def _check_set_union(doc: Doc, tmp: Path) -> None:
    for r in _results(doc).values():
        assert sorted(r["union"]) == ["a", "b", "c", "d"]


def _check_intersection(doc: Doc, tmp: Path) -> None:
    sets = [set(generated_ids(i, 30, 0.5, 1)) for i in range(3)]
    assert {r["cardinality"] for r in _results(doc).values()} == {len(set.intersection(*sets))}


def _check_psi(doc: Doc, tmp: Path) -> None:
    sets = [set(generated_ids(i, 40, 0.5, 1)) for i in range(2)]
    for r in _results(doc).values():
        assert sorted(r["ids"]) == sorted(set.intersection(*sets))


def _check_comparison(doc: Doc, tmp: Path) -> None:
    x = generated_values("alice", 0, 60, 16)
    y = generated_values("bob", 0, 60, 16)
    ge = (x >= y).astype(np.uint8)
    want = hashlib.sha256(np.packbits(ge).tobytes()).hexdigest()
    res = _results(doc)
    assert res["alice"]["sha256"] == res["bob"]["sha256"] == want


def _check_argmin(doc: Doc, tmp: Path) -> None:
    a = generated_values("alice", 0, 40 * 3, 31).reshape(40, 3).astype(object)
    b = generated_values("bob", 0, 40 * 3, 31).reshape(40, 3).astype(object)
    idx = np.argmin((a + b).astype(np.float64), axis=1)  # sums < 2^32: exact in float
    want = hashlib.sha256(idx.astype("<i8").tobytes()).hexdigest()
    assert {r["sha256"] for r in _results(doc).values()} == {want}


def _check_dot_product_ot(doc: Doc, tmp: Path) -> None:
    x = generated_bits("alice", 0, (1, 300), 0.5).astype(np.int64)
    y = generated_bits("bob", 0, (1, 300), 0.5).astype(np.int64)
    want = [int((x * y).sum())]
    assert {tuple(r["values"]) for r in _results(doc).values()} == {tuple(want)}


def _check_paillier(doc: Doc, tmp: Path) -> None:
    x = generated_input("alice", 0, 16, 8)
    y = generated_input("bob", 0, 16, 8)
    assert _results(doc)["alice"]["values"] == [int((x * y).sum())]


def _check_verified(doc: Doc, tmp: Path) -> None:
    assert any(r.get("verified") is True for r in _results(doc).values())


def _check_ring_echo(doc: Doc, tmp: Path) -> None:
    assert len(_results(doc)["alice"]["round_trip_s"]) == 2


def _check_stream(doc: Doc, tmp: Path) -> None:
    got = {r["role"]: r["bytes"] for r in _results(doc).values() if "role" in r}
    assert got == {"sender": 3000, "receiver": 3000}


def _basket_sets() -> list[set[int]]:
    rng = np.random.default_rng(5)
    out = []
    for _ in range(240):
        items = {1, 2} if rng.random() < 0.6 else set()
        items |= {
            int(i) for i in rng.choice(np.arange(3, 9), size=int(rng.integers(1, 4)), replace=False)
        }
        out.append(items)
    return out


def _baskets(tmp: Path) -> str:
    path = tmp / "baskets.dat"
    path.write_text("".join(" ".join(map(str, sorted(b))) + "\n" for b in _basket_sets()))
    return str(path)


def _check_assoc(doc: Doc, tmp: Path) -> None:
    # brute force over all itemsets of the 8 items: support >= 0.3, confidence >= 0.8
    baskets = _basket_sets()
    n = len(baskets)

    def count(s: frozenset[int]) -> int:
        return sum(s <= b for b in baskets)

    frequent = [
        frozenset(c)
        for k in range(1, 9)
        for c in itertools.combinations(range(1, 9), k)
        if count(frozenset(c)) >= 0.3 * n
    ]
    want = set()
    for z in frequent:
        for k in range(1, len(z)):
            for x in itertools.combinations(sorted(z), k):
                if count(z) >= 0.8 * count(frozenset(x)):
                    want.add((tuple(x), tuple(sorted(z - set(x)))))
    assert want  # the data has rules
    for r in _results(doc).values():
        got = {(tuple(sorted(x["antecedent"])), tuple(sorted(x["consequent"]))) for x in r["rules"]}
        assert got == want


def _records(tmp: Path) -> str:
    rng = np.random.default_rng(9)
    pts = np.concatenate([rng.normal(c, 0.3, size=(60, 2)) for c in (0.0, 5.0, 10.0)])
    path = tmp / "records.csv"
    path.write_text("x,y\n" + "".join(f"{a:.4f},{b:.4f}\n" for a, b in pts))
    return str(path)


def _check_kmeans(doc: Doc, tmp: Path) -> None:
    for r in _results(doc).values():
        centres = sorted(round(c[0]) for c in r["centers"])
        assert centres == [0, 5, 10] and sum(r["cluster_sizes"]) == 180


#: job -> (the arguments after ``ppdm simulate``, the check of the document)
CASES: dict[str, tuple[Callable[[Path], list[str]], Callable[[Doc, Path], None]]] = {
    "secure-sum": (lambda t: ["secure-sum", "--values", "3,5,9"], _check_secure_sum),
    "secure-sum-shared": (
        lambda t: [
            *("secure-sum-shared", "--input", "alice.secure_sum=3"),
            *("--input", "bob.secure_sum=5", "--input", "carol.secure_sum=9"),
        ],
        _check_shared_sum,
    ),
    "set-union": (
        lambda t: [
            *("set-union", "--input", 'alice.set_union=["a","b"]'),
            *("--input", 'bob.set_union=["b","c"]', "--input", 'carol.set_union=["d"]'),
        ],
        _check_set_union,
    ),
    "intersection-cardinality": (
        lambda t: ["intersection-cardinality", "--param", "generate_n=30"],
        _check_intersection,
    ),
    "psi-align": (
        lambda t: ["psi-align", "--generate", "40", "--parties", "2"],
        _check_psi,
    ),
    "comparison": (
        lambda t: [
            *("comparison", "--parties", "2", "--param", "count=60"),
            *("--param", "bits=16"),
        ],
        _check_comparison,
    ),
    "argmin": (
        lambda t: ["argmin", "--parties", "2", "--param", "points=40", "--param", "clusters=3"],
        _check_argmin,
    ),
    "dot-product-ot": (
        lambda t: ["dot-product-ot", "--parties", "2", "--param", "length=300"],
        _check_dot_product_ot,
    ),
    "paillier-dot-product": (
        lambda t: [
            *("paillier-dot-product", "--parties", "2", "--param", "length=16"),
            *("--param", "bits=8"),
        ],
        _check_paillier,
    ),
    "base-ot": (
        lambda t: ["base-ot", "--parties", "2", "--param", "count=16", "--param", "verify=1"],
        _check_verified,
    ),
    "ot-extension": (
        lambda t: [
            *("ot-extension", "--parties", "2", "--param", "count=2000"),
            *("--param", "verify=1"),
        ],
        _check_verified,
    ),
    "ring-echo": (lambda t: ["ring-echo", "--param", "rounds=2"], _check_ring_echo),
    "stream": (
        lambda t: [
            *("stream", "--parties", "2", "--param", "size=1000"),
            *("--param", "count=3"),
        ],
        _check_stream,
    ),
    "assoc": (
        lambda t: [
            *("assoc", "--input", _baskets(t), "--parties", "3", "--min-support", "0.3"),
            *("--min-confidence", "0.8", "--protect", "exact"),
        ],
        _check_assoc,
    ),
    "kmeans": (
        lambda t: [
            *("kmeans", "--input", _records(t), "--parties", "3", "--k", "3"),
            *("--min-cluster-size", "1", "--seed", "1"),
        ],
        _check_kmeans,
    ),
}


def _simulate_commands() -> set[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    simulate = sub.choices["simulate"]
    jobs = next(a for a in simulate._actions if a.dest == "job")
    return set(jobs.choices)


def _shipped_jobs() -> list[str]:
    """The registry's jobs without those other test modules register for themselves
    (named ``test-...``; they may or may not be loaded in this worker)."""
    return [j for j in job_names() if not j.startswith("test-")]


def test_every_registered_job_has_a_case_and_a_command():
    assert set(CASES) == set(_shipped_jobs())
    assert set(_shipped_jobs()) <= _simulate_commands()


@pytest.mark.parametrize("job", _shipped_jobs())
def test_simulate(job, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args, check = CASES[job]
    out = tmp_path / "doc.json"
    code = main(["simulate", *args(tmp_path), "--output", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err[-2000:]
    doc = json.loads(out.read_text())
    assert doc["ok"] and doc["protocol"] == job
    check(doc, tmp_path)


def test_generic_form_errors_are_one_line(capsys):
    assert main(["simulate", "set-union", "--param", "nope=1"]) == 2
    assert "no parameter 'nope'" in capsys.readouterr().err
    assert main(["simulate", "set-union", "--input", "zed.set_union=[1]"]) == 2
    assert "not one of" in capsys.readouterr().err
    assert main(["simulate", "stream", "--parties", "1"]) == 2
