"""The data owner's policy file: the default policy ``ppdm consortium init`` writes and
the open one of the test beds, parsing and validating a policy document (a
:class:`~ppdm.errors.ConfigError` naming the bad key), loading a file, and the file the
node re-reads when it changes (:class:`PolicyFile`). The schema is described in
:mod:`ppdm.service.policy` and ``docs/governance.md``.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ppdm.errors import ConfigError
from ppdm.service.policy_rules import (
    _DATA_KEYS,
    _DEFAULT_KEYS,
    _JOB_KEYS,
    STATEMENT_DEFAULTS,
    STATEMENT_KEYS,
    DataRules,
    Policy,
)

if TYPE_CHECKING:
    from ppdm.service.policy_decision import ParamRule

    OPEN_POLICY_TOML: str  # made at first use (module __getattr__)

log = logging.getLogger(__name__)

RESULTS = ("members", "initiator", "owner", "shares")

DEFAULT_POLICY_TOML = """\
# Data-owner policy of this party's node (docs/governance.md): what a job may do with this
# party's data. The node checks every job against it before anything runs, and re-reads
# this file when it changes (no restart). `ppdm policy check` tells whether a given job
# would be accepted, and by which rule.
version = 1

[defaults]
jobs = ["*"]              # every job ppdm ships a leakage profile for
initiators = ["*"]        # any roster member may start a job with this party
co_parties = ["*"]        # with any other roster members
min_parties = 3           # a job on this party's private data needs at least 3 parties:
                          # with 2, the other party learns this party's input from the result
max_parties = 64
consent = false           # true: jobs on private data wait for `ppdm job approve ID`
consent_timeout_s = 3600  # an unapproved job expires after this many seconds
results = "members"       # job results go to every member of the job
rate_limit = { jobs = 120, per_s = 3600 }   # jobs per initiator per hour
colluders = 1             # the cross-job audit assumes any one other member pools its own
                          # inputs with every answer it saw
audit = true              # the cross-job disclosure audit (docs/governance.md)
min_aggregate = 10        # no released aggregate (itemset support, centre, cluster size,
                          # intersection) rests on fewer records than this
min_party_records = 3     # nor on 1 or 2 of this party's records where it contributes
allow_records = false     # no raw record or single record's value leaves this node
exact_partners = []       # members whose linear queries on this party's data (vertical
                          # support counts, intersection counts) may run exact; with
                          # anyone else they carry this node's own calibrated noise
max_epsilon = 1.0         # privacy loss of one job's noisy answers on a data set
epsilon_budget = 10.0     # privacy loss over all jobs on a data set; refused past it
max_set_ratio = 2.0       # record alignment: another party's set at most 2x this party's
max_probes = 20           # membership jobs (alignment, intersections) per data set
reveal_size = true        # alignment may reveal this party's set size (false: refuse)

