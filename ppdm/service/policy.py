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

This module holds the evaluation; the policy's values are
:mod:`~ppdm.service.policy_rules` (a job's rules and the decision,
:mod:`~ppdm.service.policy_decision`), reading and watching the file
:mod:`~ppdm.service.policy_file`; their public names are importable from here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ppdm.service import policy_file as _policy_file
from ppdm.service.policy_file import (
    DEFAULT_POLICY_TOML,
    PolicyFile,
    load_policy,
    parse_policy,
)
from ppdm.service.policy_file import RESULTS as RESULTS
from ppdm.service.policy_file import SETTLE_S as SETTLE_S
from ppdm.service.policy_rules import STATEMENT_DEFAULTS as STATEMENT_DEFAULTS
from ppdm.service.policy_rules import STATEMENT_KEYS as STATEMENT_KEYS
from ppdm.service.policy_rules import DataRules as DataRules
from ppdm.service.policy_rules import Policy

if TYPE_CHECKING:
    from ppdm.service.policy_decision import Decision as Decision
    from ppdm.service.policy_decision import JobRules as JobRules
    from ppdm.service.policy_decision import ParamRule as ParamRule
    from ppdm.service.policy_file import OPEN_POLICY_TOML as OPEN_POLICY_TOML
    from ppdm.service.profiles import Disclosure

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
    from ppdm.service.policy_decision import Decision

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
            from ppdm.service.profiles import SHARE_OUTPUTS

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


def __getattr__(name: str) -> Any:
    """:class:`Decision`, :class:`JobRules` and :class:`ParamRule`
    (:mod:`~ppdm.service.policy_decision`), imported at first use: a node parses its
    policy and serves without them; ``OPEN_POLICY_TOML``, made at first use (it lists
    every job's disclosure parameters, :mod:`ppdm.service.profiles`)."""
    if name in ("Decision", "JobRules", "ParamRule"):
        from ppdm.service import policy_decision

        return getattr(policy_decision, name)
    if name == "OPEN_POLICY_TOML":
        return _policy_file.OPEN_POLICY_TOML
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
