"""The column dot products and the GMW-style AND-and-count (issue 14, items 2 and 3).

- Correctness against plain numpy: the shares of :func:`column_product_shares` add up to
  the products (per position and summed), :func:`column_dot_products` and
  :func:`multiparty_and_counts` equal the plain AND counts for 2, 3 and 4 parties; the
  bit packing round-trips at every width.
- Bad peer messages (corrections of the wrong length, out-of-ring shares, shares that
  open above the public bound) raise :class:`ProtocolError` naming the peer.
- Views: what the choosing party receives does not depend on the sender's values, what
  the sender receives does not depend on the choices, and a party of a three-party count
  sees the same distribution for different inputs of the others with the same counts.
  Each view test also runs with the pads zeroed and must then see the difference, so the
  tests fail if a mask is dropped.
"""

from __future__ import annotations

import math
import threading
import uuid
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import chi2_contingency

import ppdm.protocols.dot_product_ot as dpo
import ppdm.protocols.gmw as gmw
from ppdm.errors import ProtocolError
from ppdm.parties.local import LocalNetwork, run_local, simulate
from ppdm.protocols.dot_product_ot import (
    STEP_CORRECTIONS,
    ColumnOTs,
    bit_widths,
    column_dot_products,
    column_product_bytes,
    column_product_shares,
    gather_uint,
    open_shares,
    pack_uint,
    packed_size,
    unpack_uint,
)
from ppdm.protocols.gmw import (
    STEP_NOISY,
    STEP_THRESHOLD,
    multiparty_and_bytes,
    multiparty_and_counts,
    multiparty_and_shares,
    noisy_width,
    open_noisy,
    shares_at_least,
    two_sided_geometric,
)
from ppdm.protocols.ot.extension import OTSession

NAMES = ["alice", "bob", "carol", "dave"]


def _sessions(net: Any) -> dict[str, OTSession]:
    return {p: OTSession(net, p) for p in net.others}


def _plain_counts(cols: dict[str, np.ndarray], owners: list[str], index: np.ndarray) -> np.ndarray:
    prod = np.ones((len(index), next(iter(cols.values())).shape[1]), dtype=np.int64)
    for k, p in enumerate(owners):
        prod *= cols[p][index[:, k]]
    return prod.sum(axis=1)


# -- packing -------------------------------------------------------------------------------


