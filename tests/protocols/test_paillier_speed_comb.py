"""The comb's batch evaluation (issue 25, item 5): flat look-up indices computed with
numpy, the split table's beta summed as numpy limbs in groups of steps, batches laid
out a chunk at a time, and the key owner's CRT masks from two tables of either kind.
Every power is checked against ``pow`` on the very exponents the sampler drew."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppdm.protocols.paillier import PaillierPrivateKey, PaillierPublicKey, comb
from ppdm.protocols.paillier.comb import FixedBaseTable, SquareModulusTable

ROOT = 1_000_000_007 * 998_244_353  # composite, like Paillier's n


def _exponents(table: FixedBaseTable, values: list[int]) -> np.ndarray:
    nbytes = (table.exponent_bits + 7) // 8
    rows = [np.frombuffer(v.to_bytes(nbytes, "little"), dtype=np.uint8) for v in values]
    return np.stack(rows)


@pytest.mark.parametrize("cls", [FixedBaseTable, SquareModulusTable])
@pytest.mark.parametrize(
    ("bits", "window", "blocks"),
    [(200, 3, 3), (300, 2, 1), (64, 5, 7), (1024, 12, 8)],
)
def test_batches_across_chunks_match_pow(monkeypatch, cls, bits, window, blocks):
    """Odd block counts (a padded row), more than 16 steps (several beta groups), the
    all-ones and zero exponents, and a batch cut into chunks of 7 exponents."""
    monkeypatch.setattr(comb, "POWERS_CHUNK", 7)
    table = cls(5, ROOT, exponent_bits=bits, window=window, blocks=blocks)
    modulus = ROOT * ROOT if cls is SquareModulusTable else ROOT
    rng = np.random.default_rng(bits * 31 + window)
    values = [0, 1, (1 << bits) - 1] + [
        int.from_bytes(rng.bytes((bits + 7) // 8), "little") % (1 << bits) for _ in range(20)
    ]
    got = table._powers(_exponents(table, values))
    assert got == [pow(5, v, modulus) for v in values]


@settings(max_examples=30, deadline=None)
@given(
    st.integers(min_value=1, max_value=400),
    st.integers(min_value=1, max_value=8),
    st.integers(min_value=1, max_value=11),
    st.lists(st.integers(min_value=0), min_size=1, max_size=12),
)
def test_split_beta_sums_are_exact(bits, window, blocks, raw_values):
    """The numpy limb sums give exactly the big-integer sum of the beta of every
    look-up, weighted by the step, for any layout."""
    table = SquareModulusTable(7, ROOT, exponent_bits=bits, window=window, blocks=blocks)
    values = [v % (1 << bits) for v in raw_values]
    idx = table._indices(_exponents(table, values))
    betas = [int.from_bytes(row.tobytes(), "little") for row in table.betas]
    steps = idx.shape[1]
    expected = [
        sum(betas[i] << (steps - 1 - s) for s, row in enumerate(rows) for i in row)
        for rows in idx.tolist()
    ]
    assert table._beta_sums(idx) == expected
    assert idx.shape[2] % 2 == 0  # rows are padded to pairs


def test_pair_of_split_tables_matches_each_table(monkeypatch):
    monkeypatch.setattr(comb, "POWERS_CHUNK", 5)
    other_root = 1_000_000_009 * 999_999_937
    a = SquareModulusTable(3, ROOT, exponent_bits=90, window=4, blocks=3)
    b = SquareModulusTable(3, other_root, exponent_bits=90, window=4, blocks=3)
    values = [0, (1 << 90) - 1, 12345678901234567890, 2**89 + 17] * 3
    pairs = a._powers_pair(b, _exponents(a, values))
    assert pairs == [(pow(3, v, ROOT**2), pow(3, v, other_root**2)) for v in values]
    with pytest.raises(TypeError):
        a._powers_pair(
            FixedBaseTable(3, ROOT, exponent_bits=90, window=4, blocks=3), _exponents(a, values)
        )


def test_owner_masks_from_a_split_and_a_full_table(monkeypatch):
    """Factors of different sizes (a key built unchecked): one table split, the other
    full-size, each with its own row padding; the CRT masks are still h_s^alpha."""
    p, q = 4_294_967_311, 18_446_744_073_709_551_629  # 33 and 65 bits, both prime
    monkeypatch.setattr(comb, "SPLIT_MIN_ROOT_BITS", 40)
    pub = PaillierPublicKey(p * q, exponent_bits=20, window=4)
    priv = PaillierPrivateKey(pub, p, q, check=False)
    tp, tq, _ = priv._tables
    assert {type(tp), type(tq)} == {FixedBaseTable, SquareModulusTable}
    assert tp.blocks % 2  # odd: only the split table pads its rows
    drawn = tp._random_exponents(30).copy()
    drawn[0] = 0
    monkeypatch.setattr(tp, "_random_exponents", lambda count: drawn[:count])
    masks = priv._random_masks(30)
    for row, mask in zip(drawn, masks, strict=True):
        e = int.from_bytes(row.tobytes(), "little")
        assert mask == pow(int(pub.h_s), e, int(pub.nsquare))
    values = list(range(-15, 15))
    assert priv.decrypt_many(priv.encrypt_many(values)) == values
