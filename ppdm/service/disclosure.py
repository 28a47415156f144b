"""Cross-job disclosure auditing: what the answers so far reveal about this party's inputs.

Every aggregate a node contributes to is a linear query over the inputs of the parties
in it: a sum over a party set ``S`` is the row ``1_S`` of a 0/1 matrix over the roster.
Sums over {alice, bob, carol, mallory} and then over {alice, carol, mallory} determine
bob's input; so does any set of answers whose rows combine linearly to bob's unit vector
(Aggarwal 2015, §20.4.2, query auditing). Before a node lets a job run, it asks
:func:`ppdm.hiding.audit.sum_determined` -- the exact SUM auditor of
:mod:`ppdm.hiding.audit`, in rational arithmetic -- whether the answers so far on the same
input, plus this job's, determine the input of *any* party, assuming any ``colluders``
other members pool what they know: every answer (the results go to every member) and
their own inputs (one unit row each). If so, the job is refused with rule ``audit``.

Protecting every party, not only itself, matters: the job that completes a differencing
attack on bob need not include bob (the second sum above), so only the nodes that took
part in both jobs can see it. A node therefore audits over the answers it took part in
*and* those its co-members in the new job report (:meth:`DisclosureAuditor.shareable`:
job ids and party sets only, over the ``AuditHistory`` call of the node); honest members
report truthfully, so a combination any honest co-member saw part of is caught. What no
honest member of the new job ever saw cannot be caught by anyone; ``docs/governance.md``
states this bound.

Histories follow the data, not the name a settings entry gives it: an input's history
is every answer linked to it by identity (its file, source or key) or by content (a
digest of a version), transitively. A changed input keeps the answers on its earlier
versions -- two sums before and after a change difference out the change itself -- and
the same data renamed or copied keeps its history. The decision depends only on party
sets, kinds and budgets, never on values, so a refusal reveals nothing (the auditor is
simulatable).

Unions (``aggregate == "union"``: set union, the union of locally large itemsets) are
audited for *isolation* (:func:`isolated_parties`): no combination of answered unions
may single out one party's own items. Membership tests (``"probe"``: record alignment,
intersection counts) are counted per input and refused past the policy's
``max_probes``. Noisy linear answers (``"dp"``: vertical counts with each party's own
noise) are charged to the input's privacy budget, ``epsilon_budget`` over all jobs.

Dot products (``aggregate == "dot"``) are linear queries whose coefficients the other
party chooses, so linear auditing over the reals cannot protect a 0/1 vector from one
product with coefficients 1, 2, 4, ...; the policy refuses them by default (two parties
are below ``min_parties``). When an owner allows them, the auditor refuses the job that
would bring the number of answered products on one input version to its length (at that
point the products determine the vector in general).
"""

from __future__ import annotations

import itertools
import math
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from fractions import Fraction

__all__ = [
    "AuditVerdict",
    "DisclosureAuditor",
    "change_disclosed",
    "determined_with_colluders",
    "disclosed_parties",
    "isolated_parties",
]

STATE_KEY = "disclosure-audit"


class StateStore(Protocol):
    def save_state(self, key: str, value: Mapping[str, Any]) -> None: ...

    def load_state(self, key: str) -> dict[str, Any] | None: ...


@dataclass(frozen=True)
class AuditVerdict:
    ok: bool
    reason: str = ""


def determined_with_colluders(me: str, queries: Sequence[Iterable[str]], colluders: int) -> bool:
    """Whether the sums over the party sets ``queries`` determine ``me``'s input once any
    ``colluders`` other parties add their own inputs (exact, over the rationals).

    >>> determined_with_colluders("bob", [{"alice", "bob", "carol", "mallory"},
    ...                                   {"alice", "carol", "mallory"}], 0)
    True
    >>> determined_with_colluders("bob", [{"alice", "bob", "carol"}], 1)
    False
    >>> determined_with_colluders("bob", [{"bob", "mallory"}], 1)
    True
    """
    return me in disclosed_parties(queries, colluders, honest=(), only=(me,))


