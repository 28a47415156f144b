"""Cross-job disclosure auditing: what the answers so far reveal about this party's inputs.

Every aggregate a node contributes to is a linear query over the inputs of the parties
in it: a sum over a party set ``S`` is the row ``1_S`` of a 0/1 matrix over the roster.
Sums over {alice, bob, carol, mallory} and then over {alice, carol, mallory} determine
bob's input; so does any set of answers whose rows combine linearly to bob's unit vector
(seed 000 section 20.4.2, query auditing). Before a node lets a job run, it asks
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

Histories are kept per input and per *version* of the input (a digest of its value or
file): a changed input starts a fresh history. The decision depends only on party sets,
never on values, so a refusal reveals nothing (the auditor is simulatable).

Dot products (``aggregate == "dot"``) are linear queries whose coefficients the other
party chooses, so linear auditing over the reals cannot protect a 0/1 vector from one
product with coefficients 1, 2, 4, ...; the policy refuses them by default (two parties
are below ``min_parties``). When an owner allows them, the auditor refuses the job that
would bring the number of answered products on one input version to its length (at that
point the products determine the vector in general).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ppdm.hiding.audit import sum_determined

__all__ = ["AuditVerdict", "DisclosureAuditor", "determined_with_colluders", "disclosed_parties"]

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


class DisclosureAuditor:
    """Answered aggregates per (input, version), persisted in the node's state store.

    ``check`` is side-effect free; ``record`` adds a job's query once the job starts (a
    started job counts as answered, whatever its outcome). Jobs accepted but not yet
    started are ``reserve``-d so that two concurrent proposals cannot together slip past
    the audit; ``release`` drops a reservation (refused, cancelled or expired job).
    """

    def __init__(self, me: str, store: StateStore | None = None) -> None:
        self.me = me
        self._store = store
        self._lock = threading.Lock()
        self._answered: dict[str, list[dict[str, Any]]] = {}
        self._reserved: dict[str, tuple[str, dict[str, Any]]] = {}
        if store is not None:
            saved = store.load_state(STATE_KEY) or {}
            self._answered = {k: list(v) for k, v in saved.get("answered", {}).items()}

    @staticmethod
    def _key(input_key: str, version: str) -> str:
        return f"{input_key}@{version}"

    def _queries(self, key: str) -> list[dict[str, Any]]:
        past = list(self._answered.get(key, []))
        past += [q for k, q in self._reserved.values() if k == key]
        return past

    def check(
        self,
        *,
        input_key: str,
        version: str,
        kind: str,
        parties: Sequence[str],
        colluders: int,
        length: int | None = None,
        reported: Sequence[Mapping[str, Any]] = (),
    ) -> AuditVerdict:
        """Would answering this job's aggregate, with every earlier one on the same input
        that this node or an honest co-member (``reported``, see :meth:`shareable`) took
        part in, determine the input of any party?"""
        key = self._key(input_key, version)
        with self._lock:
            past = self._queries(key)
        if kind == "dot":
            dots = sum(1 for q in past if q["kind"] == "dot") + 1
            if length is not None and dots >= max(length, 1):
                return AuditVerdict(False, f"{dots} dot products on {input_key} would determine it")
            return AuditVerdict(True)
        seen: dict[str, list[str]] = {}
        for q in [*past, *reported]:
            if q.get("kind", "sum") == "sum" and isinstance(q.get("parties"), list):
                seen.setdefault(str(q.get("job_id", id(q))), [str(p) for p in q["parties"]])
        # Equal party sets are the same linear query: keep one of each.
        sets = [sorted(q) for q in {frozenset(v) for v in seen.values()} | {frozenset(parties)}]
        if disclosed_parties(sets, colluders, honest=(self.me,)):
            return AuditVerdict(
                False,
                f"with the earlier answers on {input_key}, this job's answer would "
                f"determine a member's input (assuming {colluders} colluding member(s))",
            )
        return AuditVerdict(True)

    def shareable(self, input_key: str, version: str) -> list[dict[str, Any]]:
        """The distinct party sets of the answered sums on this node's current version of
        ``input_key`` (with one job id each), for co-members auditing a new job on the
        same input."""
        key = self._key(input_key, version)
        unique: dict[frozenset[str], str] = {}
        with self._lock:
            for q in self._answered.get(key, []):
                if q["kind"] == "sum":
                    unique.setdefault(frozenset(q["parties"]), q["job_id"])
        # Equal party sets are one linear query: one representative each.
        return [
            {"job_id": job_id, "kind": "sum", "parties": sorted(parties)}
            for parties, job_id in unique.items()
        ]

    def reserve(
        self, job_id: str, *, input_key: str, version: str, kind: str, parties: Sequence[str]
    ) -> None:
        with self._lock:
            self._reserved[job_id] = (
                self._key(input_key, version),
                {"job_id": job_id, "kind": kind, "parties": sorted(parties)},
            )

    def release(self, job_id: str) -> None:
        with self._lock:
            self._reserved.pop(job_id, None)

    def record(self, job_id: str) -> None:
        """The reserved job started: its answer counts from now on."""
        with self._lock:
            held = self._reserved.pop(job_id, None)
            if held is None:
                return
            key, query = held
            self._answered.setdefault(key, []).append(query)
            snapshot = {"answered": {k: list(v) for k, v in self._answered.items()}}
        if self._store is not None:
            self._store.save_state(STATE_KEY, snapshot)

    def history(self) -> dict[str, list[dict[str, Any]]]:
        with self._lock:
            return {k: list(v) for k, v in self._answered.items()}
