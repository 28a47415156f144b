"""A party's own check of its settings, data sources and policy together
(``ppdm consortium check PARTY.toml``), before its node is started or after an edit.

A node checks the *form* of ``[data]`` at start and opens each source only when a job
asks for it, refusing a job it cannot serve with a fixed reason its peers see
(``input_check``). :func:`check_party` runs the same checks up front, for the owner: every
``[data]`` entry is parsed, its file, dataset or database found and its credentials read
(:func:`ppdm.sources.check_source`), and then opened read-only with its columns read
under a time bound (:func:`ppdm.sources.source_columns`; a database that is down fails
here, not in the first job); the ``[limits]`` table was checked when the settings loaded;
the policy file is loaded and its ``[data.KEY]`` sections are matched with ``[data]``.

Every finding names the entry and the precise local cause (this runs on the owner's own
host; nothing is sent anywhere) but never a credential's value.
"""

from __future__ import annotations

from typing import Any

from ppdm.errors import ConfigError, PPDMError
from ppdm.parties.consortium import PartySettings

__all__ = ["SOURCE_CHECK_TIMEOUT_S", "check_party"]

#: How long opening one source may take (a database that does not answer fails then).
SOURCE_CHECK_TIMEOUT_S = 10.0


def _finding(what: str, ok: bool, detail: str) -> dict[str, Any]:
    return {"what": what, "ok": ok, "detail": detail}


def _open_entry(settings: PartySettings, key: str, spec: Any, timeout: float) -> str:
    """Open ``[data] key`` read-only and describe what was found (raise on a problem)."""
    from ppdm.sources import check_source, read_time_limit, source_columns

    data = settings.raw.get("data")
    if spec.kind == "spark-table":
        return _open_spark_table(settings, spec)
    check_source(data, key, base_dir=settings.base_dir, party=settings.name)
    if spec.kind == "file" and spec.file_path.is_file():
        with spec.file_path.open("rb") as f:  # readable by this user, not only present
            f.read(1)
        return f"file {spec.file_path} ({spec.file_path.stat().st_size:,} bytes), readable"
    with read_time_limit(timeout):
        columns = source_columns(data, key, base_dir=settings.base_dir, party=settings.name)
    return f"{spec.describe()}: opened read-only, {len(columns)} columns"


def _open_spark_table(settings: PartySettings, spec: Any) -> str:
    """A ``spark-table`` entry is read through the party's Spark engine, as its node reads
    it in a job: the engine is started (a local session or the cluster's driver) and the
    table's columns read from the catalog. The embedded engine cannot read one."""
    from ppdm.compute import engine_for
    from ppdm.compute.engine import parse_compute_table

    compute = parse_compute_table(settings.raw.get("compute"))
    if compute.engine != "spark":
        raise ConfigError(
            f'{spec.describe()} is a table of a Spark catalog: it needs [compute] engine = "spark" '
            "(this party's engine is embedded)"
        )
    engine = engine_for(settings.raw, party=settings.name)
    columns = engine.column_names(spec)
    return (
        f"{spec.describe()}: read through the Spark engine ({compute.master}), "
        f"{len(columns)} columns"
    )


def check_party(
    settings: PartySettings, *, timeout: float = SOURCE_CHECK_TIMEOUT_S
) -> list[dict[str, Any]]:
    """Findings ``{what, ok, detail}`` for ``settings``' ``[limits]``, every ``[data]``
    entry (opened, bounded by ``timeout`` seconds each) and the policy (module doc)."""
    from ppdm.service.node import policy_path
    from ppdm.service.policy import load_policy
    from ppdm.sources.config import parse_data_entry

    out = [_finding("[limits]", True, "valid (checked when the settings loaded)")]
    table = settings.raw.get("data") or {}
    keys: list[str] = []
    if not isinstance(table, dict):
        out.append(_finding("[data]", False, "must be a table of entries"))
        table = {}
    for key, entry in table.items():
        keys.append(str(key))
        what = f"[data] {key}"
        try:
            spec = parse_data_entry(str(key), entry, base_dir=settings.base_dir)
            out.append(_finding(what, True, _open_entry(settings, str(key), spec, timeout)))
        except (PPDMError, OSError, ValueError) as exc:
            cause = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            out.append(_finding(what, False, cause))
    if not table:
        out.append(_finding("[data]", True, "no data entries (jobs read [inputs] only)"))
    try:
        path = policy_path(settings)
        policy = load_policy(path)
    except PPDMError as exc:
        out.append(_finding("policy", False, str(exc)))
        return out
    out.append(
        _finding(
            "policy",
            True,
            f"{path} valid" if path is not None else "none named: the default policy applies",
        )
    )
    for name in policy.data:
        kind, _, key = name.partition(".")
        if kind != "data" or key in keys:
            continue
        out.append(
            _finding(
                f"policy [{name}]",
                False,
                f"names no entry of [data] (entries: {', '.join(keys) or 'none'}): a typo?",
            )
        )
    return out
