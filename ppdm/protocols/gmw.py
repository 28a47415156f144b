"""GMW-style secure AND-and-count of bit columns held by three or more parties.

Each of ``t >= 2`` parties ``P_1 .. P_t`` holds bit columns of length ``n`` (e.g. the
transaction covers of its items); for public tuples naming one column per party, the
parties learn ``count = sum_i AND_k v_k[i]``: the number of positions where all the named
columns are 1 (the support of an itemset whose items are split among the parties, Vaidya
& Clifton's vertical association mining; seed 000 section 20.5), and nothing else.

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
- Leakage: the count of every tuple, as in the two-party dot product path; unlike the
  commutative-encryption intersection cardinality (:mod:`ppdm.protocols.intersection`)
  no evaluator learns the sizes of the parties' sets or of subset intersections.
- Shares of the wrong type, shape or range, and counts above their public bound, raise
  :class:`~ppdm.errors.ProtocolError`.

Cost for ``m`` tuples over ``n`` positions with ``l``-bit counts: ``t(t-1)/2 * n * l / 8``
bytes of corrections per tuple, plus ``16 n`` bytes of IKNP ``u`` per distinct column of
each choosing party (steps ``2 .. t``, once per party it multiplies with); ``t - 1``
sequential round trips per batch, and one opening round (``8 m`` bytes per ordered pair
of parties).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ppdm.parties.network import Network
from ppdm.protocols.dot_product_ot import (
    _as_bits,
    bit_widths,
    chooser_product_shares,
    column_product_bytes,
    column_product_shares,
    open_shares,
)
from ppdm.protocols.ot.extension import OTSession

__all__ = ["STEP_OPEN", "multiparty_and_bytes", "multiparty_and_counts"]

STEP_OPEN = "gmw/open"
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
) -> np.ndarray:
    """Counts ``sum_i AND_k own_k[index[c, k], i]`` for every tuple ``c`` (module
    docstring), revealed to all ``owners``.

    Every owner calls it with its own ``(p, n)`` 0/1 columns ``own``, the same public
    ``owners`` order (``owners[0]`` only sends; ``owners[j]`` chooses in step ``j``: put
    the parties with fewest distinct columns last), the same public ``(m, t)`` column
    ``index`` and ``m`` public ``bounds`` of the counts (``n`` if nothing better is
    known), and ``sessions[peer]``, an :class:`~ppdm.protocols.ot.extension.OTSession`
    with every other owner. Returns ``m`` int64 counts.

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
    if not m:
        return np.zeros(0, dtype=np.int64)
    out = np.zeros(m, dtype=np.int64)
    for rows in _batches(idx, n, batch_cells):
        out[rows] = _batch(net, v, owners, pos, idx[rows], bnd[rows], sessions, n)
    return out


def _batches(index: np.ndarray, n: int, batch_cells: int) -> list[np.ndarray]:
    """The tuples of each batch: sorted by the choosing parties' columns, so tuples over
    the same columns share their OTs."""
    t = index.shape[1]
    order = np.lexsort(tuple(index[:, k] for k in range(t)))
    per_batch = max(1, batch_cells // max(n, 1))
    return [order[b : b + per_batch] for b in range(0, len(order), per_batch)]


def multiparty_and_bytes(
    n: int, index: np.ndarray, bounds: np.ndarray, *, batch_cells: int = BATCH_CELLS
) -> int:
    """Payload bytes, all parties together, of :func:`multiparty_and_counts` with these
    public parameters: every pairwise :func:`column_product_shares` (IKNP ``u`` and
    packed corrections) plus the opening of the sums (8 bytes per tuple and ordered pair
    of owners). The same at every party and on every transport (envelopes excluded)."""
    idx = np.asarray(index, dtype=np.int64)
    bnd = np.asarray(bounds, dtype=np.int64).reshape(-1)
    t = idx.shape[1]
    total = 0
    for rows in _batches(idx, n, batch_cells):
        widths = bit_widths(bnd[rows])
        for j in range(1, t):
            total += j * column_product_bytes(idx[rows, j], widths, n)
        total += t * (t - 1) * 8 * len(rows)
    return total


def _batch(
    net: Network,
    v: np.ndarray,
    owners: list[str],
    pos: int,
    idx: np.ndarray,
    bounds: np.ndarray,
    sessions: Mapping[str, OTSession],
    n: int,
) -> np.ndarray:
    t = len(owners)
    widths = bit_widths(bounds)
    masks = (np.uint64(1) << widths.astype(np.uint64)) - np.uint64(1)
    share: np.ndarray | None = v[idx[:, 0]] if pos == 0 else None
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
            )
            share = got[0]
            for g in got[1:]:
                share = share + g
    if share is None:  # pragma: no cover - every owner takes part in the last step
        raise RuntimeError("no share after the last step")
    total = share.astype(np.uint64) & masks
    others = [p for p in owners if p != net.me]
    return open_shares(net, total, widths=widths, bounds=bounds, to=others, step=STEP_OPEN)
