"""Vertical association rules on the fast paths (issue 14, items 2 and 3): exactness.

Two owners count a candidate with the column dot products (one OT per distinct part and
transaction, packed corrections), three or more with the GMW-style AND-and-count; both
must give exactly the frequent itemsets, support counts and rules of centralized miners
on the pooled data: mlxtend's Apriori (with its rules) and pyfim's Apriori, on samples of
mushroom, chess and BMS-WebView-1 split among 2, 3 and 4 parties, and on random small
databases and partitions (hypothesis), with ``protect="exact"`` (issue 21: exact counts,
opened only for frequent candidates) and no minimum aggregate. The old two-party paths
(``method="gilboa"``, ``"paillier"``) stay available and agree; the EC intersection
(``multiparty="intersection"``) is refused with three or more parties. With
``protect="dp"`` and a large epsilon the results equal the exact ones, and with a
moderate epsilon they differ only within the noise's proven range. The oracles parse the
FIMI files in plain Python and never call ppdm's miners.
"""

from __future__ import annotations

import functools
import warnings
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppdm.mining.assoc_common import AssocResult
from ppdm.mining.readers import from_transactions
from ppdm.mining.vertical_rules import vertical_association_rules
from ppdm.parties.local import simulate

NAMES = ["alice", "bob", "carol", "dave"]
Tx = list[list[int]]


@functools.cache
def _fimi(path: Path) -> tuple[tuple[int, ...], ...]:
    with open(path) as fh:
        return tuple(tuple(sorted({int(x) for x in line.split()})) for line in fh)


def _sample(fimi_dir: Path, name: str, rows: int, seed: int) -> Tx:
    tx = _fimi(fimi_dir / name)
    idx = np.sort(np.random.default_rng(seed).choice(len(tx), rows, replace=False))
    return [list(tx[i]) for i in idx]


def run(tx: Tx, n_parties: int, seed: int, s: float, conf: float, **kw: Any) -> AssocResult:
    """The items dealt to the parties at random; every party's result must agree."""
    items = sorted({x for t in tx for x in t})
    order = np.random.default_rng(seed).permutation(len(items))
    owned = [{items[i] for i in part} for part in np.array_split(order, n_parties)]
    inputs = {
        p: from_transactions([[x for x in t if x in own] for t in tx])
        for p, own in zip(NAMES[:n_parties], owned, strict=True)
    }
    sim = simulate(
        lambda net, db: vertical_association_rules(
            net, db, min_support=s, min_confidence=conf, **{"protect": "exact", **kw}
        ),
        inputs,
        timeout=120,
    )
    first, *rest = sim.results.values()
    for r in rest:
        assert r.itemsets == first.itemsets
        assert r.to_json()["rules"] == first.to_json()["rules"]
    return first


def threshold(s: float, n: int) -> int:
    return next(c for c in range(1, n + 1) if c / n >= s)


def pyfim_counts(tx: Tx, s: float) -> dict[frozenset, int]:
    import fim

    found = fim.apriori([*tx, []], target="s", supp=-threshold(s, len(tx)), zmin=1, report="a")
    return {frozenset(i): int(c) for i, c in found}