def disclosed_parties(
    queries: Sequence[Iterable[str]],
    colluders: int,
    *,
    honest: Iterable[str] = (),
    only: Iterable[str] | None = None,
) -> set[str]:
    """The parties whose input the sums over ``queries`` determine, when some coalition
    of ``colluders`` parties (never the party itself, nor one of ``honest``: the node
    asking does not collude) adds its own inputs as known rows.

    >>> sorted(disclosed_parties([{"a", "b", "c", "m"}, {"a", "c", "m"}], 0, honest={"a"}))
    ['b']
    >>> sorted(disclosed_parties([{"a", "b", "m"}, {"a", "c", "m"}, {"b", "c", "m"}], 1,
    ...                          honest={"c"}))
    ['a', 'b', 'c', 'm']
    """
    from ppdm.hiding.audit import sum_determined  # numpy: at a job's audit, not at start

    sets = [frozenset(q) for q in queries if q]
    names = sorted(set().union(*sets)) if sets else []
    index = {p: i for i, p in enumerate(names)}
    rows = [[index[p] for p in q] for q in sets]
    targets = [p for p in names if only is None or p in set(only)]
    trusted = set(honest)
    out: set[str] = set()
    for target in targets:
        candidates = [p for p in names if p != target and p not in trusted]
        size = min(colluders, len(candidates))
        # A larger coalition knows at least as much: checking the largest ones suffices.
        for coalition in itertools.combinations(candidates, size):
            extra = [[index[p]] for p in coalition]
            if index[target] in sum_determined(rows + extra, len(names)):
                out.add(target)
                break
    return out


def _rank(rows: Sequence[Sequence[Fraction]]) -> int:
    """Rank over the rationals (exact elimination; the matrices here are tiny)."""
    m = [list(r) for r in rows if any(r)]
    rank, col = 0, 0
    width = len(m[0]) if m else 0
    while rank < len(m) and col < width:
        pivot = next((i for i in range(rank, len(m)) if m[i][col] != 0), None)
        if pivot is None:
            col += 1
            continue
        m[rank], m[pivot] = m[pivot], m[rank]
        for i in range(len(m)):
            if i != rank and m[i][col] != 0:
                f = m[i][col] / m[rank][col]
                m[i] = [a - f * b for a, b in zip(m[i], m[rank], strict=True)]
        rank += 1
        col += 1
    return rank


def change_disclosed(
    me: str,
    queries: Sequence[tuple[Iterable[str], str | None]],
    colluders: int,
) -> bool:
    """Whether sums over party sets, each answered on a known *version* of ``me``'s input
    (``None``: ``me`` not in the sum), determine ``me``'s input on some version or the
    change between two versions, once any ``colluders`` other parties add their own
    inputs (the others' inputs taken as unchanged: the attacker's best case).

    Two sums over the same parties before and after bob's input changed difference out
    the change itself:

    >>> change_disclosed("b", [({"a", "b", "c"}, "v1"), ({"a", "b", "c"}, "v2")], 0)
    True
    >>> change_disclosed("b", [({"a", "b", "c"}, "v1"), ({"a", "b", "c"}, "v1")], 1)
    False
    """
    qs = [(frozenset(p), v) for p, v in queries if p]
    versions = sorted({v for p, v in qs if me in p and v is not None})
    if len(versions) < 2:
        return False
    from fractions import Fraction  # here: a node starts without it (issue 25)

    others = sorted({x for p, _ in qs for x in p} - {me})
    cols = [*others, *(f"{me}@{v}" for v in versions)]
    at = {c: i for i, c in enumerate(cols)}

    def row(parties: frozenset[str], version: str | None) -> list[Fraction]:
        r = [Fraction(0)] * len(cols)
        for x in parties:
            if x == me:
                r[at[f"{me}@{version if version is not None else versions[-1]}"]] = Fraction(1)
            else:
                r[at[x]] = Fraction(1)
        return r

    base = [row(p, v) for p, v in set(qs)]
    targets = []
    for i, v in enumerate(versions):
        unit = [Fraction(0)] * len(cols)
        unit[at[f"{me}@{v}"]] = Fraction(1)
        targets.append(unit)
        for w in versions[i + 1 :]:
            diff = list(unit)
            diff[at[f"{me}@{w}"]] = Fraction(-1)
            targets.append(diff)
    for coalition in itertools.combinations(others, min(colluders, len(others))):
        rows = list(base)
        for x in coalition:
            unit = [Fraction(0)] * len(cols)
            unit[at[x]] = Fraction(1)
            rows.append(unit)
        r = _rank(rows)
        if any(_rank([*rows, t]) == r for t in targets):
            return True
    return False


