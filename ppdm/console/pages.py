"""What each console page shows, read from the running node (no web code here).

Every function takes the :class:`~ppdm.service.node.PartyNode` and returns plain
dicts and lists for the templates. What they show is what this node holds for its own
owner: its jobs' documents (parameters, its own results, per-step costs), its ledger,
its policy, the roster. Values of this party's ``[inputs]`` and the rows of its data
sources are never read into a page; another party's private values never reach this
node in the first place (the protocols see to that), and nothing here asks a peer for
more than ``Health``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import html
import json
import time
from collections.abc import Mapping
from typing import Any

import grpc

from ppdm.errors import ConfigError, PPDMError
from ppdm.jobs.registry import get_job, job_names
from ppdm.proto.ppdm.v1 import party_pb2 as pb
from ppdm.proto.ppdm.v1 import party_pb2_grpc
from ppdm.service.node import STATE_NAMES, PartyNode, dry_run

__all__ = [
    "LEDGER_PAGE",
    "entry_words",
    "history",
    "job_detail",
    "ledger_page",
    "node_status",
    "pending",
    "policy_check",
    "policy_table",
    "steps_svg",
]

LEDGER_PAGE = 50
PROBE_TIMEOUT_S = 1.0


def pending(node: PartyNode) -> list[dict[str, Any]]:
    """The jobs waiting for the owner, as ``ppdm job pending`` lists them, with the
    deciding rule and the disclosure statement in words."""
    now = time.monotonic()
    out = []
    for job in node.pending_jobs():
        d = job.disclosure
        out.append(
            {
                "job_id": job.job_id,
                "protocol": job.protocol,
                "initiator": job.initiator,
                "parties": list(job.parties),
                "params": json.dumps(job.params, sort_keys=True),
                "leakage": d.leakage if d is not None else "",
                "statement": d.describe() if d is not None else "",
                "reads": list(d.reads) if d is not None else [],
                "rule": job.rule or "consent",
                "reason": job.reason,
                "expires_in_s": max(job.expires - now, 0.0),
                "deadline": _utc_in(max(job.expires - now, 0.0)),
                "age_s": now - job.proposed,
            }
        )
    return out


def _utc_in(seconds: float) -> str:
    at = _dt.datetime.now(_dt.UTC) + _dt.timedelta(seconds=seconds)
    return at.strftime("%Y-%m-%d %H:%M:%S UTC")


def _times(node: PartyNode) -> dict[str, tuple[str, str]]:
    """Per job id, the ledger times of its first and last entries."""
    out: dict[str, tuple[str, str]] = {}
    since = 0
    while True:
        batch = node.ledger.entries(since=since, limit=1000)
        if not batch:
            return out
        for e in batch:
            if e.job_id:
                first = out.get(e.job_id, (e.time, e.time))[0]
                out[e.job_id] = (first, e.time)
        since = batch[-1].seq


def history(node: PartyNode, *, filters: Mapping[str, str]) -> list[dict[str, Any]]:
    """Every job this node saw, newest first, kept when it matches ``filters``
    (``state``, ``job``, ``initiator``, ``party``: exact; ``q``: part of the id)."""
    times = _times(node)
    rows = []
    for rec in reversed(node.ledger.jobs()):
        job = node.job(rec["job_id"])  # the live state of a job still in memory
        state = STATE_NAMES[job.state] if job is not None else rec.get("state", "unknown")
        first, last = times.get(rec["job_id"], ("", ""))
        row = {
            "job_id": rec["job_id"],
            "protocol": rec.get("protocol", ""),
            "initiator": rec.get("initiator", ""),
            "parties": list(rec.get("parties", [])),
            "state": state,
            "rule": rec.get("rule", ""),
            "reason": rec.get("reason", ""),
            "proposed": first,
            "updated": last,
            "wall_time_s": float(rec.get("wall_time_s") or 0.0),
            "outcome": _outcome(rec, state),
        }
        if _matches(row, filters):
            rows.append(row)
    return rows


def _outcome(rec: Mapping[str, Any], state: str) -> str:
    err = rec.get("error") or {}
    if state == "succeeded":
        return "result kept" if rec.get("result") is not None else "succeeded"
    if state == "refused":
        return f"refused by {err.get('party', '?')} (rule {rec.get('rule') or '?'})"
    if err:
        step = f" at step {err['step']}" if err.get("step") else ""
        return f"{err.get('code', 'error')} ({err.get('party', '?')}{step})"
    return state


def _matches(row: Mapping[str, Any], filters: Mapping[str, str]) -> bool:
    for key, field in (("state", "state"), ("job", "protocol"), ("initiator", "initiator")):
        want = filters.get(key, "")
        if want and row[field] != want:
            return False
    party = filters.get("party", "")
    if party and party not in row["parties"]:
        return False
    q = filters.get("q", "")
    return not (q and q not in row["job_id"])


def job_detail(node: PartyNode, job_id: str) -> dict[str, Any] | None:
    """One job's document at this node, its ledger entries and its per-step costs."""
    rec = node.ledger.load_job(job_id)
    job = node.job(job_id)
    if rec is None and job is None:
        return None
    doc = job.record() if job is not None else dict(rec or {})
    steps = list(doc.get("metrics") or [])
    entries = [
        {**e.as_dict(), "words": entry_words(e.kind, e.record, node.name)}
        for e in node.ledger.entries(job_id=job_id)
    ]
    return {
        "job_id": job_id,
        "document": json.dumps(doc, indent=2, sort_keys=True, default=str),
        "state": doc.get("state", ""),
        "protocol": doc.get("protocol", ""),
        "steps": steps,
        "svg": steps_svg(steps),
        "entries": entries,
    }


