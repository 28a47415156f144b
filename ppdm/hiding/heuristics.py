"""Heuristic association-rule hiding (Aggarwal 2015, §20.4, "heuristic methods").

Each function edits a :class:`~ppdm.hiding.problem.Workspace` in place until every
sensitive rule is hidden, and raises :class:`~ppdm.hiding.problem.HidingError` when its
strategy cannot hide a rule. Hiding one rule can un-hide another (deleting an antecedent
item raises the other rule's confidence; adding items raises supports), so every method
sweeps over the rules until none is minable.

Confidence and support reduction after Verykios, Elmagarmid, Bertino, Saygin & Dasseni,
"Association rule hiding", IEEE TKDE 16(4), 2004 (and Dasseni et al., IHW 2001):

* ``1.a`` -- raise ``c(X)`` by adding the missing antecedent items to transactions that
  partially support ``X`` and do not contain all of ``Y``, those missing the fewest items
  first (then the shortest), until ``conf < MCT``.
* ``1.b`` -- lower ``c(X | Y)`` by deleting a consequent item (the one with the largest
  support) from the shortest transactions supporting the rule, until ``conf < MCT`` or
  ``supp < MST``.
* ``2.a`` -- lower ``c(X | Y)`` below MST: from the shortest supporting transaction delete
  the rule item with the largest current support (the one least likely to fall below MST).
* ``2.b`` -- as 2.a, but stop as soon as the rule is hidden by either threshold.
* ``2.c`` -- itemset hiding in round robin: generating itemsets by decreasing size, then
  support; their supporting transactions by increasing length; the ``i``-th chosen
  transaction loses the ``i``-th item of the itemset (cyclically) until ``supp < MST``.

Where the paper leaves a choice open (ties, the consequent item of 1.b) the docstrings
above state ours; ties are broken by transaction index, so results are deterministic.

``swa`` -- the Sliding Window Algorithm of Oliveira & Zaiane, "Protecting sensitive
knowledge by data sanitization" (ICDM 2003): transactions are scanned in windows of ``K``;
in each window the sensitive transactions of every rule, shortest first, are sanitized up
to the rule's quota for that window by deleting the *victim* item, the item shared by most
of the sensitive rules the transaction supports. With a disclosure threshold ``psi`` a rule
keeps ``psi`` of its supporting transactions; by default (``psi=None``) the quota is the
number of deletions needed to push the rule below MST, spread over the windows in
proportion to where its transactions lie.

``remove`` -- transaction removal (Aggarwal 2015, §20.4: "a subset of transactions are
removed from the data"): drop the transactions that support the most still-minable
sensitive rules, shortest first, until all are hidden (the database shrinks, so relative
supports of other itemsets rise: ghost rules are possible).
"""

from __future__ import annotations

import math

import numpy as np

from ppdm.hiding.problem import HidingError, Workspace
from ppdm.mining.rules import is_confident

__all__ = [
    "algorithm_1a",
    "algorithm_1b",
    "algorithm_2a",
    "algorithm_2b",
    "algorithm_2c",
    "sliding_window",
    "transaction_removal",
]

_MAX_SWEEPS = 10


def _sweep(ws: Workspace, hide_one, name: str, order: list[int] | None = None) -> None:
    """Apply ``hide_one(ws, r)`` to every minable rule (in ``order``, default rule order)
    until none is left."""
    rules = range(len(ws.rules)) if order is None else order
    for _ in range(_MAX_SWEEPS):
        pending = [r for r in rules if not ws.hidden(r)]
        if not pending:
            return
        for r in pending:
            if not ws.hidden(r):
                hide_one(ws, r)
    if not ws.all_hidden():
        _finish_with_support(ws, name)