def isolated_parties(
    queries: Sequence[Iterable[str]], colluders: int, *, honest: Iterable[str] = ()
) -> set[str]:
    """The parties whose *own* items the unions over the party sets ``queries`` single
    out, when a coalition of up to ``colluders`` other parties (never one of ``honest``)
    removes its own items.

    An item in the union over ``S`` and in none of the unions over ``T_1 .. T_j`` belongs
    to a party of ``S`` outside every ``T_i``; it is attributed to ``p`` exactly when every
    other party ``q`` of ``S`` is either in some answered ``T`` without ``p`` or in the
    coalition. The union over {alice, bob, carol, mallory} minus the union over {alice,
    carol, mallory} is bob's exclusive items; so are S = {a, b, m} against T1 = {a, c, m}
    with no sum-style linear combination to show it.

    >>> sorted(isolated_parties([{"a", "b", "c", "m"}, {"a", "c", "m"}], 0))
    ['b']
    >>> sorted(isolated_parties([{"a", "b", "m"}, {"a", "c", "m"}], 1, honest={"a"}))
    ['b', 'c']
    >>> sorted(isolated_parties([{"a", "b", "c"}], 1))
    []
    """
    sets = [frozenset(q) for q in queries if q]
    trusted = set(honest)
    out: set[str] = set()
    for s in set(sets):
        for target in s:
            uncovered = [
                q for q in s if q != target and not any(q in t and target not in t for t in sets)
            ]
            if len(uncovered) <= colluders and not trusted.intersection(uncovered):
                out.add(target)
    return out


