"""What each job discloses about one party's private data: its declared leakage.

A node's policy (:mod:`ppdm.service.policy`) decides on a job from its *profile* here, not
from the job's code: which of the party's private inputs or data sets the job reads,
which parties receive something derived from them, whether the output is an aggregate
the disclosure audit must track (:mod:`ppdm.service.disclosure`), which of the
initiator's parameters change what the party discloses, and the leakage in words (from
the protocol's own documentation, ``docs/protocols/`` and ``docs/mining.md``). A job
without a profile reads nothing the node can vouch for and is refused unless the owner's
policy names it explicitly.

The leakage of a job is that of its whole function: the party set and the parameters are
part of it. A two-party sum *is* the other party's input; a dot product with a vector of
powers of two *is* the other party's 0/1 vector; starting centres placed on a grid over
another party's column make the revealed cluster labels quantise it. The profiles make
these choices visible to the policy.

The statement's types and its completeness check are :mod:`~ppdm.service.statement`, the
identity and version of the inputs a job reads :mod:`~ppdm.service.input_versions`; their
public names are importable from here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ppdm.errors import ConfigError
from ppdm.service.input_versions import _source_entry, input_identity, input_version
from ppdm.service.statement import (
    AUDIT_KINDS,
    OUTPUT_KINDS,
    Disclosure,
    Output,
    incomplete_statement,
)

if TYPE_CHECKING:  # the job registry is imported by a node's first job, not its start
    from ppdm.jobs.registry import PartyContext

__all__ = [
    "AUDIT_KINDS",
    "OUTPUT_KINDS",
    "Disclosure",
    "JobProfile",
    "Output",
    "disclosure_parameters",
    "get_profile",
    "incomplete_statement",
    "input_identity",
    "input_version",
    "profile_names",
    "unprofiled_jobs",
]

# Parameters whose non-default value changes what a party discloses, per job, with the
# value that discloses least. The policy refuses any other value unless it allows it.
_DISCLOSURE_PARAMS: dict[str, dict[str, Any]] = {
    "secure-sum": {},
    "secure-sum-shared": {"aggregator": ""},
    "paillier-dot-product": {"output": "holder", "holder": "", "other": ""},
    "set-union": {"pad_to": None, "fake_ratio": 0.25},
    "intersection-cardinality": {"fake_ratio": 0.0},
    # multiparty="intersection": the evaluator of the EC intersection protocol also sees
    # the intersection sizes of every sub-ring (more than the GMW chain's counts).
    "assoc": {
        "reveal_counts": False,
        "report_local": False,
        "fake_ratio": 0.25,
        "multiparty": "gmw",
    },
    "kmeans": {"include_labels": False, "report_local": False},
}

# Other values that disclose no more than the default.
_ALSO_SAFE: dict[tuple[str, str], tuple[Any, ...]] = {
    ("paillier-dot-product", "output"): ("shares",),
}

# Jobs that can keep their output as additive secret shares: (parameter, value).
SHARE_OUTPUTS: dict[str, tuple[str, Any]] = {"paillier-dot-product": ("output", "shares")}

# Parameters where a larger value discloses less (a smaller one is a change to refuse).
_AT_LEAST = {
    ("set-union", "fake_ratio"),
    ("assoc", "fake_ratio"),
    ("intersection-cardinality", "fake_ratio"),
}


DisclosureFn = Callable[[Mapping[str, Any], Sequence[str], str, "PartyContext"], Disclosure]
PrecheckFn = Callable[[Mapping[str, Any], Sequence[str], str, "PartyContext"], None]


@dataclass(frozen=True)
class JobProfile:
    """A job's declared leakage (``disclosure``) and its checks of the parameters against
    this party's own data before anything runs (``precheck``: raises
    :class:`~ppdm.errors.ConfigError`; the node refuses the job with a generic reason)."""

    name: str
    disclosure: DisclosureFn
    precheck: PrecheckFn | None = None


def _changed(job: str, params: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for name, safe in _DISCLOSURE_PARAMS.get(job, {}).items():
        value = params.get(name, safe)
        if (job, name) in _AT_LEAST:
            try:
                if float(value) >= float(safe):
                    continue
            except (TypeError, ValueError):
                pass
        elif (
            value == safe
            or (safe == "" and value in (None, ""))
            or value in _ALSO_SAFE.get((job, name), ())
        ):
            continue
        out[name] = value
    return out


def _generated(params: Mapping[str, Any], key: str) -> bool:
    value = params.get(key)
    if key == "length":
        return isinstance(value, int) and not isinstance(value, bool) and value > 0
    return value is not None


def _int_param(params: Mapping[str, Any], key: str, default: int = 0) -> int:
    """An integer parameter as the job reads it (anything else counts as ``default``: the
    job itself refuses it, and the statement never claims more than it enforces)."""
    value = params.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        return default
    return value


def _float_param(params: Mapping[str, Any], key: str) -> float | None:
    value = params.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    f = float(value)
    return f if math.isfinite(f) else None


def _others(parties: Sequence[str], me: str) -> tuple[str, ...]:
    return tuple(p for p in parties if p != me)


# Profiles -------------------------------------------------------------------------------


def _secure_sum(
    params: Mapping[str, Any], parties: Sequence[str], me: str, ctx: PartyContext
) -> Disclosure:
    return Disclosure(
        reads=("inputs.secure_sum",),
        participants=tuple(parties),
        aggregate="sum",
        audit_key="inputs.secure_sum",
        changed=_changed("secure-sum", params),
        outputs=(
            Output(
                "aggregate",
                "the sum of all parties' secure_sum inputs, to every party",
                unit="inputs",
            ),
        ),
        leakage=(
            "every party learns the sum of all parties' secure_sum inputs; the party's "
            "two ring neighbours together learn its input"
        ),
    )


def _check_secure_sum(
    params: Mapping[str, Any], parties: Sequence[str], me: str, ctx: PartyContext
) -> None:
    modulus = params.get("modulus")
    if modulus is None:
        return
    if isinstance(modulus, bool) or not isinstance(modulus, int) or modulus < 2:
        raise ConfigError("modulus must be an integer >= 2")
    raw = ctx.private_input("secure_sum")
    values = raw if isinstance(raw, list) else [raw]
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int):
            raise ConfigError("inputs.secure_sum must hold integers")
        if not -(modulus // 2) <= v < (modulus + 1) // 2:
            raise ConfigError("an input is outside the signed range of the modulus")


def _secure_sum_shared(
    params: Mapping[str, Any], parties: Sequence[str], me: str, ctx: PartyContext
) -> Disclosure:
    if _generated(params, "length"):
        return Disclosure(reads=(), participants=tuple(parties), leakage="generated inputs only")
    aggregator = params.get("aggregator") or ""
    return Disclosure(
        reads=("inputs.secure_sum",),
        participants=tuple(parties),
        aggregate="sum",
        audit_key="inputs.secure_sum",
        changed=_changed("secure-sum-shared", params),
        outputs=(
            Output(
                "aggregate",
                "the sum of all parties' secure_sum inputs, to "
                + (f"party {aggregator!r}" if aggregator else "every party"),
                unit="inputs",
            ),
        ),
        leakage=(
            f"{'party ' + repr(aggregator) if aggregator else 'every party'} learns the sum of "
            "all parties' secure_sum inputs; no coalition of fewer than all other parties "
            "learns more"
        ),
    )


def _dot_product(
    params: Mapping[str, Any], parties: Sequence[str], me: str, ctx: PartyContext
) -> Disclosure:
    holder = params.get("holder") or parties[0]
    other = params.get("other") or next((p for p in parties if p != holder), holder)
    pair = (holder, other)
    if me not in pair:
        return Disclosure(reads=(), participants=pair, leakage="not a participant")
    if _generated(params, "length"):
        return Disclosure(reads=(), participants=pair, leakage="generated inputs only")
    peer = other if me == holder else holder
    return Disclosure(
        reads=("inputs.dot_product",),
        participants=pair,
        aggregate="dot",
        audit_key="inputs.dot_product",
        changed=_changed("paillier-dot-product", params),
        outputs=(
            Output(
                "linear",
                f"the dot product of this party's vector with party {peer!r}'s vector",
                chosen_by=(peer,),
            ),
        ),
        leakage=(
            f"the dot product of this party's vector with party {peer!r}'s vector goes to "
            f"{params.get('output', 'holder')!r}; the other party chooses its vector, so one "
            "product can decode a whole 0/1 vector (coefficients 1, 2, 4, ...)"
        ),
    )


def _set_union(
    params: Mapping[str, Any], parties: Sequence[str], me: str, ctx: PartyContext
) -> Disclosure:
    if _generated(params, "generate_n"):
        return Disclosure(reads=(), participants=tuple(parties), leakage="generated sets only")
    return Disclosure(
        reads=("inputs.set_union",),
        participants=tuple(parties),
        aggregate="union",
        audit_key="inputs.set_union",
        changed=_changed("set-union", params),
        outputs=(
            Output(
                "membership",
                "the union of the parties' sets (items, not who holds them), to every party",
            ),
        ),
        record_count="private" if params.get("pad_to") else "pooled",
        leakage=(
            "every party learns the union of the sets; the collector learns every party's "
            "set size with fakes and the overlap counts between parties' sets"
        ),
    )


def _check_set_union(
    params: Mapping[str, Any], parties: Sequence[str], me: str, ctx: PartyContext
) -> None:
    if _generated(params, "generate_n"):
        return
    raw = ctx.private_input("set_union")
    if not isinstance(raw, list):
        raise ConfigError("inputs.set_union must be a list")
    pad_to = params.get("pad_to")
    if pad_to is not None and (not isinstance(pad_to, int) or pad_to < len(set(map(str, raw)))):
        raise ConfigError("pad_to does not fit this party's set")
    limit = params.get("max_item_bytes", 29)
    for item in raw:
        size = len(item.encode()) if isinstance(item, str) else 8
        if isinstance(limit, int) and size > limit:
            raise ConfigError("an item is longer than max_item_bytes")


def _intersection(
    params: Mapping[str, Any], parties: Sequence[str], me: str, ctx: PartyContext
) -> Disclosure:
    if _generated(params, "generate_n"):
        return Disclosure(reads=(), participants=tuple(parties), leakage="generated sets only")
    return Disclosure(
        reads=("inputs.intersection",),
        participants=tuple(parties),
        aggregate="probe",
        audit_key="inputs.intersection",
        changed=_changed("intersection-cardinality", params),
        outputs=(
            Output(
                "linear",
                "the number of this party's items that are in every other party's set (a "
                "count whose coefficients the other parties choose with their sets: a set "
                "of one item is a membership test)",
                chosen_by=_others(parties, me),
            ),
        ),
        leakage="every party learns the size of the intersection of all parties' sets",
    )


def _align_outputs(params: Mapping[str, Any], parties: Sequence[str], me: str) -> Output:
    ratio = _float_param(params, "max_set_ratio")
    minimum = _int_param(params, "min_set_size")
    return Output(
        "membership",
        "the ids common to every party (and so which of this party's ids the others hold)",
        chosen_by=_others(parties, me),
        set_ratio=ratio,
        min_set=minimum,
    )


_ALIGN_LEAKAGE = (
    "; align=true: first private record alignment (as psi-align): every party learns the "
    "common ids and every party's set size; the leader (drawn by coin toss) also the "
    "intersections with each prefix of the other parties"
)


def _psi_align(
    params: Mapping[str, Any], parties: Sequence[str], me: str, ctx: PartyContext
) -> Disclosure:
    if _generated(params, "generate_n"):
        return Disclosure(reads=(), participants=tuple(parties), leakage="generated ids only")
    key = params.get("inputs")
    read = f"inputs.{key}" if key else f"data.{params.get('data') or 'records'}"
    id_column = params.get("id_column") or "record_id"
    return Disclosure(
        reads=(read,),
        participants=tuple(parties),
        aggregate="probe",
        audit_key=read,
        outputs=(_align_outputs(params, parties, me),),
        columns=None if key else (str(id_column),),
        record_count="revealed",
        leakage=(
            "every party learns the intersection of all parties' ids (the ids and their "
            "number) and every party's set size; the leader (drawn by coin toss among the "
            "parties) also learns the intersection of its ids with each prefix of the other "
            "parties (more than the final intersection with 3+ parties)"
        ),
    )


def _check_psi_align(
    params: Mapping[str, Any], parties: Sequence[str], me: str, ctx: PartyContext
) -> None:
    if _generated(params, "generate_n"):
        return
    key = params.get("inputs")
    if key:
        if not isinstance(ctx.private_input(str(key)), list):
            raise ConfigError("the job's id list is not a list at this party")
    else:
        _check_data_file({**params, "data": params.get("data") or "records"}, parties, me, ctx)


def _assoc(
    params: Mapping[str, Any], parties: Sequence[str], me: str, ctx: PartyContext
) -> Disclosure:
    key = f"data.{params.get('data') or 'transactions'}"
    vertical = params.get("mode") == "vertical"
    align = bool(params.get("align"))
    floor = _int_param(params, "min_aggregate")
    counts = "their pooled support counts" if params.get("reveal_counts") else "no counts"
    outputs: list[Output] = [
        Output(
            "aggregate",
            f"the frequent itemsets and rules of the pooled transactions, with {counts}",
            covers=floor,
            # horizontally the job tests the threshold without any `colluders` parties'
            # baskets too; vertically every transaction holds this party's columns
            colluder_safe=0 if vertical else _int_param(params, "colluders"),
            party_covers=floor if vertical else None,
        )
    ]
    aggregate: str | None
    epsilon: float | None = None
    if vertical:
        protect = params.get("protect", "dp")
        epsilon = _float_param(params, "epsilon") if protect == "dp" else None
        outputs.append(
            Output(
                "linear",
                "the support counts of candidate itemsets whose items span this party's and "
                "other parties' columns (the other parties choose their columns)",
                chosen_by=_others(parties, me),
                protection="dp" if protect == "dp" else "exact",
                epsilon=epsilon,
            )
        )
        aggregate = "dp" if protect == "dp" else None
    else:
        outputs.append(
            Output(
                "membership",
                "the union of the parties' locally frequent itemsets (not who holds them)",
            )
        )
        aggregate = "union"
    if align:
        outputs.append(_align_outputs(params, parties, me))
    columns: tuple[str, ...] | None = None
    if align:
        columns = (str(params.get("id_column") or "record_id"),)
    return Disclosure(
        reads=(key,),
        participants=tuple(parties),
        aggregate=aggregate,
        audit_key=key if aggregate else None,
        changed=_changed("assoc", params),
        outputs=tuple(outputs),
        columns=columns,
        record_count="revealed" if align or vertical else "private",
        leakage=(
            "every party learns the frequent itemsets and rules of the pooled transactions"
            + (
                " with their global support counts"
                if params.get("reveal_counts")
                else " (whether each candidate's pooled support reaches the threshold)"
            )
            + (
                "; vertical: the number of transactions, and the support counts of "
                "candidates spanning parties"
                + (f" with this party's own noise (epsilon {epsilon:g})" if epsilon else "")
                if vertical
                else "; the collector of each level's union learns set sizes with fakes"
            )
            + (_ALIGN_LEAKAGE if align else "")
        ),
    )


def _read_header(ctx: PartyContext, key: str, sep: str) -> list[str]:
    if _source_entry(ctx, key) and ctx.settings["data"][key].get("kind") == "spark-table":
        # a table of the Spark catalog: only the party's engine can read it (issue 28)
        from ppdm.jobs.mining_data import _party_spec, party_engine

        spec = _party_spec(ctx, key)
        return [c.strip() for c in party_engine(ctx).column_names(spec)]
    if _source_entry(ctx, key):
        from ppdm.sources import source_columns

        names = source_columns(
            ctx.settings.get("data"),
            key,
            base_dir=ctx.base_dir,
            party=ctx.name,
            sep=sep if isinstance(sep, str) and len(sep) == 1 else ",",
        )
        return [c.strip() for c in names]
    path = ctx.data_path(key)
    if not path.is_file():  # the node refuses with a fixed reason; this is for its owner
        raise ConfigError(f"the job's data file is missing at this party ([data] {key}: {path})")
    import csv  # here: a node starts without it (issue 25)

    with path.open(newline="", encoding="utf-8", errors="replace") as f:
        row = next(
            csv.reader(f, delimiter=sep if isinstance(sep, str) and len(sep) == 1 else ","), []
        )
    return [c.strip() for c in row]


#: k-means starting centres that are aggregates (the others place centres on records).
AGGREGATE_INITS = ("aggregate", "random-partition", "random-slabs")


def _kmeans(
    params: Mapping[str, Any], parties: Sequence[str], me: str, ctx: PartyContext
) -> Disclosure:
    data_key = params.get("data") or "records"
    key = f"data.{data_key}"
    vertical = params.get("mode") == "vertical"
    align = bool(params.get("align"))
    columns = params.get("columns")
    changed = _changed("kmeans", params)
    init = params.get("init", "aggregate")
    id_column = str(params.get("id_column") or "record_id")
    header: list[str] | None = None

    def held() -> list[str]:
        nonlocal header
        if header is None:
            try:
                header = _read_header(ctx, data_key, params.get("sep", ","))
            except (ConfigError, OSError):
                header = []
        return header

    own: tuple[str, ...] = ()
    outputs: list[Output] = []
    if not isinstance(init, str):
        mine = [c for c in held() if c and c != id_column]
        if columns is not None:
            mine = [c for c in mine if c in columns]
        if isinstance(init, dict):
            own = tuple(c for c in init if c in mine) if vertical else tuple(mine)
        else:  # rows of full centres (horizontal)
            own = tuple(mine) or ("*",)
        if own:
            changed["init"] = "explicit starting centres"
    elif init not in AGGREGATE_INITS:
        changed["init"] = init
        outputs.append(
            Output(
                "records",
                f"init={init!r} starts from real records: they are published as starting centres",
            )
        )
    size = _int_param(params, "min_cluster_size")
    outputs.append(
        Output(
            "aggregate",
            "the centres and sizes of the clusters in every iteration",
            covers=size,
            party_covers=_int_param(params, "min_party_records") or None,
        )
    )
    if vertical:
        outputs.append(
            Output(
                "records",
                "every record's cluster label in every iteration (a function of this "
                "party's values of that record and the other parties' columns)",
                chosen_by=_others(parties, me),
            )
        )
    if align:
        outputs.append(_align_outputs(params, parties, me))
    read_columns = tuple(str(c) for c in columns) if isinstance(columns, list) else None
    if vertical and read_columns is not None and held():
        # Vertically each party reads only the job's columns that it holds: its column
        # control applies to those (the others' columns never touch its data).
        read_columns = tuple(c for c in read_columns if c in held())
    if vertical or align:
        # The id column orders (vertical) or aligns (align=true) the records: it is read.
        if read_columns is None:
            read_columns = tuple(held()) or None
        elif id_column not in read_columns:
            read_columns = (*read_columns, id_column)
    return Disclosure(
        reads=(key,),
        participants=tuple(parties),
        aggregate=None if vertical else "sum",
        audit_key=None if vertical else key,
        changed=changed,
        columns=read_columns,
        own_centre_columns=own,
        outputs=tuple(outputs),
        record_count="revealed" if vertical or align else "pooled",
        leakage=(
            "every party learns the centres and cluster sizes of every iteration"
            + (
                "; vertical: every record's cluster label, each party keeps its own centre "
                "components"
                if vertical
                else "; horizontal: sums and counts by secure sum"
            )
            + (
                f"; init={init!r} reveals real records as starting centres"
                if isinstance(init, str) and init not in AGGREGATE_INITS
                else ""
            )
            + (_ALIGN_LEAKAGE if align else "")
        ),
    )


def _check_kmeans(
    params: Mapping[str, Any], parties: Sequence[str], me: str, ctx: PartyContext
) -> None:
    columns = params.get("columns")
    if columns is None:
        return
    header = _read_header(ctx, params.get("data") or "records", params.get("sep", ","))
    if params.get("mode") == "horizontal" and any(c not in header for c in columns):
        raise ConfigError("a requested column is missing at this party")


def _check_data_file(
    params: Mapping[str, Any], parties: Sequence[str], me: str, ctx: PartyContext
) -> None:
    key = params.get("data") or "transactions"
    if _source_entry(ctx, key):
        from ppdm.sources import check_source

        check_source(ctx.settings.get("data"), key, base_dir=ctx.base_dir, party=ctx.name)
        return
    if not ctx.data_path(key).is_file():  # the node refuses with a fixed reason (owner: this)
        raise ConfigError(
            f"the job's data file is missing at this party ([data] {key}: {ctx.data_path(key)})"
        )


def _public(
    params: Mapping[str, Any], parties: Sequence[str], me: str, ctx: PartyContext
) -> Disclosure:
    return Disclosure(
        reads=(),
        participants=tuple(parties),
        leakage="generated (public) test data only; no private input is read",
    )


_PROFILES: dict[str, JobProfile] = {
    p.name: p
    for p in (
        JobProfile("secure-sum", _secure_sum, _check_secure_sum),
        JobProfile("secure-sum-shared", _secure_sum_shared),
        JobProfile("paillier-dot-product", _dot_product),
        JobProfile("set-union", _set_union, _check_set_union),
        JobProfile("intersection-cardinality", _intersection),
        JobProfile("psi-align", _psi_align, _check_psi_align),
        JobProfile("assoc", _assoc, _check_data_file),
        JobProfile("kmeans", _kmeans, _check_kmeans),
        *(
            JobProfile(name, _public)
            for name in (
                "base-ot",
                "ot-extension",
                "dot-product-ot",
                "comparison",
                "argmin",
                "ring-echo",
                "stream",
            )
        ),
    )
}


def disclosure_parameters() -> dict[str, list[str]]:
    """Per job, the parameters that change what a party discloses."""
    return {job: sorted(names) for job, names in _DISCLOSURE_PARAMS.items()}


def get_profile(name: str) -> JobProfile | None:
    """The profile of job ``name`` (``None``: the job has none and is refused unless the
    policy allows it by name)."""
    return _PROFILES.get(name)


def profile_names() -> list[str]:
    return sorted(_PROFILES)


def unprofiled_jobs() -> list[str]:
    """Registered jobs without a disclosure statement (must be empty: the node refuses
    them, and a test walks the registry)."""
    from ppdm.jobs.registry import job_names

    return [name for name in job_names() if name not in _PROFILES]
