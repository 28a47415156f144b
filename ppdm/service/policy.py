"""The data owner's policy: what this party's node lets a job do with its data.

Every node checks every job against its owner's policy *before* anything runs (the
``ProposeJob`` call of :mod:`ppdm.service.node`), and again when the job is started. The
policy is a TOML file named in the party's settings (``[node] policy = "policy.toml"``);
without one the node applies :data:`DEFAULT_POLICY_TOML`, which ``ppdm consortium init``
also writes next to every settings file. The schema, with worked examples, is in
``docs/governance.md``; in short::

    version = 1

    [defaults]                    # for every job, unless a [jobs.NAME] table overrides
    jobs = ["*"]                  # jobs that may run ("*": every job with a profile)
    initiators = ["*"]            # roster members who may start jobs with this party
    co_parties = ["*"]            # members this party may compute with
    min_parties = 3               # jobs on this party's private data need this many parties
    max_parties = 64
    consent = false               # true: such jobs wait for `ppdm job approve`
    consent_timeout_s = 3600
    results = "members"           # who reads this node's results: members | initiator | owner
                                  # | shares (only jobs that keep outputs as secret shares)
    rate_limit = { jobs = 120, per_s = 3600 }   # per initiator
    colluders = 1                 # the audit assumes this many other members pool what they know
    audit = true                  # the cross-job disclosure audit (false: e.g. public data)
    min_aggregate = 10            # fewest records behind any released aggregate
    min_party_records = 3         # fewest of this party's records behind one it contributes to
    allow_records = false         # outputs that are raw records or one record's values
    exact_partners = []           # members whose linear queries on this party run exact
    max_epsilon = 1.0             # privacy loss of one job's noisy answers
    epsilon_budget = 10.0         # privacy loss over all jobs, per data set (kept in the ledger)
    max_set_ratio = 2.0           # membership jobs: another set at most this times this party's
    max_probes = 20               # membership jobs per data set, over all jobs
    reveal_size = true            # jobs may reveal this party's record count / set size

    [jobs.assoc]                  # per job: allow, the keys above, parameter rules
    allow = true
    [jobs.assoc.params]
    min_support = { min = 0.01 }  # { min, max } | { values = [...] } | { any = true }
    reveal_counts = { values = [false, true] }    # allow a disclosure-changing value

    [data.records]                # per data set ([inputs.KEY] for private inputs)
    jobs = ["kmeans"]             # the jobs that may read it
    columns = ["age", "income"]   # the columns a job may read (the job must name them)
    min_cluster_size = 10         # minimum records per released k-means centre
    explicit_centres = false      # starting centres on this party's columns (default: refused)

The rules read each job's *disclosure statement* (:class:`ppdm.service.profiles.Disclosure`):
its outputs by kind (raw records, aggregates with the records each covers, linear queries
another party chooses, membership answers), every column it reads and what it reveals of
the party's record count; never the job's parameter names alone.

Parameters that change what this party discloses (``reveal_counts``, ``report_local``,
``include_labels``, ``pad_to``, lower ``fake_ratio``, output recipients, explicit starting
centres: the ``changed`` set of :class:`ppdm.service.profiles.Disclosure`) are refused at
any value but the safe default unless a parameter rule allows the value.

:func:`evaluate` is a pure function of the policy, the request and the job's declared
leakage: it never looks at data, so a refusal reveals nothing about the party's data (the
data-dependent checks, ``input_check`` and ``audit``, are the node's, with fixed reasons).
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ppdm.errors import ConfigError
from ppdm.service.profiles import SHARE_OUTPUTS, Disclosure, get_profile

__all__ = [
    "DEFAULT_POLICY_TOML",
    "OPEN_POLICY_TOML",
    "Decision",
    "JobRules",
    "ParamRule",
    "Policy",
    "PolicyFile",
    "evaluate",
    "load_policy",
    "parse_policy",
]

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


#: Keys that bound a job's disclosure statement: in [defaults], [jobs.NAME] and per data
#: set ([data.KEY] / [inputs.KEY]); the data set's value wins for jobs that read it.
STATEMENT_KEYS = (
    "min_aggregate",
    "min_party_records",
    "allow_records",
    "exact_partners",
    "max_epsilon",
    "epsilon_budget",
    "max_set_ratio",
    "max_probes",
    "reveal_size",
)
_DEFAULT_KEYS = {
    "jobs",
    "initiators",
    "co_parties",
    "min_parties",
    "max_parties",
    "consent",
    "consent_timeout_s",
    "results",
    "rate_limit",
    "colluders",
    "audit",
    *STATEMENT_KEYS,
}
#: What the generated policy and a policy without these keys apply.
STATEMENT_DEFAULTS: dict[str, Any] = {
    "min_aggregate": 10,
    "min_party_records": 3,
    "allow_records": False,
    "exact_partners": (),
    "max_epsilon": 1.0,
    "epsilon_budget": 10.0,
    "max_set_ratio": 2.0,
    "max_probes": 20,
    "reveal_size": True,
}
_JOB_KEYS = (_DEFAULT_KEYS - {"jobs"}) | {"allow", "params"}
_DATA_KEYS = {
    "jobs",
    "columns",
    "min_parties",
    "min_cluster_size",
    "min_support",
    "explicit_centres",
    "consent",
    *STATEMENT_KEYS,
}


@dataclass(frozen=True)
class ParamRule:
    """Allowed values of one job parameter: a list of ``values``, a numeric range
    ``[min, max]``, or ``any``."""

    values: tuple[Any, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None
    any: bool = False

    def allows(self, value: Any) -> bool:
        if self.any:
            return True
        if self.values is not None:
            return any(_same(value, v) for v in self.values)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if isinstance(value, float) and not math.isfinite(value):
            return False
        if self.minimum is not None and value < self.minimum:
            return False
        return not (self.maximum is not None and value > self.maximum)

    def describe(self) -> str:
        if self.any:
            return "any value"
        if self.values is not None:
            return "one of " + ", ".join(_show(v) for v in self.values)
        lo = "" if self.minimum is None else f">= {self.minimum:g}"
        hi = "" if self.maximum is None else f"<= {self.maximum:g}"
        return " and ".join(x for x in (lo, hi) if x) or "a number"


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return bool(a == b)


def _show(v: Any) -> str:
    return "null" if v is None else repr(v).lower() if isinstance(v, bool) else repr(v)


@dataclass(frozen=True)
class JobRules:
    """The effective rules of one job (defaults overlaid with its ``[jobs.NAME]`` table)."""

    allow: bool
    initiators: tuple[str, ...]
    co_parties: tuple[str, ...]
    min_parties: int
    max_parties: int
    consent: bool
    consent_timeout_s: float
    results: str
    rate_jobs: int
    rate_per_s: float
    colluders: int
    audit: bool = True
    params: Mapping[str, ParamRule] = field(default_factory=dict)
    #: The bounds on the disclosure statement (:data:`STATEMENT_KEYS`).
    statement: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DataRules:
    jobs: tuple[str, ...] = ("*",)
    columns: tuple[str, ...] | None = None
    min_parties: int | None = None
    min_cluster_size: int | None = None
    min_support: float | None = None
    explicit_centres: bool = False
    consent: bool | None = None
    #: Overrides of :data:`STATEMENT_KEYS` for jobs that read this data set.
    statement: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Policy:
    """A validated policy (see the module docstring for the schema)."""

    defaults: Mapping[str, Any]
    jobs: Mapping[str, Mapping[str, Any]]
    data: Mapping[str, DataRules]
    source: str = "<default>"
    #: ``[notify] pending``: the command a node runs for every job awaiting approval
    notify_pending: tuple[str, ...] = ()
    notify_timeout_s: float = 10.0

    def rules(self, job: str) -> JobRules:
        d = {**self.defaults, **{k: v for k, v in self.jobs.get(job, {}).items() if k != "params"}}
        listed = self.defaults["jobs"]
        known = get_profile(job) is not None
        allow = d.get("allow", ("*" in listed and known) or job in listed)
        rate = d["rate_limit"]
        params = self.jobs.get(job, {}).get("params", {})
        return JobRules(
            allow=bool(allow),
            initiators=tuple(d["initiators"]),
            co_parties=tuple(d["co_parties"]),
            min_parties=int(d["min_parties"]),
            max_parties=int(d["max_parties"]),
            consent=bool(d["consent"]),
            consent_timeout_s=float(d["consent_timeout_s"]),
            results=str(d["results"]),
            rate_jobs=int(rate["jobs"]),
            rate_per_s=float(rate["per_s"]),
            colluders=int(d["colluders"]),
            audit=bool(d["audit"]),
            params=params,
            statement={k: d[k] for k in STATEMENT_KEYS},
        )

    def data_rules(self, key: str) -> DataRules:
        """Rules of ``"inputs.X"`` or ``"data.X"`` (defaults if the policy has none)."""
        return self.data.get(key, DataRules())


@dataclass(frozen=True)
class Decision:
    """A node's answer to a job: ``accept``, ``pending`` (owner approval needed) or
    ``refuse``; ``rule`` names the deciding rule and ``reason`` explains it without data."""

    outcome: Literal["accept", "pending", "refuse"]
    rule: str = ""
    reason: str = ""
    expires_s: float = 0.0
    results: str = "members"
    colluders: int = 1
    audit: bool = True
    #: The audit's bounds for the data set the job reads (``epsilon_budget``,
    #: ``max_probes``), after the data set's own rules.
    limits: Mapping[str, Any] = field(default_factory=dict)
    #: The local cause of a data-dependent refusal (a typo in ``[data]``, a database that
    #: is down): shown to this node's own owner only, never sent to a peer.
    cause: str = ""

    @property
    def refused(self) -> bool:
        return self.outcome == "refuse"


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


# Evaluation --------------------------------------------------------------------------------


def _member(name: str, allowed: Sequence[str]) -> bool:
    return "*" in allowed or name in allowed


def evaluate(
    policy: Policy,
    *,
    job: str,
    params: Mapping[str, Any],
    initiator: str,
    parties: Sequence[str],
    me: str,
    disclosure: Disclosure | None,
    recent_by_initiator: int = 0,
) -> Decision:
    """Decide on a job from the policy and the job's declared leakage (never from data).

    ``recent_by_initiator`` is how many jobs ``initiator`` started at this node within
    the rate-limit window. Rules are checked in the order of ``docs/governance.md``; the
    first that refuses decides.
    """
    r = policy.rules(job)

    def refuse(rule: str, reason: str) -> Decision:
        return Decision(
            "refuse", rule, reason, results=r.results, colluders=r.colluders, audit=r.audit
        )

    if disclosure is None and job not in policy.jobs:
        return refuse("jobs", f"job {job!r} has no leakage profile; the policy must name it")
    if not r.allow:
        return refuse(f"jobs.{job}.allow", f"the policy does not allow job {job!r}")
    if initiator != me and not _member(initiator, r.initiators):
        return refuse("initiators", f"party {initiator!r} may not start jobs with this party")
    for p in parties:
        if p != me and not _member(p, r.co_parties):
            return refuse("co_parties", f"this party does not compute with party {p!r}")
    if r.rate_jobs and recent_by_initiator >= r.rate_jobs:
        return refuse(
            "rate_limit",
            f"party {initiator!r} started {r.rate_jobs} jobs within {r.rate_per_s:g} s",
        )
    consent = r.consent
    # The statement's bounds: the job's rules, overlaid by those of the data it reads.
    limits = dict(r.statement)
    for key in disclosure.reads if disclosure is not None else ():
        limits.update(policy.data_rules(key).statement)
    if disclosure is not None and disclosure.private:
        count = len(disclosure.participants)
        need = r.min_parties
        for key in disclosure.reads:
            d = policy.data_rules(key)
            if not _member(job, d.jobs):
                return refuse(f"{key}.jobs", f"job {job!r} may not read {key}")
            if d.min_parties is not None:
                need = max(need, d.min_parties)
            if d.consent is not None:
                consent = consent or d.consent
            if d.columns is not None and disclosure.columns is None:
                return refuse(
                    f"{key}.columns",
                    "the job reads columns of this data set without naming them (parameter "
                    "columns)",
                )
            if d.columns is not None and disclosure.columns is not None:
                outside = [c for c in disclosure.columns if c not in d.columns]
                if outside:
                    return refuse(f"{key}.columns", f"column(s) {outside} may not be read")
            if disclosure.own_centre_columns and not d.explicit_centres:
                rule = r.params.get("init")
                if rule is None or not rule.any:
                    return refuse(
                        "params.init",
                        "explicit starting centres on this party's columns are not allowed",
                    )
            if d.min_cluster_size and job == "kmeans":
                size = params.get("min_cluster_size", 0)
                if not isinstance(size, int) or size < d.min_cluster_size:
                    return refuse(
                        f"{key}.min_cluster_size",
                        f"the job must set min_cluster_size >= {d.min_cluster_size}",
                    )
            if d.min_support is not None and job == "assoc":
                support = params.get("min_support", 0)
                if not isinstance(support, int | float) or support < d.min_support:
                    return refuse(
                        f"{key}.min_support", f"the job must set min_support >= {d.min_support:g}"
                    )
        if r.results == "shares":
            share = SHARE_OUTPUTS.get(job)
            if share is None or params.get(share[0]) != share[1]:
                return refuse(
                    "results",
                    "this party's data may only be used for results kept as secret shares",
                )
        if count < need:
            return refuse(
                "min_parties",
                f"a job on this party's data needs at least {need} parties, not {count}",
            )
        if count > r.max_parties:
            return refuse("max_parties", f"a job may have at most {r.max_parties} parties")
        refusal = _check_statement(disclosure, limits, r, colluders=r.colluders)
        if refusal is not None:
            return refuse(*refusal)
        for name, value in disclosure.changed.items():
            if name == "init":
                continue  # decided above (explicit centres) and by the statement (records)
            rule = r.params.get(name)
            if rule is None or not rule.allows(value):
                return refuse(
                    f"params.{name}",
                    f"parameter {name!r} at this value changes what this party discloses",
                )
    for name, rule in r.params.items():
        if name in params and not rule.allows(params[name]):
            return refuse(f"params.{name}", f"parameter {name!r} must be {rule.describe()}")
    explicit = policy.jobs.get(job, {}).get("consent")
    if explicit or (consent and disclosure is not None and disclosure.private):
        return Decision(
            "pending",
            "consent",
            "the owner must approve this job (ppdm job approve)",
            expires_s=r.consent_timeout_s,
            results=r.results,
            colluders=r.colluders,
            audit=r.audit,
            limits=limits,
        )
    return Decision(
        "accept", "", "", results=r.results, colluders=r.colluders, audit=r.audit, limits=limits
    )


def _partner(name: str, partners: Sequence[str]) -> bool:
    return "*" in partners or name in partners


def _check_statement(
    disclosure: Disclosure, limits: Mapping[str, Any], r: JobRules, *, colluders: int
) -> tuple[str, str] | None:
    """The statement's outputs against the owner's bounds: ``(rule, reason)`` of the
    first refusal, or ``None``. Reasons name the rule and the job's declared values,
    never data."""
    from ppdm.service.profiles import incomplete_statement

    problem = incomplete_statement(disclosure)
    if problem is not None:
        return "statement", f"the job's disclosure statement is incomplete: {problem}"
    floor = int(limits["min_aggregate"])
    party_floor = int(limits["min_party_records"])
    for o in disclosure.outputs:
        if o.kind == "records" and not limits["allow_records"]:
            init = r.params.get("init")
            if not (o.what.startswith("init=") and init is not None and init.any):
                return (
                    "allow_records",
                    f"the job would release raw records or one record's values ({o.what})",
                )
        elif o.kind == "aggregate" and o.unit == "records":
            if (o.covers or 0) < floor:
                return (
                    "min_aggregate",
                    f"a released aggregate may rest on {o.covers or 0} records; this party "
                    f"requires at least {floor} (the job's minimum-aggregation parameter)",
                )
            if (
                colluders > 0
                and party_floor > 1
                and o.colluder_safe < colluders
                and (o.party_covers or 0) < party_floor
            ):
                return (
                    "min_party_records",
                    f"a released aggregate may rest on {o.party_covers or 0} of this party's "
                    f"records; this party requires at least {party_floor}",
                )
        elif o.kind == "linear":
            if o.protection == "dp":
                if (o.epsilon or 0.0) > float(limits["max_epsilon"]):
                    return (
                        "max_epsilon",
                        f"the job's noisy answers would cost epsilon {o.epsilon:g}; this party "
                        f"allows at most {float(limits['max_epsilon']):g} per job",
                    )
            else:
                partners = limits["exact_partners"]
                strangers = [p for p in o.chosen_by if not _partner(p, partners)]
                if strangers:
                    return (
                        "exact_partners",
                        "exact answers to queries whose coefficients "
                        f"{', '.join(repr(p) for p in strangers)} choose(s) need them in "
                        "exact_partners (or noisy answers: protect=dp)",
                    )
        elif o.kind == "membership" and o.chosen_by:
            ratio = float(limits["max_set_ratio"])
            if ratio != math.inf and (o.set_ratio is None or o.set_ratio > ratio):
                return (
                    "max_set_ratio",
                    f"another party's set may be {o.set_ratio if o.set_ratio else 'any'} "
                    f"times this party's; this party allows at most {ratio:g}",
                )
            if (o.min_set or 0) < floor:
                return (
                    "min_aggregate",
                    f"sets and intersections of {o.min_set or 0} ids would be answered; this "
                    f"party requires at least {floor}",
                )
    if disclosure.record_count == "revealed" and not limits["reveal_size"]:
        return "reveal_size", "the job would reveal this party's record count or set size"
    return None


OPEN_POLICY_TOML = _open_policy()
