"""Budget accountant (sequential/parallel composition), DP queries and sensitivity helpers."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ppdm.cli.main import main
from ppdm.dp import (
    BudgetAccountant,
    BudgetExceededError,
    count_sensitivity,
    dp_count,
    dp_histogram,
    dp_mean,
    dp_median,
    dp_sum,
    global_sensitivity,
    histogram_sensitivity,
    local_sensitivity,
    sum_sensitivity,
)
from ppdm.errors import PPDMError
from ppdm.randomness import make_rng


class CountingRandom:
    """Wraps a seeded source and counts how many bytes were drawn."""

    secure = False

    def __init__(self, seed: int) -> None:
        self.inner = make_rng(seed)
        self.drawn = 0

    def bytes(self, n: int) -> bytes:
        self.drawn += n
        return self.inner.bytes(n)

    def bits(self, size: int) -> np.ndarray:
        self.drawn += size
        return self.inner.bits(size)

    def random(self, size: int) -> np.ndarray:
        self.drawn += size
        return self.inner.random(size)

    def integers(self, low: int, high: int, size: int) -> np.ndarray:
        self.drawn += size
        return self.inner.integers(low, high, size)


# --- accountant -------------------------------------------------------------------------


def test_sequential_composition_adds_and_refuses() -> None:
    acct = BudgetAccountant(epsilon=0.3)
    for _ in range(3):
        acct.spend(0.1)  # exact rationals: 0.1 * 3 == 0.3 fits
    assert acct.spent() == (Fraction(3, 10), 0)
    with pytest.raises(BudgetExceededError):
        acct.spend(1e-9, label="one more")
    assert len(acct.ledger) == 3  # the refused query left no trace


def test_delta_budget() -> None:
    acct = BudgetAccountant(epsilon=2, delta=1e-6)
    acct.spend(1, 5e-7)
    assert acct.can_spend(1, 5e-7)
    assert not acct.can_spend(1, 6e-7)
    with pytest.raises(BudgetExceededError):
        acct.spend(0.5, 6e-7)
    with pytest.raises(ValueError):
        BudgetAccountant(epsilon=1, delta=1)
    with pytest.raises(ValueError):
        acct.spend(-1)


def test_parallel_composition_charges_max_partition() -> None:
    acct = BudgetAccountant(epsilon=1)
    with acct.parallel(label="g") as group:
        group.spend(0.5, partition="a")
        group.spend(0.5, partition="b")
        group.spend(0.25, partition="c")
    assert acct.spent()[0] == Fraction(1, 2)
    with acct.parallel() as group:
        group.spend(0.25, partition=1)
        group.spend(0.25, partition=1)  # same partition: sequential inside
        with pytest.raises(BudgetExceededError):
            group.spend(0.25, partition=1)
        group.spend(0.5, partition=2)  # within the current max: free
    assert acct.spent()[0] == 1
    summary = json.loads(json.dumps(acct.summary()))
    assert summary["epsilon_remaining"] == 0


@given(st.lists(st.integers(1, 50), min_size=1, max_size=30), st.integers(1, 400))
def test_accountant_never_exceeds_budget(charges: list[int], budget: int) -> None:
    acct = BudgetAccountant(epsilon=Fraction(budget, 100))
    total = Fraction(0)
    for c in charges:
        amount = Fraction(c, 100)
        if total + amount <= Fraction(budget, 100):
            acct.spend(amount)
            total += amount
        else:
            with pytest.raises(BudgetExceededError):
                acct.spend(amount)
    assert acct.spent()[0] == total <= Fraction(budget, 100)


def test_refused_query_does_not_touch_data_or_randomness() -> None:
    acct = BudgetAccountant(epsilon=0.5)
    rng = CountingRandom(1)
    for fn, kwargs in [
        (dp_count, {}),
        (dp_sum, {"lower": 0, "upper": 1}),
        (dp_mean, {"lower": 0, "upper": 1}),
        (dp_histogram, {"categories": [0, 1]}),
        (dp_median, {"candidates": [0, 1]}),
    ]:
        with pytest.raises(BudgetExceededError):
            fn(np.zeros(10), epsilon=1.0, accountant=acct, rng=rng, **kwargs)
    assert rng.drawn == 0 and acct.spent()[0] == 0


def test_mean_charges_sum_and_count_sequentially() -> None:
    acct = BudgetAccountant(epsilon=1)
    dp_mean(np.ones(100), epsilon=1.0, lower=0, upper=2, accountant=acct, rng=1)
    assert [c.label for c in acct.ledger] == ["mean:sum", "mean:count"]
    assert acct.spent()[0] == 1


def test_histogram_is_charged_once_by_parallel_composition() -> None:
    acct = BudgetAccountant(epsilon=1)
    dp_histogram(list("abcab"), epsilon=1.0, categories=list("abc"), accountant=acct, rng=1)
    assert acct.spent()[0] == 1 and len(acct.ledger) == 1


# --- queries ----------------------------------------------------------------------------


def test_dp_count_is_unbiased() -> None:
    data = np.arange(500) % 5 == 0
    rng = make_rng(3)
    noisy = [dp_count(data, epsilon=0.5, rng=rng) for _ in range(2000)]
    assert abs(np.mean(noisy) - 100) < 0.4  # std of the mean ~ 0.063
    g = [dp_count(data, epsilon=0.5, delta=1e-6, mechanism="gaussian", rng=rng) for _ in range(500)]
    assert abs(np.mean(g) - 100) < 1.5
    assert dp_count(pd.DataFrame({"a": range(7)}), epsilon=50.0, rng=1) in range(5, 10)


def test_dp_histogram_categories_and_bins() -> None:
    values = ["x"] * 300 + ["y"] * 100 + ["z"] * 10 + ["outside"] * 50
    h = dp_histogram(values, epsilon=2.0, categories=["x", "y", "z"], rng=4)
    assert list(h.index) == ["x", "y", "z"]
    assert np.all(np.abs(h.to_numpy() - [300, 100, 10]) < 15)
    nums = np.concatenate([np.full(100, 0.5), np.full(40, 1.5), [99.0]])
    hb = dp_histogram(nums, epsilon=2.0, bins=[0, 1, 2], rng=5, non_negative=True)
    assert len(hb) == 2 and np.all(np.abs(hb.to_numpy() - [100, 40]) < 15)
    with pytest.raises(ValueError):
        dp_histogram(values, epsilon=1.0)
    with pytest.raises(ValueError):
        dp_histogram(values, epsilon=1.0, categories=["x", "x"])
    with pytest.raises(ValueError):
        dp_histogram(nums, epsilon=1.0, bins=[2, 1])


@pytest.mark.parametrize("mechanism", ["laplace", "discrete_laplace", "gaussian"])
def test_dp_sum_and_mean(mechanism: str) -> None:
    rng = make_rng(6)
    x = rng.random(5000) * 10
    delta = 1e-6 if mechanism == "gaussian" else 0.0
    s = dp_sum(x, epsilon=1.0, lower=0, upper=10, delta=delta, mechanism=mechanism, rng=7)
    assert abs(s - x.sum()) < 200
    m = dp_mean(x, epsilon=1.0, lower=0, upper=10, delta=delta, mechanism=mechanism, rng=8)
    assert abs(m - x.mean()) < 0.2
    clipped = dp_sum(
        np.full(100, 1e6), epsilon=5.0, lower=0, upper=1, mechanism=mechanism, delta=delta, rng=9
    )
    assert abs(clipped - 100) < 20


def test_dp_sum_validation() -> None:
    with pytest.raises(ValueError):
        dp_sum([1.0], epsilon=1.0, lower=2, upper=1)
    with pytest.raises(ValueError):
        dp_sum([1.0], epsilon=1.0, lower=0, upper=1, mechanism="gaussian")
    with pytest.raises(ValueError):
        dp_sum([1.0], epsilon=1.0, lower=0, upper=1, delta=0.1)
    with pytest.raises(ValueError):
        dp_sum(
            [1.0], epsilon=1.0, lower=0, upper=1, mechanism="gaussian", delta=0.1, granularity=0.3
        )
    with pytest.raises(ValueError):
        dp_sum(pd.DataFrame({"a": [1]}), epsilon=1.0, lower=0, upper=1)


def test_dp_median_is_accurate_with_large_epsilon() -> None:
    x = np.arange(2001, dtype=float)
    med = dp_median(x, epsilon=2.0, candidates=np.arange(0, 2001, 5), rng=11)
    assert abs(med - 1000) <= 25


# --- sensitivity ------------------------------------------------------------------------


def test_closed_form_sensitivities_equal_brute_force() -> None:
    domain = [-2, 0, 1, 3]
    assert global_sensitivity(len, domain, max_size=3) == count_sensitivity()
    clamped_sum = lambda d: float(np.clip(d, -2, 3).sum()) if d else 0.0  # noqa: E731
    assert global_sensitivity(clamped_sum, domain, max_size=3) == sum_sensitivity(-2, 3)

    def hist(d: list[int]) -> np.ndarray:
        return np.array([d.count(v) for v in domain])

    assert global_sensitivity(hist, domain, max_size=3) == histogram_sensitivity("l1")
    assert global_sensitivity(hist, domain, max_size=2, norm="l2") == histogram_sensitivity("l2")


@given(st.lists(st.integers(0, 9), min_size=1, max_size=8))
def test_local_sensitivity_of_max_is_data_dependent(data: list[int]) -> None:
    # LS of max (0 for no data): removing the top value or adding a 9; GS is 9.
    ls = local_sensitivity(lambda d: max(d, default=0), data, domain=range(10))
    top = sorted(data, reverse=True)
    removal = top[0] - (top[1] if len(top) > 1 else 0)
    assert ls == max(9 - top[0], removal)


# --- command line -----------------------------------------------------------------------


def test_cli_dp_queries(tmp_path, capsys) -> None:
    path = tmp_path / "t.csv"
    pd.DataFrame({"age": [30, 40, 50] * 50, "sex": ["F", "M", "M"] * 50}).to_csv(path, index=False)
    assert (
        main(["dp", "count", "--input", str(path), "--epsilon", "1", "--seed", "1", "--json"]) == 0
    )
    doc = json.loads(capsys.readouterr().out)
    assert doc["query"] == "count" and abs(doc["result"] - 150) < 20
    assert doc["budget"]["epsilon_spent"] == 1.0
    out = tmp_path / "h.json"
    assert (
        main(
            [
                "dp",
                "histogram",
                "--input",
                str(path),
                "--column",
                "sex",
                "--categories",
                "F,M",
                "--epsilon",
                "1",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert set(json.loads(out.read_text())["result"]) == {"F", "M"}
    assert (
        main(
            [
                "dp",
                "mean",
                "--input",
                str(path),
                "--column",
                "age",
                "--lower",
                "0",
                "--upper",
                "100",
                "--epsilon",
                "2",
                "--mechanism",
                "gaussian",
                "--delta",
                "1e-6",
                "--json",
            ]
        )
        == 0
    )
    assert abs(json.loads(capsys.readouterr().out)["result"] - 40) < 10
    assert (
        main(
            [
                "dp",
                "median",
                "--input",
                str(path),
                "--column",
                "age",
                "--candidates",
                "0:100:5",
                "--epsilon",
                "1",
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert main(["dp", "sum", "--input", str(path), "--column", "age", "--epsilon", "1"]) == 2
    assert main(["dp", "histogram", "--input", str(path), "--column", "sex", "--epsilon", "1"]) == 2
    assert main(["dp", "count", "--input", str(tmp_path / "missing.csv"), "--epsilon", "1"]) == 2
    assert (
        main(
            [
                "dp",
                "mean",
                "--input",
                str(path),
                "--column",
                "sex",
                "--lower",
                "0",
                "--upper",
                "1",
                "--epsilon",
                "1",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "ppdm: error:" in err


def test_budget_error_is_a_ppdm_error() -> None:
    assert issubclass(BudgetExceededError, PPDMError)
