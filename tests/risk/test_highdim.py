"""Aggarwal 2015, exercises 14-16: re-identification with B known attributes."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ppdm.cli.main import main
from ppdm.randomness import make_rng
from ppdm.risk import (
    collision_bound,
    collision_probability,
    reidentify,
    reidentify_transactions,
    simulate_reidentification,
    transaction_uniqueness,
)


def test_exercise_14_numbers() -> None:
    # n = 10^4 other customers, B = 20 items: at most n / 2^B.
    assert collision_bound(10_000, 20) == pytest.approx(0.0095367, abs=1e-7)
    p = collision_probability(10_000, 20)
    assert p <= collision_bound(10_000, 20)
    assert p == pytest.approx(1 - (1 - 2**-20) ** 10_000, rel=1e-12)


@given(n=st.integers(0, 10**6), b=st.integers(0, 40), r=st.integers(2, 10))
def test_exercise_15_closed_form_below_union_bound(n: int, b: int, r: int) -> None:
    p = collision_probability(n, b, r)
    assert 0.0 <= p <= 1.0
    assert p <= collision_bound(n, b, r) * (1 + 1e-12) + 1e-15
    assert p == pytest.approx(1 - (1 - float(r) ** -b) ** n, abs=1e-9)


@pytest.mark.parametrize(("n", "b", "r"), [(1000, 10, 2), (300, 4, 5), (50, 3, 3), (20, 0, 2)])
def test_simulated_program_agrees_with_closed_form(n: int, b: int, r: int) -> None:
    sim = simulate_reidentification(n, b, r, trials=600, rng=n + b + r)
    # A 99.9 % interval around the closed form (binomial, fixed seed).
    sd = math.sqrt(max(sim.closed_form * (1 - sim.closed_form), 1e-12) / sim.trials)
    assert abs(sim.measured_collision - sim.closed_form) <= 3.3 * sd + 1e-9
    assert sim.ci_low <= sim.measured_collision <= sim.ci_high
    assert sim.reidentified == pytest.approx(1 - sim.measured_collision)


@given(
    st.lists(st.lists(st.integers(0, 3), min_size=3, max_size=3), min_size=1, max_size=30),
    st.lists(st.integers(0, 3), min_size=2, max_size=2),
)
def test_reidentify_equals_brute_force(rows: list[list[int]], known: list[int]) -> None:
    db = np.array(rows)
    got = reidentify(db, {0: known[0], 2: known[1]}).tolist()
    assert got == [i for i, row in enumerate(rows) if row[0] == known[0] and row[2] == known[1]]
    frame = pd.DataFrame(db, columns=["a", "b", "c"])
    assert reidentify(frame, {"a": known[0], "c": known[1]}).tolist() == got


@given(
    st.lists(st.sets(st.integers(0, 8), max_size=6), min_size=1, max_size=25),
    st.sets(st.integers(0, 8), min_size=1, max_size=3),
)
def test_reidentify_transactions_equals_brute_force(
    baskets: list[set[int]], known: set[int]
) -> None:
    got = reidentify_transactions([sorted(b) for b in baskets], known).tolist()
    assert got == [i for i, b in enumerate(baskets) if known <= b]


def test_transaction_uniqueness_on_fimi(fimi_dir) -> None:
    with (fimi_dir / "chess.dat").open() as fh:
        baskets = [[int(x) for x in line.split()] for line in fh if line.strip()]
    # chess is very dense: a couple of known items identify almost nobody, many do.
    few = transaction_uniqueness(baskets, 2, targets=100, rng=1)
    many = transaction_uniqueness(baskets, 30, targets=100, rng=1)
    assert few < 0.05 and many > few
    rng = make_rng(2)
    with pytest.raises(ValueError):
        transaction_uniqueness([[1, 2]], 3, rng=rng)


def test_cli_reidentify(tmp_path, capsys) -> None:
    assert (
        main(
            [
                "reidentify",
                "--n",
                "10000",
                "--known",
                "20",
                "--trials",
                "50",
                "--seed",
                "1",
                "--json",
            ]
        )
        == 0
    )
    doc = json.loads(capsys.readouterr().out)
    assert doc["union_bound"] == pytest.approx(10_000 / 2**20)
    assert doc["simulation"]["trials"] == 50
    path = tmp_path / "t.dat"
    path.write_text("1 2 3\n1 2\n2 3 4\n")
    assert (
        main(
            [
                "reidentify",
                "--json",
                "--known",
                "2",
                "--transactions",
                str(path),
                "--trials",
                "10",
                "--seed",
                "1",
            ]
        )
        == 0
    )
    assert 0 <= json.loads(capsys.readouterr().out)["unique_share"] <= 1
    assert main(["reidentify", "--known", "2"]) == 2
