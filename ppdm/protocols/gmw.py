"""GMW-style secure AND-and-count of bit columns held by three or more parties.

Each of ``t >= 2`` parties ``P_1 .. P_t`` holds bit columns of length ``n`` (e.g. the
transaction covers of its items); for public tuples naming one column per party, the
parties learn ``count = sum_i AND_k v_k[i]``: the number of positions where all the named
columns are 1 (the support of an itemset whose items are split among the parties, Vaidya
& Clifton's vertical association mining; Aggarwal 2015, §20.5), and nothing else.

Construction: the GMW paradigm (Goldreich, Micali and Wigderson, STOC 1987) of additive
secret sharing with OT-based multiplication (as in ABY, Demmler, Schneider and Zohner,
NDSS 2015, section III-C, and its n-party form), evaluated on the product
``v_1 v_2 ... v_t`` left to right, in the ring ``Z_{2^l}`` with ``l`` the bits of a
public bound of the count:

1. ``P_1`` and ``P_2`` turn ``v_1[i] v_2[i]`` into additive shares ``z_1[i] + z_2[i]``
   (one correlated OT per position: ``P_2``'s bit chooses, ``P_1``'s bit is the
   correlation).
2. Step ``j = 3 .. t``: the product so far is shared ``z = z_1 + ... + z_{j-1}``; each
   ``P_k`` (``k < j``) multiplies its share by ``P_j``'s private bit with one correlated
   OT with ``P_j`` (``P_j``'s bit chooses, ``z_k[i]`` is the correlation), which leaves
   ``z_k v_j`` shared between ``P_k`` and ``P_j``; ``P_j`` adds up its halves. Now
   ``z_1 + ... + z_j = v_1 ... v_j``.
3. After the last step every party sums its shares over the ``n`` positions (in the
   last step the OTs return the sums directly) and the parties open the sums to each
   other: the counts.

Every multiplication here has one *private* multiplicand (a party's own column), so an
AND gate needs no Beaver triple (a triple is the preprocessing for a product of two
*shared* values, and its generation costs the same OTs plus an opening round): the
correlated OT that would make the triple multiplies the real inputs directly. The
choosing party's column is the OT's choice vector, so one set of random OTs per distinct
column and pair of parties serves every candidate over that column
(:func:`ppdm.protocols.dot_product_ot.column_product_shares`), and the correlations are
``l``-bit ring elements packed to ``l`` bits on the wire.

Security (semi-honest)
----------------------
- Every party's view is IKNP's messages (nothing about the choosing party's bits),
  corrections masked by pads of unchosen OT keys (nothing about the correlations) and
  the other parties' final share sums, which are uniformly random subject to adding up
  to the count. Any coalition of fewer than ``t`` parties learns nothing beyond the
  counts and its own columns (each share of the product is masked by a pad known to a
  party outside the coalition); more parties than the owners see only the counts.
- Leakage of :func:`multiparty_and_counts`: the count of every tuple, as in the
  two-party dot product path (:func:`multiparty_and_shares` opens nothing;
  :func:`open_noisy` opens differentially private noisy counts; :func:`shares_at_least`
  only whether each count reaches a threshold); unlike the
  commutative-encryption intersection cardinality (:mod:`ppdm.protocols.intersection`)
  no evaluator learns the sizes of the parties' sets or of subset intersections.
- Shares of the wrong type, shape or range, and counts above their public bound, raise
  :class:`~ppdm.errors.ProtocolError`.

Cost for ``m`` tuples over ``n`` positions with ``l``-bit counts: ``t(t-1)/2 * n * l / 8``
bytes of corrections per tuple, plus ``16 n`` bytes of IKNP ``u`` per distinct column of
each choosing party (steps ``2 .. t``, once per party it multiplies with; none for a
column whose random OTs a :class:`~ppdm.protocols.dot_product_ot.ColumnOTs` kept from
an earlier call); ``t - 1``
sequential round trips per batch, and one opening round (``8 m`` bytes per ordered pair
of parties).
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Hashable, Mapping, Sequence
from fractions import Fraction

import numpy as np

from ppdm.errors import ProtocolError
from ppdm.parties.network import Network
from ppdm.protocols.comparison import secure_ge_shares
from ppdm.protocols.dot_product_ot import (
    ColumnOTs,
    _as_bits,
    bit_widths,
    chooser_product_shares,
    column_product_bytes,
    column_product_shares,
    open_shares,
)
from ppdm.protocols.ot.extension import OTSession

__all__ = [
    "STEP_NOISY",
    "STEP_OPEN",
    "STEP_THRESHOLD",
    "multiparty_and_bytes",
    "multiparty_and_counts",
    "multiparty_and_shares",
    "noise_bound",
    "noisy_width",
    "open_noisy",
    "shares_at_least",
    "two_sided_geometric",
]

STEP_OPEN = "gmw/open"
STEP_NOISY = "gmw/open-noisy"
STEP_THRESHOLD = "gmw/threshold"
#: Cells (tuples x positions) per batch: bounds the per-position shares kept in memory.
BATCH_CELLS = 1 << 24


def multiparty_and_counts(
    net: Network,
    own: np.ndarray,
    *,
    owners: Sequence[str],
    index: np.ndarray,
    bounds: np.ndarray,
    sessions: Mapping[str, OTSession],
    batch_cells: int = BATCH_CELLS,
    noise_scale: Fraction | None = None,
) -> np.ndarray:
    """Counts ``sum_i AND_k own_k[index[c, k], i]`` for every tuple ``c`` (module
    docstring), revealed to all ``owners``.

    Every owner calls it with its own ``(p, n)`` 0/1 columns ``own``, the same public
    ``owners`` order (``owners[0]`` only sends; ``owners[j]`` chooses in step ``j``: put
    the parties with fewest distinct columns last), the same public ``(m, t)`` column
    ``index`` and ``m`` public ``bounds`` of the counts (``n`` if nothing better is
    known), and ``sessions[peer]``, an :class:`~ppdm.protocols.ot.extension.OTSession`
    with every other owner. Returns ``m`` int64 counts.

    ``noise_scale`` (every owner passes the same): open the counts with noise instead,
    :func:`open_noisy` (each owner adds its own discrete Laplace noise of this scale to
    its share; the counts are then computed in the ring of :func:`noisy_width`, the
    ``bounds`` are not used). Returns the noisy counts, which may lie outside ``[0, n]``.

    Examples
    --------
    >>> from ppdm.parties.local import run_local
    >>> from ppdm.protocols.ot.extension import OTSession
    >>> cols = {"a": [[1, 1, 0, 1, 1]], "b": [[1, 0, 1, 1, 1]], "c": [[0, 1, 1, 1, 1]]}
    >>> def party(net, mine):
    ...     s = {p: OTSession(net, p) for p in net.others}
    ...     return multiparty_and_counts(net, np.array(mine), owners=["a", "b", "c"],
    ...         index=np.zeros((1, 3), dtype=np.int64), bounds=[5], sessions=s).tolist()
    >>> run_local(party, cols)
    {'a': [2], 'b': [2], 'c': [2]}
    """
    owners = list(owners)
    n = np.asarray(own).shape[-1] if np.asarray(own).ndim == 2 else 0
    bnd = np.asarray(bounds, dtype=np.int64).reshape(-1)
    if noise_scale is not None:
        width = noisy_width(n, len(owners), noise_scale)
        bnd = np.full(len(bnd), (1 << width) - 1, dtype=np.int64)
    share, widths = multiparty_and_shares(
        net, own, owners=owners, index=index, bounds=bnd, sessions=sessions, batch_cells=batch_cells
    )
    others = [p for p in owners if p != net.me]
    if noise_scale is not None:
        return open_noisy(
            net, share, width=int(widths.max(initial=1)), n=n, owners=owners, scale=noise_scale
        )
    if not len(share):
        return np.zeros(0, dtype=np.int64)
    return open_shares(net, share, widths=widths, bounds=bnd, to=others, step=STEP_OPEN)


def multiparty_and_shares(
    net: Network,
    own: np.ndarray,
    *,
    owners: Sequence[str],
    index: np.ndarray,
    bounds: np.ndarray,
    sessions: Mapping[str, OTSession],
    batch_cells: int = BATCH_CELLS,
    kept: Mapping[str, ColumnOTs] | None = None,
    labels: Mapping[str, Sequence[Hashable]] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Additive shares of the counts of :func:`multiparty_and_counts`, not opened:
    ``(share, widths)``, this owner's ``m`` uint64 shares and the public ring sizes in
    bits (count ``c`` is the sum of the owners' shares modulo ``2^widths[c]``;
    ``widths = bit_widths(bounds)``). Any ``t - 1`` owners' shares are uniformly random.
    Open them with :func:`~ppdm.protocols.dot_product_ot.open_shares`,
    :func:`open_noisy`, or decide a threshold first with :func:`shares_at_least`.

    ``kept`` (every owner, or none): this owner's
    :class:`~ppdm.protocols.dot_product_ot.ColumnOTs` over ``sessions[peer]`` for every
    other owner, and ``labels[p]`` the public labels of owner ``p``'s columns: a column
    chosen before (the same label) reuses its random OTs (as within one call), so an
    Apriori level pays OTs only for columns new since the previous level."""
    owners = list(owners)
    t = len(owners)
    if t < 2 or len(set(owners)) != t or net.me not in owners:
        raise ValueError("owners must be two or more distinct parties including this one")
    for p in owners:
        if p not in net.parties:
            raise ValueError(f"unknown party {p!r}")
    v = _as_bits(own)
    if v.ndim != 2:
        raise ValueError("own must be a (p, n) array of columns")
    n = v.shape[1]
    idx = np.asarray(index, dtype=np.int64)
    bnd = np.asarray(bounds, dtype=np.int64).reshape(-1)
    m = len(bnd)
    if idx.shape != (m, t):
        raise ValueError(f"index must have shape ({m}, {t})")
    pos = owners.index(net.me)
    if m and (int(idx[:, pos].min()) < 0 or int(idx[:, pos].max()) >= len(v)):
        raise ValueError("the index names a column this party does not have")
    for p in owners:
        if p != net.me and p not in sessions:
            raise ValueError(f"no OT session with {p!r}")
        if kept is not None and p != net.me and p not in kept:
            raise ValueError(f"no kept columns with {p!r}")
    if kept is not None and (labels is None or any(p not in labels for p in owners)):
        raise ValueError("kept columns need every owner's labels")
    widths = bit_widths(bnd)
    out = np.zeros(m, dtype=np.uint64)
    for rows in _batches(idx, n, batch_cells):
        out[rows] = _batch(net, v, owners, pos, idx[rows], widths[rows], sessions, n, kept, labels)
    return out, widths


