"""What the set-union collector sees: no point shared by two different items, fakes
indistinguishable from real items, and so no way to count a party's true items.

The collector (the first party) receives every other party's fully encrypted set at step
``set-union/encrypted`` and holds its own. Equal items of different parties are equal
rows there (that overlap is the documented leakage); anything else repeating would tell
items apart. With the old encoding, every fake's trailing chunks were one constant and
short real items shared another, so counting rows with a repeated trailing point gave
each party's true set size.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppdm.parties.local import LocalNetwork, simulate
from ppdm.protocols import commutative
from ppdm.protocols.set_union import secure_set_union

PARTIES = ["alice", "bob", "carol"]


def _collector_view(
    sets: dict[str, list[bytes]], *, max_item_bytes: int, fake_ratio: float, pad_to=None
):
    """Run the union and return (union, {party: its encrypted set as the collector saw it})."""
    net = LocalNetwork(PARTIES, job_id="view", timeout=60)
    seen: dict[str, np.ndarray] = {}
    ep = net.endpoint("alice")
    original = ep.receive

    def spy(frm, step, **kw):
        value = original(frm, step, **kw)
        if step.endswith("set-union/encrypted"):
            seen[frm] = value
        return value

    ep.receive = spy  # type: ignore[method-assign]
    sim = simulate(
        lambda n, own: secure_set_union(
            n, own, max_item_bytes=max_item_bytes, fake_ratio=fake_ratio, pad_to=pad_to
        ),
        sets,
        network=net,
        timeout=60,
    )
    return sim.results["alice"], seen


def _points(batch: np.ndarray) -> list[bytes]:
    return [bytes(p) for p in batch.reshape(-1, 33)]


def _sets(seed: int, *, long_items: bool):
    rng = np.random.default_rng(seed)
    shared_prefix = b"S" * 21  # different items sharing a whole 21-byte chunk
    out = {}
    for i, p in enumerate(PARTIES):
        items = []
        for j in range(int(rng.integers(3, 9))):
            if long_items and j % 3 == 0:
                items.append(shared_prefix + f"{p}{j}".encode())
            elif long_items and j % 3 == 1:
                items.append(f"long-item-{p}-{j}-".encode().ljust(40, b"x"))
            else:
                items.append(f"{p}{j}".encode())  # short: padding chunks only
        items.append(b"common-to-all")
        out[p] = items
        del i
    return out


@pytest.mark.parametrize("max_item_bytes", [29, 40, 63])
def test_no_two_rows_share_a_point_except_equal_items(max_item_bytes):
    sets = _sets(1, long_items=max_item_bytes > 29)
    union, seen = _collector_view(sets, max_item_bytes=max_item_bytes, fake_ratio=1.0)
    assert union == sorted({x for s in sets.values() for x in s})
    # Within one party's encrypted set every point is distinct: rows never share a point.
    for batch in seen.values():
        pts = _points(batch)
        assert len(pts) == len(set(pts)), "two rows of one set share a point"
    # Across parties, rows that share any point are whole equal rows (equal items).
    rows = {p: {bytes(r.tobytes()) for r in b} for p, b in seen.items()}
    point_owner: dict[bytes, set[bytes]] = {}
    for b in seen.values():
        for r in b:
            for pt in _points(r[None]):
                point_owner.setdefault(pt, set()).add(bytes(r.tobytes()))
    assert all(len(owners) == 1 for owners in point_owner.values())
    common = set.intersection(*rows.values())
    assert len(common) == 1  # the one item every party holds


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10**6), chunks_bytes=st.sampled_from([40, 63]))
def test_the_collector_cannot_count_real_items(seed, chunks_bytes):
    """Fakes and real items look alike: no point repeats inside a set, so the number of
    rows with any repeated point -- 0 -- says nothing about how many are fakes."""
    sets = _sets(seed, long_items=True)
    _, seen = _collector_view(sets, max_item_bytes=chunks_bytes, fake_ratio=2.0)
    for p, batch in seen.items():
        pts = _points(batch)
        assert len(set(pts)) == len(pts)
        # Per chunk position, every row's point is distinct (real and fake alike).
        for j in range(batch.shape[1]):
            col = [bytes(r) for r in batch[:, j]]
            assert len(set(col)) == len(col), (p, j)


def test_fakes_have_random_content_in_every_chunk():
    chunks = commutative.chunks_for(63)
    fakes = commutative.fake_items(50, chunks)
    real = commutative.encode_items([b"a", b"b", b"a" * 63], chunks, domain=b"d")
    for batch in (fakes, real):
        for j in range(chunks):
            col = [bytes(r) for r in batch[:, j]]
            assert len(set(col)) == len(col)
    # A decrypted fake is dropped; a real item round-trips; mixed chunks are refused.
    items, n_fake = commutative.decode_items(np.concatenate([real, fakes]), domain=b"d")
    assert items == [b"a", b"b", b"a" * 63] and n_fake == 50
    mixed = real.copy()
    mixed[0, 1] = real[1, 1]  # chunk 1 of item b spliced into item a
    with pytest.raises(ValueError, match="do not belong together"):
        commutative.decode_items(mixed, domain=b"d")
    with pytest.raises(ValueError, match="do not belong together"):
        commutative.decode_items(real, domain=b"another job")
