"""Edit a data owner's policy file in place (``ppdm policy allow``), keeping its comments.

A parameter that changes what a party discloses (``reveal_counts``, ``report_local``, ...:
:func:`ppdm.service.profiles.disclosure_parameters`) is refused at any value but its safe
default unless the policy allows the value with a parameter rule (docs/governance.md)::

    [jobs.assoc.params]
    reveal_counts = { values = [false, true] }

:func:`allow_parameter` writes exactly that rule with tomlkit (every other line, comment
and order of the file stays as it was), checks the new file with
:func:`ppdm.service.policy.parse_policy` before it replaces the old one (an invalid result
is never written), and replaces the file atomically with its mode kept, so that a running
node's file watcher picks it up whole (and records the change in its ledger).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ppdm.errors import ConfigError

__all__ = ["allow_parameter", "jobs_with_parameter"]


def jobs_with_parameter(param: str) -> list[str]:
    """The jobs for which ``param`` is a disclosure-changing parameter."""
    from ppdm.service.profiles import disclosure_parameters

    return sorted(job for job, names in disclosure_parameters().items() if param in names)


def _safe_default(job: str, param: str) -> Any:
    from ppdm.service.profiles import _DISCLOSURE_PARAMS

    return _DISCLOSURE_PARAMS[job][param]


def allow_parameter(
    path: str | os.PathLike[str],
    param: str,
    *,
    job: str | None = None,
    values: Sequence[Any] = (),
) -> tuple[str, str]:
    """Allow the disclosure-changing parameter ``param`` of ``job`` in the policy file
    ``path`` (created if missing): the safe default and ``values`` (for a boolean
    parameter, ``true`` when no value is given). Returns ``(job, the rule line)``.

    :class:`ConfigError` for an unknown parameter, a parameter of several jobs without
    ``job``, a non-boolean parameter without ``values``, or a file that is not a valid
    policy before or after the change.
    """
    import tomlkit

    from ppdm.service.policy import parse_policy

    owners = jobs_with_parameter(param)
    if not owners:
        from ppdm.service.profiles import disclosure_parameters

        known = sorted({n for names in disclosure_parameters().values() for n in names})
        raise ConfigError(
            f"{param!r} is not a parameter that changes what a party discloses "
            f"(those are: {', '.join(known)}); other parameters are bounded with "
            "{ min, max } rules written by hand (docs/governance.md)"
        )
    if job is None:
        if len(owners) > 1:
            raise ConfigError(
                f"{param!r} belongs to several jobs ({', '.join(owners)}): name one with --job"
            )
        job = owners[0]
    elif job not in owners:
        raise ConfigError(
            f"{param!r} is not a disclosure parameter of job {job!r} (it is one of: "
            f"{', '.join(owners)})"
        )
    safe = _safe_default(job, param)
    wanted = list(values)
    if not wanted:
        if not isinstance(safe, bool):
            raise ConfigError(f"give the value(s) of {param!r} to allow with --value")
        wanted = [not safe]
    allowed = [safe, *[v for v in wanted if v != safe]]
    if any(v is None for v in allowed):
        allowed = ["null" if v is None else v for v in allowed]

    p = Path(path)
    text = p.read_text() if p.exists() else ""
    try:
        doc = tomlkit.parse(text)
    except tomlkit.exceptions.ParseError as exc:
        raise ConfigError(f"{p}: not valid TOML ({exc})") from None
    jobs = doc.get("jobs")
    if jobs is None:
        jobs = tomlkit.table(is_super_table=True)
        doc["jobs"] = jobs
    table = jobs.get(job)
    if table is None:
        table = tomlkit.table(is_super_table=True)
        jobs[job] = table
    params = table.get("params")
    if params is None:
        params = tomlkit.table()
        table["params"] = params
    rule = tomlkit.inline_table()
    rule["values"] = allowed
    params[param] = rule
    new_text = tomlkit.dumps(doc)
    import tomllib

    try:
        parse_policy(tomllib.loads(new_text), source=str(p))
    except (tomllib.TOMLDecodeError, ConfigError) as exc:
        raise ConfigError(f"{p}: the policy would not be valid after the change: {exc}") from None
    _replace(p, new_text)
    return job, f"{param} = {tomlkit.dumps({'v': rule}).split('=', 1)[1].strip()}"


def _replace(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically, keeping the old file's mode (0600 if new)."""
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o600
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
