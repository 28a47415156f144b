"""Border-based hiding of the sensitive rules' generating itemsets (Aggarwal 2015, §20.4).

"In the case of border-based methods, the border of the frequent pattern mining algorithm
is adjusted, so as to discover only nonsensitive rules." Once the sensitive itemsets
``S`` (the generating itemsets ``X | Y`` of the sensitive rules) are infrequent, so are all
their supersets; every other frequent itemset survives iff the *revised positive border*
``Bd+'`` -- the maximal itemsets of ``F`` minus the supersets of ``S`` -- stays frequent
(downward closure). The methods therefore delete sensitive items one at a time, choosing
the (item, transaction) pair that damages ``Bd+'`` least:

* ``border`` -- after Sun & Yu, "A border-based approach for hiding sensitive frequent
  itemsets" (ICDM 2005): the cost of deleting item ``i`` from transaction ``t`` is first
  the number of border itemsets ``B`` (with ``i`` in ``B``, ``B`` in ``t``) that would drop
  below MST, then the sum over those ``B`` of ``1 / (sup(B) - minc + 1)`` (itemsets close
  to the threshold weigh more); the cheapest pair is taken, ties to the shortest
  transaction.
* ``maxmin`` -- after Moustakides & Verykios, "A MaxMin approach for hiding frequent
  itemsets" (DKE 65(1), 2008): the victim item is the one whose least-supported affected
  border itemset has the largest support (max over items of the min over border
  itemsets); the transaction is then chosen as above.

Sensitive itemsets are hidden in order of decreasing support; each deletion updates the
border supports. Only deletions are made, so no ghost itemsets appear and the rules stay
hidden.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ppdm.hiding.problem import Workspace

__all__ = ["hide_border", "revised_positive_border"]

# Deletions applied per cost evaluation (costs are also recomputed whenever a deletion
# would push a border itemset below the threshold).
_BATCH = 256


def revised_positive_border(
    frequent: Mapping[frozenset, int] | set[frozenset], sensitive: list[frozenset]
) -> list[frozenset]:
    """Maximal itemsets of ``frequent`` that contain no sensitive itemset.

    Examples
    --------
    >>> f = {frozenset(s) for s in ["a", "b", "c", "ab", "ac", "bc", "abc"]}
    >>> sorted("".join(sorted(b)) for b in revised_positive_border(f, [frozenset("ab")]))
    ['ac', 'bc']
    """
    kept = {s for s in frequent if not any(z <= s for z in sensitive)}
    not_max: set[frozenset] = set()
    for s in kept:
        if len(s) > 1:
            for x in s:
                not_max.add(s - {x})
    return [s for s in kept if s not in not_max]


def hide_border(
    ws: Workspace,
    frequent: Mapping[frozenset, int],
    *,
    criterion: str = "border",
) -> None:
    """Hide every sensitive rule's generating itemset with border-aware deletions.

    Parameters
    ----------
    ws : Workspace
        The working copy (edited in place).
    frequent : Mapping[frozenset, int]
        Frequent itemsets of the original data at ``ws.min_support``.
    criterion : {'border', 'maxmin'}
        Victim selection (see the module docstring).
    """
    if criterion not in ("border", "maxmin"):
        raise ValueError(f"unknown criterion {criterion!r}")
    sensitive = [r.itemset for r in ws.rules]
    sens_items = set(ws.labels)
    border = [b for b in revised_positive_border(frequent, sensitive) if b & sens_items]
    minc = ws.min_count()
    if border:
        covers = np.stack([ws.db.cover(b) for b in border])  # (B, n)
        margin = np.array([frequent[b] for b in border], dtype=np.int64) - minc
    else:
        covers = np.zeros((0, ws.db.n_transactions), dtype=bool)
        margin = np.zeros(0, dtype=np.int64)
    # Border itemsets containing each sensitive column.
    holders = {
        c: np.array([k for k, b in enumerate(border) if ws.labels[c] in b], dtype=np.int64)
        for c in range(len(ws.labels))
    }
    order = sorted(range(len(ws.rules)), key=lambda r: (-ws.counts[ws.z_cols[r]], r))
    for r in order:
        z = ws.z_cols[r]
        need = ws.counts[z] - minc + 1
        while need > 0:
            rows = np.flatnonzero(ws.cover(z))
            items = list(z)
            if criterion == "maxmin":
                scores = {c: _worst_margin(covers, margin, holders[c], rows) for c in items}
                top = max(scores.values())
                items = [c for c in items if scores[c] == top]
            keys = []
            for c in items:
                h = holders[c]
                if len(h):
                    sub = covers[np.ix_(h, rows)].astype(np.float64)
                    lost = (margin[h] <= 0).astype(np.float64) @ sub
                    weight = (1.0 / (np.maximum(margin[h], 0) + 1.0)) @ sub
                else:
                    lost = np.zeros(len(rows))
                    weight = np.zeros(len(rows))
                keys.append((lost, weight, ws.length[rows], rows, np.full(len(rows), c)))
            lost, weight, length, trows, tcols = (
                np.concatenate(k) for k in zip(*keys, strict=True)
            )
            ranked = np.lexsort((tcols, trows, length, weight, lost))
            # Apply the ranked deletions in one go while they stay valid: each transaction
            # once (it stops supporting z), and stop as soon as a deletion would lose a
            # border itemset that was not counted as lost when the costs were computed
            # (then the costs are recomputed).
            used: set[int] = set()
            for k in ranked.tolist():
                if need == 0 or len(used) >= _BATCH:
                    break
                t, c = int(trows[k]), int(tcols[k])
                if t in used:
                    continue
                h = holders[c]
                hit = h[covers[h, t]] if len(h) else h
                if len(hit) and int((margin[hit] <= 0).sum()) > lost[k]:
                    break
                ws.remove_item(t, c)
                used.add(t)
                if len(hit):
                    margin[hit] -= 1
                    covers[hit, t] = False
                need -= 1
                if criterion == "maxmin" and len(hit) and margin[hit].min() < top:
                    break


def _worst_margin(covers: np.ndarray, margin: np.ndarray, h: np.ndarray, rows: np.ndarray) -> float:
    """Smallest margin among the border itemsets ``h`` supported by some of ``rows``."""
    if len(h) == 0:
        return np.inf
    hit = covers[np.ix_(h, rows)].any(axis=1)
    return float(margin[h][hit].min()) if hit.any() else np.inf