def mlxtend_check(got: AssocResult, tx: Tx, s: float) -> None:
    """Itemsets, counts and rules (confidence and lift) equal mlxtend's."""
    from mlxtend.frequent_patterns import apriori, association_rules
    from mlxtend.preprocessing import TransactionEncoder

    n = len(tx)
    te = TransactionEncoder().fit(tx)
    onehot = pd.DataFrame(te.transform(tx), columns=te.columns_)
    # low_memory: the same frame, counted candidate by candidate (BMS-WebView-1's ~10^4
    # pair candidates at once cost ten times as much)
    fi = apriori(onehot, min_support=s, use_colnames=True, low_memory=True)
    want = {
        frozenset(int(x) for x in i): round(v * n)
        for i, v in zip(fi.itemsets, fi.support, strict=True)
    }
    assert got.itemsets == want
    if not any(len(i) > 1 for i in fi.itemsets):
        assert not got.rules
        return
    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        rules = association_rules(
            fi, num_itemsets=n, metric="confidence", min_threshold=got.min_confidence
        )
    theirs = {
        (frozenset(map(int, a)), frozenset(map(int, c))): (conf, lift)
        for a, c, conf, lift in zip(
            rules.antecedents, rules.consequents, rules.confidence, rules.lift, strict=True
        )
    }
    ours = {(r.antecedent, r.consequent): r for r in got.rules}
    assert set(theirs) <= set(ours)
    for key in set(ours) - set(theirs):  # mlxtend's float rounding exactly at the threshold
        exact = Fraction(ours[key].support_count, want[key[0]])
        assert exact == Fraction(repr(float(got.min_confidence)))
    for key, (conf, lift) in theirs.items():
        assert ours[key].confidence == pytest.approx(conf, rel=1e-12)
        assert ours[key].lift == pytest.approx(lift, rel=1e-12)


def spans(got: AssocResult, owners: int) -> int:
    """Candidates counted by exactly ``owners`` parties together."""
    return sum(
        m for lv in got.levels for g, m in lv["groups"].items() if g.count("+") == owners - 1
    )


# (file, rows, min support, parties, min confidence, seed)
CASES = [
    ("mushroom.dat", 600, 0.4, 2, 0.8, 1),
    ("mushroom.dat", 600, 0.4, 3, 0.8, 2),
    ("mushroom.dat", 400, 0.45, 4, 0.7, 3),
    ("chess.dat", 300, 0.92, 3, 0.9, 4),
    ("chess.dat", 200, 0.95, 4, 0.9, 5),
    ("BMS1.dat", 6000, 0.005, 2, 0.3, 6),
    ("BMS1.dat", 6000, 0.005, 3, 0.3, 7),
]


@pytest.mark.parametrize(("name", "rows", "s", "n_parties", "conf", "seed"), CASES)
def test_fast_paths_match_mlxtend_and_pyfim(
    fimi_dir: Path, name: str, rows: int, s: float, n_parties: int, conf: float, seed: int
) -> None:
    tx = _sample(fimi_dir, name, rows, seed)
    got = run(tx, n_parties, seed, s, conf)
    mlxtend_check(got, tx, s)
    assert got.itemsets == pyfim_counts(tx, s)
    assert spans(got, 2) > 0
    if n_parties > 2 and name != "BMS1.dat":
        assert spans(got, 3) > 0  # candidates over three parties took the GMW path
    if n_parties == 4 and name == "mushroom.dat":
        assert spans(got, 4) > 0  # and over four
    # The costs are in the result: payload bytes per candidate and transaction.
    per = [lv["bytes_per_candidate_transaction"] for lv in got.levels if lv["shared_candidates"]]
    assert per and all(b > 0 for b in per)


