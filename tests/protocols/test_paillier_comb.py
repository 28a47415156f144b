"""The fixed-base comb behind DJN encryption (issue 25, item 5), its split form modulo a
square, and the one-way ``keys -> pool`` dependency (issue 26, item 4)."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ppdm.protocols.paillier.keys as keys_module
from ppdm.protocols.paillier import FixedBaseTable, PaillierPublicKey, comb, generate_keypair, pool
from ppdm.protocols.paillier.comb import SquareModulusTable, table_mod_square

MOD = 1_000_000_007 * 998_244_353
PAILLIER = Path(keys_module.__file__).resolve().parent


@settings(max_examples=60, deadline=None)
@given(
    st.integers(min_value=1, max_value=300),
    st.integers(min_value=1, max_value=12),
    st.integers(min_value=1, max_value=9),
    st.data(),
)
def test_comb_matches_powmod_for_every_layout(bits, window, blocks, data):
    table = FixedBaseTable(5, MOD, exponent_bits=bits, window=window, blocks=blocks)
    assert table.span * table.window >= bits  # the layout covers every exponent bit
    for e in (0, 1, (1 << bits) - 1, data.draw(st.integers(0, (1 << bits) - 1))):
        assert table.pow(e) == pow(5, e, MOD)


@settings(max_examples=40, deadline=None)
@given(
    st.integers(min_value=1, max_value=300),
    st.integers(min_value=1, max_value=10),
    st.integers(min_value=1, max_value=9),
    st.data(),
)
def test_split_comb_matches_powmod_for_every_layout(bits, window, blocks, data):
    """Modulo root^2 for a composite root (as Paillier's n^2): the split entries a (1 +
    root beta) give exactly base^e, zero and all-ones exponents included."""
    table = SquareModulusTable(5, MOD, exponent_bits=bits, window=window, blocks=blocks)
    assert table.modulus == MOD * MOD
    for e in (0, 1, (1 << bits) - 1, data.draw(st.integers(0, (1 << bits) - 1))):
        assert table.pow(e) == pow(5, e, MOD * MOD)


def test_split_comb_needs_a_unit_base():
    with pytest.raises(ValueError, match="unit"):
        SquareModulusTable(1_000_000_007 * 3, MOD, exponent_bits=20, window=4)
    with pytest.raises(ValueError, match="unit"):
        SquareModulusTable(0, MOD, exponent_bits=20, window=4)


def test_split_form_is_chosen_from_its_threshold_on():
    big = (1 << (comb.SPLIT_MIN_ROOT_BITS - 1)) + 1
    small = (1 << (comb.SPLIT_MIN_ROOT_BITS - 2)) + 1
    assert type(table_mod_square(7, big, exponent_bits=24, window=3)) is SquareModulusTable
    assert type(table_mod_square(7, small, exponent_bits=24, window=3)) is FixedBaseTable
    e = 0xABCDEF
    assert table_mod_square(7, big, exponent_bits=24, window=3).pow(e) == pow(7, e, big * big)


def test_comb_refuses_exponents_out_of_range():
    table = FixedBaseTable(3, MOD, exponent_bits=20, window=4)
    with pytest.raises(ValueError):
        table.pow(1 << 20)
    with pytest.raises(ValueError):
        table.pow(-1)
    with pytest.raises(ValueError):
        FixedBaseTable(3, MOD, exponent_bits=20, window=4, blocks=0)


def test_default_comb_costs_fewer_operations_than_the_window_table():
    """At the 2048-bit default (1,024-bit exponent): 8 blocks x 11 steps = 88
    multiplications + 10 squarings, against 127 multiplications for a window table of
    8-bit digits, with the same 32,768 entries."""
    bits, window, blocks = 1024, keys_module.DEFAULT_WINDOW, keys_module.DEFAULT_COMB_BLOCKS
    span = -(-bits // window)
    v = min(blocks, span)
    steps = -(-span // v)
    assert v * (1 << window) == 128 * 256
    assert v * steps + steps - 1 < 127


def test_random_powers_are_powers_of_the_sampled_exponents(monkeypatch):
    """The batch path (exponent bits laid out by numpy) agrees with pow() on the very
    exponents the sampler drew."""
    table = FixedBaseTable(7, MOD, exponent_bits=77, window=5, blocks=3)
    drawn = table._random_exponents(50)
    monkeypatch.setattr(table, "_random_exponents", lambda count: drawn[:count])
    got = table._random_powers(50)
    for row, value in zip(drawn, got, strict=True):
        e = int.from_bytes(row.tobytes(), "little")
        assert e < 1 << 77 and value == pow(7, e, MOD)


def test_owner_and_public_encryptions_decrypt_with_the_comb():
    pub, priv = generate_keypair(512, allow_insecure=True)
    values = np.arange(-70, 70)
    assert priv.decrypt_many(pub.encrypt_many(values)) == values.tolist()
    assert priv.decrypt_many(priv.encrypt_many(values)) == values.tolist()


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


def test_pool_does_not_import_keys():
    """The process pool is generic; keys uses it, never the other way round."""
    assert "ppdm.protocols.paillier.keys" not in _imports(PAILLIER / "pool.py")
    assert "ppdm.protocols.paillier.pool" in _imports(PAILLIER / "keys.py")


@pytest.mark.parametrize("split_from_bits", [comb.SPLIT_MIN_ROOT_BITS, 1])
def test_owner_masks_are_the_public_masks_of_the_same_exponents(monkeypatch, split_from_bits):
    """The key owner's CRT path (combs mod p^2 and q^2 in one loop, full-size or split)
    gives exactly h_s^alpha mod n^2 for the exponents its sampler drew, zero included; so
    does the public comb."""
    monkeypatch.setattr(comb, "SPLIT_MIN_ROOT_BITS", split_from_bits)
    pub, priv = generate_keypair(512, allow_insecure=True)
    tp, tq, _ = priv._tables
    for table, root in ((tp, priv.p), (tq, priv.q), (pub.table, pub.n)):
        assert isinstance(table, SquareModulusTable) == (root.bit_length() >= split_from_bits)
    assert isinstance(tp, SquareModulusTable) == (split_from_bits == 1)  # both variants run
    drawn = tp._random_exponents(40).copy()
    drawn[0] = 0
    monkeypatch.setattr(tp, "_random_exponents", lambda count: drawn[:count])
    monkeypatch.setattr(pub.table, "_random_exponents", lambda count: drawn[:count])
    masks = priv._random_masks(40)
    public = pub.table._random_powers(40)
    for row, mask, pmask in zip(drawn, masks, public, strict=True):
        e = int.from_bytes(row.tobytes(), "little")
        assert mask == pmask == pow(int(pub.h_s), e, int(pub.nsquare))


def test_large_batch_layout_costs_fewer_operations_and_is_chosen_by_size():
    """The large-batch layout reads a 1,024-bit exponent in fewer look-ups and squarings
    than the default; :func:`comb_layout` picks it from its threshold on."""
    span = -(-1024 // comb.LARGE_BATCH_WINDOW)
    steps = -(-span // comb.LARGE_BATCH_BLOCKS)
    default_span = -(-1024 // comb.DEFAULT_WINDOW)
    default_steps = -(-default_span // comb.DEFAULT_COMB_BLOCKS)
    assert comb.LARGE_BATCH_BLOCKS * steps < comb.DEFAULT_COMB_BLOCKS * default_steps
    assert steps < default_steps
    small = (comb.DEFAULT_WINDOW, comb.DEFAULT_COMB_BLOCKS)
    large = (comb.LARGE_BATCH_WINDOW, comb.LARGE_BATCH_BLOCKS)
    assert comb.comb_layout(0) == comb.comb_layout(comb.LARGE_BATCH_MIN_POWERS - 1) == small
    assert comb.comb_layout(comb.LARGE_BATCH_MIN_POWERS) == large


def test_key_comb_layout_reaches_its_tables_and_the_worker_side():
    """``window`` and ``blocks`` of a key lay out its public and owner tables, and the
    worker task of the process pool rebuilds the key with them (same ciphertexts'
    plaintexts, tables of the same layout)."""
    pub, priv = generate_keypair(512, window=5, blocks=3, allow_insecure=True)
    assert (pub.window, pub.blocks) == (5, 3)
    assert (pub.table.window, pub.table.blocks) == (5, 3)
    tp, tq, _ = priv._tables
    assert (tp.window, tp.blocks, tq.window, tq.blocks) == (5, 3, 5, 3)
    width, out_width = (pub.bits + 7) // 8, pub.ciphertext_bytes
    values = [0, 1, 2, int(pub.n) - 1]
    for kind, blob in (("private", priv.to_bytes()), ("public", pub.to_bytes())):
        packed = keys_module._encrypt_task(
            kind, blob, pub.exponent_bits, 5, 3, out_width, width, pool.pack(values, width)
        )
        cts = pool.unpack(packed, out_width)
        assert [int(m) for m in priv.raw_decrypt_many(cts)] == values
        worker = keys_module._worker_key(kind, blob, pub.exponent_bits, 5, 3)
        public = worker.public_key if kind == "private" else worker
        assert (public.window, public.blocks) == (5, 3)
    with pytest.raises(ValueError, match="blocks"):
        generate_keypair(512, blocks=0, allow_insecure=True)


def test_worker_key_cache_is_bounded_by_table_entries(monkeypatch):
    """The worker side keeps the keys it has seen, least recently used out first, while
    their tables would hold more than its budget of entries (``blocks * 2^window``)."""
    monkeypatch.setattr(keys_module, "_worker_keys", type(keys_module._worker_keys)())
    monkeypatch.setattr(keys_module, "_WORKER_TABLE_ENTRIES", 3 * (3 << 5))
    blobs = [generate_keypair(512, allow_insecure=True)[0].to_bytes() for _ in range(5)]

    def get(i, window=5):
        return keys_module._worker_key("public", blobs[i], 64, window, 3)

    first = get(0)
    get(1), get(2)
    assert get(0) is first  # a hit, and now the most recently used
    get(3)  # 4 x 96 entries > 288: the least recently used (key 1) goes
    assert [k[1] for k in keys_module._worker_keys] == [blobs[2], blobs[0], blobs[3]]
    get(4, window=6)  # 192 entries: keys 2 and 0 go
    assert [(k[1], k[3]) for k in keys_module._worker_keys] == [(blobs[3], 5), (blobs[4], 6)]
    assert get(3).n == PaillierPublicKey.from_bytes(blobs[3]).n
