"""A small mixed-integer linear programming interface with open-source back ends.

Exact hiding (:mod:`ppdm.hiding.exact`) builds a :class:`MilpProblem`::

    minimize    c @ x
    subject to  row_lower <= A @ x <= row_upper
                col_lower <= x <= col_upper,   x[j] integer where integrality[j] == 1

and hands it to a :class:`MilpSolver`. Two solvers ship: ``"scipy"`` (HiGHS through
:func:`scipy.optimize.milp`) and ``"highspy"`` (HiGHS through its own Python binding).
Another solver (CBC through PuLP, a commercial one) only needs a ``solve`` method.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol, cast

import numpy as np

from ppdm.errors import ConfigError
from ppdm.extras import require

if TYPE_CHECKING:
    from scipy.sparse import csr_matrix

sp = require("scipy.sparse", "hiding", "ppdm.hiding")

__all__ = [
    "HighspySolver",
    "MilpProblem",
    "MilpSolution",
    "MilpSolver",
    "ScipyMilpSolver",
    "get_solver",
]

Status = Literal["optimal", "feasible", "infeasible", "no_solution", "error"]


@dataclass
class MilpProblem:
    """A MILP in the form of the module docstring (``A`` is a scipy sparse matrix)."""

    c: np.ndarray
    A: csr_matrix
    row_lower: np.ndarray
    row_upper: np.ndarray
    col_lower: np.ndarray
    col_upper: np.ndarray
    integrality: np.ndarray

    @property
    def n_vars(self) -> int:
        return len(self.c)

    @property
    def n_rows(self) -> int:
        return self.A.shape[0]


@dataclass
class MilpSolution:
    """Outcome: ``status`` is ``optimal``, ``feasible`` (time limit hit with an incumbent),
    ``infeasible``, ``no_solution`` (limit hit without one) or ``error``."""

    status: Status
    x: np.ndarray | None
    objective: float | None
    message: str = ""


class MilpSolver(Protocol):
    """What exact hiding needs from a MILP solver."""

    name: str

    def solve(self, problem: MilpProblem, *, time_limit: float | None = None) -> MilpSolution: ...


class ScipyMilpSolver:
    """HiGHS through :func:`scipy.optimize.milp`."""

    name = "scipy"

    def solve(self, problem: MilpProblem, *, time_limit: float | None = None) -> MilpSolution:
        from scipy.optimize import Bounds, LinearConstraint, milp

        options: dict = {"disp": False}
        if time_limit is not None:
            options["time_limit"] = float(time_limit)
        cons = (
            [LinearConstraint(problem.A, problem.row_lower, problem.row_upper)]
            if problem.n_rows
            else []
        )
        res = milp(
            problem.c,
            constraints=cons,
            integrality=problem.integrality,
            bounds=Bounds(problem.col_lower, problem.col_upper),
            options=options,
        )
        # scipy statuses: 0 optimal, 1 iteration/time limit, 2 infeasible, 3 unbounded, 4 other
        if res.status == 0:
            return MilpSolution("optimal", np.asarray(res.x), float(res.fun), res.message)
        if res.status == 1:
            if res.x is not None:
                return MilpSolution("feasible", np.asarray(res.x), float(res.fun), res.message)
            return MilpSolution("no_solution", None, None, res.message)
        if res.status == 2:
            return MilpSolution("infeasible", None, None, res.message)
        return MilpSolution("error", None, None, res.message)


class HighspySolver:
    """HiGHS through the ``highspy`` binding (no scipy round trip)."""

    name = "highspy"

    def solve(self, problem: MilpProblem, *, time_limit: float | None = None) -> MilpSolution:
        highspy = require("highspy", "hiding", "the exact rule hiding (HiGHS)")

        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        if time_limit is not None:
            h.setOptionValue("time_limit", float(time_limit))
        lp = highspy.HighsLp()
        lp.num_col_ = problem.n_vars
        lp.num_row_ = problem.n_rows
        lp.col_cost_ = np.asarray(problem.c, dtype=np.float64)
        lp.col_lower_ = np.asarray(problem.col_lower, dtype=np.float64)
        lp.col_upper_ = np.asarray(problem.col_upper, dtype=np.float64)
        lp.row_lower_ = np.asarray(problem.row_lower, dtype=np.float64)
        lp.row_upper_ = np.asarray(problem.row_upper, dtype=np.float64)
        a = sp.csc_matrix(problem.A)
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = a.indptr.astype(np.int32)
        lp.a_matrix_.index_ = a.indices.astype(np.int32)
        lp.a_matrix_.value_ = a.data.astype(np.float64)
        lp.a_matrix_.num_col_ = problem.n_vars
        lp.a_matrix_.num_row_ = problem.n_rows
        lp.integrality_ = [
            highspy.HighsVarType.kInteger if v else highspy.HighsVarType.kContinuous
            for v in problem.integrality
        ]
        h.passModel(lp)
        h.run()
        status = h.getModelStatus()
        ms = highspy.HighsModelStatus
        info = h.getInfo()
        has_sol = info.primal_solution_status == 2  # kSolutionStatusFeasible
        x = np.asarray(h.getSolution().col_value) if has_sol else None
        obj = float(info.objective_function_value) if has_sol else None
        text = h.modelStatusToString(status)
        if status == ms.kOptimal:
            return MilpSolution("optimal", x, obj, text)
        if status == ms.kInfeasible:
            return MilpSolution("infeasible", None, None, text)
        if status in (ms.kTimeLimit, ms.kIterationLimit, ms.kSolutionLimit, ms.kInterrupt):
            return MilpSolution("feasible" if has_sol else "no_solution", x, obj, text)
        return MilpSolution("error", None, None, text)


_SOLVERS = {"scipy": ScipyMilpSolver, "highs": ScipyMilpSolver, "highspy": HighspySolver}


def get_solver(solver: str | MilpSolver) -> MilpSolver:
    """A solver by name (``"scipy"``/``"highs"``, ``"highspy"``) or the object itself."""
    if not isinstance(solver, str):
        return solver
    try:
        return cast(MilpSolver, _SOLVERS[solver]())
    except KeyError:
        raise ConfigError(
            f"unknown MILP solver {solver!r}; choose from {sorted(_SOLVERS)}"
        ) from None
