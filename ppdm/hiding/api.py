"""One entry point for every hiding method: :func:`hide_rules`.

Methods (see :mod:`ppdm.hiding.heuristics`, :mod:`ppdm.hiding.border` and
:mod:`ppdm.hiding.exact` for the algorithms and their references):

========== ==================================================================
``1.a``    confidence reduction, add antecedent items (Verykios et al. 2004)
``1.b``    confidence reduction, delete consequent items
``2.a``    support reduction of the generating itemset below MST
``2.b``    support reduction until either threshold fails
``2.c``    support reduction in round robin over itemsets
``swa``    Sliding Window Algorithm (Oliveira & Zaiane 2003)
``remove`` transaction removal (Aggarwal 2015, §20.4, heuristic methods)
``border`` border-based, Sun & Yu (2005)
``maxmin`` border-based, Moustakides & Verykios Max-Min (2008)
``exact``  integer program (Gkoulalas-Divanis & Verykios 2006), HiGHS
========== ==================================================================
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ppdm.errors import ConfigError
from ppdm.hiding import border as _border
from ppdm.hiding import exact as _exact
from ppdm.hiding import heuristics as _h
from ppdm.hiding.methods import METHODS
from ppdm.hiding.metrics import Mined, SideEffects, bounded_frequent_itemsets, side_effects
from ppdm.hiding.problem import HidingError, SensitiveRule, Workspace, rule_is_hidden
from ppdm.hiding.solvers import MilpSolver
from ppdm.mining.itemsets import TransactionDB, as_transaction_db, min_count, support_counts
from ppdm.mining.rules import Rule
from ppdm.progress import Progress, progress_task

__all__ = ["METHODS", "HidingResult", "hide_rules"]

log = logging.getLogger(__name__)


def _canonical(method: str) -> str:
    m = method.strip().lower()
    aliases = {"1a": "1.a", "1b": "1.b", "2a": "2.a", "2b": "2.b", "2c": "2.c"}
    m = aliases.get(m, m)
    if m not in METHODS:
        raise ConfigError(f"unknown hiding method {method!r}; choose from {', '.join(METHODS)}")
    return m


@dataclass
class HidingResult:
    """What :func:`hide_rules` returns.

    Attributes
    ----------
    sanitized : TransactionDB
        The released database.
    method : str
        The method that produced it (after a fallback, the fallback's name).
    operations : dict
        Items removed and added, transactions modified and removed.
    time_s : float
        Wall time of the sanitization (mining the original included where the method
        needs the frequent itemsets; evaluation excluded).
    side_effects : SideEffects or None
        Recounted measures (``evaluate=True``).
    info : dict
        Method details (solver statistics, fallback reason, ...).
    """

    sanitized: TransactionDB
    method: str
    requested_method: str
    sensitive: list[SensitiveRule]
    min_support: float
    min_confidence: float
    operations: dict[str, int]
    time_s: float
    side_effects: SideEffects | None = None
    info: dict[str, Any] = field(default_factory=dict)

    def report(self) -> dict[str, Any]:
        """A JSON-ready summary (the CLI's ``--report``)."""
        return {
            "method": self.method,
            "requested_method": self.requested_method,
            "min_support": self.min_support,
            "min_confidence": self.min_confidence,
            "n_transactions_sanitized": self.sanitized.n_transactions,
            "sensitive_rules": [s.to_record() for s in self.sensitive],
            "operations": dict(self.operations),
            "time_s": self.time_s,
            "side_effects": None if self.side_effects is None else self.side_effects.to_dict(),
            "info": dict(self.info),
        }


def hide_rules(
    db: TransactionDB | Any,
    sensitive: Iterable[SensitiveRule | Rule | Mapping[str, Any]],
    *,
    min_support: float,
    min_confidence: float,
    method: str = "2.b",
    frequent: Mapping[frozenset, int] | None = None,
    evaluate: bool = True,
    before: Mined | None = None,
    solver: str | MilpSolver = "scipy",
    time_limit: float | None = 60.0,
    max_vars: int = 200_000,
    fallback: str | None = "border",
    swa_window: int = 10_000,
    swa_psi: float | None = None,
    progress: Progress | None = None,
) -> HidingResult:
    """Sanitize ``db`` so that no sensitive rule is mined at ``(min_support,
    min_confidence)``.

    Parameters
    ----------
    db : TransactionDB or DataFrame or list
        The original data (not modified), in any layout
        :func:`ppdm.mining.itemsets.as_transaction_db` accepts: a one-hot DataFrame (as
        mlxtend's ``TransactionEncoder`` writes), a column of item lists, a list of
        transactions. The release is :attr:`HidingResult.sanitized`, a
        :class:`TransactionDB` (``.to_frame()`` gives it back as a one-hot DataFrame).
    sensitive : iterable
        Sensitive rules (:class:`SensitiveRule`, mined :class:`~ppdm.mining.rules.Rule`, or
        ``{"antecedent": [...], "consequent": [...]}``).
    min_support, min_confidence : float
        The mining thresholds MST and MCT the release must resist.
    method : str
        One of :data:`METHODS`.
    frequent : Mapping, optional
        Frequent itemsets of ``db`` at ``min_support`` (mined when needed and absent).
    evaluate : bool
        Recount the side effects (mines both databases).
    before : Mined, optional
        The mined original, to share between calls when evaluating several methods.
    solver, time_limit, max_vars :
        For ``exact``: the MILP solver (``"scipy"``, ``"highspy"`` or an object), its time
        limit in seconds and the largest program accepted.
    fallback : str or None
        Method used when ``exact`` is too large or unsolved (``None`` raises instead).
    swa_window, swa_psi :
        SWA's window size and disclosure threshold.

    Returns
    -------
    HidingResult

    Examples
    --------
    >>> from ppdm.mining.readers import from_transactions
    >>> db = from_transactions([[1, 2, 3], [1, 2], [1, 2, 4], [2, 3], [1, 3], [1, 2, 3]])
    >>> res = hide_rules(db, [{"antecedent": [1], "consequent": [2]}],
    ...                  min_support=0.5, min_confidence=0.7, method="1.b")
    >>> res.side_effects.hiding_failure, res.operations["items_removed"]
    (0, 1)
    """
    m = _canonical(method)
    db = as_transaction_db(db, argument="db")
    rules = [SensitiveRule.of(s) for s in sensitive]
    if not rules:
        raise ConfigError("no sensitive rules given")
    info: dict[str, Any] = {}
    already = [r for r in rules if rule_is_hidden(db, r, min_support, min_confidence)]
    if already:
        info["already_hidden"] = [r.to_record() for r in already]
    t0 = time.perf_counter()
    with progress_task(progress, f"hiding ({m})", None):
        ws = Workspace(db, rules, min_support=min_support, min_confidence=min_confidence)
        used = m
        if m in ("border", "maxmin", "exact") and frequent is None:
            frequent = (
                before.itemsets
                if before is not None
                else bounded_frequent_itemsets(db, min_support)
            )
        if m == "exact":
            try:
                info.update(
                    _exact.hide_exact(
                        ws,
                        frequent or {},
                        solver=solver,
                        time_limit=time_limit,
                        max_vars=max_vars,
                    )
                )
            except HidingError as exc:
                if fallback is None:
                    raise
                fb = _canonical(fallback)
                if fb == "exact":
                    raise
                log.warning("%s; falling back to %s", exc, fb)
                info["fallback_reason"] = str(exc)
                ws = Workspace(db, rules, min_support=min_support, min_confidence=min_confidence)
                used = fb
                _run(ws, fb, frequent or {}, swa_window, swa_psi)
            else:
                if info.get("status") != "optimal" and fallback is not None:
                    # Not proven optimal (time limit): keep whichever of the solver's best
                    # solution and the fallback loses fewer frequent itemsets.
                    fb = _canonical(fallback)
                    if fb != "exact":
                        alt = Workspace(
                            db, rules, min_support=min_support, min_confidence=min_confidence
                        )
                        _run(alt, fb, frequent or {}, swa_window, swa_psi)
                        lost_exact = _lost_itemsets(ws, frequent or {}, min_support)
                        lost_alt = _lost_itemsets(alt, frequent or {}, min_support)
                        info["incumbent_lost_itemsets"] = lost_exact
                        info["fallback_lost_itemsets"] = lost_alt
                        if lost_alt < lost_exact:
                            info["fallback_reason"] = (
                                f"solver stopped at {info.get('status')} with {lost_exact} lost "
                                f"itemsets; {fb} lost {lost_alt}"
                            )
                            ws, used = alt, fb
        else:
            _run(ws, m, frequent or {}, swa_window, swa_psi)
        sanitized = ws.sanitized()
    if ws.notes:
        info["notes"] = list(ws.notes)
    elapsed = time.perf_counter() - t0
    if not ws.all_hidden():  # pragma: no cover - every method raises instead
        raise HidingError(f"{used}: some sensitive rules are still minable")
    effects = None
    if evaluate:
        effects = side_effects(
            db,
            sanitized,
            rules,
            min_support=min_support,
            min_confidence=min_confidence,
            before=before,
        )
    return HidingResult(
        sanitized=sanitized,
        method=used,
        requested_method=m,
        sensitive=rules,
        min_support=float(min_support),
        min_confidence=float(min_confidence),
        operations=ws.operations(),
        time_s=elapsed,
        side_effects=effects,
        info=info,
    )


def _lost_itemsets(ws: Workspace, frequent: Mapping[frozenset, int], min_support: float) -> int:
    """Frequent itemsets of the original data that are no longer frequent in ``ws``."""
    if not frequent:
        return 0
    sanitized = ws.sanitized()
    keys = [tuple(sorted(k)) for k in frequent]
    counts = support_counts(sanitized, keys)
    return int(np.count_nonzero(counts < min_count(min_support, sanitized.n_transactions)))


def _run(
    ws: Workspace,
    m: str,
    frequent: Mapping[frozenset, int],
    swa_window: int,
    swa_psi: float | None,
) -> None:
    if m == "1.a":
        _h.algorithm_1a(ws)
    elif m == "1.b":
        _h.algorithm_1b(ws)
    elif m == "2.a":
        _h.algorithm_2a(ws)
    elif m == "2.b":
        _h.algorithm_2b(ws)
    elif m == "2.c":
        _h.algorithm_2c(ws)
    elif m == "swa":
        _h.sliding_window(ws, window=swa_window, psi=swa_psi)
    elif m == "remove":
        _h.transaction_removal(ws)
    elif m in ("border", "maxmin"):
        _border.hide_border(ws, frequent, criterion=m)
    else:  # pragma: no cover - _canonical filters
        raise ConfigError(f"unknown method {m}")