def _batches(index: np.ndarray, n: int, batch_cells: int) -> list[np.ndarray]:
    """The tuples of each batch: sorted by the choosing parties' columns, so tuples over
    the same columns share their OTs."""
    t = index.shape[1]
    order = np.lexsort(tuple(index[:, k] for k in range(t)))
    per_batch = max(1, batch_cells // max(n, 1))
    return [order[b : b + per_batch] for b in range(0, len(order), per_batch)]


def multiparty_and_bytes(
    n: int,
    index: np.ndarray,
    bounds: np.ndarray,
    *,
    batch_cells: int = BATCH_CELLS,
    owners: Sequence[str] | None = None,
    kept: Mapping[tuple[str, str], ColumnOTs] | None = None,
    labels: Mapping[str, Sequence[Hashable]] | None = None,
) -> int:
    """Payload bytes, all parties together, of :func:`multiparty_and_counts` with these
    public parameters: every pairwise :func:`column_product_shares` (IKNP ``u`` and
    packed corrections) plus the opening of the sums (8 bytes per tuple and ordered pair
    of owners). The same at every party and on every transport (envelopes excluded).

    With kept columns (:func:`multiparty_and_shares`): the ``owners`` order, the
    ``labels`` and ``kept[(sender, chooser)]``, a
    :class:`~ppdm.protocols.dot_product_ot.ColumnOTs` without a session that follows
    that pair's calls (any party can keep one per ordered pair: the book-keeping is
    public); the call is recorded in them."""
    idx = np.asarray(index, dtype=np.int64)
    bnd = np.asarray(bounds, dtype=np.int64).reshape(-1)
    t = idx.shape[1]
    if kept is not None and (owners is None or labels is None or len(owners) != t):
        raise ValueError("kept columns need the owners' order and labels")
    total = 0
    for rows in _batches(idx, n, batch_cells):
        widths = bit_widths(bnd[rows])
        for j in range(1, t):
            if kept is None:
                total += j * column_product_bytes(idx[rows, j], widths, n)
                continue
            chooser = owners[j]  # type: ignore[index]
            for sender in owners[:j]:  # type: ignore[index]
                total += column_product_bytes(
                    idx[rows, j],
                    widths,
                    n,
                    kept=kept[(sender, chooser)],
                    labels=labels[chooser],  # type: ignore[index]
                )
        total += t * (t - 1) * 8 * len(rows)
    return total


def _batch(
    net: Network,
    v: np.ndarray,
    owners: list[str],
    pos: int,
    idx: np.ndarray,
    widths: np.ndarray,
    sessions: Mapping[str, OTSession],
    n: int,
    kept: Mapping[str, ColumnOTs] | None,
    labels: Mapping[str, Sequence[Hashable]] | None,
) -> np.ndarray:
    t = len(owners)
    masks = (np.uint64(1) << widths.astype(np.uint64)) - np.uint64(1)
    # the first owner's columns as bool: 0/1 values, added to the corrections as bits
    share: np.ndarray | None = v[idx[:, 0]].view(np.bool_) if pos == 0 else None
    for j in range(1, t):
        last = j == t - 1
        chooser = owners[j]
        if pos < j:
            share = column_product_shares(
                net,
                sender=net.me,
                receiver=chooser,
                columns=idx[:, j],
                widths=widths,
                n=n,
                session=sessions[chooser],
                values=share,
                elementwise=not last,
                kept=None if kept is None else kept[chooser],
                labels=None if labels is None else labels[chooser],
            )
        elif pos == j:
            # Every earlier party multiplies its share by this party's columns, at once.
            got = chooser_product_shares(
                net,
                senders=owners[:j],
                columns=idx[:, j],
                widths=widths,
                n=n,
                sessions=sessions,
                choices=v,
                elementwise=not last,
                kept=kept,
                labels=None if labels is None else labels[chooser],
            )
            share = got[0]
            for g in got[1:]:
                share = share + g
    if share is None:  # pragma: no cover - every owner takes part in the last step
        raise RuntimeError("no share after the last step")
    return share.astype(np.uint64) & masks


# -- opening with noise, and deciding a threshold without opening ----------------------------

#: Per owner, noise beyond ``NOISE_TAIL * scale`` in magnitude has probability below
#: ``2 e^-NOISE_TAIL``: the ring of :func:`noisy_width` holds every count plus noise
#: below that bound (a larger sum would wrap around: still private, wrong only then).
NOISE_TAIL = 40


def as_fraction(value: float | int | Fraction | str) -> Fraction:
    """A positive finite number as an exact fraction (floats by their shortest decimal:
    ``0.1`` is ``1/10``)."""
    if isinstance(value, bool):
        raise ValueError("expected a number")
    frac = Fraction(repr(float(value))) if isinstance(value, float) else Fraction(value)
    if frac <= 0:
        raise ValueError("expected a positive number")
    return frac


def _bernoulli_exp(gamma: Fraction) -> bool:
    """An exact Bernoulli(``exp(-gamma)``) trial, ``gamma >= 0`` rational (Canonne,
    Kamath and Steinke 2020, Algorithm 1), from :mod:`secrets`."""
    while gamma > 1:
        if not _bernoulli_exp(Fraction(1)):
            return False
        gamma -= 1
    num, den = gamma.numerator, gamma.denominator
    k = 1
    while secrets.randbelow(den * k) < num:  # A ~ Bernoulli(gamma / k)
        k += 1
    return k % 2 == 1


def two_sided_geometric(scale: Fraction, size: int) -> np.ndarray:
    """``size`` exact two-sided geometric (discrete Laplace) variates,
    ``P(X = x) ∝ exp(-|x| / scale)``, from :mod:`secrets` (Canonne, Kamath and Steinke
    2020, "The discrete Gaussian for differential privacy", Algorithm 2; no floating
    point, so none of Mironov's 2012 attacks on floating-point Laplace noise). Adding it
    to an integer count of sensitivity 1 is ``1/scale``-differentially private (Ghosh,
    Roughgarden and Sundararajan 2009)."""
    scale = as_fraction(scale)
    t, s = scale.numerator, scale.denominator  # P ∝ exp(-|x| s / t)
    out = np.zeros(int(size), dtype=np.int64)
    for i in range(len(out)):
        while True:
            u = secrets.randbelow(t)
            if not _bernoulli_exp(Fraction(u, t)):
                continue
            v = 0
            while _bernoulli_exp(Fraction(1)):
                v += 1
            y = (u + t * v) // s
            negative = secrets.randbelow(2) == 1
            if negative and y == 0:
                continue
            out[i] = -y if negative else y
            break
    return out


def noise_bound(owners: int, scale: Fraction) -> int:
    """``owners * ceil(NOISE_TAIL * scale)``: the total noise of ``owners`` owners lies
    within plus or minus this bound except with probability below
    ``2 * owners * e^-NOISE_TAIL``."""
    return owners * math.ceil(NOISE_TAIL * as_fraction(scale))


def noisy_width(n: int, owners: int, scale: Fraction) -> int:
    """Ring size in bits for counts in ``[0, n]`` opened with :func:`open_noisy`: the
    noisy counts, read as signed, lie in ``[-B, n + B]`` (``B`` = :func:`noise_bound`)."""
    return (int(n) + noise_bound(owners, scale)).bit_length() + 1


def open_noisy(
    net: Network,
    share: np.ndarray,
    *,
    width: int,
    n: int,
    owners: Sequence[str],
    scale: Fraction,
    step: str = STEP_NOISY,
) -> np.ndarray:
    """Open additive shares (modulo ``2^width``, ``width >=`` :func:`noisy_width`) of
    ``m`` counts in ``[0, n]`` with noise: every owner adds its own
    :func:`two_sided_geometric` noise of this ``scale`` to its share before sending it
    to the other ``owners``; all learn ``count + sum of the noises`` (int64, read as
    signed) and nothing else.

    Privacy (semi-honest): each honest owner's noise alone makes every opened value
    ``1/scale``-differentially private with respect to a change of 1 in the count,
    against any coalition of the others (who may subtract their own noise): the
    coalition's view is the sum of that owner's uniform-looking share and its noise.
    Wrapping modulo ``2^width`` is post-processing. A sum outside ``[-B, n + B]``
    (:func:`noise_bound`; probability below ``2 t e^-40`` for honest owners) raises
    :class:`~ppdm.errors.ProtocolError` naming the last owner.
    """
    owners = list(owners)
    mask = np.uint64((1 << width) - 1)
    mine = np.ascontiguousarray(share, dtype=np.uint64)
    if not len(mine):
        return np.zeros(0, dtype=np.int64)
    noise = np.asarray(two_sided_geometric(scale, len(mine)), dtype=np.int64)
    noisy = (mine + noise.view(np.uint64)) & mask
    others = [p for p in owners if p != net.me]
    total = open_shares(
        net,
        noisy,
        widths=np.full(len(mine), width, dtype=np.int64),
        bounds=np.full(len(mine), (1 << width) - 1, dtype=np.int64),
        to=others,
        step=step,
    )
    signed = np.where(total >= (1 << (width - 1)), total - (1 << width), total)
    bound = noise_bound(len(owners), scale)
    if bool((signed < -bound).any() or (signed > n + bound).any()):
        raise ProtocolError(others[-1], step, "shares do not open to noisy counts in range")
    return signed.astype(np.int64)


def shares_at_least(
    net: Network,
    share: np.ndarray,
    *,
    widths: np.ndarray,
    thresholds: np.ndarray,
    owners: Sequence[str],
    session: OTSession | None,
    step: str = STEP_THRESHOLD,
) -> np.ndarray:
    """``[count_c >= thresholds[c]]`` for counts additively shared among the ``owners``
    (modulo ``2^widths[c]``), learned by every owner; nothing else is revealed.

    The ring must leave room for the sign: ``count - threshold`` in
    ``[-2^(w-1), 2^(w-1))`` (``w = widths[c]``; with ``count`` in ``[0, b]`` take
    ``w = max(b, threshold).bit_length() + 1``). ``session``: at ``owners[0]`` and
    ``owners[1]``, an :class:`~ppdm.protocols.ot.extension.OTSession` between the two
    (``None`` at the other owners).

    Construction: with three or more owners, every other owner splits its share at
    random between ``owners[0]`` and ``owners[1]``; ``owners[0]`` subtracts the
    threshold; the sign of ``e = x + y`` (mod ``2^w``) is ``MSB(x) XOR MSB(y) XOR carry``
    with the carry ``[low(x) + low(y) >= 2^(w-1)]`` from one millionaires' comparison
    (:func:`~ppdm.protocols.comparison.secure_ge_shares`, CrypTFlow2's DReLU, as in
    :mod:`ppdm.protocols.threshold`); the two open the XOR-shared bits and
    ``owners[0]`` sends them to the others.

    Security (semi-honest): the re-shared halves and the comparison's messages are
    uniformly random; only the bits are opened. Collusion: ``owners[0]`` and
    ``owners[1]`` together learn the counts (from their re-shared halves); with two
    owners that is no more than the coalition of all owners.

    Cost per count: ``2 * 8`` bytes per further owner, one ``w``-bit comparison (about
    ``0.6 KB`` for 16 bits with 4-bit blocks), ``2 / 8`` byte to open and ``1 / 8`` byte
    per further owner.
    """
    owners = list(owners)
    if len(owners) < 2 or net.me not in owners:
        raise ValueError("owners must be two or more parties including this one")
    a, b = owners[0], owners[1]
    w = np.asarray(widths, dtype=np.int64).reshape(-1)
    m = len(w)
    thr = np.asarray(thresholds, dtype=np.int64).reshape(-1)
    if thr.shape != (m,) or np.asarray(share).shape != (m,):
        raise ValueError("share, widths and thresholds must have the same length")
    if m and (int(w.min()) < 2 or int(w.max()) > 62):
        raise ValueError("widths must lie in [2, 62]")
    if m and (int(thr.min()) < 0 or bool((thr >= (np.int64(1) << (w - 1))).any())):
        raise ValueError("thresholds must lie in [0, 2^(width - 1))")
    if not m:
        return np.zeros(0, dtype=bool)
    me = net.me
    masks = (np.uint64(1) << w.astype(np.uint64)) - np.uint64(1)
    mine = np.asarray(share, dtype=np.uint64) & masks
    reshare, result_step = f"{step}/reshare", f"{step}/result"
    packed = ((m + 7) // 8,)
    if me not in (a, b):
        half = np.frombuffer(secrets.token_bytes(8 * m), dtype=np.uint64) & masks
        net.send(a, reshare, half)
        net.send(b, reshare, (mine - half) & masks)
        got = net.receive(a, result_step, expect=np.ndarray)
        if got.dtype != np.uint8 or got.shape != packed:
            raise ProtocolError(a, result_step, "wrong length of result bits")
        return np.unpackbits(got)[:m].astype(bool)
    if session is None or session.peer != (b if me == a else a):
        raise ValueError("owners[0] and owners[1] need an OT session with each other")
    for p in owners[2:]:
        got = net.receive(p, reshare, expect=np.ndarray)
        if got.dtype != np.uint64 or got.shape != (m,) or bool((got > masks).any()):
            raise ProtocolError(p, reshare, "shares of the wrong type, shape or range")
        mine = (mine + got) & masks
    if me == a:
        mine = (mine - thr.astype(np.uint64)) & masks
    top = (w - 1).astype(np.uint64)
    half_ring = np.uint64(1) << top
    low = mine & (half_ring - np.uint64(1))
    # carry = [low(x) + low(y) >= 2^(w-1)] = [low(x) >= 2^(w-1) - low(y)]
    values = low if me == a else half_ring - low
    carry = secure_ge_shares(
        session.net, values, x_party=a, y_party=b, bits=int(w.max()), session=session
    )
    msb = ((mine >> top) & np.uint64(1)).astype(np.uint8) ^ carry
    other = b if me == a else a
    net.send(other, f"{step}/open", np.packbits(msb))
    got = net.receive(other, f"{step}/open", expect=np.ndarray)
    if got.dtype != np.uint8 or got.shape != packed:
        raise ProtocolError(other, f"{step}/open", "wrong length of opened bits")
    result = (msb ^ np.unpackbits(got)[:m]) == 0
    if me == a and owners[2:]:
        net.broadcast(result_step, np.packbits(result), to=owners[2:])
    return result
