"""Query auditing for statistical databases (Aggarwal 2015, §20.4).

"In query auditing, the assumption is that users are allowed to issue a sequence of
queries to the database. However, the response to one or more queries may sometimes lead
to the compromising of sensitive information about smaller sets of individuals. Therefore,
the responses to some of the queries are withheld (or audited) to prevent undesirable
disclosure."

The database is a vector ``x`` of ``n`` private real values; a query names a subset ``Q``
of the records and asks for ``sum``, ``max`` or ``min`` of ``x`` over ``Q``.

* :class:`SumAuditor` -- online auditing of SUM queries (Chin & Ozsoyoglu 1982; the
  simulatable auditor of Kenthapadi, Mishra & Nissim, PODS 2005). The answered queries
  are the rows of a 0/1 matrix ``A``; ``x_i`` is determined by the answers iff the unit
  vector ``e_i`` lies in the row space of ``A``. With ``A`` kept in reduced row echelon form
  over the rationals (exact :class:`fractions.Fraction` arithmetic, no rounding), that is iff
  some row of the echelon form equals ``e_i``. A query is denied iff answering it would
  make that happen. The decision looks only at the queries, never at the data, so a denial
  itself reveals nothing.
* :class:`MaxAuditor` -- online auditing of MAX (or MIN) queries over distinct real values
  (Chin 1986; Kenthapadi, Mishra & Nissim 2005). After answers ``(Q_j, m_j)``, each record
  has the upper bound ``mu_i = min{m_j : i in Q_j}``; ``x_i`` is determined iff for some
  answer ``m`` the records of every query answered ``m`` that can still reach ``m`` reduce to
  ``{i}``. The auditor is simulatable: it denies a query if *some* answer consistent with
  the past -- each past answer value or one value in each open interval between them --
  would determine a record, so the decision does not depend on the true answer.
* :func:`audit_log` -- the offline audit: given a log of answered queries, report which
  records each answer disclosed and which earlier answers it combined with.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Literal

import numpy as np

from ppdm.errors import ConfigError

__all__ = ["Disclosure", "MaxAuditor", "SumAuditor", "audit_log", "sum_determined"]


def _subset(query: Iterable[int], n: int) -> frozenset[int]:
    q = frozenset(int(i) for i in query)
    if not q:
        raise ConfigError("a query must name at least one record")
    if min(q) < 0 or max(q) >= n:
        raise ConfigError(f"query names records outside 0..{n - 1}")
    return q


def _sub_scaled(target: dict[int, Fraction], f: Fraction, src: dict[int, Fraction]) -> None:
    """``target -= f * src`` in place on sparse rows, dropping the entries that become 0."""
    for j, v in src.items():
        w = target.get(j, Fraction(0)) - f * v
        if w:
            target[j] = w
        else:
            target.pop(j, None)


class _Echelon:
    """Reduced row echelon form over the rationals, with each row's combination of the
    original queries (so that a disclosure can be traced to the answers behind it)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.rows: dict[int, dict[int, Fraction]] = {}  # pivot -> sparse row
        self.combos: dict[int, dict[int, Fraction]] = {}  # pivot -> {query index: coef}

    def reduce(
        self, vec: dict[int, Fraction], combo: dict[int, Fraction]
    ) -> tuple[dict[int, Fraction], dict[int, Fraction]]:
        vec, combo = dict(vec), dict(combo)
        for p in sorted(set(vec) & set(self.rows)):
            f = vec.get(p)
            if not f:
                continue
            _sub_scaled(vec, f, self.rows[p])
            _sub_scaled(combo, f, self.combos[p])
        return vec, combo

    def insert(self, vec: dict[int, Fraction], combo: dict[int, Fraction]) -> int | None:
        """Add a row; returns the new pivot or ``None`` if ``vec`` was dependent."""
        # Reducing against every pivot (not only those present at the start) is needed
        # because subtracting a row can introduce other pivot columns; loop until stable.
        while True:
            hit = set(vec) & set(self.rows)
            if not hit:
                break
            vec, combo = self.reduce(vec, combo)
        if not vec:
            return None
        p = min(vec)
        f = vec[p]
        vec = {j: v / f for j, v in vec.items()}
        combo = {j: v / f for j, v in combo.items()}
        for q in list(self.rows):
            g = self.rows[q].get(p)
            if g:
                _sub_scaled(self.rows[q], g, vec)
                _sub_scaled(self.combos[q], g, combo)
        self.rows[p] = vec
        self.combos[p] = combo
        return p

    def determined(self) -> dict[int, dict[int, Fraction]]:
        """``{record: combination of queries}`` for every record fixed by the rows."""
        return {p: self.combos[p] for p, row in self.rows.items() if len(row) == 1}

    def copy(self) -> _Echelon:
        e = _Echelon(self.n)
        e.rows = {p: dict(r) for p, r in self.rows.items()}
        e.combos = {p: dict(c) for p, c in self.combos.items()}
        return e