def test_kept_ots_cost_less_and_every_party_reports_the_same_payload(
    fimi_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The random OTs of a part are kept from level to level
    (:class:`~ppdm.protocols.dot_product_ot.ColumnOTs`): the same itemsets as with none
    kept (``max_ots=0``), the same payload at level 2 (no part was counted before) and
    less in all; and the payload each level reports is still computed from public
    information alone, so a party outside a pair (three parties, groups of two owners)
    reports the same bytes as the pair."""
    import ppdm.protocols.column_ots as column_ots

    tx = _sample(fimi_dir, "mushroom.dat", 600, 1)
    items = sorted({x for t in tx for x in t})
    order = np.random.default_rng(2).permutation(len(items))
    owned = [{items[i] for i in part} for part in np.array_split(order, 3)]
    inputs = {
        p: from_transactions([[x for x in t if x in own] for t in tx])
        for p, own in zip(NAMES[:3], owned, strict=True)
    }

    def levels() -> list[list[dict[str, Any]]]:
        sim = simulate(
            lambda net, db: vertical_association_rules(
                net, db, min_support=0.4, min_confidence=0.8, protect="exact"
            ),
            inputs,
            timeout=120,
        )
        assert sim.results["alice"].itemsets == pyfim_counts(tx, 0.4)
        return [r.levels for r in sim.results.values()]

    kept = levels()
    assert all(lv == kept[0] for lv in kept[1:])
    real_init = column_ots.ColumnOTs.__init__
    monkeypatch.setattr(
        column_ots.ColumnOTs,
        "__init__",
        lambda self, session, *, max_ots=0: real_init(self, session, max_ots=0),
    )
    fresh = levels()
    assert all(lv == fresh[0] for lv in fresh[1:])
    payload = [[lv["payload_bytes"] for lv in run[0]] for run in (kept, fresh)]
    assert payload[0][1] == payload[1][1] > 0
    assert sum(payload[0]) < sum(payload[1])


def test_old_paths_agree_and_cost_more(fimi_dir: Path) -> None:
    """``gilboa`` (one OT per candidate and transaction; three owners then take the GMW
    path) gives the same counts; the default sends over ten times fewer bytes per
    candidate (bytes are deterministic: message sizes do not depend on the randomness).
    The EC intersection protocol is refused with three parties."""
    small = _sample(fimi_dir, "mushroom.dat", 100, 9)
    new = run(small, 3, 10, 0.5, 0.8)
    old = run(small, 3, 10, 0.5, 0.8, method="gilboa")
    assert new.itemsets == old.itemsets == pyfim_counts(small, 0.5)
    assert spans(new, 3) > 0
    with pytest.raises(ValueError, match="intersection"):
        run(small, 3, 10, 0.5, 0.8, multiparty="intersection")
    tx = _sample(fimi_dir, "BMS1.dat", 3000, 12)

    def bytes_per(res: AssocResult) -> float:
        levels = [lv for lv in res.levels if lv["shared_candidates"]]
        return sum(lv["payload_bytes"] for lv in levels) / sum(
            lv["shared_candidates"] for lv in levels
        )

    two = run(tx, 2, 11, 0.015, 0.8)
    two_old = run(tx, 2, 11, 0.015, 0.8, method="gilboa")
    assert two.itemsets == two_old.itemsets == pyfim_counts(tx, 0.015)
    assert spans(two, 2) > 100
    # about 1.4 against 24 bytes per candidate and transaction
    assert bytes_per(two) * 10 < bytes_per(two_old)


def test_paillier_path_gives_exact_shares(fimi_dir: Path) -> None:
    """``method="paillier"`` now returns shares modulo the key's ``N``, lifted to
    ``2^64`` (module docstring of :func:`_pair_paillier`): the same itemsets."""
    small = _sample(fimi_dir, "mushroom.dat", 40, 13)
    got = run(small, 2, 14, 0.6, 0.8, method="paillier")
    assert got.itemsets == pyfim_counts(small, 0.6)
    assert spans(got, 2) > 0


def test_paillier_past_its_encryption_limit_is_refused_naming_the_cost(fimi_dir: Path) -> None:
    """``method="paillier"`` encrypts one cover of ``n`` transactions per distinct part
    of a pair's first owner; a level that would take the job past
    ``max_paillier_encryptions`` is refused at every party before it starts, with the
    count (public: the parts follow from the public candidates), not left to run for
    hours. Level 1 needs no encryption (one owner per candidate); level 2 needs one
    encrypted cover per frequent item of the first owner that pairs with the other's."""
    from ppdm.errors import ConfigError

    small = _sample(fimi_dir, "mushroom.dat", 40, 13)
    full = run(small, 2, 14, 0.6, 0.8, method="paillier")
    ones = sorted(next(iter(s)) for s in full.itemsets if len(s) == 1)
    items = sorted({x for t in small for x in t})
    order = np.random.default_rng(14).permutation(len(items))
    first = {items[i] for i in np.array_split(order, 2)[0]}
    mine, theirs = [x for x in ones if x in first], [x for x in ones if x not in first]
    level2 = len(mine) * len(small) if theirs else 0  # one cover per frequent item of mine
    assert level2 > 0
    with pytest.raises(ConfigError, match=f"level 2 would take the job to {level2:,} Pai"):
        run(small, 2, 14, 0.6, 0.8, method="paillier", max_paillier_encryptions=0)
    limit, reported = level2, []
    for _ in range(10):  # raise the limit to each refusal's count until the job passes
        try:
            got = run(small, 2, 14, 0.6, 0.8, method="paillier", max_paillier_encryptions=limit)
            break
        except ConfigError as exc:
            count = int(str(exc).split(" to ")[1].split(" Paillier")[0].replace(",", ""))
            assert count > limit  # cumulative over the levels
            reported.append(count)
            limit = count
    else:
        raise AssertionError("the limit never sufficed")
    assert got.itemsets == full.itemsets
    with pytest.raises(ConfigError, match="past max_paillier_encryptions"):
        run(small, 2, 14, 0.6, 0.8, method="paillier", max_paillier_encryptions=limit - 1)


def test_unknown_options_refused() -> None:
    db = from_transactions([[1], [2]])
    with pytest.raises(ValueError, match="method"):
        vertical_association_rules(None, db, min_support=0.5, min_confidence=0.5, method="x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="multiparty"):
        vertical_association_rules(
            None,  # type: ignore[arg-type]
            db,
            min_support=0.5,
            min_confidence=0.5,
            multiparty="x",  # type: ignore[arg-type]
        )
    bad: list[dict[str, Any]] = [
        {"protect": "none"},
        {"protect": "dp", "epsilon": 0.0},
        {"protect": "dp", "epsilon": float("inf")},
        {"max_shared_candidates": 0},
        {"min_aggregate": -1},
        {"min_aggregate": True},
    ]
    for kw in bad:
        with pytest.raises(ValueError):
            vertical_association_rules(None, db, min_support=0.5, min_confidence=0.5, **kw)  # type: ignore[arg-type]


@settings(max_examples=15)
@given(
    st.lists(st.lists(st.integers(0, 9), max_size=7), min_size=2, max_size=30),
    st.integers(2, 4),
    st.integers(0, 2**32 - 1),
    st.sampled_from([0.1, 0.2, 0.4]),
    st.sampled_from([0.0, 0.6]),
)
def test_random_small_partitions(tx: Tx, n_parties: int, seed: int, s: float, conf: float) -> None:
    tx = [sorted(set(t)) for t in tx]
    if len({x for t in tx for x in t}) < n_parties:  # every party holds some item
        tx = [*tx, list(range(n_parties))]
    got = run(tx, n_parties, seed, s, conf)
    mlxtend_check(got, tx, s)
    assert got.itemsets == pyfim_counts(tx, s)


# -- protect="dp" and the minimum aggregate (issue 21) ---------------------------------------


def test_dp_with_a_large_epsilon_equals_exact(fimi_dir: Path) -> None:
    """Per-count epsilon 40 (noise scale 1/40 per owner): a discrete Laplace variate is
    non-zero with probability ``2 e^-40 / (1 + e^-40) < 9e-18``, so over the ~500 noisy
    counts of two owners the result differs from the exact one with probability below
    ``1e-14``: equality is required."""
    tx = _sample(fimi_dir, "mushroom.dat", 3000, 21)
    budget = 10_000
    got = run(
        tx, 2, 22, 0.3, 0.8, protect="dp", epsilon=40.0 * budget, max_shared_candidates=budget
    )
    assert got.itemsets == pyfim_counts(tx, 0.3)
    prot = got.protection
    assert prot["protect"] == "dp" and prot["epsilon_per_count"] == 40.0
    assert prot["noisy_counts"] == spans(got, 2) > 100
    assert prot["budget_exhausted"] is False
    assert prot["epsilon_spent"] == pytest.approx(40.0 * prot["noisy_counts"])


def test_dp_with_a_moderate_epsilon_errs_only_within_the_noise_range(fimi_dir: Path) -> None:
    """Per-count epsilon 1/2 (scale b = 2 per owner, three owners). A two-sided
    geometric exceeds ``20 b`` in magnitude with probability ``<= 2 e^-20``, so a sum of
    three exceeds ``d = 60 b = 120`` with probability ``<= 6 e^-20 = 1.2e-8`` per count:
    below ``1e-5`` over the ~700 counts. Then every published count is within ``d`` of
    the true one (capping at a subset's published count keeps that), and an itemset is
    found or missed wrongly only if its true count is within ``d`` of the threshold."""
    tx = _sample(fimi_dir, "mushroom.dat", 2000, 23)
    s, d = 0.3, 120
    got = run(tx, 3, 24, s, 0.8, protect="dp", epsilon=0.5 * 100_000, max_shared_candidates=100_000)
    exact = pyfim_counts(tx, s)
    t = threshold(s, len(tx))
    everything = pyfim_counts(tx, (t - d) / len(tx))  # true counts down to t - d
    assert spans(got, 3) > 0
    for items, count in got.itemsets.items():
        assert abs(count - everything[items]) <= d
    for items in set(got.itemsets) ^ set(exact):
        assert abs(everything[items] - t) <= d
    # the noise is there: some published count differs from the true one
    assert any(c != everything[i] for i, c in got.itemsets.items() if len(i) > 1)


def test_dp_refuses_the_level_that_would_exceed_the_budget(fimi_dir: Path) -> None:
    """Mining stops before a level whose shared candidates would take the noisy counts
    above ``max_shared_candidates``; the result says so and the epsilon spent stays
    within ``epsilon``."""
    tx = _sample(fimi_dir, "mushroom.dat", 500, 25)
    full = run(tx, 2, 26, 0.3, 0.8)
    per_level = [lv["shared_candidates"] for lv in full.levels]
    assert per_level[1] > 0 and len(per_level) > 2
    budget = per_level[0] + per_level[1]  # levels 1 and 2 fit, level 3 does not
    got = run(tx, 2, 26, 0.3, 0.8, protect="dp", epsilon=1.0, max_shared_candidates=budget)
    prot = got.protection
    assert prot["budget_exhausted"] is True and prot["refused_level"] == 3
    assert prot["noisy_counts"] == budget and prot["epsilon_spent"] == pytest.approx(1.0)
    assert max(len(i) for i in got.itemsets) <= 2 and len(got.levels) == 2


def test_min_aggregate_raises_the_threshold_and_hides_infrequent_counts() -> None:
    """``threshold = max(min_count, min_aggregate)``; a party outside a group learns the
    frequent candidates and their counts only (the announcer sends no other count)."""
    rng = np.random.default_rng(27)
    tx = [[int(x) for x in np.flatnonzero(rng.random(9) < 0.5)] for _ in range(60)]
    got = run(tx, 3, 28, 0.05, 0.5, min_aggregate=20)
    assert got.protection["threshold_count"] == 20
    assert got.itemsets == pyfim_counts(tx, 20 / 60)
    assert all(c >= 20 for c in got.itemsets.values())


def test_parties_must_agree_on_the_protection() -> None:
    from ppdm.errors import ProtocolError

    dbs = {"alice": from_transactions([[1], [1, 2]]), "bob": from_transactions([[3], [3]])}
    modes = {"alice": "dp", "bob": "exact"}
    with pytest.raises(ProtocolError, match="differ"):
        simulate(
            lambda net, db: vertical_association_rules(
                net, db, min_support=0.5, min_confidence=0.5, protect=modes[net.me]
            ),
            dbs,
            timeout=30,
        )