# The per-step figure ----------------------------------------------------------------------

_BAR = {"bytes": "#3b6ea5", "messages": "#6a9f58", "time": "#c07a2c"}


def steps_svg(steps: list[dict[str, Any]], *, width: int = 720) -> str:
    """Per-step bytes (sent + received), messages and wall time as three bar panels, an
    inline SVG built here (no script, no style attribute: the page's CSP allows none)."""
    if not steps:
        return ""
    label_w, gap, row_h = 180, 12, 18
    panel_w = (width - label_w - 2 * gap) // 3
    height = 40 + row_h * len(steps)
    series: dict[str, list[float]] = {
        "bytes": [int(s.get("bytes_sent", 0)) + int(s.get("bytes_received", 0)) for s in steps],
        "messages": [
            int(s.get("messages_sent", 0)) + int(s.get("messages_received", 0)) for s in steps
        ],
        "time": [float(s.get("wall_time_s", 0.0)) for s in steps],
    }
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="per-step costs">'
    ]
    for col, (name, values) in enumerate(series.items()):
        x0 = label_w + col * (panel_w + gap)
        top = max(values) or 1
        unit = {"bytes": "bytes", "messages": "messages", "time": "seconds"}[name]
        out.append(
            f'<text x="{x0}" y="14" font-size="12" font-family="sans-serif">{unit} '
            f"(max {_num(top)})</text>"
        )
        for i, v in enumerate(values):
            y = 24 + i * row_h
            w = max(int((panel_w - 4) * v / top), 1 if v else 0)
            out.append(
                f'<rect x="{x0}" y="{y}" width="{w}" height="{row_h - 4}" fill="{_BAR[name]}">'
                f"<title>{html.escape(str(steps[i].get('step', '')))}: {_num(v)}</title></rect>"
            )
    for i, s in enumerate(steps):
        y = 24 + i * row_h + row_h - 7
        name = html.escape(str(s.get("step", ""))[:28])
        out.append(f'<text x="0" y="{y}" font-size="11" font-family="monospace">{name}</text>')
    out.append("</svg>")
    return "".join(out)


def _num(v: float) -> str:
    return f"{v:.3g}" if isinstance(v, float) else f"{v:,}"


# The ledger -------------------------------------------------------------------------------


def entry_words(kind: str, rec: Mapping[str, Any], me: str) -> str:
    """What one ledger entry proves, in plain words (the hash chain makes each of these
    statements tamper-evident: a changed or removed entry breaks ``ledger verify``)."""
    r = rec
    if kind == "node":
        return (
            f"This node {r.get('event', 'changed')}ed"
            if r.get("event") in ("start", "stop")
            else "The node recorded an event"
        ) + f" (version {r.get('version', '?')}, policy {r.get('policy', '?')})."
    if kind == "request":
        decision = {"accept": "accepted", "pending": "held for the owner's approval"}.get(
            str(r.get("decision")), str(r.get("decision", "?")) + "d"
        )
        rule = f" by rule {r['rule']!r}" if r.get("rule") else ""
        return (
            f"{r.get('initiator', '?')} proposed a {r.get('protocol', '?')} job with "
            f"{', '.join(r.get('parties') or [])}; this node {decision}{rule}, with these "
            "parameters and this declared disclosure."
        )
    if kind == "approval":
        if r.get("approved"):
            return "The owner approved the job."
        return f"The owner rejected the job (reason: {r.get('reason') or 'none given'})."
    if kind == "start":
        return f"The initiator started the job; this party ran it with {', '.join(r.get('parties') or [])}."
    if kind == "finish":
        state = r.get("state", "?")
        if r.get("result_sha256"):
            return f"The job {state} here; the result had this SHA-256 (the result itself is not in the chain)."
        return f"The job ended here: {state}."
    if kind == "policy":
        ok = "loaded" if r.get("ok") else "NOT loaded (the previous policy stayed)"
        return f"The policy file {r.get('path', '?')} was re-read and {ok}."
    if kind == "roster":
        return "The node took a new roster (consortium membership) signed by the consortium CA."
    if kind == "peer-head":
        return (
            f"{r.get('party', 'A peer')} signed that its own ledger had {r.get('seq', '?')} "
            "entries ending in this hash; this node keeps it so that the peer cannot "
            "later rewrite its history unnoticed."
        )
    if kind == "state":
        return f"The stored state document {r.get('key', '?')!r} had this SHA-256 (e.g. the disclosure audit's history)."
    return f"A {kind} entry of {me}'s node."


