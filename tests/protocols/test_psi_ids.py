"""PSI on real ids (issue 25, item 6): random, shuffled and string ids align exactly like
sorted integers, on the numpy path; short strings are encoded without hashing and stay
injective and separated from every other kind."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppdm.parties.local import run_local
from ppdm.protocols.psi import IdSet, align
from ppdm.protocols.psi.ids import has_duplicates

UNBOUNDED = {"max_set_ratio": float("inf"), "min_set_size": 0}


def _id_sets(kind: str, n: int, seed: int) -> tuple[list, list]:
    rng = np.random.default_rng(seed)
    if kind == "random":
        pool = rng.choice(np.iinfo(np.int64).max, 2 * n, replace=False) - (1 << 62)
        pool = pool.tolist()
    elif kind == "shuffled":
        pool = list(range(10**9, 10**9 + 2 * n))
    elif kind == "string":  # short (direct) and long (hashed) ids, non-ASCII too
        pool = [f"c-{i}" if i % 2 else f"customer-ü-{i:012d}" for i in range(2 * n)]
    else:
        pool = [f"k{i}".encode() + b"\0" * (i % 3) for i in range(2 * n)]
    a = pool[: n + n // 2]
    b = pool[n // 2 :]
    order_a, order_b = rng.permutation(len(a)), rng.permutation(len(b))
    return [a[i] for i in order_a], [b[i] for i in order_b]


@pytest.mark.parametrize("kind", ["random", "shuffled", "string", "bytes"])
@pytest.mark.parametrize("seed", [1, 2])
def test_real_ids_align_like_the_plain_intersection(kind, seed):
    a, b = _id_sets(kind, 3000, seed)
    out = run_local(partial(align, **UNBOUNDED), {"alice": a, "bob": b}, timeout=120)
    want = sorted(set(a) & set(b))
    for party, own in (("alice", a), ("bob", b)):
        got = out[party]
        assert got.ids == want
        assert [own[i] for i in got.rows.tolist()] == want


def test_numpy_ids_take_the_array_path_and_match_lists():
    rng = np.random.default_rng(7)
    a = rng.choice(1 << 40, 5000, replace=False).astype(np.int64)
    b = np.concatenate([a[:2500], rng.choice(1 << 40, 2500, replace=False) + (1 << 41)])
    rng.shuffle(b)
    arr = run_local(partial(align, **UNBOUNDED), {"alice": a, "bob": b}, timeout=120)
    lst = run_local(
        partial(align, **UNBOUNDED), {"alice": a.tolist(), "bob": b.tolist()}, timeout=120
    )
    assert arr["alice"].ids == lst["alice"].ids == sorted(set(a.tolist()) & set(b.tolist()))
    assert np.array_equal(arr["bob"].rows, lst["bob"].rows)
    assert IdSet.of(a).array is not None and IdSet.of(a.tolist()).array is not None


def test_blocks_are_injective_and_separated_between_kinds():
    ids = {
        "int": [0, 1, -1, 2**63 - 1, -(2**63), 0x696D6470707000],
        "str": ["", "a", "a\0", "\0", "ab", "x" * 14, "x" * 15, "é" * 7, "é" * 8, "1", "0"],
        "bytes": [b"", b"a", b"a\0", b"\0", b"x" * 14, b"x" * 15, b"1", b"\xa1"],
    }
    seen = {}
    for kind, values in ids.items():
        blocks = IdSet.of(values).blocks()
        assert blocks.shape == (len(values), 16) and not blocks[:, 15].any()
        for v, blk in zip(values, blocks, strict=True):
            key = blk.tobytes()
            assert key not in seen, (kind, v, seen.get(key))
            seen[key] = (kind, v)


def test_short_strings_are_copied_not_hashed():
    blk = IdSet.of(["abc"]).blocks()[0]
    assert blk[:3].tobytes() == b"abc" and not blk[3:14].any() and blk[14] == 0xA0 + 3
    long = IdSet.of(["abcdefghijklmno"]).blocks()[0]  # 15 bytes: hashed
    assert long[:15].tobytes() != b"abcdefghijklmno"


@pytest.mark.parametrize(
    "bad",
    [np.array([3, 1, 3]), [5, np.int64(5)], [np.True_, 1], ["a", b"a"], [2**64]],
)
def test_bad_real_id_sets_are_refused_locally(bad):
    with pytest.raises((ValueError, TypeError)):
        IdSet.of(bad)


def test_has_duplicates():
    assert not has_duplicates(np.array([], dtype=np.int64))
    assert not has_duplicates(np.array([3, 1, 2]))
    assert has_duplicates(np.array([3, 1, 3]))


# -- the vectorized string paths against their definitions (hypothesis) ------------------

_PERSON = {"str": b"ppdm-psi-str", "bytes": b"ppdm-psi-bytes"}


def _reference_block(kind: str, value) -> bytes:
    """The module docstring's encoding of one string / byte string id, byte by byte."""
    import hashlib

    raw = value.encode("utf-8", "surrogatepass") if kind == "str" else bytes(value)
    if len(raw) <= 14:
        tag = (0xA0 if kind == "str" else 0xB0) + len(raw)
        return raw + b"\0" * (14 - len(raw)) + bytes([tag, 0])
    return hashlib.blake2b(raw, digest_size=15, person=_PERSON[kind]).digest() + b"\0"


