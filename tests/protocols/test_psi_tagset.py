"""The KKRT PSI's wire sizes: tag length, Elias-Fano tag sets, code width.

The tag sets round-trip (hypothesis), cost what the module says, and every malformed
encoding is a ProtocolError naming the sender and the step with a fixed reason. The
bounds are checked against formulas written out here, independently of the module: the
tags stay at least ``40 + log2(|X| |Y|)`` bits long (a false match ``<= 2^-40``) and the
code at least as wide as ``3 |Y| P[Bin(w, 1/2) < 128] <= 2^-40`` needs; a run's messages
have exactly those sizes.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppdm.errors import ProtocolError
from ppdm.parties.local import simulate
from ppdm.protocols.psi import IdSet, tagset
from ppdm.protocols.psi.cuckoo import cuckoo_bins
from ppdm.protocols.psi.kkrt import code_bits, kkrt_receive, kkrt_send

SIZES = [1, 2, 3, 10, 100, 1000, 4095, 4096, 4097, 10**5, 10**6, 2**20 + 1, 10**7, 2**28]


def _tags(count: int, bits: int, seed: int) -> np.ndarray:
    """``count`` distinct random tags of ``bits`` bits, unsorted."""
    gen = np.random.default_rng(seed)
    width = tagset.tag_width(bits)
    raw = gen.integers(0, 256, size=(count, width), dtype=np.uint8)
    tags = tagset.truncate(raw, bits)
    _, first = np.unique(tags, axis=0, return_index=True)
    return tags[np.sort(first)]


def _sorted(tags: np.ndarray) -> np.ndarray:
    return tags[np.lexsort(tags.T[::-1])]


# The bounds --------------------------------------------------------------------------------


@pytest.mark.parametrize("n_receiver", SIZES)
@pytest.mark.parametrize("n_sender", SIZES)
def test_tags_are_long_enough_for_a_false_match_below_2_to_the_minus_40(n_receiver, n_sender):
    """``|X| |Y| 2^-l <= 2^-40``, in exact integers: this fails if the tag length drops
    below the stated bound (and the bound is tight: one bit less breaks it)."""
    bits = tagset.tag_bits(n_receiver, n_sender)
    assert (n_receiver * n_sender) * 2**40 <= 2**bits
    assert bits == 40 + math.ceil(math.log2(n_receiver * n_sender) - 1e-12)
    assert tagset.bound_holds(n_receiver, n_sender, bits)
    assert (n_receiver * n_sender) * 2**40 > 2 ** (bits - 1) or bits == 40


def _log2_tail(w: int, d: int = 128) -> float:
    """``log2 P[Bin(w, 1/2) < d]`` in floating point (lgamma), an independent check."""
    terms = [math.lgamma(w + 1) - math.lgamma(i + 1) - math.lgamma(w - i + 1) for i in range(d)]
    top = max(terms)
    return (top + math.log(sum(math.exp(t - top) for t in terms))) / math.log(2) - w


@pytest.mark.parametrize("n_sender", SIZES)
def test_code_is_wide_enough_for_every_tag_pair(n_sender):
    width = code_bits(n_sender)
    assert width % 64 == 0 and 448 <= width <= 512
    assert math.log2(3 * n_sender) + _log2_tail(width) <= -40
    if width > 448:  # the narrower code would not do
        assert math.log2(3 * n_sender) + _log2_tail(width - 64) > -40


def test_tag_set_costs_what_the_docstring_says():
    """At most ``l - log2 n + 2`` bits a tag (plus byte padding), against 80 raw at
    10^6: at most 62.1."""
    for n in (1, 2, 3, 5000, 2**16, 2**16 + 1, 10**5, 10**6, 3 * 2**19):
        for bits in (40, 74, 80, 96):
            size = tagset.encoded_size(n, bits)
            assert size * 8 <= n * (bits - math.log2(n) + 2) + 16
    assert tagset.encoded_size(10**6, 80) * 8 / 10**6 < 62.1


# Round trip ----------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    count=st.integers(0, 600),
    bits=st.integers(40, 96),
    seed=st.integers(0, 2**32 - 1),
)
def test_round_trip(count, bits, seed):
    tags = _tags(count, bits, seed)
    data = tagset.encode(tags, bits)
    assert len(data) == tagset.encoded_size(len(tags), bits)
    back = tagset.decode(data, len(tags), bits, party="bob", step="tags")
    assert back.shape == (len(tags), tagset.tag_width(bits))
    assert (_sorted(back) == _sorted(tags)).all()  # the same set
    assert (back == _sorted(tags)).all()  # and sorted: the order of the values
    assert tagset.encode(back, bits) == data  # canonical: the set alone decides


def test_round_trip_across_batches(monkeypatch):
    monkeypatch.setattr(tagset, "BATCH", 16)
    tags = _tags(1000, 77, 5)
    back = tagset.decode(tagset.encode(tags, 77), len(tags), 77, party="bob", step="tags")
    assert (back == _sorted(tags)).all()


# Malformed encodings ---------------------------------------------------------------------------


def _flip(data: bytes, byte: int, mask: int) -> bytes:
    out = bytearray(data)
    out[byte] ^= mask
    return bytes(out)


def _layout(count: int, bits: int) -> tuple[int, int, int]:
    """Bits of the unary part, its bytes, bits of the low part."""
    h = tagset.high_bits(count, bits)
    unary = count + (1 << h)
    return unary, -(-unary // 8), count * (bits - h)


def _malformed(tags: np.ndarray, bits: int) -> dict[str, object]:
    data = tagset.encode(tags, bits)
    count = len(tags)
    unary_bits, unary_bytes, low_bits = _layout(count, bits)
    assert unary_bits % 8 and low_bits % 8  # both parts have padding bits to flip
    unary = np.unpackbits(np.frombuffer(data[:unary_bytes], dtype=np.uint8))
    ones = np.flatnonzero(unary[:unary_bits])
    first_zero = int(np.flatnonzero(unary[:unary_bits] == 0)[0])
    # exactly `count` ones, but the last high part at 2^h: out of range
    moved = unary.copy()
    moved[ones[-1]] = 0
    moved[unary_bits - 1] = 1
    keys = tagset.sort_keys(tagset.decode(data, count, bits, party="b", step="t"))
    high = keys >> np.uint64(64 - tagset.high_bits(count, bits))
    same = int(np.flatnonzero(high[1:] == high[:-1])[0])  # two tags of one high part
    swapped = _sorted(tags)
    swapped[[same, same + 1]] = swapped[[same + 1, same]]
    return {
        "short": data[:-1],
        "long": data + b"\x00",
        "empty": b"",
        "array": np.frombuffer(data, dtype=np.uint8),
        "text": data.decode("latin-1"),
        "unary padding": _flip(data, unary_bytes - 1, 1),
        "low padding": _flip(data, len(data) - 1, 1),
        "one more tag": _flip(data, first_zero // 8, 0x80 >> (first_zero % 8)),
        "one tag less": _flip(data, int(ones[0]) // 8, 0x80 >> (int(ones[0]) % 8)),
        "high out of range": np.packbits(moved).tobytes() + data[unary_bytes:],
        "unsorted": tagset._pack(swapped, bits),
    }


@pytest.mark.parametrize(
    "case",
    [
        "short",
        "long",
        "empty",
        "array",
        "text",
        "unary padding",
        "low padding",
        "one more tag",
        "one tag less",
        "high out of range",
        "unsorted",
    ],
)
def test_malformed_tag_sets_are_refused(case):
    count, bits = 300, 60  # h = 9: 812 unary bits, 300 x 51 low bits, both padded
    tags = _tags(count, bits, 11)
    assert len(tags) == count
    bad = _malformed(tags, bits)[case]
    with pytest.raises(ProtocolError) as info:
        tagset.decode(bad, count, bits, party="bob", step="psi/kkrt/alice>bob/tags")
    assert info.value.party == "bob" and info.value.step == "psi/kkrt/alice>bob/tags"
    assert not re.search(r"\d", info.value.reason)  # a fixed reason: no size in it


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), byte=st.integers(0, 10**6), bit=st.integers(0, 7))
def test_a_flipped_bit_is_refused_or_changes_the_set(seed, byte, bit):
    """No flipped bit passes silently as the same set: either the decoder refuses it or
    the set differs (a changed tag; the receiver then finds a different intersection,
    which only a malicious sender could cause anyway)."""
    tags = _tags(200, 61, seed)
    data = tagset.encode(tags, 61)
    bad = _flip(data, byte % len(data), 1 << bit)
    try:
        back = tagset.decode(bad, len(tags), 61, party="bob", step="tags")
    except ProtocolError:
        return
    assert not (back == _sorted(tags)).all()


# The protocol's messages -------------------------------------------------------------------------


def test_a_run_sends_tags_and_u_of_exactly_the_bound_sizes():
    """In a real run the three tag messages have the size of ``|Y|`` tags of ``40 +
    ceil(log2(|X| |Y|))`` bits (computed here, not by the module) and ``u`` has one row
    per code bit; fewer bits anywhere fails this test."""
    x, y = list(range(0, 700)), list(range(300, 1300))
    seen: dict[str, list] = {"tags": [], "u": []}

    def party(net, blocks):
        if net.me == "s":
            kkrt_send(net, "r", blocks)
            return None
        send, receive = net.send, net.receive

        def logged_send(to, step, value):
            if step.endswith("kkrt/r>s/u"):
                seen["u"].append(value)
            send(to, step, value)

        def logged_receive(frm, step, **kw):
            value = receive(frm, step, **kw)
            if step.endswith("kkrt/r>s/tags"):
                seen["tags"].append(value)
            return value

        net.send, net.receive = logged_send, logged_receive
        return kkrt_receive(net, "s", blocks)

    inputs = {"r": IdSet.of(x).blocks(), "s": IdSet.of(y).blocks()}
    found = simulate(party, inputs, timeout=30).results["r"]
    assert int(found.sum()) == 400
    bits = 40 + math.ceil(math.log2(len(x) * len(y)))
    h = math.ceil(math.log2(len(y)))
    expected = math.ceil((len(y) + 2**h) / 8) + math.ceil(len(y) * (bits - h) / 8)
    assert [len(t) for t in seen["tags"]] == [expected] * 3
    (u,) = seen["u"]
    assert u.shape == (code_bits(len(y)), cuckoo_bins(len(x)) // 8) == (448, u.shape[1])
