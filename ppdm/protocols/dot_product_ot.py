"""OT-based secure dot product of binary vectors, and AND of bit vectors.

Party ``x_party`` holds bits ``x``, party ``y_party`` bits ``y`` (same length ``n``); they
learn ``x . y = sum_i x_i y_i`` -- both, one of them, or as additive shares mod
``2^ring_bits`` -- or XOR shares of the bitwise AND ``x AND y``. Aggarwal 2015, §20.5:
"the scalar dot product of the binary representation of an itemset and a transaction can
be used to determine whether or not that itemset is supported by that transaction"; for
vertically partitioned association mining the support of an itemset split over two
parties is the dot product of the two parties' AND-ed item columns, and this is the fast
path for it (OTs instead of ``n`` Paillier encryptions per candidate).

Construction: Gilboa's OT-based multiplication (Gilboa, "Two party RSA key generation",
CRYPTO 1999) with one-bit multipliers needs a single correlated OT per product, as in
the COT-based arithmetic of Demmler, Schneider, Zohner, "ABY", NDSS 2015, section III-C:
for every ``i`` the ``x_party`` is the sender of an IKNP correlated OT
(:class:`~ppdm.protocols.ot.extension.IKNPSender`) with correlation ``Delta_i = x_i``, the
``y_party`` the receiver with choice bit ``y_i``. The sender gets a random ``s_i``, the
receiver ``s_i + y_i x_i`` (mod ``2^k``). Summing, ``-sum s_i`` and ``sum (s_i + y_i x_i)``
are additive shares of ``x . y``. For AND, the bit-correlated OT gives XOR shares
``s_i`` and ``s_i XOR x_i y_i`` directly.

Security (semi-honest, two parties)
-----------------------------------
- The ``x_party`` sees only the sender's side of OTs: nothing about ``y``. The
  ``y_party`` sees ``s_i + y_i x_i`` with ``s_i`` pseudorandom: nothing about ``x``.
- Outputs: the dot product (or its shares) only. Note that a dot product reveals by its
  nature something about the other vector (``x . y`` with ``y = e_i`` is ``x_i``); that
  is the function, not the protocol, and callers should choose what to reveal (e.g.
  shares fed into a secure comparison with the support threshold).
- Wrong message types or shapes raise :class:`~ppdm.errors.ProtocolError`.

Many dot products over shared columns (:func:`column_dot_products`, the vertical mining
path): one random OT per distinct column of the ``y_party`` and position serves every
product over that column, each product's pads hashed from the IKNP rows and its correction
sent as ``l`` bit planes, ``l`` the bits of a public bound of the product
(:func:`column_product_shares`); about ``l / 8`` bytes per product and position (``l`` ~
10 to 16) instead of 24. A :class:`ColumnOTs` keeps a column's random OTs for later
calls (vertical mining's next levels), each call's pads under tweaks never used before.
:mod:`ppdm.protocols.gmw` chains the same products over three or more parties.
(:func:`pack_uint` and its inverses pack values to ``width`` bits each.)

Cost: ``n`` IKNP OTs: ``16 n`` bytes (``u``, ``y_party -> x_party``) plus
``n * ring_bits / 8`` bytes of corrections back (``n / 8`` for AND), one round trip
(after the 128 base OTs of the session's setup); the reveal adds 8 bytes per dot
product per direction. For ``n = 100,000`` with 32-bit shares: ~2 MB.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping, Sequence
from itertools import pairwise

import numpy as np

from ppdm.errors import ProtocolError
from ppdm.parties.network import Network
from ppdm.protocols.column_ots import (
    ColumnOTs,
    Segment,
    Step,
    attach,
    batch_members,
    check_kept,
    column_sums,
    gather_uint,
    pack_uint,
    packed_size,
    plane_matrix,
    planes,
    planes_size,
    schedule,
    segment_corrections,
    segment_pad_sums,
    segment_sums,
    segments,
    unpack_uint,
    unplanes,
)
from ppdm.protocols.column_ots import pads as _pads
from ppdm.protocols.column_ots import stacked_pads as _stacked_pads
from ppdm.protocols.ot.bits import pack
from ppdm.protocols.ot.crhash import BLOCK
from ppdm.protocols.ot.extension import DEFAULT_CHUNK, IKNPReceiver, IKNPSender, OTSession

__all__ = [
    "ColumnOTs",
    "binary_dot_product",
    "binary_dot_product_shares",
    "bit_widths",
    "chooser_product_shares",
    "column_dot_products",
    "column_product_bytes",
    "column_product_shares",
    "gather_uint",
    "open_shares",
    "pack_uint",
    "packed_size",
    "secure_and_shares",
    "unpack_uint",
]

STEP_REVEAL = "dot/reveal"

_RING_DTYPES = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


def check_two_party_roles(net: Network, x_party: str, y_party: str) -> str:
    """Check that this party is one of two distinct job parties ``x_party`` and ``y_party``;
    return the other one (shared by the two-party OT protocols)."""
    if x_party == y_party:
        raise ValueError("x_party and y_party must differ")
    for p in (x_party, y_party):
        if p not in net.parties:
            raise ValueError(f"unknown party {p!r}")
    if net.me not in (x_party, y_party):
        raise ValueError(f"party {net.me!r} is neither the x_party nor the y_party")
    return y_party if net.me == x_party else x_party


def _as_bits(bits: np.ndarray) -> np.ndarray:
    b = np.asarray(bits)
    if b.ndim < 1 or (b.dtype not in (np.bool_,) and not np.issubdtype(b.dtype, np.integer)):
        raise ValueError("bits must be an array of 0/1 integers or booleans")
    b = b.astype(np.uint8)
    if b.size and int(b.max()) > 1:
        raise ValueError("bits must be 0 or 1")
    return b


def _sender(net: Network, peer: str, session: OTSession | None) -> IKNPSender:
    return session.sender if session is not None else IKNPSender.setup(net, peer)


def _receiver(net: Network, peer: str, session: OTSession | None) -> IKNPReceiver:
    return session.receiver if session is not None else IKNPReceiver.setup(net, peer)


def binary_dot_product_shares(
    net: Network,
    bits: np.ndarray,
    *,
    x_party: str,
    y_party: str,
    ring_bits: int = 64,
    session: OTSession | None = None,
) -> np.ndarray:
    """Additive shares mod ``2^ring_bits`` of the dot products of binary vectors.

    ``bits`` is this party's ``(..., n)`` array of 0/1; the dot products are taken
    along the last axis, so a ``(c, n)`` array gives ``c`` dot products in one batch (e.g.
    ``c`` candidate itemsets over ``n`` transactions). Returns this party's shares as a
    uint64 array of shape ``bits.shape[:-1]``; the two parties' shares add up to the
    dot products mod ``2^ring_bits`` (8, 16, 32 or 64).
    """
    peer = check_two_party_roles(net, x_party, y_party)
    dtype = _RING_DTYPES.get(ring_bits)
    if dtype is None:
        raise ValueError("ring_bits must be 8, 16, 32 or 64")
    b = _as_bits(bits)
    flat = b.reshape(-1)
    mask = np.uint64((1 << ring_bits) - 1)
    if net.me == x_party:
        x0 = _sender(net, peer, session).correlated(flat.astype(dtype))
        total = np.atleast_1d(x0.astype(np.uint64).reshape(b.shape).sum(axis=-1, dtype=np.uint64))
        return (np.negative(total) & mask).reshape(b.shape[:-1])
    got = _receiver(net, peer, session).correlated(flat, dtype=dtype)
    total = np.atleast_1d(got.astype(np.uint64).reshape(b.shape).sum(axis=-1, dtype=np.uint64))
    return (total & mask).reshape(b.shape[:-1])


def binary_dot_product(
    net: Network,
    bits: np.ndarray,
    *,
    x_party: str,
    y_party: str,
    reveal_to: str | None = None,
    session: OTSession | None = None,
) -> np.ndarray | None:
    """Dot products of binary vectors (see :func:`binary_dot_product_shares`), revealed
    to both parties or only to ``reveal_to`` (the other gets ``None``). Returns an int64
    array of shape ``bits.shape[:-1]`` (0-d for 1-D input).

    Examples
    --------
    >>> from ppdm.parties.local import run_local
    >>> def party(net, v):
    ...     return binary_dot_product(net, np.array(v), x_party="alice", y_party="bob")
    >>> out = run_local(party, {"alice": [1, 1, 0, 1, 1], "bob": [1, 0, 0, 1, 1]})
    >>> int(out["alice"]), int(out["bob"])
    (3, 3)
    """
    peer = check_two_party_roles(net, x_party, y_party)
    if reveal_to is not None and reveal_to not in (x_party, y_party):
        raise ValueError("reveal_to must be None, the x_party or the y_party")
    b = _as_bits(bits)
    if b.shape[-1] >= (1 << 62):
        raise ValueError("vectors too long")  # pragma: no cover
    share = binary_dot_product_shares(
        net, b, x_party=x_party, y_party=y_party, ring_bits=64, session=session
    )
    flat = np.atleast_1d(share).reshape(-1)
    if reveal_to is None or reveal_to == peer:
        net.send(peer, STEP_REVEAL, flat)
    if reveal_to is None or reveal_to == net.me:
        got = net.receive(peer, STEP_REVEAL, expect=np.ndarray)
        if got.dtype != np.uint64 or got.shape != flat.shape:
            raise ProtocolError(
                peer,
                STEP_REVEAL,
                f"expected {flat.shape} uint64 shares, got {got.dtype}{got.shape}",
            )
        total = (flat + got).view(np.int64)
        n = b.shape[-1]
        if total.size and (int(total.min()) < 0 or int(total.max()) > n):
            raise ProtocolError(peer, STEP_REVEAL, f"shares do not open to a count in [0, {n}]")
        return total.reshape(share.shape)
    return None


def secure_and_shares(
    net: Network,
    bits: np.ndarray,
    *,
    x_party: str,
    y_party: str,
    session: OTSession | None = None,
) -> np.ndarray:
    """XOR shares of the bitwise AND of two bit arrays of the same shape (one
    bit-correlated OT per bit). Returns this party's uint8 0/1 share array.

    Examples
    --------
    >>> from ppdm.parties.local import run_local
    >>> def party(net, v):
    ...     return secure_and_shares(net, np.array(v), x_party="a", y_party="b")
    >>> out = run_local(party, {"a": [0, 1, 1, 0], "b": [0, 0, 1, 1]})
    >>> (out["a"] ^ out["b"]).tolist()
    [0, 0, 1, 0]
    """
    peer = check_two_party_roles(net, x_party, y_party)
    b = _as_bits(bits)
    flat = b.reshape(-1)
    if net.me == x_party:
        return _sender(net, peer, session).correlated_bits(flat).reshape(b.shape)
    return _receiver(net, peer, session).correlated_bits(flat).reshape(b.shape)


# ---------------------------------------------------------------------------------------
# Many dot products between two parties' columns: one OT per choice bit, many correlations

#: Largest correction message of :func:`column_product_shares` (bytes, before packing).
MAX_CORRECTION_BYTES = 8 << 20
#: OTs per IKNP batch of :func:`column_product_shares` (whole receiver columns, at least
#: one): a batch's IKNP rows take 16 bytes per OT at the receiver (two batches held), 32 at the
#: sender.
OT_GROUP = 1 << 20

STEP_CORRECTIONS = "cdot/d"
STEP_COLUMN_REVEAL = "cdot/reveal"


def bit_widths(bounds: np.ndarray) -> np.ndarray:
    """Bits needed for a count in ``[0, bound]``: ``max(1, bound.bit_length())`` each.

    >>> bit_widths(np.array([0, 1, 255, 256, 59600])).tolist()
    [1, 1, 8, 9, 16]
    """
    v = np.asarray(bounds, dtype=np.int64).reshape(-1).copy()
    if v.size and int(v.min()) < 0:
        raise ValueError("bounds must be non-negative")
    bits = np.zeros(v.shape, dtype=np.int64)
    for shift in (32, 16, 8, 4, 2, 1):  # binary search for the highest set bit
        high = v >= (1 << shift)
        bits[high] += shift
        v[high] >>= shift
    return np.maximum(bits + (v > 0), 1)


def _ring(widths: np.ndarray) -> np.dtype:
    top = int(widths.max()) if widths.size else 1
    if top > 32:
        raise ValueError("counts above 2^32 are not supported")
    return np.dtype(np.uint16 if top <= 16 else np.uint32)


def _plan(columns: np.ndarray, widths: np.ndarray, n: int, itemsize: int) -> list:
    """The public processing plan both parties derive from the public ``columns`` and
    ``widths``: per distinct receiver column (in sorted order) the products using it
    (sorted by width), their runs of equal width, and the row chunks that keep one
    correction message under :data:`MAX_CORRECTION_BYTES`. (The boundaries of columns
    and runs are found in one pass over the sorted products; the loop below only reads
    them.)"""
    m = len(columns)
    if not m:
        return []
    order = np.lexsort((np.arange(m), widths, columns))
    cs, ws = columns[order], widths[order]
    new_col = np.concatenate([[True], cs[1:] != cs[:-1]])
    new_run = new_col | np.concatenate([[True], ws[1:] != ws[:-1]])
    col_starts = [*np.flatnonzero(new_col).tolist(), m]
    run_starts = [*np.flatnonzero(new_run).tolist(), m]
    col_of, width_of = cs.tolist(), ws.tolist()
    plan = []
    r = 0
    for a, b in pairwise(col_starts):
        runs = []
        while run_starts[r] < b:  # every column start is a run start
            s, e = run_starts[r], run_starts[r + 1]
            runs.append((s - a, e - a, width_of[s]))
            r += 1
        rows = max(1, MAX_CORRECTION_BYTES // max(1, itemsize * (b - a)))
        chunks = [(x, min(rows, n - x)) for x in range(0, n, rows)]
        plan.append((col_of[a], order[a:b], runs, chunks))
    return plan


def _check_public(columns: np.ndarray, widths: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    cols = np.asarray(columns, dtype=np.int64).reshape(-1)
    w = np.asarray(widths, dtype=np.int64).reshape(-1)
    if cols.shape != w.shape:
        raise ValueError("columns and widths must have the same length")
    if cols.size and (int(cols.min()) < 0 or int(w.min()) < 1 or int(w.max()) > 32):
        raise ValueError("columns must be >= 0 and widths in [1, 32]")
    if n < 1:
        raise ValueError("vectors must not be empty")
    return cols, w


def column_product_shares(
    net: Network,
    *,
    sender: str,
    receiver: str,
    columns: np.ndarray,
    widths: np.ndarray,
    n: int,
    session: OTSession,
    values: np.ndarray | None = None,
    choices: np.ndarray | None = None,
    elementwise: bool = False,
    kept: ColumnOTs | None = None,
    labels: Sequence[Hashable] | None = None,
) -> np.ndarray:
    """Additive shares of ``m`` products ``values[c] * choices[columns[c]]`` (element by
    element over ``n`` positions), product ``c`` modulo ``2^widths[c]``, with one random
    OT per *distinct* receiver column and position, however many products use it.

    Public (both parties pass the same): ``columns`` (``m`` receiver column indices),
    ``widths`` (``m`` ring sizes in bits, at most 32) and ``n``. The ``sender`` passes
    ``values``, an ``(m, n)`` array of integers (taken modulo ``2^widths[c]``; 0/1 for a
    dot product); the ``receiver`` passes ``choices``, a ``(p, n)`` array of 0/1 with a
    row for every column index used. Returns this party's shares: ``(m,)`` uint64 sums
    over the ``n`` positions (the dot products' shares), or with ``elementwise=True`` the
    ``(m, n)`` per-position shares (uint16 or uint32). Shares of the two parties add up to
    the products modulo ``2^widths[c]``; each party's shares alone are uniformly random.
    ``kept`` (both parties, or neither): this party's :class:`ColumnOTs` over ``session``,
    with ``labels``, one public label per receiver column index: columns kept from
    earlier calls take no new OTs, and the new ones are kept for later calls.

    Construction ("one OT, many correlations"): for every distinct receiver column ``j``
    and position ``i`` one IKNP random OT with choice bit ``y_{j,i}``, taken as IKNP's
    unhashed rows (:meth:`IKNPSender.raw_rows`): the sender gets ``q_{j,i}`` and ``s``, the
    receiver ``t_{j,i} = q_{j,i} XOR y_{j,i} s``. Every product ``c`` on column ``j`` gets
    its own pads straight from the rows, ``h^0_{c,i} = H((o, sigma, b_c), q_{j,i})`` and
    ``h^1_{c,i} = H((o, sigma, b_c), q_{j,i} XOR s)`` (the fixed-key AES TCCR hash of
    :func:`~ppdm.protocols.ot.crhash.tccr_expand` under the tweak of the OT's own index
    ``o``, the IKNP session's tag ``sigma`` and output blocks ``b_c`` no other pad of the
    column took: how IKNP derives its own outputs, one hash layer per pad; the receiver's
    ``H((o, sigma, b_c), t_{j,i})`` is ``h^{y}_{c,i}``; :class:`ColumnOTs` states why no
    tweak repeats), and the sender sends the correction ``d_{c,i} = h^0_{c,i} - h^1_{c,i}
    + x_{c,i}`` packed to ``widths[c]`` bits. The receiver's share ``h^{y}_{c,i} +
    y_{j,i} d_{c,i} = h^0_{c,i} + y_{j,i} x_{c,i}``, the sender's ``-h^0_{c,i}``: Gilboa's
    OT multiplication (CRYPTO 1999) as the correlated OT of Asharov, Lindell, Schneider
    and Zohner (CCS 2013), whose random OTs are stretched into a long correlation vector
    (the standard random OT on long strings), one entry per product; ABY (Demmler,
    Schneider and Zohner, NDSS 2015, section III-C) makes its arithmetic multiplication
    triples from the same correlated OTs.

    Security (semi-honest): the sender sees only IKNP's ``u`` (nothing about the
    choices); the receiver sees corrections masked by ``h^{1-y}``, the pad of the output
    it did not choose (a hash of ``t XOR s``, ``s`` unknown to it), which is pseudorandom
    to it (IKNP plus the correlation robustness of the hash): nothing about ``values``.
    Corrections of a wrong size or type raise :class:`~ppdm.errors.ProtocolError`.

    Cost: ``16 n`` bytes receiver -> sender per distinct column not kept (IKNP's ``u``,
    one IKNP batch per :data:`OT_GROUP` OTs of whole columns, the next batch's ``u`` sent
    before the current corrections are read) plus ``widths[c] * ceil(n / 8)`` bytes
    sender -> receiver per product (its corrections as bit planes), in messages of at
    most :data:`MAX_CORRECTION_BYTES`: one round trip of latency. The receiver ANDs the
    planes with its packed choice bits and counts the ones (``np.bitwise_count``): only
    the positions it chose count, and no value is unpacked. Sums (``elementwise=False``)
    take consecutive columns a :class:`~ppdm.protocols.column_ots.Segment` at a time
    (about :data:`~ppdm.protocols.column_ots.SEGMENT_BYTES` of pads, one message): the
    same pads and bytes as column by column, in fewer numpy calls; 0/1 ``values`` are
    added to the bit planes of ``h0 - h1`` with a ripple carry.
    """
    if sender == receiver or net.me not in (sender, receiver):
        raise ValueError("this party must be exactly one of sender and receiver")
    cols, w = _check_public(columns, widths, n)
    m = len(cols)
    dtype = _ring(w)
    item = dtype.itemsize
    masks64 = (np.uint64(1) << w.astype(np.uint64)) - np.uint64(1)
    masks = masks64.astype(dtype)
    plan = _plan(cols, w, n, item)
    out: np.ndarray = np.zeros((m, n), dtype=dtype) if elementwise else np.zeros(m, dtype=np.uint64)
    if not m:
        return out
    if net.me == sender:
        if values is None:
            raise ValueError("the sender must pass values")
        x_all = np.asarray(values)
        if x_all.shape != (m, n) or not (
            x_all.dtype == np.bool_ or np.issubdtype(x_all.dtype, np.integer)
        ):
            raise ValueError(f"values must be an ({m}, {n}) integer array")
        check_kept(kept, session, labels)
        ot = session.sender
        steps, sizes = schedule(plan, n, item, labels, kept, True, _columns_per_group(n))
        batches = batch_members(steps, len(sizes))
        bits = x_all.dtype == np.bool_ or (x_all.dtype == np.uint8 and not (x_all > 1).any())
        for unit in range(len(plan)) if elementwise else segments(plan, w, n, item):
            for i in unit.members if isinstance(unit, Segment) else (unit,):
                if steps[i].slot == 0 and steps[i].batch >= 0:  # a batch's OTs, as IKNP rows
                    attach(batches[steps[i].batch], ot.raw_rows(sizes[steps[i].batch] * n), n)
            if isinstance(unit, Segment):  # its columns' corrections in one message
                h0 = _segment_pads(unit, steps, dtype, n, 0)
                h1 = _segment_pads(unit, steps, dtype, n, 1)
                wire = segment_corrections(h0, h1, x_all, unit, n, bits=bits)
                net.send(receiver, STEP_CORRECTIONS, wire)  # before its own sums
                out[unit.products] += segment_pad_sums(h0, unit)
                continue
            (_, run, runs, chunks), step = plan[unit], steps[unit]
            col = step.column
            k = len(run)
            mk = masks[run][:, None]
            blocks = -(-k * item // BLOCK)
            for r0, rn in chunks:
                at = col.indices(r0, rn)
                h0 = _pads(col.keys[0][r0 : r0 + rn], at, col.session, blocks, dtype, step.block)
                h1 = _pads(col.keys[1][r0 : r0 + rn], at, col.session, blocks, dtype, step.block)
                # d = h0 - h1 + x, position by position; only the low widths[c] bits of
                # product c go on the wire (its bit planes)
                d = plane_matrix(rn, h0.shape[1], dtype)
                np.subtract(h0, h1, out=d[:rn])
                dt = d[:rn].T[:k]  # the products' columns (numpy loops over the positions)
                np.add(dt, x_all[run, r0 : r0 + rn], out=dt, casting="unsafe")
                net.send(receiver, STEP_CORRECTIONS, planes(d, rn, runs))
                if elementwise:
                    out[run, r0 : r0 + rn] = np.negative(h0.T[:k]) & mk
                else:
                    out[run] += column_sums(h0, k)
            if not step.keep:
                col.keys = ()
        if not elementwise:
            out = np.negative(out) & masks64
        return out
    if choices is None:
        raise ValueError("the receiver must pass choices")
    return chooser_product_shares(
        net,
        senders=[sender],
        columns=cols,
        widths=w,
        n=n,
        sessions={sender: session},
        choices=choices,
        elementwise=elementwise,
        kept=None if kept is None else {sender: kept},
        labels=labels,
    )[0]


def chooser_product_shares(
    net: Network,
    *,
    senders: Sequence[str],
    columns: np.ndarray,
    widths: np.ndarray,
    n: int,
    sessions: Mapping[str, OTSession],
    choices: np.ndarray,
    elementwise: bool = False,
    kept: Mapping[str, ColumnOTs] | None = None,
    labels: Sequence[Hashable] | None = None,
) -> list[np.ndarray]:
    """The receiver's side of :func:`column_product_shares` with several senders at once
    (each multiplying its own values by the same choice columns): the ``u`` matrices go
    out to every sender first and the corrections are taken in turn, column by column,
    so the senders compute in parallel. Returns one share array per sender. ``kept``:
    this party's :class:`ColumnOTs` with every sender (and the columns' ``labels``)."""
    cols, w = _check_public(columns, widths, n)
    m = len(cols)
    dtype = _ring(w)
    item = dtype.itemsize
    masks64 = (np.uint64(1) << w.astype(np.uint64)) - np.uint64(1)
    plan = _plan(cols, w, n, item)
    y = _as_bits(choices)
    if m and (y.ndim != 2 or y.shape[1] != n or y.shape[0] <= int(cols.max())):
        raise ValueError(f"choices must be a (p, {n}) bit array covering every column")
    outs = [
        np.zeros((m, n), dtype=dtype) if elementwise else np.zeros(m, dtype=np.uint64)
        for _ in senders
    ]
    if m:
        for p in senders:
            check_kept(None if kept is None else kept.get(p), sessions[p], labels)
        runs = [
            _choose(
                net,
                p,
                sessions[p],
                y,
                plan,
                schedule(
                    plan,
                    n,
                    item,
                    labels,
                    None if kept is None else kept[p],
                    False,
                    _columns_per_group(n),
                ),
                (n, dtype, masks64.astype(dtype), w),
                out,
                elementwise,
            )
            for p, out in zip(senders, outs, strict=True)
        ]
        for r in runs:
            next(r)  # every sender's first window of u
        while runs:  # then a column or segment of columns of every sender in turn
            runs = [r for r in runs if next(r, True) is None]
    if not elementwise:
        for out in outs:
            out &= masks64
    return outs


def _choose(
    net: Network,
    sender: str,
    session: OTSession,
    y: np.ndarray,
    plan: list,
    schedule: tuple[list[Step], list[int]],
    ring: tuple[int, np.dtype, np.ndarray, np.ndarray],
    out: np.ndarray,
    elementwise: bool,
) -> Iterator[None]:
    """The receiver's work with one sender, one column (or :class:`Segment` of columns)
    per step (a generator: the first step sends the first window of ``u``). Adds the
    shares into ``out``."""
    ot_r = session.receiver
    n, dtype, masks, widths = ring
    steps, sizes = schedule
    item = dtype.itemsize
    # One IKNP batch per group of new columns; the next batch's u goes out before this
    # batch's corrections are read, so the sender never waits a round trip.
    batches = batch_members(steps, len(sizes))
    chosen: list[list[int]] = [[] for _ in sizes]
    for (c, _, _, _), step in zip(plan, steps, strict=True):
        if step.batch >= 0:
            chosen[step.batch].append(c)

    def prefetch(b: int) -> None:
        attach(batches[b], ot_r.raw_rows(np.concatenate([y[c] for c in chosen[b]])), n)

    if sizes:
        prefetch(0)
    yield
    choices = None
    for unit in range(len(plan)) if elementwise else segments(plan, widths, n, item):
        for i in unit.members if isinstance(unit, Segment) else (unit,):
            if steps[i].slot == 0 and 0 <= steps[i].batch < len(sizes) - 1:
                prefetch(steps[i].batch + 1)
        if isinstance(unit, Segment):
            if choices is None:  # every column's choice bits, packed, in whole words
                choices = np.zeros((len(y), -(-n // 64) * 8), dtype=np.uint8)
                choices[:, : -(-n // 8)] = pack(y)
            # its pads and their sums while the corrections are on their way
            sums = segment_pad_sums(_segment_pads(unit, steps, dtype, n, 0), unit)
            data = net.receive(sender, STEP_CORRECTIONS, expect=np.ndarray)
            if data.dtype != np.uint8 or data.shape != (len(unit.row_bit) * -(-n // 8),):
                raise ProtocolError(
                    sender, STEP_CORRECTIONS, "corrections of the wrong type or length"
                )
            out[unit.products] += segment_sums(sums, data, choices, unit, n)
            yield
            continue
        (c, run, runs, chunks), step = plan[unit], steps[unit]
        col = step.column
        k = len(run)
        mk = masks[run][:, None]
        blocks = -(-k * item // BLOCK)
        sel_all = y[c].astype(bool)
        for r0, rn in chunks:
            at = col.indices(r0, rn)
            h = _pads(col.keys[0][r0 : r0 + rn], at, col.session, blocks, dtype, step.block)
            data = net.receive(sender, STEP_CORRECTIONS, expect=np.ndarray)
            sizes_b = [planes_size(rn, e - s, width) for s, e, width in runs]
            if data.dtype != np.uint8 or data.shape != (sum(sizes_b),):
                raise ProtocolError(
                    sender, STEP_CORRECTIONS, "corrections of the wrong type or length"
                )
            # Only the rows this party chose (y = 1) need their corrections: AND every
            # bit plane with the choices, then count (or, per position, unpack).
            picked = pack(sel_all[r0 : r0 + rn])
            off = 0
            if elementwise:
                mine = np.ascontiguousarray(h.T[:k])
                for (s, e, width), size in zip(runs, sizes_b, strict=True):
                    got = data[off : off + size].reshape(e - s, width, -1) & picked
                    mine[s:e] += unplanes(got, rn, dtype)
                    off += size
                out[run, r0 : r0 + rn] = mine & mk
                continue
            # every plane ANDed into whole zero-padded words, counted a word at a time
            used = -(-rn // 8)
            got = np.zeros((len(data) // used, -(-used // 8) * 8), dtype=np.uint8)
            np.bitwise_and(data.reshape(-1, used), picked, out=got[:, :used])
            ones = np.bitwise_count(got.view(np.uint64)).sum(axis=1, dtype=np.uint64)
            sums = column_sums(h, k)
            for s, e, width in runs:
                got = ones[off : off + (e - s) * width].reshape(e - s, width)
                sums[s:e] += (got << np.arange(width, dtype=np.uint64)).sum(axis=1)
                off += (e - s) * width
            out[run] += sums
        if not step.keep:
            col.keys = ()
        yield


def _segment_pads(seg: Segment, steps: list[Step], dtype: np.dtype, n: int, key: int) -> np.ndarray:
    """The :func:`~ppdm.protocols.column_ots.stacked_pads` of a segment's columns from
    their rows ``keys[key]`` (the sender's ``q`` or ``q XOR s``, the receiver's ``t``);
    a column not kept for later calls drops its rows after its last pads."""
    cols = [steps[i].column for i in seg.members]
    got = _stacked_pads(
        [c.keys[key] for c in cols],
        [c.indices(0, n) for c in cols],
        [c.session for c in cols],
        seg.blocks,
        dtype,
        [steps[i].block for i in seg.members],
    )
    if key == len(cols[0].keys) - 1:
        for i, c in zip(seg.members, cols, strict=True):
            if not steps[i].keep:
                c.keys = ()
    return got


def column_product_bytes(
    columns: np.ndarray,
    widths: np.ndarray,
    n: int,
    *,
    chunk: int = DEFAULT_CHUNK,
    kept: ColumnOTs | None = None,
    labels: Sequence[Hashable] | None = None,
) -> int:
    """Payload bytes of one :func:`column_product_shares` call with these public
    parameters (IKNP's ``u`` for one random OT per distinct column not kept and position,
    padded as IKNP pads its chunks of ``chunk`` OTs, plus the packed corrections); the
    same at both parties and on every transport (message envelopes not included). With
    ``kept`` (a :class:`ColumnOTs` that follows the pair's calls, ``session=None`` at a
    party outside the pair) and ``labels``, the call is also recorded in ``kept``, as
    the call itself records it at the two parties."""
    cols, w = _check_public(columns, widths, n)
    if not len(cols):
        return 0
    dtype = _ring(w)
    plan = _plan(cols, w, n, dtype.itemsize)
    chunk -= chunk % 64
    _, sizes = schedule(plan, n, dtype.itemsize, labels, kept, True, _columns_per_group(n))
    total = 0
    for size in sizes:
        ots = size * n
        total += sum(16 * (-(-min(chunk, ots - o) // 64) * 64) for o in range(0, ots, chunk))
    for _, _, runs, chunks in plan:
        for _, rn in chunks:
            total += sum(planes_size(rn, e - s, width) for s, e, width in runs)
    return total


def _columns_per_group(n: int) -> int:
    """Receiver columns whose OTs go in one IKNP batch (at most :data:`OT_GROUP` OTs)."""
    return max(1, OT_GROUP // max(n, 1))


def column_dot_products(
    net: Network,
    own: np.ndarray,
    *,
    x_party: str,
    y_party: str,
    pairs: np.ndarray,
    bounds: np.ndarray,
    session: OTSession,
) -> np.ndarray:
    """Dot products ``X[a] . Y[b]`` for public column pairs ``(a, b)``, revealed to both
    parties (as :func:`binary_dot_product` reveals): many candidates over few columns.

    ``own`` is this party's ``(p, n)`` 0/1 columns (``X`` at the ``x_party``, ``Y`` at
    the ``y_party``); ``pairs`` an ``(m, 2)`` int array and ``bounds`` ``m`` public upper
    bounds of the products (``n`` if nothing better is known; e.g. the smaller public
    count of the two columns), which set the ring ``2^ceil(log2(bound+1))``
    of each product's shares. The ``y_party`` is the OT receiver: one random OT per
    distinct ``b`` and transaction (:func:`column_product_shares`), so the traffic is
    ``16 n`` bytes per distinct ``b`` plus about ``n * bits / 8`` per product, instead of
    :func:`binary_dot_product`'s ``16 n + 8 n`` per product. Opened values outside
    ``[0, bound]`` raise :class:`~ppdm.errors.ProtocolError`.

    Examples
    --------
    >>> from ppdm.parties.local import run_local
    >>> from ppdm.protocols.ot.extension import OTSession
    >>> x = np.array([[1, 1, 0, 1], [0, 1, 1, 1]])
    >>> y = np.array([[1, 0, 0, 1], [1, 1, 1, 1]])
    >>> def party(net, cols):
    ...     peer = net.others[0]
    ...     return column_dot_products(net, cols, x_party="a", y_party="b",
    ...         pairs=np.array([[0, 0], [1, 0], [1, 1]]), bounds=np.array([4, 4, 4]),
    ...         session=OTSession(net, peer)).tolist()
    >>> run_local(party, {"a": x, "b": y})
    {'a': [2, 1, 3], 'b': [2, 1, 3]}
    """
    peer = check_two_party_roles(net, x_party, y_party)
    b = _as_bits(own)
    if b.ndim != 2:
        raise ValueError("own must be a (p, n) array of columns")
    n = b.shape[1]
    pr = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    bnd = np.asarray(bounds, dtype=np.int64).reshape(-1)
    if len(bnd) != len(pr):
        raise ValueError("one bound per pair is needed")
    widths = bit_widths(bnd)
    mine = pr[:, 0] if net.me == x_party else pr[:, 1]
    if len(pr) and (int(mine.min()) < 0 or int(mine.max()) >= len(b)):
        raise ValueError("a pair names a column this party does not have")
    # The x party's columns are the correlations, the y party's the OT choice bits.
    is_x = net.me == x_party
    share = column_product_shares(
        net,
        sender=x_party,
        receiver=y_party,
        columns=pr[:, 1],
        widths=widths,
        n=n,
        session=session,
        values=b[pr[:, 0]] if is_x else None,
        choices=None if is_x else b,
    )
    return open_shares(net, share, widths=widths, bounds=bnd, to=[peer], step=STEP_COLUMN_REVEAL)


def open_shares(
    net: Network,
    share: np.ndarray,
    *,
    widths: np.ndarray,
    bounds: np.ndarray,
    to: list[str],
    step: str = STEP_COLUMN_REVEAL,
) -> np.ndarray:
    """Open additive shares (modulo ``2^widths``) among this party and the parties ``to``:
    every one sends its shares to every other and adds them up. Values outside
    ``[0, bounds]`` or out-of-ring shares raise :class:`~ppdm.errors.ProtocolError`
    naming the party whose shares did not fit (the last one added)."""
    w = np.asarray(widths, dtype=np.uint64)
    masks = (np.uint64(1) << w) - np.uint64(1)
    mine = np.ascontiguousarray(share, dtype=np.uint64)
    total = mine.copy()
    for p in to:
        net.send(p, step, mine)
    for p in to:
        got = net.receive(p, step, expect=np.ndarray)
        if got.dtype != np.uint64 or got.shape != total.shape or bool((got > masks).any()):
            raise ProtocolError(p, step, "shares of the wrong type, shape or range")
        total = (total + got) & masks
    opened = total.astype(np.int64)
    if bool((opened > np.asarray(bounds, dtype=np.int64)).any()):
        raise ProtocolError(to[-1], step, "shares do not open to counts within the bounds")
    return opened