@settings(max_examples=40)
@given(st.integers(1, 32), st.integers(0, 40), st.integers(0, 2**32 - 1))
def test_pack_round_trip(width: int, count: int, seed: int) -> None:
    v = np.random.default_rng(seed).integers(0, 1 << width, count, dtype=np.uint64)
    data = pack_uint(v, width)
    assert data.dtype == np.uint8
    assert data.size == packed_size(count, width)
    if width <= 16:
        assert data.size == -(-count * width // 8)
    assert np.array_equal(unpack_uint(data, width, count), v)
    at = np.random.default_rng(seed + 1).integers(0, max(count, 1), 10 if count else 0)
    assert np.array_equal(gather_uint(data, width, count, at), v[at])


def test_bit_widths_exact() -> None:
    bounds = [0, 1, 2, 3, 4, 7, 8, 255, 256, 65535, 65536, 2**31, 2**32 - 1]
    assert bit_widths(np.array(bounds)).tolist() == [max(1, b.bit_length()) for b in bounds]


# -- correctness ---------------------------------------------------------------------------


@pytest.mark.parametrize("group", [None, 700, 3000])
@pytest.mark.parametrize("elementwise", [False, True])
def test_column_product_shares_add_up(
    elementwise: bool, group: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Also with the OTs of one column, or of four, per IKNP batch (``OT_GROUP``)."""
    if group is not None:
        monkeypatch.setattr(dpo, "OT_GROUP", group)
    rng = np.random.default_rng(11)
    n, m = 700, 90
    values = rng.integers(0, 1 << 20, (m, n)).astype(np.uint32)
    choices = (rng.random((6, n)) < 0.4).astype(np.uint8)
    columns = rng.integers(0, 6, m)
    widths = rng.integers(1, 21, m)

    def party(net: Any, _: Any) -> np.ndarray:
        s = OTSession(net, net.others[0])
        kw = {"values": values} if net.me == "alice" else {"choices": choices}
        return column_product_shares(
            net,
            sender="alice",
            receiver="bob",
            columns=columns,
            widths=widths,
            n=n,
            session=s,
            elementwise=elementwise,
            **kw,
        )

    out = run_local(party, {"alice": 0, "bob": 0})
    masks = (1 << widths.astype(np.int64)) - 1
    prod = values.astype(np.int64) * choices[columns]
    got = out["alice"].astype(np.int64) + out["bob"].astype(np.int64)
    if elementwise:
        assert np.array_equal(got & masks[:, None], prod & masks[:, None])
    else:
        assert np.array_equal(got & masks, prod.sum(axis=1) & masks)


def _kept_calls_with_pads(monkeypatch: pytest.MonkeyPatch) -> tuple[dict, dict, list]:
    """Three calls of :func:`column_product_shares` on kept columns (products of several
    widths, one to three output blocks of pads per run), recording every pad call
    (party, the rows it hashed -- ``pi`` inverted --, their OT indices, the session
    field, the blocks and the pads) and every batch of raw IKNP rows."""
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    from ppdm.protocols import column_ots
    from ppdm.protocols.ot.crhash import FIXED_KEY

    pads: dict[str, list] = {"alice": [], "bob": []}
    raws: dict[str, list] = {"alice": [], "bob": []}
    real_pads, real_stacked, real_attach = dpo._pads, dpo._stacked_pads, column_ots.attach
    lock = threading.Lock()

    def record(keys: Any, index: Any, session: int, block: int, blocks: int, out: Any) -> None:
        dec = Cipher(algorithms.AES(FIXED_KEY), modes.ECB()).decryptor()
        rows = np.frombuffer(dec.update(np.ascontiguousarray(keys).tobytes()), np.uint8)
        with lock:
            pads[threading.current_thread().name].append(
                (rows.reshape(-1, 16), np.array(index), session, block, blocks, out.copy())
            )

    def spy(keys: np.ndarray, index: np.ndarray, session: int, blocks: int, *rest: Any) -> Any:
        out = real_pads(keys, index, session, blocks, *rest)
        record(keys, index, session, rest[1] if len(rest) > 1 else 0, blocks, out)
        return out

    def stacked_spy(keys: Any, index: Any, session: Any, blocks: Any, *rest: Any) -> Any:
        # several columns' pads at once: each column's units side by side are its pads
        out = real_stacked(keys, index, session, blocks, *rest)
        unit = 0
        for j, count in enumerate(blocks):
            own = out[unit : unit + count].transpose(1, 0, 2).reshape(len(keys[j]), -1)
            record(keys[j], index[j], session[j], rest[1][j], count, own)
            unit += count
        return out

    def attach_spy(members: Any, raw: Any, n: int) -> None:
        raws[threading.current_thread().name].append(raw)
        real_attach(members, raw, n)

    monkeypatch.setattr(dpo, "_pads", spy)
    monkeypatch.setattr(dpo, "_stacked_pads", stacked_spy)
    monkeypatch.setattr(dpo, "attach", attach_spy)
    rng = np.random.default_rng(8)
    n = 640
    choices = (rng.random((4, n)) < 0.5).astype(np.uint8)
    values = rng.integers(0, 1 << 16, (12, n)).astype(np.uint32)
    calls = [  # (columns, widths): column 1 is kept through all three calls
        (np.array([0] * 9 + [1] * 2), np.array([9, 10, 11, 12, 13, 14, 15, 16, 16, 8, 8])),
        (np.array([1] * 10 + [2]), np.full(11, 12)),
        (np.array([1] * 3 + [2] * 4 + [3]), np.array([20, 20, 5, 6, 6, 6, 6, 7])),
    ]
    labels = ["w", "x", "y", "z"]

    def party(net: Any, _: Any) -> list[np.ndarray]:
        threading.current_thread().name = net.me
        kept = ColumnOTs(OTSession(net, net.others[0]))
        out = []
        for cols, widths in calls:
            kept.advance()
            kw = {"values": values[: len(cols)]} if net.me == "alice" else {"choices": choices}
            out.append(
                column_product_shares(
                    net,
                    sender="alice",
                    receiver="bob",
                    columns=cols,
                    widths=widths,
                    n=n,
                    session=kept.session,
                    kept=kept,
                    labels=labels,
                    **kw,
                )
            )
        return out

    sim = simulate(party, {"alice": 0, "bob": 0}, timeout=60)
    for c, (cols, widths) in enumerate(calls):
        got = sim.results["alice"][c].astype(np.int64) + sim.results["bob"][c].astype(np.int64)
        want = (values[: len(cols)].astype(np.int64) * choices[cols]).sum(axis=1)
        masks = (1 << widths.astype(np.int64)) - 1
        assert np.array_equal(got & masks, want & masks)
    return pads, raws, calls


def test_pads_are_one_tccr_hash_of_the_iknp_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every pad is ``tccr_expand`` of an IKNP row (``q_i`` or ``q_i XOR s`` at the
    sender, ``t_i`` at the receiver: the rows the session's ``raw_rows`` gave, under
    their own OT index) with the IKNP session's tag and the pad's output blocks: one hash
    layer, as IKNP derives its outputs; and the receiver's pads are the sender's pads of
    the rows it chose."""
    from ppdm.protocols.ot.crhash import tccr_expand

    pads, raws, _ = _kept_calls_with_pads(monkeypatch)
    rows_of: dict[str, dict[int, set[bytes]]] = {}
    for who, batches in raws.items():
        table = rows_of.setdefault(who, {})
        for raw in batches:
            both = [raw.rows] if raw.delta is None else [raw.rows, raw.rows ^ raw.delta]
            for i, at in enumerate(raw.indices().tolist()):
                table[at] = {bytes(r[i]) for r in both}
    assert rows_of["alice"].keys() == rows_of["bob"].keys()
    session = {raw.session for b in raws.values() for raw in b}
    assert len(session) == 1
    for who, calls in pads.items():
        assert calls and all(sess in session for _, _, sess, _, _, _ in calls)
        for rows, index, sess, block, blocks, out in calls:
            assert all(
                bytes(r) in rows_of[who][at] for r, at in zip(rows, index.tolist(), strict=True)
            )
            assert np.array_equal(index, np.arange(index[0], index[0] + len(index)))
            want = tccr_expand(
                rows, start=int(index[0]), session=sess, nbytes=16 * (block + blocks)
            )
            assert np.array_equal(out.view(np.uint8).reshape(len(rows), -1), want[:, 16 * block :])
    # the receiver's pad of a call equals one of the sender's two pads, row by row
    sender = {}
    for rows, index, _, block, _, out in pads["alice"]:
        flat = out.view(np.uint8).reshape(len(rows), -1)
        for i, at in enumerate(index.tolist()):
            sender.setdefault((at, block), []).append(bytes(flat[i]))
    for rows, index, _, block, _, out in pads["bob"]:
        flat = out.view(np.uint8).reshape(len(rows), -1)
        assert all(bytes(flat[i]) in sender[(at, block)] for i, at in enumerate(index.tolist()))


def test_pads_never_reuse_a_tweak(monkeypatch: pytest.MonkeyPatch) -> None:
    """No ``(OT index, session, block)`` tweak hashes two pads of one party's rows: the
    receiver hashes each triple once, the sender twice (``q_i`` and ``q_i XOR s``, as IKNP
    does); the products of the three calls on the kept column (and of the runs within a
    call) take disjoint blocks; and the blocks a kept column's later calls use start
    after those of its earlier ones (a kept column restarting at block 0 reuses pads)."""
    pads, _, calls = _kept_calls_with_pads(monkeypatch)
    for who, expect in (("bob", 1), ("alice", 2)):
        seen: dict[tuple[int, int, int], int] = {}
        for _, index, sess, block, blocks, _ in pads[who]:
            for at in index.tolist():
                for b in range(block, block + blocks):
                    seen[(at, sess, b)] = seen.get((at, sess, b), 0) + 1
        assert set(seen.values()) == {expect}
    # the kept column (x) serves all three calls on one set of OTs: 1 + 2 + 1 blocks
    blocks_of: dict[int, set[int]] = {}
    for _, index, _, block, blocks, _ in pads["bob"]:
        for at in index.tolist():
            blocks_of.setdefault(at, set()).update(range(block, block + blocks))
    assert len(calls) == 3 and max(map(len, blocks_of.values())) == 4
    assert {frozenset(v) for v in blocks_of.values()} >= {frozenset(range(4))}


@pytest.mark.parametrize("elementwise", [False, True])
def test_kept_columns_take_no_new_ots_and_fresh_pads(elementwise: bool) -> None:
    """:class:`ColumnOTs` across calls (vertical mining's levels): every call's shares
    add up to its products; a column kept from the previous call takes no new OTs (the
    wire carries 16 bytes less per kept column and position, as
    :func:`column_product_bytes` says with a session-less ledger following the calls),
    a column the last call did not use is dropped at :meth:`ColumnOTs.advance`; and
    the same values on a kept column travel under fresh pads: the corrections of the
    two calls differ (reused pads would repeat them, and their difference would give
    away the difference of the values)."""
    rng = np.random.default_rng(5)
    n = 640
    choices = (rng.random((4, n)) < 0.5).astype(np.uint8)
    labels = ["w", "x", "y", "z"]
    values = rng.integers(0, 1 << 12, (3, n)).astype(np.uint16)
    # Column labels per call: x is kept for call 2, y for call 3; w (call 1 only) is
    # dropped when call 3 starts, so it takes new OTs again.
    calls = [np.array([0, 1, 1]), np.array([1, 2, 1]), np.array([0, 2, 3])]
    widths = np.array([12, 12, 11])

    def party(net: Any, _: Any) -> list[tuple[np.ndarray, int, list[bytes]]]:
        kept = ColumnOTs(OTSession(net, net.others[0]))
        kept.session.setup_both()  # type: ignore[union-attr]
        seen: list[bytes] = []
        inner = net.receive

        def spy(frm: str, step: str, **kw: Any) -> Any:
            got = inner(frm, step, **kw)
            if step.endswith(STEP_CORRECTIONS):
                seen.append(np.asarray(got).tobytes())
            return got

        net.receive = spy
        out = []
        for cols in calls:
            kept.advance()
            before = net.metrics.totals()["bytes_sent"]
            seen.clear()
            kw = {"values": values} if net.me == "alice" else {"choices": choices}
            share = column_product_shares(
                net,
                sender="alice",
                receiver="bob",
                columns=cols,
                widths=widths,
                n=n,
                session=kept.session,
                elementwise=elementwise,
                kept=kept,
                labels=labels,
                **kw,
            )
            out.append((share, net.metrics.totals()["bytes_sent"] - before, list(seen)))
        return out

    sim = simulate(party, {"alice": 0, "bob": 0})
    ledger = ColumnOTs(None)
    masks = (1 << widths.astype(np.int64)) - 1
    for c, cols in enumerate(calls):
        ledger.advance()
        (a, sent_a, _), (b, sent_b, _) = sim.results["alice"][c], sim.results["bob"][c]
        prod = values.astype(np.int64) * choices[cols]
        got = a.astype(np.int64) + b.astype(np.int64)
        if elementwise:
            assert np.array_equal(got & masks[:, None], prod & masks[:, None])
        else:
            assert np.array_equal(got & masks, prod.sum(axis=1) & masks)
        model = column_product_bytes(cols, widths, n, kept=ledger, labels=labels)
        assert model <= sent_a + sent_b <= model + 200 * 8
        assert model == column_product_bytes(cols, widths, n) - 16 * n * [0, 1, 1][c]
    # Calls 2 and 3 both multiply values[1] (width 12) by column y, kept: column y's
    # corrections in each call.
    second = _column_corrections(sim.results["bob"][1][2], calls[1], widths, n, 2)
    third = _column_corrections(sim.results["bob"][2][2], calls[2], widths, n, 2)
    assert len(second) == len(third) == 12 * n // 8 and second != third


def _column_corrections(
    messages: list[bytes], cols: np.ndarray, widths: np.ndarray, n: int, column: int
) -> bytes:
    """The corrections of receiver column ``column`` in the messages of a call: every
    product's bit planes in the order of the plan (by column, then width), whether the
    columns travel in messages of their own or several to a message."""
    data = b"".join(messages)
    order = np.lexsort((np.arange(len(cols)), widths, cols))
    sizes = widths[order] * -(-n // 8)
    ends = np.cumsum(sizes)
    mine = cols[order] == column
    return data[int((ends - sizes)[mine][0]) : int(ends[mine][-1])]


@settings(max_examples=12)
@given(
    st.integers(2, 4),
    st.integers(1, 120),
    st.integers(1, 30),
    st.floats(0.05, 0.95),
    st.integers(0, 2**32 - 1),
)
def test_multiparty_counts_equal_plain_and(
    t: int, n: int, m: int, density: float, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    owners = NAMES[:t]
    cols = {p: (rng.random((4, n)) < density).astype(np.uint8) for p in owners}
    index = rng.integers(0, 4, (m, t))
    want = _plain_counts(cols, owners, index)
    # Public bounds: the smallest single-column count (what vertical mining uses).
    bounds = np.min([cols[p].sum(axis=1)[index[:, k]] for k, p in enumerate(owners)], axis=0)

    def party(net: Any, mine: np.ndarray) -> np.ndarray:
        return multiparty_and_counts(
            net,
            mine,
            owners=owners,
            index=index,
            bounds=bounds,
            sessions=_sessions(net),
            batch_cells=7 * n,  # several batches
        )

    for got in run_local(party, cols).values():
        assert np.array_equal(got, want)


@pytest.mark.parametrize(("t", "group"), [(2, None), (3, None), (3, 6000)])
def test_payload_model_matches_the_wire(
    t: int, group: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """:func:`multiparty_and_bytes` (what vertical mining reports) is the measured traffic
    less the message envelopes and the one-time OT setup."""
    if group is not None:
        monkeypatch.setattr(dpo, "OT_GROUP", group)
    rng = np.random.default_rng(t)
    n, m = 3000, 40
    owners = NAMES[:t]
    cols = {p: (rng.random((3, n)) < 0.5).astype(np.uint8) for p in owners}
    index = rng.integers(0, 3, (m, t))
    bounds = rng.integers(100, n, m)
    bounds = np.maximum(bounds, _plain_counts(cols, owners, index))

    def party(net: Any, mine: np.ndarray) -> np.ndarray:
        s = _sessions(net)
        for sess in s.values():
            sess.setup_both()
        return multiparty_and_counts(
            net, mine, owners=owners, index=index, bounds=bounds, sessions=s, batch_cells=13 * n
        )

    sim = simulate(party, cols)
    setup = simulate(
        lambda net, _: [s.setup_both() for s in _sessions(net).values()], dict.fromkeys(owners, 0)
    )
    sent = sum(x["bytes_sent"] for x in sim.totals.values())
    messages = sum(x["messages_sent"] for x in sim.totals.values())
    base = sum(x["bytes_sent"] for x in setup.totals.values())
    base_messages = sum(x["messages_sent"] for x in setup.totals.values())
    model = multiparty_and_bytes(n, index, bounds, batch_cells=13 * n)
    assert model <= sent - base <= model + 200 * (messages - base_messages)


def test_column_dot_products_many_columns() -> None:
    rng = np.random.default_rng(3)
    n = 2000
    x = (rng.random((12, n)) < 0.1).astype(np.uint8)
    y = (rng.random((5, n)) < 0.3).astype(np.uint8)
    pairs = np.stack([rng.integers(0, 12, 150), rng.integers(0, 5, 150)], axis=1)
    want = (x[pairs[:, 0]].astype(np.int64) * y[pairs[:, 1]]).sum(axis=1)

    def party(net: Any, cols: np.ndarray) -> np.ndarray:
        return column_dot_products(
            net,
            cols,
            x_party="alice",
            y_party="bob",
            pairs=pairs,
            bounds=np.full(150, n),
            session=OTSession(net, net.others[0]),
        )

    sim = simulate(party, {"alice": x, "bob": y})
    for got in sim.results.values():
        assert np.array_equal(got, want)
    # Traffic: IKNP's u for 5 distinct columns plus 11-bit corrections per product,
    # far below the 24 bytes per product and position of one OT per product.
    total = sum(t["bytes_sent"] for t in sim.totals.values())
    assert total < 150 * n * 2


def test_wide_counts_use_32_bit_rings() -> None:
    """Bounds above 2^16 switch the shares to uint32 and two-run packing."""
    n = 70_000
    x = np.ones((1, n), dtype=np.uint8)
    y = np.ones((1, n), dtype=np.uint8)
    y[0, :5] = 0

    def party(net: Any, cols: np.ndarray) -> np.ndarray:
        return column_dot_products(
            net,
            cols,
            x_party="alice",
            y_party="bob",
            pairs=np.array([[0, 0]]),
            bounds=np.array([n]),
            session=OTSession(net, net.others[0]),
        )

    for got in run_local(party, {"alice": x, "bob": y}).values():
        assert got.tolist() == [n - 5]


# -- bad peer messages -----------------------------------------------------------------------


def test_bad_corrections_raise_protocol_error() -> None:
    n = 300
    y = np.ones((1, n), dtype=np.uint8)

    def party(net: Any, _: Any) -> Any:
        s = OTSession(net, net.others[0])
        if net.me == "alice":  # a sender whose correction message is one byte short
            s.sender.random(n, length=16)
            net.send("bob", STEP_CORRECTIONS, np.zeros(packed_size(n, 9) - 1, np.uint8))
            return None
        return column_product_shares(
            net,
            sender="alice",
            receiver="bob",
            columns=np.array([0]),
            widths=np.array([9]),
            n=n,
            session=s,
            choices=y,
        )

    with pytest.raises(ProtocolError) as err:
        simulate(party, {"alice": 0, "bob": 0}, timeout=20)
    assert err.value.party == "alice" and err.value.step.endswith(STEP_CORRECTIONS)


@pytest.mark.parametrize("bad", ["range", "bound", "dtype"])
def test_bad_shares_raise_protocol_error(bad: str) -> None:
    widths = np.array([4, 4])
    bounds = np.array([3, 3])

    def party(net: Any, _: Any) -> Any:
        if net.me == "alice":
            share = {
                "range": np.array([16, 0], dtype=np.uint64),  # outside Z_16
                "bound": np.array([9, 0], dtype=np.uint64),  # opens to 9 > 3
                "dtype": np.array([1, 0], dtype=np.int64),
            }[bad]
            net.send("bob", "open", share)
            return None
        return open_shares(
            net, np.zeros(2, np.uint64), widths=widths, bounds=bounds, to=["alice"], step="open"
        )

    with pytest.raises(ProtocolError) as err:
        simulate(party, {"alice": 0, "bob": 0}, timeout=20)
    assert err.value.party == "alice"


# -- views -----------------------------------------------------------------------------------


def _view(fn: Callable[[Any, Any], Any], inputs: dict[str, Any], observer: str) -> bytes:
    """Everything ``observer`` receives in one run (in-process network)."""
    net = LocalNetwork(list(inputs), job_id=uuid.uuid4().hex, timeout=60)
    got: list[bytes] = []
    ep = net.endpoint(observer)
    original = ep.receive

    def spy(frm: str, step: str, **kw: Any) -> Any:
        value = original(frm, step, **kw)
        if isinstance(value, np.ndarray):
            got.append(np.ascontiguousarray(value).tobytes())
        elif isinstance(value, bytes):
            got.append(value)
        return value

    ep.receive = spy  # type: ignore[method-assign]
    simulate(fn, inputs, network=net, timeout=60)
    return b"".join(got)


def _distinguishable(fn: Any, a: dict, b: dict, observer: str, runs: int = 6) -> bool:
    """Whether ``observer``'s views under ``a`` and ``b`` differ (length or a chi-square
    test on byte frequencies at p < 1e-6)."""
    va = [_view(fn, a, observer) for _ in range(runs)]
    vb = [_view(fn, b, observer) for _ in range(runs)]
    if sorted(map(len, va)) != sorted(map(len, vb)):
        return True
    ha = np.bincount(np.frombuffer(b"".join(va), np.uint8), minlength=256)
    hb = np.bincount(np.frombuffer(b"".join(vb), np.uint8), minlength=256)
    keep = (ha + hb) > 0
    if keep.sum() < 2:
        return not np.array_equal(ha, hb)
    return bool(chi2_contingency(np.vstack([ha[keep], hb[keep]])).pvalue < 1e-6)


@pytest.fixture
def zero_pads(monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """Weaken the protocol: every pad derived from the OT keys becomes 0."""

    def weaken() -> None:
        real, real_stacked = dpo._pads, dpo._stacked_pads

        def zeros(keys: np.ndarray, *args: Any) -> np.ndarray:
            return np.zeros_like(real(keys, *args))

        def stacked_zeros(keys: Any, *args: Any) -> np.ndarray:
            return np.zeros_like(real_stacked(keys, *args))

        monkeypatch.setattr(dpo, "_pads", zeros)
        monkeypatch.setattr(dpo, "_stacked_pads", stacked_zeros)

    return weaken


def _pair_fn(n: int, m: int) -> Callable[[Any, Any], Any]:
    columns = np.zeros(m, dtype=np.int64)
    widths = np.full(m, 12)

    def fn(net: Any, mine: np.ndarray) -> Any:
        s = OTSession(net, net.others[0])
        kw = {"values": mine} if net.me == "alice" else {"choices": mine}
        return column_product_shares(
            net,
            sender="alice",
            receiver="bob",
            columns=columns,
            widths=widths,
            n=n,
            session=s,
            elementwise=True,
            **kw,
        )

    return fn


def test_receiver_view_independent_of_sender_values(zero_pads: Callable[[], None]) -> None:
    n, m = 512, 8
    fn = _pair_fn(n, m)
    y = np.ones((1, n), dtype=np.uint8)
    xa = np.zeros((m, n), dtype=np.uint16)
    xb = np.full((m, n), 0xABC, dtype=np.uint16)
    a, b = {"alice": xa, "bob": y}, {"alice": xb, "bob": y}
    assert not _distinguishable(fn, a, b, "bob")
    zero_pads()
    assert _distinguishable(fn, a, b, "bob")


def test_sender_view_independent_of_choices() -> None:
    n, m = 512, 4
    fn = _pair_fn(n, m)
    x = np.ones((m, n), dtype=np.uint16)
    a = {"alice": x, "bob": np.zeros((1, n), dtype=np.uint8)}
    b = {"alice": x, "bob": np.ones((1, n), dtype=np.uint8)}
    assert not _distinguishable(fn, a, b, "alice")


def test_dot_product_views_depend_only_on_counts(zero_pads: Callable[[], None]) -> None:
    """The two-party mining path (sums opened): bob's view is the same for alice's
    columns with the same dot products; with the pads zeroed it is not."""
    n = 512
    pairs = np.array([[0, 0], [1, 0], [1, 1]])
    bounds = np.full(3, n)

    def fn(net: Any, cols: np.ndarray) -> Any:
        return column_dot_products(
            net,
            cols,
            x_party="alice",
            y_party="bob",
            pairs=pairs,
            bounds=bounds,
            session=OTSession(net, net.others[0]),
        )

    y = np.zeros((2, n), dtype=np.uint8)
    y[0, :256] = 1
    y[1, 128:384] = 1
    xa = np.zeros((2, n), dtype=np.uint8)
    xa[:, :64] = 1
    xb = xa.copy()
    xb[:, 400:] = 1  # where bob's columns are 0: the same dot products 64, 64, 0
    a, b = {"alice": xa, "bob": y}, {"alice": xb, "bob": y}
    assert run_local(fn, a)["bob"].tolist() == run_local(fn, b)["bob"].tolist()
    assert not _distinguishable(fn, a, b, "bob")
    zero_pads()
    assert _distinguishable(fn, a, b, "bob")


def test_three_party_views_depend_only_on_counts(zero_pads: Callable[[], None]) -> None:
    """Settings with the same observer input and the same AND counts but different
    columns of the others: bob (chooser of step 1) and carol (chooser of step 2) see the
    same view distributions; with the pads zeroed they do not. (1024 positions: the
    corrections travel as bit planes, so a dropped pad shows in fewer bytes than when
    every value had its own byte; at 256 the chi-square test of the weakened protocol
    sat near its 1e-6 threshold.)"""
    n = 1024
    owners = ["alice", "bob", "carol"]
    index = np.zeros((4, 3), dtype=np.int64)
    bounds = np.full(4, n)

    def fn(net: Any, mine: np.ndarray) -> Any:
        return multiparty_and_counts(
            net, mine, owners=owners, index=index, bounds=bounds, sessions=_sessions(net)
        )

    ones = np.ones((1, n), dtype=np.uint8)
    first = np.zeros((1, n), dtype=np.uint8)
    first[0, :100] = 1
    for_bob = (
        {"alice": ones, "bob": first, "carol": ones},
        {"alice": first, "bob": first, "carol": ones},
    )
    for_carol = (
        {"alice": ones, "bob": ones, "carol": first},
        {"alice": first, "bob": first, "carol": first},
    )
    for a, b in (for_bob, for_carol):
        assert run_local(fn, a)["alice"].tolist() == run_local(fn, b)["alice"].tolist() == [100] * 4
    assert not _distinguishable(fn, *for_bob, "bob", runs=4)
    assert not _distinguishable(fn, *for_carol, "carol", runs=4)
    zero_pads()
    assert _distinguishable(fn, *for_bob, "bob", runs=3)
    assert _distinguishable(fn, *for_carol, "carol", runs=3)


# -- noisy opening and thresholds on shares (issue 21) ---------------------------------------


def test_two_sided_geometric_has_the_discrete_laplace_law() -> None:
    """Frequencies of ``X`` against ``P(X = x) = (1 - r) / (1 + r) r^|x|`` (chi-square,
    p > 1e-4); a sampler with another scale (or none) fails the same test."""
    from scipy.stats import chisquare

    scale = Fraction(3, 2)
    x = two_sided_geometric(scale, 6000)
    r = math.exp(-1 / 1.5)
    support = np.arange(-8, 9)
    pmf = (1 - r) / (1 + r) * r ** np.abs(support)
    tail = 1 - pmf.sum()

    def pvalue(sample: np.ndarray) -> float:
        obs = np.array([(sample == v).sum() for v in support] + [(np.abs(sample) > 8).sum()])
        exp = np.append(pmf, tail) * len(sample)
        return float(chisquare(obs, exp).pvalue)

    assert pvalue(x) > 1e-4
    assert pvalue(two_sided_geometric(Fraction(3), 6000)) < 1e-4
    assert pvalue(np.zeros(6000, dtype=np.int64)) < 1e-4
    assert (two_sided_geometric(Fraction(1, 1000), 200) == 0).all()  # P(X != 0) < 1e-400


@pytest.mark.parametrize("t", [2, 3])
def test_noisy_counts_are_the_counts_plus_every_owners_noise(
    t: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the sampler replaced by known values, the opened counts are the true counts
    plus the sum of every owner's noise (negative noise and wrap-around included)."""
    owners = NAMES[:t]
    rng = np.random.default_rng(t)
    n = 40
    cols = {p: (rng.random((2, n)) < 0.7).astype(np.uint8) for p in owners}
    index = rng.integers(0, 2, (5, t))
    want = _plain_counts(cols, owners, index)
    noise = {p: rng.integers(-50, 50, 5) for p in owners}
    monkeypatch.setattr(
        gmw,
        "two_sided_geometric",
        lambda scale, size: noise[threading.current_thread().name.removeprefix("ppdm-")],
    )

    def party(net: Any, mine: np.ndarray) -> np.ndarray:
        return multiparty_and_counts(
            net,
            mine,
            owners=owners,
            index=index,
            bounds=[n] * 5,
            sessions=_sessions(net),
            noise_scale=Fraction(2),
        )

    total = sum(noise.values())
    for got in run_local(party, cols).values():
        assert np.array_equal(got, want + total)
    assert noisy_width(n, t, Fraction(2)) == (n + t * 80).bit_length() + 1


def test_noisy_view_of_a_coalition_is_private(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two owners, one count of 0 or 1 (bob's single bit); alice, the coalition of all
    but bob, knows her own noise. Her best guess of bob's bit from the opened value is
    right with probability at most ``e^eps / (1 + e^eps)``, here 0.62 for eps = 1/2
    (+ 4 standard deviations over 400 runs); with bob's noise removed she is always
    right."""

    def accuracy(quiet: bool) -> float:
        bits = np.random.default_rng(11).integers(0, 2, 400)
        monkeypatch.setattr(
            gmw,
            "two_sided_geometric",
            lambda scale, size: (
                np.zeros(size, np.int64)
                if quiet or threading.current_thread().name == "ppdm-alice"
                else sampler(scale, size)
            ),
        )
        bob = np.zeros((400, 3), np.uint8)
        bob[:, 0] = bits  # count c is bob's bit c
        cols = {"alice": np.ones((1, 3), np.uint8), "bob": bob}
        index = np.stack([np.zeros(400, np.int64), np.arange(400)], axis=1)

        def party(net: Any, mine: np.ndarray) -> np.ndarray:
            return multiparty_and_counts(
                net,
                mine,
                owners=["alice", "bob"],
                index=index,
                bounds=[1] * 400,
                sessions=_sessions(net),
                noise_scale=Fraction(2),
            )

        opened = run_local(party, cols)["alice"]
        return float(np.mean((opened >= 1) == (bits == 1)))

    sampler = gmw.two_sided_geometric
    p = math.exp(0.5) / (1 + math.exp(0.5))
    assert accuracy(quiet=False) <= p + 4 * math.sqrt(p * (1 - p) / 400)
    assert accuracy(quiet=True) == 1.0


@settings(max_examples=12, deadline=None)
@given(st.integers(2, 4), st.integers(1, 30), st.integers(0, 2**32 - 1))
def test_shares_at_least_decides_the_threshold(t: int, n: int, seed: int) -> None:
    """``[count >= threshold]`` from the shares, for 2-4 owners, thresholds at, below and
    above the counts (ties count as reached), per-candidate ring sizes."""
    rng = np.random.default_rng(seed)
    owners = NAMES[:t]
    cols = {p: (rng.random((3, n)) < 0.8).astype(np.uint8) for p in owners}
    index = rng.integers(0, 3, (9, t))
    want = _plain_counts(cols, owners, index)
    thresholds = np.clip(want + np.tile([-1, 0, 1], 3), 0, n)
    ring = 2 * np.maximum(n, thresholds) + 1

    def party(net: Any, mine: np.ndarray) -> np.ndarray:
        s = _sessions(net)
        share, widths = multiparty_and_shares(
            net, mine, owners=owners, index=index, bounds=ring, sessions=s
        )
        peer = {"alice": "bob", "bob": "alice"}.get(net.me)
        return shares_at_least(
            net,
            share,
            widths=widths,
            thresholds=thresholds,
            owners=owners,
            session=s[peer] if peer else None,
        )

    for got in run_local(party, cols).values():
        assert np.array_equal(got, want >= thresholds)


@pytest.mark.parametrize("bad", ["reshare", "noisy"])
def test_bad_threshold_and_noisy_messages_raise_protocol_error(bad: str) -> None:
    widths = np.array([5, 5])

    def party(net: Any, _: Any) -> Any:
        me = net.me
        if bad == "noisy":
            if me == "alice":  # opens far outside [-B, n + B] for scale 1, n = 3
                net.send("bob", STEP_NOISY, np.array([1 << 19, 0], dtype=np.uint64))
                return None
            return open_noisy(
                net,
                np.zeros(2, np.uint64),
                width=20,
                n=3,
                owners=["alice", "bob"],
                scale=Fraction(1),
            )
        if bad == "reshare":
            if me == "carol":
                net.send("alice", f"{STEP_THRESHOLD}/reshare", np.array([99, 0], np.uint64))
                return None
            if me == "bob":
                return None
        session = OTSession(net, "bob")
        owners = ["alice", "bob", "carol"] if bad == "reshare" else ["alice", "bob"]
        return shares_at_least(
            net,
            np.zeros(2, np.uint64),
            widths=widths,
            thresholds=np.array([1, 1]),
            owners=owners,
            session=session,
        )

    inputs = {"alice": 0, "bob": 0, "carol": 0} if bad == "reshare" else {"alice": 0, "bob": 0}
    with pytest.raises(ProtocolError) as err:
        simulate(party, inputs, timeout=20)
    assert err.value.party == {"reshare": "carol", "noisy": "alice"}[bad]


def test_a_third_owners_share_reaches_neither_evaluator_whole() -> None:
    """In the threshold test a third owner splits its share between the two evaluating
    owners: what each of them receives must be a fresh uniform half, never the share
    itself (otherwise one evaluator holds two of three shares). carol's share is a known
    constant here; a uniform 20-bit half equals it in all 64 places with probability
    2^-1280."""
    owners = ["alice", "bob", "carol"]
    m, w = 64, 20
    widths = np.full(m, w)
    carol_share = np.full(m, 12345, dtype=np.uint64)
    seen: dict[str, np.ndarray] = {}

    def party(net: Any, _: Any) -> Any:
        me = net.me
        share = carol_share if me == "carol" else np.zeros(m, dtype=np.uint64)
        if me in ("alice", "bob"):
            inner = net.receive

            def spy(sender: str, step: str, **kw: Any) -> Any:
                got = inner(sender, step, **kw)
                if sender == "carol" and step.endswith("/reshare"):
                    seen[me] = np.asarray(got).copy()
                return got

            net.receive = spy  # type: ignore[method-assign]
        peer = {"alice": "bob", "bob": "alice"}.get(me)
        return shares_at_least(
            net,
            share,
            widths=widths,
            thresholds=np.zeros(m, dtype=np.int64),
            owners=owners,
            session=OTSession(net, peer) if peer else None,
        )

    run_local(party, {p: None for p in owners})
    assert set(seen) == {"alice", "bob"}
    for me in ("alice", "bob"):
        assert not np.array_equal(seen[me], carol_share), me
    assert not np.array_equal(seen["alice"], seen["bob"])