def _finish_with_support(ws: Workspace, name: str) -> None:
    """Hide the rules that keep re-appearing by support reduction (2.a deletions).

    Hiding one rule can un-hide another (adding items raises supports, deleting an
    antecedent item raises a confidence, dropping transactions lowers ``n``); a rule whose
    generating itemset is below MST through deletions stays hidden under any further
    deletion, so this always terminates with every rule hidden.
    """
    stuck = [ws.rules[r].to_record() for r in range(len(ws.rules)) if not ws.hidden(r)]
    ws.notes.append(f"{name} did not converge on {stuck}; finished with 2.a deletions")
    for _ in range(len(ws.rules) + 1):
        pending = [r for r in range(len(ws.rules)) if not ws.hidden(r)]
        if not pending:
            return
        for r in pending:
            _hide_2a(ws, r)
    if not ws.all_hidden():  # pragma: no cover - see the docstring
        raise HidingError(f"{name}: could not hide every sensitive rule")


def _hide_2a(ws: Workspace, r: int) -> None:
    z = ws.z_cols[r]
    for t in _shortest_first(ws, ws.cover(z)).tolist():
        if ws.support_hidden(r):
            return
        ws.remove_item(t, _best_item(ws, z, t))


def _shortest_first(ws: Workspace, mask: np.ndarray) -> np.ndarray:
    idx = np.flatnonzero(mask)
    return idx[np.argsort(ws.length[idx], kind="stable")]


def _best_item(ws: Workspace, cols: tuple[int, ...], t: int) -> int:
    """Column of ``cols`` present in ``t`` with the largest current support."""
    present = [c for c in cols if ws.matrix[t, c]]
    return max(present, key=lambda c: (ws.item_count[c], -c))


def algorithm_1a(ws: Workspace, *, complete: bool = True) -> None:
    """Verykios et al. 1.a: confidence reduction by increasing the antecedent's support.

    A rule whose consequent is in nearly every transaction cannot be hidden this way; with
    ``complete`` (the default) such a rule is finished with 1.b and a note is recorded in
    ``ws.notes``, otherwise :class:`HidingError` is raised.
    """

    def hide(ws: Workspace, r: int) -> None:
        x, y, z = ws.x_cols[r], ws.y_cols[r], ws.z_cols[r]
        sub = ws.matrix[:, list(x)]
        missing = len(x) - sub.sum(axis=1)
        cand = ws.alive & (missing > 0) & ~ws.matrix[:, list(y)].all(axis=1)
        idx = np.flatnonzero(cand)
        idx = idx[np.lexsort((idx, ws.length[idx], missing[idx]))]
        for t in idx.tolist():
            if not is_confident(ws.counts[z], ws.counts[x], ws.min_confidence):
                return
            for c in x:
                if not ws.matrix[t, c]:
                    ws.add_item(t, c)
        if not is_confident(ws.counts[z], ws.counts[x], ws.min_confidence):
            return
        if not complete:
            raise HidingError(
                f"1.a cannot hide {ws.rules[r].to_record()}: not enough transactions to "
                "add the antecedent to"
            )
        ws.notes.append(
            f"1.a could not hide {ws.rules[r].to_record()} (too few transactions without "
            "the consequent); finished with 1.b"
        )
        hide_1b(ws, r)

    _sweep(ws, hide, "1.a")


def hide_1b(ws: Workspace, r: int) -> None:
    """1.b on one rule: delete consequent items, shortest supporting transactions first."""
    y, z = ws.y_cols[r], ws.z_cols[r]
    for t in _shortest_first(ws, ws.cover(z)).tolist():
        if ws.hidden(r):
            return
        ws.remove_item(t, _best_item(ws, y, t))


def algorithm_1b(ws: Workspace) -> None:
    """Verykios et al. 1.b: confidence reduction by decreasing the consequent's support."""
    _sweep(ws, hide_1b, "1.b")


def algorithm_2a(ws: Workspace) -> None:
    """Verykios et al. 2.a: support reduction of the generating itemset below MST."""
    _sweep(ws, _hide_2a, "2.a")


def algorithm_2b(ws: Workspace) -> None:
    """Verykios et al. 2.b: support reduction until the rule fails either threshold."""

    def hide(ws: Workspace, r: int) -> None:
        z = ws.z_cols[r]
        for t in _shortest_first(ws, ws.cover(z)).tolist():
            if ws.hidden(r):
                return
            ws.remove_item(t, _best_item(ws, z, t))

    _sweep(ws, hide, "2.b")


