"""A node's decision on a job (:func:`decide`): the owner's policy
(:mod:`ppdm.service.policy`) on the job's declared leakage (:mod:`ppdm.service.profiles`),
then the parameters against the party's own data (rule ``input_check``), then the
cross-job disclosure audit (:mod:`ppdm.service.disclosure`, rule ``audit``); the same
decision as a dry run that sends, records and reserves nothing (:func:`dry_run`, ``ppdm
policy check``); and where the owner's policy file is (:func:`policy_path`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ppdm.errors import ConfigError, PPDMError
from ppdm.parties.consortium import PartySettings
from ppdm.service.disclosure import DisclosureAuditor
from ppdm.service.jobstate import owner_cause
from ppdm.service.ledger import ledger_path, read_state
from ppdm.service.policy import Policy, PolicyFile, evaluate

if TYPE_CHECKING:  # the job registry and the jobs' leakage: a node's first job imports them
    from ppdm.jobs.registry import PartyContext
    from ppdm.service.policy_decision import Decision
    from ppdm.service.profiles import Disclosure

log = logging.getLogger(__name__)

INPUT_CHECK_REASON = "the job's parameters do not fit this party's data"
#: The refusal when a co-member's audit history cannot be read: the audit fails closed
#: (a job that a slow or silent member's history would refuse must not run for it).
HISTORY_UNAVAILABLE_REASON = (
    "the audit history of co-member(s) {peers} could not be read, so the audit cannot rule "
    "out that this job, with earlier ones, singles out a member"
)


class AuditHistoryUnavailable(PPDMError):
    """``peer_history`` could not read the audit history of these co-members."""

    def __init__(self, peers: Sequence[str]) -> None:
        self.peers = sorted(peers)
        super().__init__(f"audit history unavailable from {', '.join(self.peers)}")


def policy_path(settings: PartySettings) -> Path | None:
    """The policy file named by ``[node] policy`` in the settings (``None``: the default
    policy applies)."""
    node = settings.raw.get("node", {})
    ref = node.get("policy") if isinstance(node, dict) else None
    if ref is None:
        return None
    if not isinstance(ref, str) or not ref:
        raise ConfigError(f"{settings.path}: node.policy must be the path of a policy file")
    p = Path(ref)
    return p if p.is_absolute() else settings.base_dir / p


def decide(
    policy: Policy,
    *,
    auditor: DisclosureAuditor,
    ctx: PartyContext,
    job_id: str,
    protocol: str,
    params: Mapping[str, Any],
    initiator: str,
    parties: Sequence[str],
    recent_by_initiator: int = 0,
    reserve: bool = False,
    peer_history: Callable[[Sequence[str], str], list[dict[str, Any]]] | None = None,
) -> tuple[Decision, Disclosure | None, dict[str, Any] | None]:
    """A node's decision on a job, in order: the policy on the job's declared leakage
    (:func:`ppdm.service.policy.evaluate`), the parameters against the party's own data
    (rule ``input_check``), then the cross-job disclosure audit (rule ``audit``). What
    ``ProposeJob`` and ``ppdm policy check`` use. With ``reserve``, an accepted or
    pending job's aggregate is reserved in the audit.

    ``peer_history(peers, input_key)`` returns what those co-members report of their
    audited sums on that input (the node asks over ``AuditHistory``; the dry run does
    not), or raises :class:`AuditHistoryUnavailable` when one of them does not answer:
    the job is then refused (the audit fails closed).

    Returns the decision, the job's declared leakage and the audit record (or ``None``).
    Refusals carry fixed reasons; the data-dependent details go to the local log.
    """
    from ppdm.service.policy_decision import Decision  # not at a node's start
    from ppdm.service.profiles import get_profile, input_identity, input_version

    me = ctx.name
    profile = get_profile(protocol)
    rules = policy.rules(protocol)

    def refuse(rule: str, reason: str, cause: BaseException | None = None) -> Decision:
        return Decision(
            "refuse",
            rule,
            reason,
            results=rules.results,
            colluders=rules.colluders,
            cause=owner_cause(cause) if cause is not None else "",
        )

    disclosure: Disclosure | None = None
    if profile is not None:
        try:
            disclosure = profile.disclosure(params, parties, me, ctx)
        except (PPDMError, OSError, ValueError, TypeError, KeyError) as exc:
            log.warning("job %s: cannot read its declared leakage: %s", job_id, exc)
            return refuse("input_check", INPUT_CHECK_REASON, exc), None, None
    decision = evaluate(
        policy,
        job=protocol,
        params=params,
        initiator=initiator,
        parties=parties,
        me=me,
        disclosure=disclosure,
        recent_by_initiator=recent_by_initiator,
    )
    if decision.refused:
        return decision, disclosure, None
    if profile is not None and profile.precheck is not None:
        try:
            profile.precheck(params, parties, me, ctx)
        except (PPDMError, OSError, ValueError, TypeError, KeyError) as exc:
            log.warning("job %s refused by the input check: %s", job_id, exc)
            return refuse("input_check", INPUT_CHECK_REASON, exc), disclosure, None
    audit: dict[str, Any] | None = None
    if decision.audit and disclosure is not None and disclosure.aggregate and disclosure.audit_key:
        try:
            version = input_version(ctx, disclosure.audit_key)
            identity = input_identity(ctx, disclosure.audit_key)
            length = None
            if disclosure.aggregate == "dot":
                raw = ctx.private_input(disclosure.audit_key.partition(".")[2])
                length = len(raw) if isinstance(raw, list) else 1
        except (PPDMError, OSError, ValueError) as exc:
            log.warning("job %s: cannot read its input for the audit: %s", job_id, exc)
            return refuse("input_check", INPUT_CHECK_REASON, exc), disclosure, None
        reported: list[dict[str, Any]] = []
        if peer_history is not None and disclosure.aggregate in ("sum", "union"):
            peers = [p for p in disclosure.participants if p != me]
            try:
                reported = peer_history(peers, disclosure.audit_key)
            except AuditHistoryUnavailable as exc:
                log.warning("job %s refused by the audit: %s", job_id, exc)
                reason = HISTORY_UNAVAILABLE_REASON.format(peers=", ".join(exc.peers))
                return refuse("audit", reason), disclosure, None
        limits = decision.limits
        verdict = auditor.check(
            input_key=disclosure.audit_key,
            version=version,
            identity=identity,
            kind=disclosure.aggregate,
            parties=disclosure.participants,
            colluders=decision.colluders,
            length=length,
            reported=reported,
            epsilon=disclosure.epsilon,
            epsilon_budget=float(limits.get("epsilon_budget", math.inf)),
            max_probes=limits.get("max_probes"),
        )
        if not verdict.ok:
            return refuse("audit", verdict.reason), disclosure, None
        audit = {
            "input_key": disclosure.audit_key,
            "version": version,
            "kind": disclosure.aggregate,
            "parties": list(disclosure.participants),
        }
        if disclosure.aggregate == "dp":
            audit["epsilon"] = disclosure.epsilon
        if reserve:
            auditor.reserve(
                job_id,
                input_key=disclosure.audit_key,
                version=version,
                identity=identity,
                kind=disclosure.aggregate,
                parties=disclosure.participants,
                epsilon=disclosure.epsilon,
            )
        audit["reported"] = len(reported)
    return decision, disclosure, audit


# Dry run ---------------------------------------------------------------------------------


class _ReadOnlyState:
    """The ledger's state table, read without writing (the node may be running)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load_state(self, key: str) -> dict[str, Any] | None:
        return read_state(self.path, key)

    def save_state(self, key: str, value: Mapping[str, Any]) -> None:
        raise RuntimeError("the dry run records nothing")


