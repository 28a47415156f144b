"""The persistent privacy budget of ``ppdm dp`` (issue 24, item 8).

One budget per data set across processes: charges add up between calls (exactly, as
rationals), a query that would exceed the total is refused and spends nothing, the file
is owner-only and a loosened file is refused, concurrent queries cannot overspend, and
``ppdm dp budget`` shows and sets the total.
"""

from __future__ import annotations

import json
import os
import stat
import threading
from fractions import Fraction

import pytest

from ppdm.cli.main import main
from ppdm.dp import BudgetExceededError, dp_count
from ppdm.dp.budget import DEFAULT_EPSILON, BudgetFile, default_budget_path
from ppdm.errors import ConfigError


@pytest.fixture
def state(tmp_path, monkeypatch):
    folder = tmp_path / "state"
    monkeypatch.setenv("PPDM_STATE_DIR", str(folder))
    return folder


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "people.csv"
    path.write_text("age;sex\n" + "".join(f"{20 + i % 50};{'FM'[i % 2]}\n" for i in range(200)))
    return path


def test_charges_persist_between_instances_exactly(tmp_path):
    path = tmp_path / "b.json"
    BudgetFile(path, dataset="d").set_total("0.3")
    for _ in range(3):  # three processes, one query of 0.1 each
        with BudgetFile(path, dataset="d").accountant(query="count") as acct:
            acct.spend(0.1)
    with pytest.raises(BudgetExceededError), BudgetFile(path, dataset="d").accountant() as acct:
        acct.spend(Fraction(1, 10**9))
    summary = BudgetFile(path, dataset="d").summary()
    assert summary["epsilon_remaining"] == 0.0 and len(summary["ledger"]) == 3
    assert json.loads(path.read_text())["ledger"][0]["epsilon"] == "1/10"


def test_a_refused_or_failed_query_spends_nothing(tmp_path):
    path = tmp_path / "b.json"
    budget = BudgetFile(path)
    budget.set_total(1)
    with budget.accountant() as acct:
        dp_count(list(range(50)), epsilon=0.75, accountant=acct, rng=1)
    before = path.read_bytes()
    with pytest.raises(BudgetExceededError), budget.accountant() as acct:
        dp_count(list(range(50)), epsilon=0.5, accountant=acct, rng=1)
    with pytest.raises(RuntimeError), budget.accountant() as acct:
        acct.spend(0.1)
        raise RuntimeError("the query failed after charging: nothing was released")
    assert path.read_bytes() == before
    assert budget.summary()["epsilon_spent"] == 0.75


def test_owner_only_permissions_and_a_loosened_file_is_refused(tmp_path):
    path = tmp_path / "folder" / "b.json"
    budget = BudgetFile(path)
    with budget.accountant() as acct:
        acct.spend(0.5)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    os.chmod(path, 0o644)
    with pytest.raises(ConfigError, match="chmod 600"), budget.accountant():
        pass


def test_total_cannot_drop_below_spending_and_other_data_sets_are_refused(tmp_path):
    path = tmp_path / "b.json"
    budget = BudgetFile(path, dataset="a.csv")
    with budget.accountant() as acct:
        acct.spend(2)
    assert budget.summary()["epsilon_budget"] == float(DEFAULT_EPSILON)
    with pytest.raises(ConfigError, match="already spent"):
        budget.set_total(1)
    budget.set_total(2.5)
    with pytest.raises(ConfigError, match="another data set"):
        BudgetFile(path, dataset="b.csv").summary()


def test_concurrent_queries_cannot_overspend(tmp_path):
    path = tmp_path / "b.json"
    BudgetFile(path).set_total(1)
    outcomes: list[bool] = []

    def query() -> None:
        try:
            with BudgetFile(path).accountant() as acct:
                acct.spend(0.25)
            outcomes.append(True)
        except BudgetExceededError:
            outcomes.append(False)

    threads = [threading.Thread(target=query) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert sorted(outcomes) == [False] * 6 + [True] * 4
    assert BudgetFile(path).summary()["epsilon_spent"] == 1.0


def test_cli_budget_persists_and_refuses(state, data, capsys, tmp_path):
    out = tmp_path / "out.json"
    args = ["dp", "count", "--input", str(data), "--sep", ";", "--seed", "1", "--output", str(out)]
    budget = ["dp", "budget", "--input", str(data), "--output", str(out)]
    assert main([*budget, "--set", "1", "--delta", "1e-6"]) == 0
    assert main([*args, "--epsilon", "0.4"]) == 0
    first = json.loads(out.read_text())
    assert first["budget"]["epsilon_remaining"] == pytest.approx(0.6)
    assert first["budget"]["this_query"]["epsilon"] == pytest.approx(0.4)
    assert main([*args, "--epsilon", "0.4"]) == 0
    capsys.readouterr()
    assert main([*args, "--epsilon", "0.4"]) == 1  # 0.2 left
    err = capsys.readouterr().err
    assert "refused" in err and "ppdm dp budget" in err
    assert main(budget) == 0
    shown = json.loads(out.read_text())
    assert shown["epsilon_spent"] == pytest.approx(0.8)
    assert [c["query"] for c in shown["ledger"]] == ["count", "count"]
    assert shown["budget_file"] == str(default_budget_path(data))
    assert default_budget_path(data).parent.parent == state
    # an explicit budget file is another, fresh budget
    other = data.parent / "other-budget.json"
    assert main([*args, "--epsilon", "0.4", "--budget-file", str(other)]) == 0
    assert other.is_file()


def test_cli_queries_need_epsilon(state, data, capsys):
    assert main(["dp", "count", "--input", str(data), "--sep", ";"]) == 2
    assert "--epsilon" in capsys.readouterr().err
