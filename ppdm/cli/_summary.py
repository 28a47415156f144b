"""A short human summary of a job document (``ppdm job run --output``, ``ppdm simulate``).

The JSON document (docs/jobs.md) is for programs; this is for the terminal: the state, the
cost per party, and the result in a few lines -- for association rules the top rules with
support, confidence and lift, as ``ppdm demo`` shows them.
"""

from __future__ import annotations

from typing import Any

__all__ = ["job_summary", "party_seconds", "seconds"]


def _fmt_items(items: list[Any]) -> str:
    return "{" + ", ".join(map(str, items)) + "}"


def _first_result(doc: dict[str, Any]) -> dict[str, Any] | None:
    for rec in (doc.get("parties") or {}).values():
        if isinstance(rec, dict) and isinstance(rec.get("result"), dict):
            return rec["result"]
    return None


#: What a first network run of ``assoc`` prints when the measures were kept private: the
#: one-line policy change each owner makes, and the parameter to ask for them.
WITHHELD_NOTE = (
    "support, confidence and lift are not shown: the parties kept their counts private "
    "(reveal_counts=false, the safe default). To publish them, each party's owner runs "
    "`ppdm policy allow reveal_counts --settings THEIR.toml` (it adds "
    "`reveal_counts = { values = [false, true] }` under [jobs.assoc.params] of their "
    "policy); then run the job again with --param reveal_counts=true."
)


def _rules_lines(result: dict[str, Any], top: int) -> list[str]:
    rules = list(result.get("rules") or [])
    lines = [
        f"{len(result.get('frequent_itemsets') or [])} frequent itemsets, {len(rules)} rules "
        f"over {result.get('n_transactions')} transactions (min support "
        f"{result.get('min_support')}, min confidence {result.get('min_confidence')})"
    ]
    itemsets = [f for f in result.get("frequent_itemsets") or [] if isinstance(f, dict)]
    withheld = any("support" in r and r["support"] is None for r in rules + itemsets)
    if not rules:
        return [*lines, WITHHELD_NOTE] if withheld else lines
    revealed = all(r.get("support") is not None for r in rules)
    if revealed:
        rules.sort(key=lambda r: (-r["lift"], -r["confidence"], str(r["antecedent"])))
        lines.append(f"top {min(top, len(rules))} rules by lift:")
        lines.append(f"  {'rule':<40} {'support':>8} {'confidence':>10} {'lift':>7}")
        for r in rules[:top]:
            rule = f"{_fmt_items(r['antecedent'])} -> {_fmt_items(r['consequent'])}"
            lines.append(
                f"  {rule:<40} {r['support']:>8.4f} {r['confidence']:>10.3f} {r['lift']:>7.2f}"
            )
    else:
        lines.append(f"first {min(top, len(rules))} rules:")
        for r in rules[:top]:
            lines.append(f"  {_fmt_items(r['antecedent'])} -> {_fmt_items(r['consequent'])}")
        lines.append(WITHHELD_NOTE)
    return lines


def _result_lines(result: dict[str, Any], top: int) -> list[str]:
    if "rules" in result:
        return _rules_lines(result, top)
    if "centers" in result:
        return [
            f"k-means: {len(result['centers'])} centers, {result.get('iterations')} "
            f"iterations, converged={result.get('converged')}"
        ]
    if "sum" in result:
        return [f"sum = {result['sum']}"]
    shown = {k: v for k, v in result.items() if not isinstance(v, list | dict)}
    return [", ".join(f"{k}={v}" for k, v in shown.items())] if shown else []


def seconds(value: float) -> str:
    """A duration for people: ``0.42 s``, or ``3.1 ms`` below a hundredth of a second."""
    return f"{value * 1000:.1f} ms" if 0 < value < 0.01 else f"{value:.2f} s"


def party_seconds(rec: dict[str, Any] | None) -> float:
    """A party's wall time in a job document: its node's own measure (``wall_time_s`` of
    the party record; the totals carry only counts), else the longest of its steps."""
    rec = rec or {}
    own = float(rec.get("wall_time_s") or 0.0)
    if own > 0:
        return own
    steps = [float(m.get("wall_time_s") or 0.0) for m in rec.get("metrics") or []]
    return max(steps, default=0.0)


def job_summary(doc: dict[str, Any], *, top: int = 10) -> str:
    """A few lines describing ``doc``: state, per-party cost, result (see module doc)."""
    state = doc.get("state") or ("succeeded" if doc.get("ok") else "failed")
    lines = [
        f"job {doc.get('job_id')} ({doc.get('protocol')}): {state} in "
        f"{seconds(float(doc.get('wall_time_s') or 0.0))}"
    ]
    if doc.get("error"):
        lines.append(f"error: {doc['error']}")
    for party, rec in (doc.get("parties") or {}).items():
        totals = (rec or {}).get("totals") or {}
        if totals:
            lines.append(
                f"  {party}: {totals.get('messages_sent', 0)} messages, "
                f"{totals.get('bytes_sent', 0):,} bytes sent, "
                f"{seconds(party_seconds(rec))}"
            )
    result = _first_result(doc)
    if result is not None:
        lines.extend(_result_lines(result, top))
    return "\n".join(lines)
