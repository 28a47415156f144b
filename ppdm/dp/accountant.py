"""A privacy budget accountant with sequential and parallel composition.

Seidl 2016 ("Composition"): *sequential composition* -- a sequence of computations that are
each differentially private in isolation is private with the **sum** of their epsilons;
*parallel composition* -- computations on disjoint subsets of the data cost only the
**worst** (largest) of their epsilons. For ``(epsilon, delta)`` mechanisms the basic
composition theorems add (sequential) or take the maximum of (parallel) both parameters
(Dwork and Roth 2014, Theorem 3.16; McSherry 2009 for parallel composition).

The accountant checks every charge *before* it is made: a query that would exceed the
budget raises :class:`BudgetExceededError` and is not recorded, so callers charge first
and compute second (all query functions in :mod:`ppdm.dp.queries` do).
Amounts are exact rationals (floats read by their decimal, ``0.1`` is 1/10), so three
queries of 0.1 fit in a budget of 0.3 and rounding never lets a query slip through.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction

from ppdm.dp._exact import to_fraction
from ppdm.errors import PPDMError

__all__ = ["BudgetAccountant", "BudgetExceededError", "Charge", "ParallelGroup"]

log = logging.getLogger(__name__)

Amount = float | Fraction | str


class BudgetExceededError(PPDMError):
    """A query would spend more privacy budget than is left; nothing was spent."""


@dataclass(frozen=True)
class Charge:
    """One entry of the ledger."""

    label: str
    epsilon: Fraction
    delta: Fraction


def _amount(name: str, value: Amount) -> Fraction:
    f = to_fraction(value)  # type: ignore[arg-type]
    if f < 0:
        raise ValueError(f"{name} must be non-negative, got {value}")
    return f


class BudgetAccountant:
    """Tracks the ``(epsilon, delta)`` spent against a total budget.

    Parameters
    ----------
    epsilon : float
        Total epsilon budget (may be ``float('inf')`` only via ``None``: no limit).
    delta : float
        Total delta budget (default 0: only pure-DP mechanisms fit).

    Examples
    --------
    Sequential composition adds up; the query that would exceed the budget is refused.

    >>> acct = BudgetAccountant(epsilon=1.0)
    >>> acct.spend(0.5, label="count")
    >>> acct.spend(0.3, label="sum")
    >>> acct.remaining()
    (Fraction(1, 5), Fraction(0, 1))
    >>> acct.spend(0.3, label="mean")
    Traceback (most recent call last):
    ...
    ppdm.dp.accountant.BudgetExceededError: query 'mean' needs epsilon=0.3, delta=0 but only epsilon=0.2, delta=0 is left

    Parallel composition over disjoint partitions charges the largest partition.

    >>> acct = BudgetAccountant(epsilon=1.0)
    >>> with acct.parallel(label="per-region") as group:
    ...     group.spend(0.4, partition="north")
    ...     group.spend(0.4, partition="south")
    ...     group.spend(0.2, partition="north")  # north now at 0.6
    >>> acct.spent()
    (Fraction(3, 5), Fraction(0, 1))
    """

    def __init__(self, epsilon: Amount | None, delta: Amount = 0) -> None:
        self.epsilon = None if epsilon is None else _amount("epsilon", epsilon)
        self.delta = _amount("delta", delta)
        if self.delta >= 1:
            raise ValueError("delta budget must be below 1")
        self.ledger: list[Charge] = []
        self._eps_spent = Fraction(0)
        self._delta_spent = Fraction(0)

    def spent(self) -> tuple[Fraction, Fraction]:
        return self._eps_spent, self._delta_spent

    def remaining(self) -> tuple[Fraction | None, Fraction]:
        eps = None if self.epsilon is None else self.epsilon - self._eps_spent
        return eps, self.delta - self._delta_spent

    def can_spend(self, epsilon: Amount, delta: Amount = 0) -> bool:
        """Would a charge of ``(epsilon, delta)`` fit?"""
        e, d = _amount("epsilon", epsilon), _amount("delta", delta)
        fits_eps = self.epsilon is None or self._eps_spent + e <= self.epsilon
        return fits_eps and self._delta_spent + d <= self.delta

    def spend(self, epsilon: Amount, delta: Amount = 0, *, label: str = "query") -> None:
        """Charge ``(epsilon, delta)`` (sequential composition) or raise
        :class:`BudgetExceededError` without charging anything."""
        e, d = _amount("epsilon", epsilon), _amount("delta", delta)
        if not self.can_spend(e, d):
            left_e, left_d = self.remaining()
            raise BudgetExceededError(
                f"query {label!r} needs epsilon={_fmt(e)}, delta={_fmt(d)} but only "
                f"epsilon={_fmt(left_e)}, delta={_fmt(left_d)} is left"
            )
        self._eps_spent += e
        self._delta_spent += d
        self.ledger.append(Charge(label, e, d))
        log.debug("spent epsilon=%s delta=%s on %s", e, d, label)

    @contextmanager
    def parallel(self, *, label: str = "parallel") -> Iterator[ParallelGroup]:
        """A group of queries on disjoint partitions of the data (parallel composition)."""
        yield ParallelGroup(self, label)

    def summary(self) -> dict[str, object]:
        """A JSON-friendly view of budget, spending and ledger."""
        left_e, left_d = self.remaining()
        return {
            "epsilon_budget": None if self.epsilon is None else float(self.epsilon),
            "delta_budget": float(self.delta),
            "epsilon_spent": float(self._eps_spent),
            "delta_spent": float(self._delta_spent),
            "epsilon_remaining": None if left_e is None else float(left_e),
            "delta_remaining": float(left_d),
            "ledger": [
                {"label": c.label, "epsilon": float(c.epsilon), "delta": float(c.delta)}
                for c in self.ledger
            ],
        }


class ParallelGroup:
    """Queries on disjoint partitions: the group costs the maximum over partitions.

    Queries on the *same* partition compose sequentially (their costs add); the group's
    charge to the accountant is ``(max_p eps_p, max_p delta_p)`` and grows as partitions
    do. Each increase is checked against the accountant before it is recorded.
    """

    def __init__(self, accountant: BudgetAccountant, label: str) -> None:
        self.accountant = accountant
        self.label = label
        self.partitions: dict[object, tuple[Fraction, Fraction]] = {}
        self._charged = (Fraction(0), Fraction(0))

    def spend(self, epsilon: Amount, delta: Amount = 0, *, partition: object) -> None:
        e, d = _amount("epsilon", epsilon), _amount("delta", delta)
        pe, pd = self.partitions.get(partition, (Fraction(0), Fraction(0)))
        new_p = (pe + e, pd + d)
        new_e = max(self._charged[0], new_p[0])
        new_d = max(self._charged[1], new_p[1])
        inc_e, inc_d = new_e - self._charged[0], new_d - self._charged[1]
        if inc_e or inc_d:
            self.accountant.spend(inc_e, inc_d, label=f"{self.label}[{partition}]")
        self.partitions[partition] = new_p
        self._charged = (new_e, new_d)


def _fmt(x: Fraction | None) -> str:
    if x is None:
        return "inf"
    return f"{float(x):.6g}"
