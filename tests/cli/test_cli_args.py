"""The shared argument checks of ``ppdm/cli/_args.py`` (issue 23, item 8), in process."""

from __future__ import annotations

import argparse
import os

import pytest

from ppdm.cli._args import (
    MAX_LINE_BYTES,
    atomic_file,
    atomic_folder,
    bounded_int,
    check_address,
    check_csv_header,
    check_input_file,
    check_support_budget,
    finite_float,
    host_name,
    seconds,
)
from ppdm.errors import ConfigError
from ppdm.mining.readers import from_transactions


@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "1e400", "abc", ""])
def test_finite_float_refuses_what_is_not_a_finite_number(text):
    with pytest.raises(argparse.ArgumentTypeError):
        finite_float()(text)


def test_ranges_are_inclusive_or_open_as_asked():
    assert finite_float(0, 1)("0") == 0.0
    with pytest.raises(argparse.ArgumentTypeError):
        finite_float(0, 1, lo_open=True)("0")
    with pytest.raises(argparse.ArgumentTypeError):
        finite_float(0, 1, hi_open=True)("1")
    assert bounded_int(1, 3)(" 3 ") == 3
    for bad in ("0", "4", "1.5", "x"):
        with pytest.raises(argparse.ArgumentTypeError):
            bounded_int(1, 3)(bad)
    for bad in ("0", "-1", "86401", "nan"):
        with pytest.raises(argparse.ArgumentTypeError):
            seconds(bad)
    assert seconds("0.5") == 0.5


@pytest.mark.parametrize("good", ["localhost", "node-1.example.org", "10.0.0.1", "::1", "a.b."])
def test_host_names_and_addresses_pass(good):
    assert host_name(good) == good


@pytest.mark.parametrize(
    "bad", ["bad host!", "", "a..b", "-a.org", "a-.org", "300.1.2.3", "x" * 64]
)
def test_bad_host_names_are_refused(bad):
    with pytest.raises(argparse.ArgumentTypeError):
        host_name(bad)


def test_addresses_need_a_port_in_range():
    check_address("node.example:50051", "--address")
    check_address("[::1]:7", "--address")
    for bad in ("node", "node:0", "node:65536", "bad host!:5", ":5"):
        with pytest.raises(ConfigError):
            check_address(bad, "--address")


def test_input_files_are_regular_readable_utf8_with_a_bounded_first_line(tmp_path):
    ok = tmp_path / "ok.csv"
    ok.write_text("a,b\n1,2\n")
    check_input_file(ok, "--input")
    (tmp_path / "one_line.csv").write_text("a,b")  # short, no newline: fine
    check_input_file(tmp_path / "one_line.csv", "--input")
    os.mkfifo(tmp_path / "fifo")
    sparse = tmp_path / "sparse.dat"
    with open(sparse, "wb") as fh:
        fh.truncate(3 << 30)
    long = tmp_path / "long.dat"
    long.write_bytes(b"1 " * (MAX_LINE_BYTES // 2 + 10))
    latin = tmp_path / "latin.csv"
    latin.write_bytes("a\nJos\xe9\n".encode("latin-1"))
    cases = {
        tmp_path / "missing": "not found",
        tmp_path: "folder",
        tmp_path / "fifo": "FIFO",
        sparse: "NUL",
        long: "longer than 16 MiB",
        latin: "not UTF-8",
    }
    for path, why in cases.items():
        with pytest.raises(ConfigError, match=why):
            check_input_file(path, "--input")
    check_input_file(sparse, "--ledger", text=False)  # binary inputs: kind only


def test_a_header_naming_a_column_twice_is_refused(tmp_path):
    (tmp_path / "d.csv").write_text("age; age ;sex\n1;2;M\n")
    with pytest.raises(ConfigError, match="'age' twice"):
        check_csv_header(tmp_path / "d.csv", "--input", sep=";")
    check_csv_header(tmp_path / "d.csv", "--input", sep=",")  # one column "age; age ;sex"


def test_atomic_file_leaves_nothing_on_failure_and_the_whole_file_on_success(tmp_path):
    target = tmp_path / "out.json"
    with pytest.raises(RuntimeError), atomic_file(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("refused midway")
    assert list(tmp_path.iterdir()) == []
    target.write_text("old")
    with atomic_file(target) as tmp:
        tmp.write_text("new")
        assert target.read_text() == "old"  # nobody sees a partial file
    assert target.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_atomic_folder_appears_only_on_success(tmp_path):
    target = tmp_path / "parts"
    with pytest.raises(ConfigError), atomic_folder(target) as tmp:
        (tmp / "alice.dat").write_text("1\n")
        raise ConfigError("cannot split")
    assert list(tmp_path.iterdir()) == []
    with atomic_folder(target) as tmp:
        (tmp / "alice.dat").write_text("1\n")
    assert [p.name for p in target.iterdir()] == ["alice.dat"]
    with atomic_folder(target) as tmp:  # an existing folder keeps its other files
        (tmp / "bob.dat").write_text("2\n")
    assert sorted(p.name for p in target.iterdir()) == ["alice.dat", "bob.dat"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["parts"]


def test_support_budget_refuses_below_one_transaction_and_past_the_budget():
    db = from_transactions([list(range(12))] * 3 + [[0, 1]] * 3)
    with pytest.raises(ConfigError, match="below one transaction"):
        check_support_budget(db, 0.1)  # 0.6 of a basket
    with pytest.raises(ConfigError, match="smallest party"):
        check_support_budget(db, 0.4, smallest=2)
    # 3 baskets hold all 12 items: 2^12 - 1 itemsets are frequent at 3 of 6
    with pytest.raises(ConfigError, match="more than 1,000 frequent itemsets"):
        check_support_budget(db, 0.5, budget=1000)
    check_support_budget(db, 0.5, budget=5000)
    check_support_budget(db, 0.5, budget=1000, max_len=2)  # 12 + 66 itemsets up to pairs
    check_support_budget(db, 0.9)  # only {0}, {1}, {0, 1}