class DisclosureAuditor:
    """Answered queries on this party's inputs, persisted in the node's state store
    (which the ledger's hash chain covers, :mod:`ppdm.service.ledger`).

    Each entry names the job, what was answered (``kind``: ``sum``, ``dot``, ``union``,
    ``probe`` or ``dp``), the party set, the *identity* of the input (its file, source or
    key, :func:`ppdm.service.profiles.input_identity`), its *version* (a digest of its
    content) and, for ``dp``, the privacy loss charged. The history of an input is every
    entry linked to it by identity *or* by content, transitively: a changed input keeps the
    answers on its earlier versions (two answers before and after a change difference out
    the change itself), and the same data under another name or path keeps its history.

    ``check`` is side-effect free; ``record`` adds a job's entry once the job starts (a
    started job counts as answered, whatever its outcome). Jobs accepted but not yet
    started are ``reserve``-d so that two concurrent proposals cannot together slip past
    the audit; ``release`` drops a reservation (refused, cancelled or expired job).
    """

    def __init__(self, me: str, store: StateStore | None = None) -> None:
        self.me = me
        self._store = store
        self._lock = threading.Lock()
        self._answered: list[dict[str, Any]] = []
        self._reserved: dict[str, dict[str, Any]] = {}
        if store is not None:
            saved = store.load_state(STATE_KEY) or {}
            self._answered = [dict(e) for e in saved.get("entries", [])]
            # Histories written before identities: "input@version" -> [queries].
            for key, queries in saved.get("answered", {}).items():
                input_key, _, version = str(key).rpartition("@")
                for q in queries:
                    self._answered.append({**q, "identity": f"key:{input_key}", "version": version})

    def _related(self, identity: str, version: str) -> list[dict[str, Any]]:
        entries = [*self._answered, *self._reserved.values()]
        ids, versions = {identity}, {version}
        picked: set[int] = set()
        grew = True
        while grew:
            grew = False
            for i, e in enumerate(entries):
                if i not in picked and (e.get("identity") in ids or e.get("version") in versions):
                    picked.add(i)
                    ids.add(str(e.get("identity")))
                    versions.add(str(e.get("version")))
                    grew = True
        return [entries[i] for i in sorted(picked)]

    def check(
        self,
        *,
        input_key: str,
        version: str,
        kind: str,
        parties: Sequence[str],
        colluders: int,
        identity: str | None = None,
        length: int | None = None,
        reported: Sequence[Mapping[str, Any]] = (),
        epsilon: float = 0.0,
        epsilon_budget: float = math.inf,
        max_probes: int | None = None,
    ) -> AuditVerdict:
        """Would answering this job, with every earlier answer on the same input that
        this node or an honest co-member (``reported``, see :meth:`shareable`) took part
        in, determine a party's input (sums), single out a party's items (unions), exceed
        the data set's privacy budget (``dp``) or its number of membership tests
        (``probe``)?"""
        with self._lock:
            past = self._related(identity or f"key:{input_key}", version)
        if kind == "dot":
            dots = sum(1 for q in past if q["kind"] == "dot") + 1
            if length is not None and dots >= max(length, 1):
                return AuditVerdict(False, f"{dots} dot products on {input_key} would determine it")
            return AuditVerdict(True)
        if kind == "dp":
            spent = sum(float(q.get("epsilon", 0.0)) for q in past if q["kind"] == "dp")
            if spent + epsilon > epsilon_budget + 1e-12:
                return AuditVerdict(
                    False,
                    f"the privacy budget of {input_key} ({epsilon_budget:g}) would be "
                    f"exceeded: {spent:g} spent, this job {epsilon:g}",
                )
            return AuditVerdict(True)
        if kind == "probe":
            probes = sum(1 for q in past if q["kind"] == "probe") + 1
            if max_probes is not None and probes > max_probes:
                return AuditVerdict(
                    False, f"{input_key} was already tested for membership {probes - 1} times"
                )
            return AuditVerdict(True)
        seen: dict[str, list[str]] = {}
        for q in [*past, *reported]:
            if q.get("kind", "sum") == kind and isinstance(q.get("parties"), list):
                seen.setdefault(str(q.get("job_id", id(q))), [str(p) for p in q["parties"]])
        # Equal party sets are the same query: keep one of each.
        sets = [sorted(q) for q in {frozenset(v) for v in seen.values()} | {frozenset(parties)}]
        if kind == "union":
            if isolated_parties(sets, colluders, honest=(self.me,)):
                return AuditVerdict(
                    False,
                    f"with the earlier unions of {input_key}, this job's union would single "
                    f"out a member's own items (assuming {colluders} colluding member(s))",
                )
            return AuditVerdict(True)
        mine = [
            (q["parties"], q.get("version") if self.me in q["parties"] else None)
            for q in past
            if q["kind"] == "sum"
        ]
        mine.append((list(parties), version if self.me in parties else None))
        if change_disclosed(self.me, mine, colluders):
            return AuditVerdict(
                False,
                f"with the earlier answers on {input_key}, this job's answer would determine "
                f"this party's input or its change since an earlier version (assuming "
                f"{colluders} colluding member(s))",
            )
        if disclosed_parties(sets, colluders, honest=(self.me,)):
            return AuditVerdict(
                False,
                f"with the earlier answers on {input_key}, this job's answer would "
                f"determine a member's input (assuming {colluders} colluding member(s))",
            )
        return AuditVerdict(True)

    def shareable(
        self, input_key: str, version: str, identity: str | None = None
    ) -> list[dict[str, Any]]:
        """The distinct party sets of the answered sums and unions on ``input_key`` (its
        whole history), one job id each, for co-members auditing a new job on it."""
        unique: dict[tuple[str, frozenset[str]], str] = {}
        with self._lock:
            for q in self._related(identity or f"key:{input_key}", version):
                if q["kind"] in ("sum", "union") and q["job_id"] not in self._reserved:
                    unique.setdefault((q["kind"], frozenset(q["parties"])), q["job_id"])
        return [
            {"job_id": job_id, "kind": kind, "parties": sorted(parties)}
            for (kind, parties), job_id in unique.items()
        ]

    def reserve(
        self,
        job_id: str,
        *,
        input_key: str,
        version: str,
        kind: str,
        parties: Sequence[str],
        identity: str | None = None,
        epsilon: float = 0.0,
    ) -> None:
        entry: dict[str, Any] = {
            "job_id": job_id,
            "kind": kind,
            "parties": sorted(parties),
            "input_key": input_key,
            "identity": identity or f"key:{input_key}",
            "version": version,
        }
        if kind == "dp":
            entry["epsilon"] = float(epsilon)
        with self._lock:
            self._reserved[job_id] = entry

    def release(self, job_id: str) -> None:
        with self._lock:
            self._reserved.pop(job_id, None)

    def record(self, job_id: str) -> None:
        """The reserved job started: its answer counts from now on."""
        with self._lock:
            held = self._reserved.pop(job_id, None)
            if held is None:
                return
            self._answered.append(held)
            snapshot = {"entries": [dict(e) for e in self._answered]}
        if self._store is not None:
            self._store.save_state(STATE_KEY, snapshot)

    def history(self) -> dict[str, list[dict[str, Any]]]:
        """The answered entries grouped by input identity."""
        out: dict[str, list[dict[str, Any]]] = {}
        with self._lock:
            for e in self._answered:
                out.setdefault(str(e.get("identity")), []).append(dict(e))
        return out

    def spent(self, identity: str, version: str) -> float:
        """The privacy loss charged so far to this input's history."""
        with self._lock:
            return sum(
                float(q.get("epsilon", 0.0))
                for q in self._related(identity, version)
                if q["kind"] == "dp"
            )