_texts = st.text(alphabet=st.sampled_from("ab\0Zé\U0001f600\ud800-9"), max_size=20)
_blobs = st.binary(max_size=20).map(lambda b: b[:: max(1, len(b) // 17)])


@settings(max_examples=150, deadline=None)
@given(
    values=st.one_of(
        st.lists(_texts, unique=True, max_size=40), st.lists(_blobs, unique=True, max_size=40)
    ),
    data=st.data(),
)
def test_string_blocks_order_and_lookup_match_their_definitions(values, data):
    """Blocks (copied in one scatter, or hashed), the common order (the blocks' byte order
    when every id is short) and ``locate`` (on 64-bit block keys) give what the plain
    definitions give: the encoding of the docstring, ``sorted``, a dict of positions."""
    s = IdSet.of(values)
    if not values:
        return
    kind = s.kind
    assert [bytes(b) for b in s.blocks()] == [_reference_block(kind, v) for v in values]
    rows = np.array(data.draw(st.permutations(range(len(values)))), dtype=np.int64)
    rows = rows[: data.draw(st.integers(0, len(values)))]
    ids, picked = s.common(rows)
    assert ids == sorted(values[i] for i in rows.tolist())
    assert [values[i] for i in picked.tolist()] == ids
    position = {v: i for i, v in enumerate(values)}
    assert s.locate(ids).tolist() == [position[v] for v in ids]
    missing = "\x01absent\x01" if kind == "str" else b"\x01absent\x01"
    assert s.locate([*ids, missing]) is None
    assert s.locate([1] if kind == "str" else ["x"]) is None  # another kind: not found
    with pytest.raises(ValueError, match="duplicate"):
        IdSet.of([*values, values[0]])


@pytest.mark.parametrize(
    "result",
    [
        {"kind": "str", "ids": {"lengths": np.array([2, 2], np.int64), "data": b"c5c1"}},
        {"kind": "str", "ids": {"lengths": np.array([2, 2], np.int64), "data": b"c1c1"}},
        {"kind": "str", "ids": {"lengths": np.array([2, 3], np.int64), "data": b"c1c5"}},
        {"kind": "str", "ids": {"lengths": np.array([-2, 6], np.int64), "data": b"c1c5"}},
        {"kind": "str", "ids": {"lengths": np.array([2, 2], np.int32), "data": b"c1c5"}},
        {"kind": "str", "ids": {"lengths": np.array([1, 1], np.int64), "data": b"\xff\xfe"}},
        {"kind": "str", "ids": {"lengths": np.array([2], np.int64), "data": b"c9"}},
        {"kind": "str", "ids": {"data": b"c1c5"}},
        {"kind": "bytes", "ids": {"lengths": np.array([2, 2], np.int64), "data": b"c1c5"}},
        {"kind": "int", "ids": np.array([5, 1], np.int64)},
    ],
)
def test_a_bad_or_unordered_intersection_from_the_leader_is_a_protocol_error(result):
    """The non-leader checks the leader's intersection: the strings' lengths add up to
    the bytes, valid UTF-8, strictly increasing (the common order, no repeat), all its
    own ids, of its own kind."""
    from ppdm.errors import ProtocolError
    from ppdm.protocols.psi import _decode_result

    own = IdSet.of(["c1", "c5", "c7"] if result["kind"] != "int" else [1, 5, 7])
    with pytest.raises(ProtocolError) as info:
        _decode_result(result, own, "alice", 0)
    assert info.value.party == "alice"
    good = {"kind": "str", "ids": {"lengths": np.array([2, 2], np.int64), "data": b"c1c5"}}
    ids, rows = _decode_result(good, IdSet.of(["c7", "c5", "c1"]), "alice", 0)
    assert ids == ["c1", "c5"] and rows.tolist() == [2, 1]