def sum_determined(queries: Sequence[Iterable[int]], n: int) -> set[int]:
    """Records whose value is fixed by the answers to the SUM ``queries`` (exact test)."""
    e = _Echelon(n)
    for k, q in enumerate(queries):
        qs = _subset(q, n)
        e.insert(dict.fromkeys(qs, Fraction(1)), {k: Fraction(1)})
    return set(e.determined())


@dataclass
class SumAuditor:
    """Online auditor of SUM queries over the private values ``values``.

    Examples
    --------
    >>> a = SumAuditor([3.0, 5.0, 7.0])
    >>> a.ask({0, 1}), a.ask({0, 1, 2})   # the second would reveal x_2 = 15 - 8
    (8.0, None)
    >>> a.ask({1, 2})  # safe: x_1 and x_2 stay tied together
    12.0
    >>> a.ask({0})  # denied: it would pin down x_0, and then x_1 and x_2
    """

    values: Sequence[float] | np.ndarray
    _echelon: _Echelon = field(init=False, repr=False)
    answered: list[frozenset[int]] = field(init=False, default_factory=list)
    denied: list[frozenset[int]] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        self.values = np.asarray(self.values, dtype=np.float64)
        if self.values.ndim != 1:
            raise ConfigError("values must be a 1-D array")
        self._echelon = _Echelon(len(self.values))

    @property
    def n(self) -> int:
        return len(self.values)

    def would_disclose(self, query: Iterable[int]) -> bool:
        """Whether answering ``query`` would determine some record (data-independent)."""
        q = _subset(query, self.n)
        trial = self._echelon.copy()
        trial.insert(dict.fromkeys(q, Fraction(1)), {})
        return bool(trial.determined())

    def ask(self, query: Iterable[int]) -> float | None:
        """The sum over ``query``, or ``None`` when the auditor denies it."""
        q = _subset(query, self.n)
        if self.would_disclose(q):
            self.denied.append(q)
            return None
        self._echelon.insert(dict.fromkeys(q, Fraction(1)), {len(self.answered): Fraction(1)})
        self.answered.append(q)
        return float(np.asarray(self.values)[sorted(q)].sum())


@dataclass
class MaxAuditor:
    """Online simulatable auditor of MAX (``kind='max'``) or MIN queries.

    Values must be distinct (the standard assumption of max auditing: with ties a
    maximum does not identify its holder).

    Examples
    --------
    >>> a = MaxAuditor([4.0, 9.0, 1.0, 6.0])
    >>> a.ask({0, 1, 2, 3})
    9.0
    >>> a.ask({0, 2, 3})   # 6 < 9 would leave record 1 alone at 9
    """

    values: Sequence[float] | np.ndarray
    kind: Literal["max", "min"] = "max"
    answered: list[tuple[frozenset[int], float]] = field(init=False, default_factory=list)
    denied: list[frozenset[int]] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        self.values = np.asarray(self.values, dtype=np.float64)
        if self.kind not in ("max", "min"):
            raise ConfigError("kind must be 'max' or 'min'")
        if len(np.unique(self.values)) != len(self.values):
            raise ConfigError("max/min auditing assumes distinct values")

    @property
    def n(self) -> int:
        return len(self.values)

    def _sign(self) -> float:
        return 1.0 if self.kind == "max" else -1.0

    def would_disclose(self, query: Iterable[int]) -> bool:
        """Whether some consistent answer to ``query`` would determine a record."""
        q = _subset(query, self.n)
        s = self._sign()
        past = [(qq, s * m) for qq, m in self.answered]
        for a in _candidate_answers(past):
            trial = [*past, (q, a)]
            if _consistent(trial, self.n) and _max_determined(trial, self.n):
                return True
        return False

    def ask(self, query: Iterable[int]) -> float | None:
        """The max (or min) over ``query``, or ``None`` when denied."""
        q = _subset(query, self.n)
        if self.would_disclose(q):
            self.denied.append(q)
            return None
        vals = np.asarray(self.values)[sorted(q)]
        ans = float(vals.max() if self.kind == "max" else vals.min())
        self.answered.append((q, ans))
        return ans


def _upper_bounds(answers: list[tuple[frozenset[int], float]], n: int) -> np.ndarray:
    mu = np.full(n, np.inf)
    for q, m in answers:
        idx = np.fromiter(q, dtype=np.int64)
        mu[idx] = np.minimum(mu[idx], m)
    return mu


