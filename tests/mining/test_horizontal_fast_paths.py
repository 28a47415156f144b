"""The horizontal miner's fast paths (issue 25 item 3) give exactly the slow paths' answers.

- A party's level counts: :class:`TransactionCounter` counts Apriori's candidates with one
  ``searchsorted`` and packed-bit ANDs, and level 1 from ``item_counts``; both must equal
  :func:`ppdm.mining.itemsets.support_counts` (and a plain Python count) on seeded random
  databases with int and string labels, including labels the party lacks.
- An invalid point a peer sends is refused at its index.
- The miner stops when ``apriori_gen`` of the public frequent itemsets is empty, without a
  union: the result (itemsets, rules, levels) equals a plain centralized computation, and
  no union message of that level is sent.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from ppdm.errors import ProtocolError
from ppdm.mining.horizontal_rules import (
    TransactionCounter,
    _count_sorted_tuples,
    _single_items,
    horizontal_association_rules,
    local_label_bytes,
)
from ppdm.mining.itemsets import apriori_gen, support_counts
from ppdm.mining.readers import from_transactions
from ppdm.parties.local import simulate
from ppdm.protocols import commutative


def _random_db(seed: int, *, labels: str) -> tuple[list[list], list]:
    rng = np.random.default_rng(seed)
    n_items = int(rng.integers(3, 40))
    universe: list = [int(x) for x in rng.choice(10_000, n_items, replace=False)]
    if labels == "str":
        universe = [f"item-{x}" for x in universe]
    tx = []
    for _ in range(int(rng.integers(1, 300))):
        size = int(rng.integers(0, min(n_items, 8) + 1))
        tx.append([universe[i] for i in rng.choice(n_items, size, replace=False)])
    return tx, universe


def _plain_count(tx: list[list], itemset: tuple) -> int:
    want = set(itemset)
    return sum(1 for t in tx if want <= set(t))


@pytest.mark.parametrize("labels", ["int", "str"])
@pytest.mark.parametrize("seed", range(12))
def test_level_counts_equal_support_counts(seed: int, labels: str) -> None:
    tx, universe = _random_db(seed, labels=labels)
    db = from_transactions(tx)
    counter = TransactionCounter(db)
    singles, counts = _single_items(counter)
    assert [c[0] for c in singles] == db.items.tolist()
    assert counts.tolist() == [_plain_count(tx, c) for c in singles]
    assert counts.tolist() == support_counts(db, singles).tolist()
    # Every k-subset of the universe (labels the party lacks included), in Apriori's form.
    for k in (2, 3, 4):
        cands = [tuple(sorted(c)) for c in itertools.combinations(sorted(universe), k)][:500]
        if not cands:
            continue
        fast = _count_sorted_tuples(db, cands)
        assert fast is not None
        assert fast.tolist() == support_counts(db, cands).tolist()
        assert fast.tolist() == [_plain_count(tx, c) for c in cands]
        assert counter.count(cands).tolist() == fast.tolist()


@pytest.mark.parametrize("labels", ["int", "str"])
@pytest.mark.parametrize("seed", range(8))
def test_level_two_pair_matrix_equals_support_counts(
    seed: int, labels: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Level 2 from the co-occurrence matrix (``_Pairs``) gives the explicit level's
    locally large pairs and union counts, labels the party lacks included; with the
    matrix over its budget the explicit level runs instead."""
    from ppdm.mining import horizontal_rules as hr

    tx, universe = _random_db(seed, labels=labels)
    db = from_transactions(tx)
    counter = TransactionCounter(db)
    monkeypatch.setattr(hr, "_AND_WORD_COST", 1e9)  # small databases: force the matrix
    absent = 10_001 if labels == "int" else "item-absent"  # no basket holds it
    prev = [(x,) for x in sorted([*universe, absent])]
    pairs, explicit = hr._level(counter, prev, 2), hr._Explicit(*_plain_level(tx, prev))
    assert isinstance(pairs, hr._Pairs)
    for t in (1, 2, 3, 5):
        assert pairs.locally_large(t) == explicit.locally_large(t)
    got = _count_sorted_tuples(db, explicit.candidates)  # its k = 2 matrix branch
    assert got is not None and got.tolist() == explicit.counts.tolist()
    union = [*explicit.candidates[::3], (universe[0],), ("zz", "zzz")]
    assert pairs.union_counts(union).tolist() == explicit.union_counts(union).tolist()
    monkeypatch.setattr(hr, "_PAIR_CHUNK", 7)  # many passes over the rows: the same
    assert pairs.matrix.tolist() == hr._level(counter, prev, 2).matrix.tolist()
    monkeypatch.setattr(hr, "_AND_WORD_COST", 0)  # the ANDs cheaper: no matrix
    assert counter.pair_counts(sorted(universe)) is None
    assert isinstance(hr._level(counter, prev, 2), hr._Explicit)


@pytest.mark.parametrize("labels", ["int", "str"])
@pytest.mark.parametrize("seed", range(6))
def test_level_one_item_arrays_equal_the_explicit_level(seed: int, labels: str) -> None:
    """Level 1 from the item arrays (``_Items``) gives the explicit level's locally large
    items and union counts, for labels the party lacks, of the other kind, too wide for
    its dtype, or not single items."""
    from ppdm.mining import horizontal_rules as hr

    tx, universe = _random_db(seed, labels=labels)
    counter = TransactionCounter(from_transactions(tx))
    items, explicit = hr._level(counter, [], 1), hr._Explicit(*_single_items(counter))
    assert isinstance(items, hr._Items)
    for t in (0, 1, 2, 4, 300):
        assert items.locally_large(t) == explicit.locally_large(t)
    odd = [(10_001,), ("item-absent",), (2**70,), (True,), (universe[0], universe[1]), ()]
    union = [*explicit.candidates[::2], *odd]
    assert items.union_counts(union).tolist() == explicit.union_counts(union).tolist()