# To run vertical association rules with exact counts with named members:
# exact_partners = ["bob", "carol"]
#
# Parameters that change what this party discloses are refused at any value but their
# safe default unless allowed here, for example:
# [jobs.assoc.params]
# reveal_counts = { values = [false, true] }
#
# Minimum aggregation sizes and column control per data set, for example:
# [data.records]
# jobs = ["kmeans"]
# columns = ["age", "income"]
# min_cluster_size = 10
"""


def _open_policy() -> str:
    from ppdm.service.profiles import disclosure_parameters

    lines = [
        "# An open policy for testbeds of protocols and transports (NOT for private data):",
        "# every job, any number of parties, any disclosure parameter, no audit.",
        "version = 1",
        "",
        "[defaults]",
        "min_parties = 1",
        "colluders = 0",
        "audit = false",
        "rate_limit = { jobs = 1000000, per_s = 1 }",
        "min_aggregate = 0",
        "min_party_records = 0",
        "allow_records = true",
        'exact_partners = ["*"]',
        "max_epsilon = 1e9",
        "epsilon_budget = 1e12",
        "max_set_ratio = inf",
        "max_probes = 1000000000",
        "reveal_size = true",
    ]
    for job, names in sorted(disclosure_parameters().items()):
        lines += ["", f'[jobs."{job}".params]']
        lines += [
            f"{name} = {{ any = true }}"
            for name in sorted({*names, "init"} if job == "kmeans" else names)
        ]
    return "\n".join(lines) + "\n"


# Parsing ----------------------------------------------------------------------------------


def _names(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f'{where} must be a list of names ("*" for all)')
    return tuple(value)


def _int(value: Any, where: str, low: int, high: int = 1 << 31) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(f"{where} must be an integer in [{low}, {high}]")
    return value


def _positive(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
        raise ConfigError(f"{where} must be a positive number")
    return float(value)


def _check_common(table: Mapping[str, Any], where: str, out: dict[str, Any]) -> None:
    for key, value in table.items():
        w = f"{where}.{key}"
        if key in ("jobs", "initiators", "co_parties"):
            out[key] = _names(value, w)
        elif key in ("min_parties", "max_parties"):
            out[key] = _int(value, w, 1, 10_000)
        elif key == "colluders":
            out[key] = _int(value, w, 0, 10_000)
        elif key in ("consent", "allow", "audit"):
            if not isinstance(value, bool):
                raise ConfigError(f"{w} must be true or false")
            out[key] = value
        elif key == "consent_timeout_s":
            out[key] = _positive(value, w)
        elif key == "results":
            if value not in RESULTS:
                raise ConfigError(f"{w} must be one of {', '.join(RESULTS)}")
            out[key] = value
        elif key in ("min_aggregate", "min_party_records") or key == "max_probes":
            out[key] = _int(value, w, 0, 10**9)
        elif key in ("allow_records", "reveal_size"):
            if not isinstance(value, bool):
                raise ConfigError(f"{w} must be true or false")
            out[key] = value
        elif key == "exact_partners":
            if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
                raise ConfigError(f'{w} must be a list of member names ("*" for all)')
            out[key] = tuple(value)
        elif key in ("max_epsilon", "epsilon_budget"):
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not (0 <= value < math.inf)
            ):
                raise ConfigError(f"{w} must be a finite number >= 0")
            out[key] = float(value)
        elif key == "max_set_ratio":
            if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 1:
                raise ConfigError(f"{w} must be a number >= 1 (inf: unbounded)")
            out[key] = float(value)
        elif key == "rate_limit":
            if not isinstance(value, dict) or set(value) - {"jobs", "per_s"}:
                raise ConfigError(f"{w} must be {{ jobs = N, per_s = SECONDS }}")
            out[key] = {
                "jobs": _int(value.get("jobs", 120), f"{w}.jobs", 1, 10**9),
                "per_s": _positive(value.get("per_s", 3600), f"{w}.per_s"),
            }


def _param_rule(value: Any, where: str) -> ParamRule:
    from ppdm.service.policy_decision import ParamRule  # only a policy with params tables

    if not isinstance(value, dict) or not value:
        raise ConfigError(
            f"{where} must be a table: {{ values = [...] }}, {{ min, max }} or {{ any = true }}"
        )
    extra = set(value) - {"values", "min", "max", "any"}
    if extra:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(sorted(extra))}")
    if "any" in value:
        if value["any"] is not True or len(value) > 1:
            raise ConfigError(f"{where}: any must be true and alone")
        return ParamRule(any=True)
    if "values" in value:
        if not isinstance(value["values"], list) or set(value) != {"values"}:
            raise ConfigError(f"{where}: values must be a list (and alone)")
        # TOML has no null: the string "null" stands for it.
        return ParamRule(values=tuple(None if v == "null" else v for v in value["values"]))
    lo, hi = value.get("min"), value.get("max")
    for v, k in ((lo, "min"), (hi, "max")):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | float)):
            raise ConfigError(f"{where}.{k} must be a number")
    if lo is not None and hi is not None and lo > hi:
        raise ConfigError(f"{where}: min is above max")
    return ParamRule(minimum=lo, maximum=hi)


def parse_policy(doc: Mapping[str, Any], *, source: str = "<policy>") -> Policy:
    """Validate a parsed policy document; :class:`ConfigError` naming the bad key."""
    unknown = set(doc) - {"version", "defaults", "jobs", "data", "inputs", "notify"}
    if unknown:
        raise ConfigError(f"{source}: unknown top-level key(s) {', '.join(sorted(unknown))}")
    if "version" not in doc:
        # An empty or half-written file must never read as the default policy.
        raise ConfigError(f"{source}: a policy starts with 'version = 1'")
    if doc["version"] != 1:
        raise ConfigError(f"{source}: version must be 1")
    defaults: dict[str, Any] = {
        "jobs": ("*",),
        "initiators": ("*",),
        "co_parties": ("*",),
        "min_parties": 3,
        "max_parties": 64,
        "consent": False,
        "consent_timeout_s": 3600.0,
        "results": "members",
        "rate_limit": {"jobs": 120, "per_s": 3600.0},
        "colluders": 1,
        "audit": True,
        **STATEMENT_DEFAULTS,
    }
    d = doc.get("defaults", {})
    if not isinstance(d, dict):
        raise ConfigError(f"{source}: [defaults] must be a table")
    bad = set(d) - _DEFAULT_KEYS
    if bad:
        raise ConfigError(f"{source}: unknown key(s) in [defaults]: {', '.join(sorted(bad))}")
    _check_common(d, f"{source}: defaults", defaults)
    if defaults["min_parties"] > defaults["max_parties"]:
        raise ConfigError(f"{source}: defaults.min_parties is above max_parties")
    jobs: dict[str, dict[str, Any]] = {}
    jt = doc.get("jobs", {})
    if not isinstance(jt, dict):
        raise ConfigError(f"{source}: [jobs] must hold one table per job")
    for name, table in jt.items():
        where = f"{source}: jobs.{name}"
        if not isinstance(table, dict):
            raise ConfigError(f"{where} must be a table")
        bad = set(table) - _JOB_KEYS
        if bad:
            raise ConfigError(f"{where}: unknown key(s) {', '.join(sorted(bad))}")
        rules: dict[str, Any] = {}
        _check_common({k: v for k, v in table.items() if k != "params"}, where, rules)
        params = table.get("params", {})
        if not isinstance(params, dict):
            raise ConfigError(f"{where}.params must be a table")
        rules["params"] = {k: _param_rule(v, f"{where}.params.{k}") for k, v in params.items()}
        jobs[name] = rules
    data: dict[str, DataRules] = {}
    for table_name in ("data", "inputs"):
        tables = doc.get(table_name, {})
        if not isinstance(tables, dict):
            raise ConfigError(f"{source}: [{table_name}] must hold one table per data set")
        for key, t in tables.items():
            where = f"{source}: {table_name}.{key}"
            if not isinstance(t, dict):
                raise ConfigError(f"{where} must be a table")
            bad = set(t) - _DATA_KEYS
            if bad:
                raise ConfigError(f"{where}: unknown key(s) {', '.join(sorted(bad))}")
            for flag in ("explicit_centres", "consent"):
                if flag in t and not isinstance(t[flag], bool):
                    raise ConfigError(f"{where}.{flag} must be true or false")
            statement: dict[str, Any] = {}
            _check_common({k: t[k] for k in STATEMENT_KEYS if k in t}, where, statement)
            data[f"{table_name}.{key}"] = DataRules(
                jobs=_names(t["jobs"], f"{where}.jobs") if "jobs" in t else ("*",),
                columns=_names(t["columns"], f"{where}.columns") if "columns" in t else None,
                min_parties=_int(t["min_parties"], f"{where}.min_parties", 1, 10_000)
                if "min_parties" in t
                else None,
                min_cluster_size=_int(t["min_cluster_size"], f"{where}.min_cluster_size", 0, 10**9)
                if "min_cluster_size" in t
                else None,
                min_support=_fraction(t["min_support"], f"{where}.min_support")
                if "min_support" in t
                else None,
                explicit_centres=bool(t.get("explicit_centres", False)),
                consent=t.get("consent"),
                statement=statement,
            )
    notify = _notify_table(doc.get("notify", {}), f"{source}: notify")
    return Policy(defaults=defaults, jobs=jobs, data=data, source=source, **notify)


def _notify_table(table: Any, where: str) -> dict[str, Any]:
    """The ``[notify]`` table: ``pending`` (a command as a list of strings, run by the
    node for every job that waits for the owner's approval, with the job's id and
    initiator in its environment) and ``timeout_s`` (how long it may run, default 10)."""
    if not isinstance(table, dict):
        raise ConfigError(f"{where} must be a table")
    bad = set(table) - {"pending", "timeout_s"}
    if bad:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(sorted(bad))}")
    command = table.get("pending", [])
    if not isinstance(command, list) or not all(isinstance(a, str) and a for a in command):
        raise ConfigError(f'{where}.pending must be a command as a list, e.g. ["notify", "-u"]')
    timeout = _positive(table.get("timeout_s", 10.0), f"{where}.timeout_s")
    if timeout > 600:
        raise ConfigError(f"{where}.timeout_s must be at most 600 s")
    return {"notify_pending": tuple(command), "notify_timeout_s": timeout}


def _fraction(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
        raise ConfigError(f"{where} must be a fraction in (0, 1]")
    return float(value)


def load_policy(path: str | os.PathLike[str] | None) -> Policy:
    """The policy in ``path`` (the default policy when ``path`` is ``None``)."""
    if path is None:
        return parse_policy(tomllib.loads(DEFAULT_POLICY_TOML), source="<default policy>")
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"policy file not found: {p}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read policy file {p}: {exc}") from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{p}: not valid TOML ({exc})") from None
    return parse_policy(doc, source=str(p))


SETTLE_S = 0.3


class PolicyFile:
    """A policy file that is re-read when it changes (checked on every use, once the file
    has been unchanged for :data:`SETTLE_S` seconds, so that a file being written is not
    read half-way; at once on :meth:`reload`, i.e. SIGHUP); an invalid new version is
    logged and the previous one stays. Replace the file atomically (write a new file and
    rename it) where you can."""

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        self.path = Path(path) if path is not None else None
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._policy = load_policy(self.path)
        self._stamp = self._mtime()
        #: told (with whether the new file was valid) of every change the watcher in
        #: :meth:`current` picks up: the node chains a ``policy`` ledger entry
        self.on_change: Callable[[bool], object] | None = None

    def _mtime(self) -> tuple[int, int] | None:
        if self.path is None:
            return None
        try:
            st = self.path.stat()
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def current(self) -> Policy:
        stamp = self._mtime()
        if stamp is not None and stamp != self._stamp:
            age = time.time() - stamp[0] / 1e9
            if age >= SETTLE_S:
                ok = self.reload()
                if self.on_change is not None:
                    self.on_change(ok)
        return self._policy

    def reload(self) -> bool:
        """Re-read the file; ``False`` (and the old policy kept) if the new one is bad."""
        with self._lock:
            stamp = self._mtime()
            try:
                policy = load_policy(self.path)
            except ConfigError as exc:
                log.error("policy not reloaded, keeping the previous one: %s", exc)
                self._stamp = stamp
                return False
            self._policy, self._stamp = policy, stamp
            log.info("policy loaded from %s", self.path)
            return True


def __getattr__(name: str) -> Any:
    """``OPEN_POLICY_TOML``, made at first use from the jobs' declared leakage
    (:mod:`ppdm.service.profiles`, which a node imports with its first job, not at start)."""
    if name == "OPEN_POLICY_TOML":
        text = globals()[name] = _open_policy()
        return text
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