def _holders(answers: list[tuple[frozenset[int], float]], n: int) -> dict[float, set[int]]:
    """For each answer value, the records that can hold it (in every query with that
    answer, and bounded exactly by it)."""
    mu = _upper_bounds(answers, n)
    out: dict[float, set[int]] = {}
    for q, m in answers:
        cand = {i for i in q if mu[i] == m}
        out[m] = cand if m not in out else out[m] & cand
    return out


def _consistent(answers: list[tuple[frozenset[int], float]], n: int) -> bool:
    """Distinct values admit these answers iff every answer has a possible holder and
    different answers can have different holders (a holder bounded by one value only)."""
    return all(h for h in _holders(answers, n).values())


def _max_determined(answers: list[tuple[frozenset[int], float]], n: int) -> dict[int, float]:
    return {next(iter(h)): m for m, h in _holders(answers, n).items() if len(h) == 1}


def _candidate_answers(past: list[tuple[frozenset[int], float]]) -> list[float]:
    """Representative answers: every past answer value and one point in each gap."""
    vals = sorted({m for _, m in past})
    if not vals:
        return [0.0]
    out = list(vals)
    out.append(vals[0] - 1.0)
    out.append(vals[-1] + 1.0)
    out.extend((a + b) / 2 for a, b in itertools.pairwise(vals))
    return out


@dataclass(frozen=True)
class Disclosure:
    """Record ``record`` became known at answer ``at`` (index in the log), as ``value``,
    from the answers ``by`` (indices into the log)."""

    record: int
    at: int
    by: tuple[int, ...]
    value: float | None


def audit_log(
    queries: Sequence[Iterable[int]],
    answers: Sequence[float] | None = None,
    *,
    n: int,
    kind: Literal["sum", "max", "min"] = "sum",
) -> list[Disclosure]:
    """Offline audit: which answers of a query log disclosed which records.

    Parameters
    ----------
    queries : sequence of record subsets
        The answered queries, in the order they were answered.
    answers : sequence of float, optional
        Their answers (needed for ``max``/``min``; for ``sum`` they give the values).
    n : int
        Number of records.
    kind : {'sum', 'max', 'min'}

    Returns
    -------
    list[Disclosure]
        One entry per disclosed record, in the order of disclosure.

    Examples
    --------
    >>> log = [{0, 1}, {1, 2}, {0, 1, 2}]
    >>> [(d.record, d.at, d.by, d.value) for d in audit_log(log, [8, 12, 15], n=3)]
    [(0, 2, (1, 2), 3.0), (1, 2, (0, 1, 2), 5.0), (2, 2, (0, 2), 7.0)]
    """
    qs = [_subset(q, n) for q in queries]
    if answers is not None and len(answers) != len(qs):
        raise ConfigError("queries and answers differ in length")
    out: list[Disclosure] = []
    known: set[int] = set()
    if kind == "sum":
        e = _Echelon(n)
        for k, q in enumerate(qs):
            e.insert(dict.fromkeys(q, Fraction(1)), {k: Fraction(1)})
            for rec, combo in sorted(e.determined().items()):
                if rec in known:
                    continue
                known.add(rec)
                val = None
                if answers is not None:
                    val = float(sum(c * Fraction(answers[j]) for j, c in combo.items()))
                out.append(Disclosure(rec, k, tuple(sorted(combo)), val))
        return out
    if kind not in ("max", "min"):
        raise ConfigError("kind must be 'sum', 'max' or 'min'")
    if answers is None:
        raise ConfigError("max/min audits need the answers")
    s = 1.0 if kind == "max" else -1.0
    hist: list[tuple[frozenset[int], float]] = []
    for k, (q, a) in enumerate(zip(qs, answers, strict=True)):
        hist.append((q, s * float(a)))
        for rec, m in sorted(_max_determined(hist, n).items()):
            if rec in known:
                continue
            known.add(rec)
            out.append(Disclosure(rec, k, _max_witnesses(hist, n, m), s * m))
    return out


def _max_witnesses(hist: list[tuple[frozenset[int], float]], n: int, m: float) -> tuple[int, ...]:
    """The answers that pin the holder of ``m``: those answered ``m``, and for every other
    member of them the first answer that bounds it below ``m``."""
    mu = _upper_bounds(hist, n)
    by = {j for j, (_, mm) in enumerate(hist) if mm == m}
    members = set().union(*(q for q, mm in hist if mm == m))
    for i in members:
        if mu[i] < m:
            by.add(next(j for j, (q, mm) in enumerate(hist) if i in q and mm == mu[i]))
    return tuple(sorted(by))