def algorithm_2c(ws: Workspace) -> None:
    """Verykios et al. 2.c: round-robin deletion, largest itemsets first."""

    def hide(ws: Workspace, r: int) -> None:
        z = ws.z_cols[r]
        for i, t in enumerate(_shortest_first(ws, ws.cover(z)).tolist()):
            if ws.support_hidden(r):
                return
            ws.remove_item(t, z[i % len(z)])

    order = sorted(
        range(len(ws.rules)),
        key=lambda r: (-len(ws.z_cols[r]), -ws.counts[ws.z_cols[r]], r),
    )
    _sweep(ws, hide, "2.c", order)


def sliding_window(ws: Workspace, *, window: int = 10_000, psi: float | None = None) -> None:
    """Oliveira & Zaiane's SWA with window size ``window`` and disclosure threshold ``psi``.

    ``psi`` in ``[0, 1]`` is the fraction of each rule's supporting transactions left
    untouched (0 sanitizes all of them); ``None`` sanitizes just enough to push each rule
    below MST. Any rule still minable after the scan is finished with 2.a-style deletions,
    so the result always hides every rule.
    """
    if window < 1:
        raise ValueError("window must be positive")
    if psi is not None and not 0.0 <= psi <= 1.0:
        raise ValueError("psi must be in [0, 1]")
    n_rules = len(ws.rules)
    covers = np.stack([ws.cover(z) for z in ws.z_cols], axis=1)  # (n, rules)
    total = covers.sum(axis=0)
    minc = ws.min_count()
    if psi is None:
        quota = np.maximum(total - minc + 1, 0)
    else:
        quota = np.ceil(total * (1.0 - psi)).astype(np.int64)
    # Item frequency among the sensitive rules, for the victim choice.
    done = np.zeros(n_rules, dtype=np.int64)
    seen = np.zeros(n_rules, dtype=np.int64)
    for start in range(0, ws.db.n_transactions, window):
        stop = min(start + window, ws.db.n_transactions)
        block = covers[start:stop]
        in_block = block.sum(axis=0)
        seen += in_block
        marked: set[int] = set()
        for r in range(n_rules):
            # Quota up to this window, proportional to the rule's transactions seen so far.
            want = math.ceil(quota[r] * seen[r] / total[r]) if total[r] else 0
            k = int(min(max(want - done[r], 0), in_block[r]))
            if k == 0:
                continue
            rows = start + np.flatnonzero(block[:, r])
            rows = rows[np.argsort(ws.length[rows], kind="stable")][:k]
            marked.update(rows.tolist())
            done[r] += k
        for t in sorted(marked):
            supported = [r for r in range(n_rules) if all(ws.matrix[t, c] for c in ws.z_cols[r])]
            if not supported:
                continue
            freq: dict[int, int] = {}
            for r in supported:
                for c in ws.z_cols[r]:
                    freq[c] = freq.get(c, 0) + 1
            victim = max(freq, key=lambda c: (freq[c], ws.item_count[c], -c))
            ws.remove_item(t, victim)
    if not ws.all_hidden():
        algorithm_2b(ws)


def transaction_removal(ws: Workspace) -> None:
    """Drop whole transactions supporting the sensitive rules (Aggarwal 2015, §20.4)."""
    for _ in range(_MAX_SWEEPS):
        pending = [r for r in range(len(ws.rules)) if not ws.hidden(r)]
        if not pending:
            return
        for r in pending:
            if ws.hidden(r):
                continue
            covers = np.stack([ws.cover(ws.z_cols[q]) for q in pending], axis=1)
            score = covers.sum(axis=1)
            idx = np.flatnonzero(covers[:, pending.index(r)])
            idx = idx[np.lexsort((idx, ws.length[idx], -score[idx]))]
            for t in idx.tolist():
                if ws.hidden(r):
                    break
                ws.drop_transaction(t)
    if not ws.all_hidden():
        _finish_with_support(ws, "remove")
