"""A job's disclosure statement: what one job would disclose about one party's data
(:class:`Disclosure`, one :class:`Output` per thing its output reveals), the kinds of
output and of audit it names, and the check that a statement is complete.

The statements themselves, one per job, are in :mod:`ppdm.service.profiles`; the owner's
bounds on them in :mod:`ppdm.service.policy` (``docs/governance.md``, "What a job
discloses").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: The kinds of output a disclosure statement names (docs/governance.md, "What a job
#: discloses"): ``records`` -- raw records or single values of one record (a starting
#: centre placed on a record, a per-record label); ``aggregate`` -- a value over many
#: records (a support count, a centre and its size, a sum), with the fewest records each
#: covers; ``linear`` -- a linear query whose coefficients another party chooses (a
#: vertical support count over another party's columns, a dot product, an intersection
#: count over another party's set); ``membership`` -- set-membership answers (a union, an
#: intersection of ids), with the bounds on the sets involved.
OUTPUT_KINDS = ("records", "aggregate", "linear", "membership")

#: What the cross-job audit tracks for a job's input (:mod:`ppdm.service.disclosure`).
AUDIT_KINDS = ("sum", "dot", "union", "probe", "dp")


@dataclass(frozen=True)
class Output:
    """One thing a job's output reveals about this party's data.

    Attributes
    ----------
    kind
        One of :data:`OUTPUT_KINDS`.
    what
        The output in words.
    unit
        ``"records"`` (values over this party's records or transactions) or ``"inputs"``
        (one private value per party: a sum of the parties' inputs).
    covers
        ``aggregate``: the fewest pooled records behind any released value that the job
        *enforces* before it releases it (``None``: nothing enforced).
    colluder_safe
        ``aggregate``: how many other parties ``covers`` holds without: no released value
        rests on fewer than ``covers`` records once any coalition of that many members
        removes its own (0: only the pooled count is bounded).
    party_covers
        ``aggregate``: the fewest of *this* party's records behind a released value it
        contributes to (a job-enforced floor; ``None``: none).
    chosen_by
        ``linear``/``membership``: the other parties who choose the query's coefficients
        or the set this party's data is tested against.
    protection
        ``linear``: ``"exact"`` (exact answers) or ``"dp"`` (each count carries this
        party's own calibrated noise).
    epsilon
        ``dp``: the privacy loss the job charges to this party's data set.
    set_ratio
        ``membership``: the largest size of another party's set, as a multiple of this
        party's, that the job lets run (``None``: unbounded).
    min_set
        ``membership``: the fewest items a set, and a released intersection, must have.
    """

    kind: str
    what: str
    unit: str = "records"
    covers: int | None = None
    colluder_safe: int = 0
    party_covers: int | None = None
    chosen_by: tuple[str, ...] = ()
    protection: str = "exact"
    epsilon: float | None = None
    set_ratio: float | None = None
    min_set: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in OUTPUT_KINDS:
            raise ValueError(f"unknown output kind {self.kind!r}")

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "what": self.what}
        for name in (
            "unit",
            "covers",
            "colluder_safe",
            "party_covers",
            "chosen_by",
            "protection",
            "epsilon",
            "set_ratio",
            "min_set",
        ):
            value = getattr(self, name)
            default = Output.__dataclass_fields__[name].default
            if value != default:
                out[name] = list(value) if isinstance(value, tuple) else value
        return out


@dataclass(frozen=True)
class Disclosure:
    """What this party would disclose in one job: its *disclosure statement*.

    Attributes
    ----------
    reads
        The private inputs and data sets the job reads at this party (``"inputs.KEY"``,
        ``"data.KEY"``); empty when it works on generated (public) data only.
    participants
        The parties whose data the output combines with this party's (the job's party
        set, or fewer: a dot product runs between two of them).
    outputs
        Every output and what it reveals about this party's data (:class:`Output`); a
        job on private data without outputs is refused.
    aggregate
        What the cross-job audit tracks on ``audit_key`` (one of :data:`AUDIT_KINDS`,
        ``None``: nothing to track): ``"sum"`` a sum over the participants' inputs,
        ``"dot"`` a dot product another party chose the coefficients of, ``"union"`` a
        union of the participants' sets, ``"probe"`` a membership test of this party's
        ids, ``"dp"`` noisy linear answers charged to the data set's privacy budget.
    audit_key
        The input the audit tracks (one of ``reads``).
    changed
        Disclosure-relevant parameters at values that disclose more than the default.
    columns
        Every column of a table the job reads at this party, id columns and join keys
        included (``None``: not a table job, or every column of the table).
    own_centre_columns
        This party's columns that explicit starting centres are given for.
    record_count
        What the job reveals of this party's number of records or set size:
        ``"private"``, ``"pooled"`` (only a total over the parties) or ``"revealed"``.
    leakage
        The declared leakage, in words.
    """

    reads: tuple[str, ...]
    participants: tuple[str, ...]
    aggregate: str | None = None
    audit_key: str | None = None
    changed: Mapping[str, Any] = field(default_factory=dict)
    columns: tuple[str, ...] | None = None
    own_centre_columns: tuple[str, ...] = ()
    leakage: str = ""
    outputs: tuple[Output, ...] = ()
    record_count: str = "private"

    @property
    def private(self) -> bool:
        return bool(self.reads)

    @property
    def epsilon(self) -> float:
        """The privacy loss this job charges to the audited data set (``dp`` outputs)."""
        return float(sum(o.epsilon or 0.0 for o in self.outputs if o.protection == "dp"))

    def as_dict(self) -> dict[str, Any]:
        return {
            "reads": list(self.reads),
            "participants": list(self.participants),
            "outputs": [o.as_dict() for o in self.outputs],
            "aggregate": self.aggregate,
            "audit_key": self.audit_key,
            "changed": dict(self.changed),
            "columns": list(self.columns) if self.columns is not None else None,
            "own_centre_columns": list(self.own_centre_columns),
            "record_count": self.record_count,
            "leakage": self.leakage,
        }

    def describe(self) -> str:
        """The statement in words, for ``ppdm job pending`` and ``ppdm policy check``."""
        parts = []
        for o in self.outputs:
            text = f"{o.kind}: {o.what}"
            if o.kind == "aggregate" and o.unit == "records":
                text += f" (each over at least {o.covers or 0} records"
                if o.colluder_safe:
                    text += f", also without any {o.colluder_safe} other parties'"
                if o.party_covers:
                    text += f"; at least {o.party_covers} of this party's where it contributes"
                text += ")"
            if o.chosen_by:
                text += f"; chosen by {', '.join(o.chosen_by)}"
            if o.kind == "linear":
                text += f"; {o.protection}" + (
                    f" with epsilon {o.epsilon:g}" if o.epsilon is not None else ""
                )
            parts.append(text)
        if self.columns is not None:
            parts.append("columns read: " + (", ".join(self.columns) or "none"))
        parts.append(f"record count: {self.record_count}")
        return "; ".join(parts)


def incomplete_statement(disclosure: Disclosure) -> str | None:
    """Why a statement is incomplete (``None``: complete). A statement on private data
    names at least one output, names who chooses every linear query, and gives the
    privacy loss of every noisy one."""
    if not disclosure.private:
        return None
    if not disclosure.outputs:
        return "it names no output"
    for o in disclosure.outputs:
        if o.kind == "linear" and not o.chosen_by:
            return "a linear output does not name who chooses its coefficients"
        if o.protection == "dp" and (o.epsilon is None or not o.epsilon > 0):
            return "a noisy output does not name its privacy loss"
        if o.kind == "aggregate" and o.unit == "records" and o.covers is None:
            return "an aggregate does not name how many records it covers"
    if disclosure.aggregate is not None and disclosure.aggregate not in AUDIT_KINDS:
        return f"unknown audit kind {disclosure.aggregate!r}"
    if disclosure.aggregate is not None and disclosure.audit_key not in disclosure.reads:
        return "the audited input is not one the job reads"
    return None
