"""Exact association-rule hiding as an integer program (Aggarwal 2015, §20.4).

"The last class of problems formulates the hiding process as a constraint satisfaction
problem. This formulation can be solved using integer programming. While these methods
provide exact solutions, they are much slower, and their use is limited to problems of
smaller size." The formulation follows the inline approach of Gkoulalas-Divanis &
Verykios ("An integer programming approach for frequent itemset hiding", CIKM 2006),
extended so that a rule may also be hidden through its confidence:

* a binary ``u[t, q]`` for every occurrence of a sensitive item ``q`` in a transaction
  ``t`` that supports some sensitive itemset (only these can usefully be deleted;
  ``u = 0`` deletes the item);
* the support of an itemset ``I`` after sanitization is ``f_I + sum_t prod_{q in I} u[t, q]``
  (``f_I`` counts the supporting transactions nobody touches); products are linearized with
  a continuous ``y[t, I]`` bounded by ``y <= u[t, q]`` where a lower support is the risk and
  by ``y >= sum_q u[t, q] - |I| + 1`` where a higher support is;
* every sensitive rule ``X -> Y`` gets a binary ``h``: ``h = 1`` demands
  ``sup(X | Y) <= minc - 1``, ``h = 0`` demands ``sup(X | Y) - MCT * sup(X) <= -eps``
  (big-M switched);
* every non-sensitive frequent itemset that the deletions could push below MST gets a
  binary ``z_I`` with ``sup(I) >= minc * z_I``; itemsets that keep ``f_I >= minc`` cannot be
  lost and get no constraint;
* the objective maximizes ``W * sum z + sum u`` with ``W`` larger than the number of
  ``u``: first the fewest lost non-sensitive itemsets, then the fewest deleted items.

Because only deletions are made no ghost itemsets arise, and among all deletion-only
sanitizations the optimum loses the fewest non-sensitive frequent itemsets. The solution is
verified by recounting. When that program exceeds ``max_vars`` variables, a smaller one
with constraints only on the revised positive border (Sun & Yu's ``Bd+'``, as in
Gkoulalas-Divanis & Verykios) is tried: it still loses nothing whenever that is possible.
If that is too large as well, :class:`ExactTooLarge` is raised with the sizes (the API then
falls back to the border heuristic when asked to). The report says which ``scope`` was
solved.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ppdm.extras import require
from ppdm.hiding.border import revised_positive_border
from ppdm.hiding.problem import HidingError, Workspace
from ppdm.hiding.solvers import MilpProblem, MilpSolver, get_solver

sp = require("scipy.sparse", "hiding", "ppdm.hiding")

__all__ = ["ExactTooLarge", "build_program", "hide_exact"]

log = logging.getLogger(__name__)

_EPS = 1e-4


class ExactTooLarge(HidingError):
    """The integer program is larger than the configured limit."""


@dataclass
class _Builder:
    n_vars: int = 0
    lower: list[float] = field(default_factory=list)
    upper: list[float] = field(default_factory=list)
    integer: list[int] = field(default_factory=list)
    cost: list[float] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)
    cols: list[int] = field(default_factory=list)
    vals: list[float] = field(default_factory=list)
    row_lo: list[float] = field(default_factory=list)
    row_hi: list[float] = field(default_factory=list)

    def var(self, lo: float, hi: float, integer: bool, cost: float = 0.0) -> int:
        self.lower.append(lo)
        self.upper.append(hi)
        self.integer.append(int(integer))
        self.cost.append(cost)
        self.n_vars += 1
        return self.n_vars - 1

    def row(self, coefs: dict[int, float], lo: float, hi: float) -> None:
        r = len(self.row_lo)
        for j, v in coefs.items():
            self.rows.append(r)
            self.cols.append(j)
            self.vals.append(v)
        self.row_lo.append(lo)
        self.row_hi.append(hi)

    def problem(self) -> MilpProblem:
        a = sp.csr_matrix(
            (self.vals, (self.rows, self.cols)), shape=(len(self.row_lo), self.n_vars)
        )
        return MilpProblem(
            c=np.array(self.cost, dtype=np.float64),
            A=a,
            row_lower=np.array(self.row_lo, dtype=np.float64),
            row_upper=np.array(self.row_hi, dtype=np.float64),
            col_lower=np.array(self.lower, dtype=np.float64),
            col_upper=np.array(self.upper, dtype=np.float64),
            integrality=np.array(self.integer, dtype=np.int64),
        )


def _check_size(b: _Builder, max_vars: int) -> None:
    if b.n_vars > max_vars:
        raise ExactTooLarge(
            f"exact hiding: more than max_vars={max_vars} variables; use a heuristic "
            "or border method, or raise the limit"
        )


@dataclass
class Program:
    """The built program and what is needed to read a solution back."""

    problem: MilpProblem
    u_rows: np.ndarray  # transaction index of every u variable
    u_cols: np.ndarray  # workspace column of every u variable
    n_keep: int  # number of z variables (itemsets that could be lost)


def build_program(
    ws: Workspace,
    frequent: Mapping[frozenset, int],
    *,
    confidence: bool = True,
    max_vars: int = 200_000,
    scope: str = "all",
) -> Program:
    """Build the integer program of the module docstring for a fresh workspace.

    ``scope='all'`` puts a ``z_I`` on every non-sensitive frequent itemset that can be lost
    (the optimum then loses the fewest); ``scope='border'`` only on the revised positive
    border, a much smaller program whose optimum loses nothing whenever that is possible
    but otherwise only maximizes the number of border itemsets kept.
    """
    if scope not in ("all", "border"):
        raise ValueError(f"scope must be 'all' or 'border', got {scope!r}")
    n_rules = len(ws.rules)
    minc = ws.min_count()
    mct = ws.min_confidence
    mod = np.zeros(ws.db.n_transactions, dtype=bool)
    for z in ws.z_cols:
        mod |= ws.cover(z)
    mod_rows = np.flatnonzero(mod)
    sub = ws.matrix[mod_rows]
    nz_r, nz_c = np.nonzero(sub)
    n_u = len(nz_r)
    if n_u > max_vars:
        raise ExactTooLarge(
            f"exact hiding: {n_u} deletable item occurrences exceed max_vars={max_vars}; "
            "use a heuristic or border method, or raise the limit"
        )
    b = _Builder()
    uid = np.full(sub.shape, -1, dtype=np.int64)
    for r_, c_ in zip(nz_r.tolist(), nz_c.tolist(), strict=True):
        uid[r_, c_] = b.var(0, 1, True)

    upper_cache: dict[tuple[int, tuple[int, ...]], int] = {}

    def upper_product(local: int, cols: tuple[int, ...]) -> int:
        """Variable y <= prod u[local, q] (or the u itself for one column)."""
        if len(cols) == 1:
            return int(uid[local, cols[0]])
        key = (local, cols)
        j = upper_cache.get(key)
        if j is None:
            j = b.var(0, 1, False)
            for q in cols:
                b.row({j: 1.0, int(uid[local, q]): -1.0}, -np.inf, 0.0)
            upper_cache[key] = j
        return j

    def lower_product(local: int, cols: tuple[int, ...]) -> int:
        """Variable y >= prod u[local, q] (linear lower bound)."""
        if len(cols) == 1:
            return int(uid[local, cols[0]])
        j = b.var(0, 1, False)
        coefs = {j: 1.0}
        for q in cols:
            coefs[int(uid[local, q])] = -1.0
        b.row(coefs, -(len(cols) - 1), np.inf)
        return j

    in_mod = np.full(ws.db.n_transactions, -1, dtype=np.int64)
    in_mod[mod_rows] = np.arange(len(mod_rows))
    for r in range(n_rules):
        z, x = ws.z_cols[r], ws.x_cols[r]
        tz = np.flatnonzero(sub[:, list(z)].all(axis=1))
        ys = [lower_product(int(t), z) for t in tz.tolist()]
        big = float(len(tz) + 1)
        use_conf = confidence and mct > 0.0
        h = b.var(0 if use_conf else 1, 1, True)
        coefs = dict.fromkeys(ys, 1.0)
        coefs[h] = big
        b.row(coefs, -np.inf, minc - 1 + big)
        if use_conf:
            cover_x = ws.cover(x)
            f_x = int((cover_x & ~mod).sum())
            tx = in_mod[np.flatnonzero(cover_x & mod)]
            coefs = dict.fromkeys(ys, 1.0)
            for t in tx.tolist():
                j = upper_product(int(t), x)
                coefs[j] = coefs.get(j, 0.0) - mct
            coefs[h] = -big
            b.row(coefs, -np.inf, -_EPS + mct * f_x)
        _check_size(b, max_vars)
    sensitive = [r.itemset for r in ws.rules]
    sens_labels = set(ws.labels)
    z_vars = []
    keep = frequent if scope == "all" else revised_positive_border(frequent, sensitive)
    for itemset in keep:
        inter = itemset & sens_labels
        if not inter or any(s <= itemset for s in sensitive):
            continue
        cover = ws.db.cover(itemset)
        f_i = int((cover & ~mod).sum())
        if f_i >= minc:
            continue
        rows = in_mod[np.flatnonzero(cover & mod)]
        if len(rows) == 0:
            continue
        cols = ws.cols(inter)
        zi = b.var(0, 1, True)
        z_vars.append(zi)
        coefs = {zi: -float(minc)}
        for t in rows.tolist():
            j = upper_product(int(t), cols)
            coefs[j] = coefs.get(j, 0.0) + 1.0
        b.row(coefs, -float(f_i), np.inf)
        _check_size(b, max_vars)
    weight = float(n_u + 1)
    for j in range(n_u):
        b.cost[j] = -1.0
    for j in z_vars:
        b.cost[j] = -weight
    return Program(b.problem(), mod_rows[nz_r], nz_c, len(z_vars))


def hide_exact(
    ws: Workspace,
    frequent: Mapping[frozenset, int],
    *,
    solver: str | MilpSolver = "scipy",
    confidence: bool = True,
    time_limit: float | None = 60.0,
    max_vars: int = 200_000,
) -> dict[str, Any]:
    """Solve the program for ``ws`` and apply the deletions; return solver facts.

    Raises
    ------
    ExactTooLarge
        When the program would exceed ``max_vars`` variables.
    HidingError
        When the solver finds no solution within ``time_limit`` or the recount fails.
    """
    try:
        prog = build_program(ws, frequent, confidence=confidence, max_vars=max_vars)
        scope = "all"
    except ExactTooLarge as exc:
        log.info("%s; trying the border-only program", exc)
        prog = build_program(ws, frequent, confidence=confidence, max_vars=max_vars, scope="border")
        scope = "border"
    slv = get_solver(solver)
    log.info(
        "exact hiding: %d variables, %d constraints, solver %s",
        prog.problem.n_vars,
        prog.problem.n_rows,
        slv.name,
    )
    sol = slv.solve(prog.problem, time_limit=time_limit)
    if sol.x is None or sol.status not in ("optimal", "feasible"):
        raise HidingError(f"exact hiding: solver {slv.name} returned {sol.status}: {sol.message}")
    u = sol.x[: len(prog.u_rows)]
    for t, c in zip(prog.u_rows[u < 0.5].tolist(), prog.u_cols[u < 0.5].tolist(), strict=True):
        ws.remove_item(t, c)
    if not ws.all_hidden():
        raise HidingError("exact hiding: the solver's solution does not hide every rule")
    return {
        "solver": slv.name,
        "status": sol.status,
        "variables": prog.problem.n_vars,
        "constraints": prog.problem.n_rows,
        "itemset_constraints": prog.n_keep,
        "scope": scope,
    }