def ledger_page(node: PartyNode, page: int, *, online: bool = False) -> dict[str, Any]:
    """One page of entries (newest page first: page 1 holds the latest entries), the
    result of ``ledger verify`` (with ``online``: ``ledger verify --online``, which also
    asks every peer for the heads of this ledger it holds and checks them against the
    chain) and the heads this node holds of each peer."""
    last, head = node.ledger.head()
    pages = max((last + LEDGER_PAGE - 1) // LEDGER_PAGE, 1)
    page = min(max(page, 1), pages)
    hi = last - (page - 1) * LEDGER_PAGE
    lo = max(hi - LEDGER_PAGE, 0)
    entries = [
        {**e.as_dict(), "words": entry_words(e.kind, e.record, node.name)}
        for e in reversed(node.ledger.entries(since=lo, limit=hi - lo))
    ]
    if online:
        from ppdm.service.ledger import verify_online

        report = verify_online(node.settings, timeout=PROBE_TIMEOUT_S * 3)
    else:
        report = node.ledger.verify()
    peers = []
    for member in node.consortium.names:
        if member == node.name:
            continue
        heads, _more = node.ledger.peer_heads(member, after_seq=0, limit=1_000_000)
        conflicts = node.ledger.peer_head_conflicts(member)
        newest = heads[-1] if heads else None
        peers.append(
            {
                "party": member,
                "held": len(heads),
                "latest_seq": newest.seq if newest is not None else None,
                "latest_hash": newest.hash if newest is not None else "",
                "conflicts": len(conflicts),
            }
        )
    return {
        "entries": entries,
        "page": page,
        "pages": pages,
        "head_seq": last,
        "head": head,
        "verify": {
            "ok": report.ok,
            "entries": report.entries,
            "problems": report.problems,
            "notes": report.notes,
            "checked": report.checked,
            "online": online,
        },
        "peers": peers,
    }


# The policy -------------------------------------------------------------------------------


def policy_table(node: PartyNode) -> dict[str, Any]:
    """The policy in force: the defaults, each job's effective rules, the per-data-set
    rules, the file and when it was loaded."""
    policy = node.policy.current()
    path = node.policy.path
    loaded = ""
    if path is not None:
        try:
            loaded = _dt.datetime.fromtimestamp(path.stat().st_mtime, _dt.UTC).strftime(
                "%Y-%m-%d %H:%M:%S UTC"
            )
        except OSError:
            loaded = "(file missing now: the last good version stays in force)"
    started, reloaded = _policy_events(node)
    defaults = [(k, _show(v)) for k, v in sorted(policy.defaults.items())]
    jobs = []
    for name in job_names():
        r = policy.rules(name)
        jobs.append(
            {
                "job": name,
                "allow": r.allow,
                "consent": r.consent,
                "initiators": ", ".join(r.initiators),
                "parties": f"{r.min_parties}..{r.max_parties}",
                "results": r.results,
                "rate": f"{r.rate_jobs} per {r.rate_per_s:g} s",
                "params": "; ".join(f"{k}: {v.describe()}" for k, v in r.params.items()),
                "overrides": ", ".join(sorted(k for k in policy.jobs.get(name, {}))),
            }
        )
    data = []
    for key, d in sorted(policy.data.items()):
        data.append(
            {
                "key": key,
                "jobs": ", ".join(d.jobs),
                "columns": ", ".join(d.columns) if d.columns is not None else "every column",
                "min_parties": d.min_parties if d.min_parties is not None else "",
                "min_cluster_size": d.min_cluster_size if d.min_cluster_size is not None else "",
                "consent": "" if d.consent is None else ("yes" if d.consent else "no"),
                "statement": ", ".join(f"{k} = {_show(v)}" for k, v in sorted(d.statement.items())),
            }
        )
    return {
        "source": policy.source,
        "path": str(path) if path is not None else "<default policy>",
        "loaded": loaded,
        "started": started,
        "reloaded": reloaded,
        "defaults": defaults,
        "jobs": jobs,
        "data": data,
        "job_names": job_names(),
        "members": list(node.consortium.names),
    }


def _policy_events(node: PartyNode) -> tuple[str, str]:
    """Ledger times of the node's last start (when it loaded the policy) and of the last
    recorded reload (SIGHUP, ``reload_policy``); ``""`` where there is none."""
    started = reloaded = ""
    since = 0
    while batch := node.ledger.entries(since=since, limit=1000):
        for e in batch:
            if e.kind == "node" and e.record.get("event") == "start":
                started, reloaded = e.time, ""
            elif e.kind == "policy" and e.record.get("ok"):
                reloaded = e.time
        since = batch[-1].seq
    return started, reloaded


def _show(v: Any) -> str:
    if isinstance(v, list | tuple):
        return ", ".join(str(x) for x in v) or "(none)"
    if isinstance(v, dict):
        return ", ".join(f"{k} = {x}" for k, x in v.items())
    return json.dumps(v) if isinstance(v, bool) else str(v)


def policy_check(
    node: PartyNode, *, job: str, params_text: str, parties: list[str], initiator: str
) -> dict[str, Any]:
    """The dry run of ``ppdm policy check`` (the same :func:`~ppdm.service.node.dry_run`
    on the node's settings), with its one-line verdict as the command prints it."""
    raw = parse_params(params_text)
    params = get_job(job).params(raw)
    report = dry_run(node.settings, job, params, parties=parties, initiator=initiator)
    verdict = {"accept": "ACCEPTED", "pending": "PENDING your approval", "refuse": "REFUSED"}[
        report["decision"]
    ]
    rule = f" by rule {report['rule']!r}" if report["rule"] else ""
    report["verdict"] = f"{verdict}{rule}" + (f": {report['reason']}" if report["reason"] else "")
    return report


def parse_params(text: str) -> dict[str, Any]:
    """``KEY=VALUE`` lines (as ``--param`` takes them): JSON values where they parse."""
    out: dict[str, Any] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        key, sep, raw = line.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"a parameter line must read KEY=VALUE, got {line.strip()!r}")
        try:
            out[key.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            out[key.strip()] = raw.strip()
    return out


# Peers and node ---------------------------------------------------------------------------


def _probe(node: PartyNode, peer: str) -> str:
    try:
        reply = party_pb2_grpc.PartyStub(node.channel(peer)).Health(
            pb.HealthRequest(), timeout=PROBE_TIMEOUT_S
        )
    except grpc.RpcError as exc:
        code = exc.code() if hasattr(exc, "code") else None  # type: ignore[attr-defined]
        return f"unreachable ({code.name.lower() if code is not None else 'error'})"
    return "reachable" + (f" (version {reply.version})" if getattr(reply, "version", "") else "")


def node_status(node: PartyNode) -> dict[str, Any]:
    """Roster version, each member's reachability and certificate expiry, the node's
    limits and load, and whether each data source opens."""
    now = _dt.datetime.now(_dt.UTC)
    members = []
    for entry in node.consortium.parties:
        left = (entry.not_after - now).days if entry.not_after is not None else None
        members.append(
            {
                "party": entry.name,
                "address": entry.address,
                "me": entry.name == node.name,
                "reach": "this node" if entry.name == node.name else _probe(node, entry.name),
                "expires": entry.not_after.strftime("%Y-%m-%d") if entry.not_after else "",
                "days_left": left,
                "valid": entry.valid_now(),
            }
        )
    limits = sorted(dataclasses.asdict(node.limits).items())
    limits.append(("node.max_workers", node.settings.max_workers))
    return {
        "party": node.name,
        "consortium": node.consortium.name,
        "roster_version": node.consortium.version,
        "ready": node.not_ready() or "ready",
        "members": members,
        "limits": limits,
        "running": len(node.running_jobs()),
        "pending": len(node.pending_jobs()),
        "streams": len(node.streams),
        "sources": _sources(node),
        "inputs": sorted((node.settings.raw.get("inputs") or {}).keys()),
    }


def _sources(node: PartyNode) -> list[dict[str, str]]:
    from ppdm.parties.consortium import load_settings
    from ppdm.sources import source_columns
    from ppdm.sources.config import parse_data_table

    settings = node.settings
    if settings.path is not None:  # the node reads the file afresh for every job
        with contextlib.suppress(PPDMError):
            settings = load_settings(settings.path, verify_own_certificate=False)
    data = settings.raw.get("data") or {}
    out = []
    try:
        specs = parse_data_table(data, base_dir=settings.base_dir)
    except PPDMError as exc:
        return [{"key": "[data]", "where": "", "opens": f"not valid: {exc}"}]
    for key, spec in specs.items():
        try:
            cols = source_columns(data, key, base_dir=settings.base_dir, party=node.name)
            opens = f"opens ({len(cols)} columns)"
        except (PPDMError, OSError, ValueError) as exc:
            opens = f"does not open: {type(exc).__name__}"
        out.append({"key": key, "where": spec.describe(), "opens": opens})
    return out