def _plain_level(tx: list[list], prev: list[tuple]) -> tuple[list[tuple], np.ndarray]:
    cands = list(itertools.combinations(sorted(x for (x,) in prev), 2))
    return cands, np.array([_plain_count(tx, c) for c in cands], dtype=np.int64)


def test_level_counts_fall_back_outside_apriori_shape() -> None:
    tx = [[1, 2, 3], [2, 3], [1, 3], [5]]
    db = from_transactions(tx)
    counter = TransactionCounter(db)
    odd = [(3, 1), (2, 2, 3), (1,), (1, 2, 3)]  # unsorted, repeated, mixed lengths
    assert _count_sorted_tuples(db, odd) is None
    assert counter.count(odd).tolist() == [2, 2, 2, 1]
    assert _count_sorted_tuples(db, [("a", "b")]) is None  # labels of another kind
    assert counter.count([("a", "b")]).tolist() == [0]
    assert _count_sorted_tuples(db, [(1, 2**70)]) is None  # no int64 label
    assert counter.count([(1, 2**70)]).tolist() == [0]


def test_packed_columns_large_database_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Above the dense bound the counts come from ``TransactionDB.bit_matrix``: the same."""
    from ppdm.mining import horizontal_rules

    tx, universe = _random_db(7, labels="int")
    db = from_transactions(tx)
    cands = [tuple(c) for c in itertools.combinations(sorted(universe), 2)]
    dense = _count_sorted_tuples(db, cands)
    monkeypatch.setattr(horizontal_rules, "_AND_CHUNK_BYTES", 1)
    packed = _count_sorted_tuples(from_transactions(tx), cands)
    assert dense is not None and packed is not None
    assert dense.tolist() == packed.tolist() == support_counts(db, cands).tolist()


def test_local_label_bytes_vectorized() -> None:
    assert local_label_bytes(from_transactions([[1, 255]])) == 1
    assert local_label_bytes(from_transactions([[0, 256]])) == 2
    assert local_label_bytes(from_transactions([[2**32 - 1]])) == 4
    assert local_label_bytes(from_transactions([[2**32]])) == 5
    assert local_label_bytes(from_transactions([["ab", "é"]])) == 2


def test_an_invalid_point_is_refused_at_its_index() -> None:
    points = commutative.encode_items([b"a", b"b", b"c"], 1)
    bad = points.copy()
    bad[1, 0, 1:] = 0xFF  # x above the field prime: not a point
    key = commutative.CommutativeKey.generate()
    with pytest.raises(ProtocolError, match="item 1 is not a point"):
        key.encrypt_received(bad, "bob", "set-union/encrypt", chunks=1)
    with pytest.raises(ProtocolError, match="item 1 is not a point"):
        commutative.validate_points(bad, "bob", "set-union/encrypted", chunks=1)


def _centralized(tx: list[list], min_count: int) -> dict[frozenset, int]:
    items = sorted({x for t in tx for x in t})
    out: dict[frozenset, int] = {}
    level = [(x,) for x in items]
    while level:
        counted = {c: _plain_count(tx, c) for c in level}
        large = [c for c, n in counted.items() if n >= min_count]
        out.update({frozenset(c): counted[c] for c in large})
        level = apriori_gen(large)
    return out


def test_miner_stops_without_a_union_when_no_candidates_remain() -> None:
    # Two frequent pairs that share no prefix: apriori_gen of level 2 is empty.
    parts = {
        "alice": [[1, 2], [1, 2], [3, 4], [9]],
        "bob": [[1, 2], [3, 4], [3, 4]],
        "carol": [[1, 2], [3, 4], [5]],
    }
    pooled = [t for p in parts.values() for t in p]
    assert apriori_gen([(1, 2), (3, 4)]) == []
    sim = simulate(
        lambda net, tx: horizontal_association_rules(
            net, from_transactions(tx), min_support=0.3, min_confidence=0.5, reveal_counts=True
        ),
        parts,
    )
    want = _centralized(pooled, 3)
    for result in sim.results.values():
        assert result.itemsets == want
        assert result.levels[-1] == {"k": 3, "candidates_union": 0, "frequent": 0}
    steps = {m["step"] for m in sim.metrics["alice"]}
    assert any("assoc/level2/union" in s for s in steps)
    assert not any("assoc/level3" in s for s in steps)


@pytest.mark.parametrize("seed", range(6))
def test_level_two_candidates_equal_apriori_gen(seed: int) -> None:
    from ppdm.mining.horizontal_rules import _candidates

    rng = np.random.default_rng(seed)
    ints = [(int(x),) for x in rng.choice(1000, int(rng.integers(0, 60)), replace=False)]
    strs = [(f"i{x}",) for (x,) in ints]
    for level in (ints, strs, ints[:1], []):
        assert _candidates(level, 2) == apriori_gen(level)
    pairs = apriori_gen(sorted(ints))
    assert _candidates(pairs, 3) == apriori_gen(pairs)