def dry_run(
    settings: PartySettings,
    name: str,
    params: Mapping[str, Any],
    *,
    parties: Sequence[str],
    initiator: str,
) -> dict[str, Any]:
    """What this party's node would decide on job ``name`` (``ppdm policy check``):
    the same :func:`decide` as ``ProposeJob``, with the audit history read from the
    node's ledger; nothing is sent, recorded or reserved. Rate limits are not
    simulated (they depend on the running node's recent jobs)."""
    path = policy_path(settings)
    policy = PolicyFile(path).current()
    auditor = DisclosureAuditor(settings.name, _ReadOnlyState(ledger_path(settings)))
    from ppdm.jobs.registry import PartyContext, get_job

    ctx = PartyContext(name=settings.name, settings=settings.raw, base_dir=settings.base_dir)
    spec = get_job(name)
    decision, disclosure, audit = decide(
        policy,
        auditor=auditor,
        ctx=ctx,
        job_id="dry-run",
        protocol=spec.name,
        params=dict(params),
        initiator=initiator,
        parties=settings.consortium.order(list(parties)),
    )
    return {
        "job": spec.name,
        "party": settings.name,
        "initiator": initiator,
        "parties": list(settings.consortium.order(list(parties))),
        "decision": decision.outcome,
        "rule": decision.rule,
        "reason": decision.reason,
        "cause": decision.cause,  # the local cause: a dry run is the owner's own
        "results_to": decision.results,
        "leakage": disclosure.as_dict() if disclosure is not None else None,
        "audit": audit,
        "policy": str(path) if path is not None else "<default policy>",
    }
