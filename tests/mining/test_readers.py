"""Readers and writers of transaction data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ppdm.errors import ConfigError
from ppdm.mining.readers import (
    from_onehot,
    from_transactions,
    read_basket_csv,
    read_fimi,
    write_fimi,
)

int_db = st.lists(st.lists(st.integers(0, 50), max_size=8), max_size=20)


@given(int_db)
def test_fimi_roundtrip(tmp_path_factory: pytest.TempPathFactory, tx: list) -> None:
    path = tmp_path_factory.mktemp("fimi") / "db.dat"
    db = from_transactions(tx)
    write_fimi(db, path)
    back = read_fimi(path)
    assert back.n_transactions == len(tx)
    assert list(back.transactions()) == [tuple(sorted(set(t))) for t in tx]
    assert list(back.transactions()) == list(db.transactions())


def test_read_fimi_format_details(tmp_path: Path) -> None:
    p = tmp_path / "a.dat"
    p.write_text("3 1 1\n\n2  7 \r\n5")
    db = read_fimi(p)
    assert list(db.transactions()) == [(1, 3), (), (2, 7), (5,)]
    assert db.items.dtype == np.int64
    p.write_text("")
    assert read_fimi(p).n_transactions == 0
    p.write_text("\n")
    assert read_fimi(p).n_transactions == 1
    for bad in ("1 x 2\n", "1 -3\n", "1.5 2\n"):
        p.write_text(bad)
        with pytest.raises(ConfigError):
            read_fimi(p)


def test_read_fimi_real_file(fimi_dir: Path) -> None:
    db = read_fimi(fimi_dir / "chess.dat")
    lines = (fimi_dir / "chess.dat").read_text().splitlines()
    assert db.n_transactions == len(lines) == 3196
    assert db.n_items == 75
    assert list(db.transactions())[5] == tuple(sorted({int(x) for x in lines[5].split()}))
    assert int(db.transaction_lengths().sum()) == sum(len(set(line.split())) for line in lines)


def test_read_basket_csv(tmp_path: Path) -> None:
    p = tmp_path / "b.csv"
    p.write_text('milk, bread,eggs\nbread\n\n"jam, strawberry",milk,,\n')
    db = read_basket_csv(p)
    assert list(db.transactions()) == [
        ("bread", "eggs", "milk"),
        ("bread",),
        (),
        ("jam, strawberry", "milk"),
    ]
    p.write_text("a;b\nb\n")
    assert read_basket_csv(p, sep=";").support_count({"b"}) == 2


@given(st.lists(st.lists(st.sampled_from("abcdefg"), max_size=5), max_size=15))
def test_onehot_matches_transactions(tx: list) -> None:
    cols = ["g", "c", "a", "b", "d", "e", "f"]  # unsorted on purpose
    df = pd.DataFrame([[c in t for c in cols] for t in tx], columns=cols, dtype=bool)
    db = from_onehot(df)
    assert db.n_transactions == len(tx)
    assert db.items.tolist() == sorted(cols)
    assert list(db.transactions()) == [tuple(sorted(set(t))) for t in tx]
    sparse = df.astype(pd.SparseDtype(bool, False))
    assert from_onehot(sparse) == db
    assert from_onehot(df.astype(int)) == db


def test_onehot_rejects_non_binary() -> None:
    with pytest.raises(ConfigError):
        from_onehot(pd.DataFrame({"a": [0, 2]}))
    with pytest.raises(ConfigError):
        from_onehot([[1, 0]])


def test_write_fimi_needs_integers(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        write_fimi(from_transactions([["a"]]), tmp_path / "x.dat")


def test_from_transactions_rejects_strings() -> None:
    with pytest.raises(ConfigError):
        from_transactions(["abc"])
