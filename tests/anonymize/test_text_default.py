"""``anonymize(df, qi, k)`` on text quasi-identifiers without hierarchies (issue 24, item 7).

The default builds a hierarchy per text column from its values (masking for codes such
as ZIP codes, frequency groups for other text; :func:`ppdm.anonymize.api.text_hierarchy`).
Oracle: pycanon's k-anonymity of the release, on Adult and on seeded generated tables,
and the hierarchy's levels against a plain count of the values.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pycanon import anonymity

from ppdm.anonymize.api import OTHER, anonymize, text_hierarchy
from ppdm.errors import ConfigError

ADULT_QI = ["age", "education", "marital-status", "race", "sex"]


def test_adult_text_columns_without_hierarchies(adult_dir):
    table = pd.read_csv(adult_dir / "adult.csv", sep=";")
    for k in (2, 5, 10):
        rel = anonymize(table, ADULT_QI, k, rng=1)  # the notebook call form
        assert anonymity.k_anonymity(rel.data, ADULT_QI) >= k
        assert len(rel.data) == len(table)  # no suppression was allowed
        assert set(rel.info["built_hierarchies"]) == set(ADULT_QI)
        # the release keeps information: not every QI generalized to '*'
        assert any((rel.data[c] != "*").any() for c in ADULT_QI)


@pytest.mark.parametrize("seed", range(12))
def test_generated_text_tables_are_k_anonymous(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(40, 400))
    k = int(rng.integers(2, 8))
    cities = [f"city-{i}" for i in range(int(rng.integers(2, 15)))]
    zips = [f"{rng.integers(0, 99999):05d}" for _ in range(int(rng.integers(2, 30)))]
    # skewed frequencies: some values rarer than k
    p_city = rng.dirichlet(np.full(len(cities), 0.5))
    table = pd.DataFrame(
        {
            "city": rng.choice(cities, n, p=p_city),
            "zip": rng.choice(zips, n),
            "sex": rng.choice(["F", "M"], n),
            "income": rng.integers(0, 100, n),
        }
    )
    qi = ["city", "zip", "sex"]
    algorithm = ["optimal", "samarati", "incognito"][seed % 3]
    suppression = [0.0, 0.05][seed % 2]
    rel = anonymize(table, qi, k, algorithm=algorithm, suppression=suppression, rng=seed)
    assert anonymity.k_anonymity(rel.data, qi) >= k
    assert len(rel.data) >= int(np.ceil(n * (1 - suppression))) - 1
    assert rel.info["built_hierarchies"]["zip"].startswith("masking")
    assert "grouped as" in rel.info["built_hierarchies"]["city"]


def test_frequency_levels_against_counts():
    rng = np.random.default_rng(3)
    values = rng.choice(list("abcdefghij"), 300, p=np.linspace(1, 10, 10) / 55)
    counts = pd.Series(values).value_counts()
    k = 4
    h = text_hierarchy(values, attribute="x", k=k)
    assert h.generalize(["a"], h.height - 1).tolist() == ["*"]
    for level in range(1, h.height - 1):
        out = h.generalize(list(counts.index), level)
        grouped = {v for v, g in zip(counts.index, out, strict=True) if g == OTHER}
        kept = {v for v, g in zip(counts.index, out, strict=True) if g == v}
        assert grouped | kept == set(counts.index) and grouped
        # a coarser level groups every value the finer one grouped, by frequency
        assert max(counts[list(grouped)]) < min(counts[list(kept)], default=10**9)
    # level 1 groups exactly the values rarer than k
    level1 = dict(zip(counts.index, h.generalize(list(counts.index), 1), strict=True))
    assert {v for v, g in level1.items() if g == OTHER} == set(counts[counts < k].index) or (
        (counts >= k).all()
    )


def test_codes_are_masked_and_a_value_named_other_is_kept_apart():
    h = text_hierarchy(["02139", "02138", "10598"], attribute="zip")
    assert h.generalize(["02139", "02138"], 1).tolist() == ["0213*", "0213*"]
    h = text_hierarchy([OTHER, OTHER, OTHER, "x"], attribute="y", k=2)
    assert h.generalize(["x", OTHER], 1).tolist() == [f"({OTHER})", OTHER]


def test_missing_text_values_are_an_error_without_the_values():
    table = pd.DataFrame({"city": ["a", None, "b", "a"], "v": [1, 2, 3, 4]})
    with pytest.raises(ConfigError, match="'city' has missing values") as err:
        anonymize(table, ["city"], 2)
    assert "'a'" not in str(err.value)


def test_cli_anonymize_text_columns_without_hierarchies(tmp_path, capsys):
    from ppdm.anonymize.data import load_table
    from ppdm.cli.main import main

    rng = np.random.default_rng(11)
    n = 300
    table = pd.DataFrame(
        {
            "city": rng.choice(
                ["Lyon", "Nice", "Paris", "Lille", "Brest"], n, p=[0.4, 0.3, 0.2, 0.07, 0.03]
            ),
            "job": rng.choice(["nurse", "clerk", "teacher", "pilot"], n, p=[0.5, 0.3, 0.18, 0.02]),
            "income": rng.integers(1000, 5000, n),
        }
    )
    table.to_csv(tmp_path / "t.csv", index=False)
    code = main(
        [
            *("anonymize", "--input", str(tmp_path / "t.csv"), "--qi", "city,job"),
            *("--k", "10", "--output", str(tmp_path / "o.csv"), "--no-progress", "--seed", "1"),
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "grouped as (other)" in captured.out + captured.err
    out = load_table(tmp_path / "o.csv")
    assert anonymity.k_anonymity(out, ["city", "job"]) >= 10
