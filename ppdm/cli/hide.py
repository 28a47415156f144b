"""``ppdm hide``: sanitize a FIMI transaction file so that sensitive rules cannot be mined.

Example::

    ppdm hide --input ../shared/data/fimi/mushroom.dat --sensitive rules.json --min-support 0.3 \\
        --min-confidence 0.8 --method 2.b --output sanitized.dat --report report.json

``rules.json`` is a JSON array of ``{"antecedent": [...], "consequent": [...]}`` objects
(see :mod:`ppdm.hiding.problem`). The report holds the method, the operations, the time and
the side effects recounted by mining both files (``--no-evaluate`` skips that).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
from pathlib import Path
from typing import Any

from ppdm.cli._args import atomic_file, bounded_int, check_input_file, finite_float, seconds
from ppdm.cli._output import write_json
from ppdm.errors import ConfigError

log = logging.getLogger(__name__)


def _fraction(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 <= v <= 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1: {text!r}")
    return v


def register(subparsers: argparse._SubParsersAction) -> None:
    from ppdm.hiding.methods import METHODS

    p = subparsers.add_parser(
        "hide",
        help="hide sensitive association rules in a FIMI transaction file",
        description=(
            "Sanitize a FIMI transaction file so that the sensitive rules of RULES.json "
            '(a JSON array of {"antecedent": [...], "consequent": [...]} objects; '
            'items as numbers or as digit strings such as "34") cannot be mined at the '
            "given minimum support and confidence. The report holds the method, the "
            "operations, the time and the side effects recounted by mining both files."
        ),
    )
    p.add_argument("--input", required=True, help="FIMI .dat file (one transaction per line)")
    p.add_argument("--sensitive", required=True, help="sensitive rules, JSON")
    p.add_argument(
        "--min-support", required=True, type=finite_float(0, 1, lo_open=True), help="MST, relative"
    )
    p.add_argument("--min-confidence", required=True, type=_fraction, help="MCT")
    p.add_argument("--method", default="2.b", choices=METHODS, help="hiding method")
    p.add_argument("--output", required=True, help="sanitized FIMI file to write")
    p.add_argument("--report", help="JSON report to write")
    p.add_argument(
        "--solver",
        default="scipy",
        choices=["scipy", "highspy"],
        help="MILP solver for --method exact",
    )
    p.add_argument("--time-limit", type=seconds, default=60.0, help="solver time limit (s)")
    p.add_argument(
        "--max-vars",
        type=bounded_int(1, 100_000_000),
        default=200_000,
        help="largest integer program accepted by --method exact",
    )
    p.add_argument(
        "--fallback",
        default="border",
        type=_fallback,
        help="method used when exact is too large ('none' to fail)",
    )
    p.add_argument("--no-evaluate", action="store_true", help="skip the side-effect recount")
    p.set_defaults(handler=run)


def _fallback(text: str) -> str:
    """``--fallback``: a hiding method other than ``exact``, or ``none`` (checked before
    any mining, not when the fallback is needed)."""
    from ppdm.hiding.methods import METHODS

    m = text.strip().lower()
    m = {"1a": "1.a", "1b": "1.b", "2a": "2.a", "2b": "2.b", "2c": "2.c"}.get(m, m)
    if m != "none" and (m not in METHODS or m == "exact"):
        choices = ", ".join(x for x in (*METHODS, "none") if x != "exact")
        raise argparse.ArgumentTypeError(f"unknown fallback {text!r} (choose from {choices})")
    return m


def _fimi_item(x: object) -> object:
    """A FIMI item of a rules file: an int, or a digit string such as ``"34"``."""
    if isinstance(x, str):
        text = x.strip()
        if text.isascii() and text.isdigit():
            return int(text)
        raise ConfigError(
            f"sensitive rule item {x[:40]!r} is not a FIMI item (a non-negative integer)"
        )
    return x


def _fimi_rule(rule: Any) -> Any:
    return dataclasses.replace(
        rule,
        antecedent=frozenset(_fimi_item(x) for x in rule.antecedent),
        consequent=frozenset(_fimi_item(x) for x in rule.consequent),
    )


def run(args: argparse.Namespace) -> int:
    from ppdm.hiding.api import hide_rules
    from ppdm.hiding.problem import load_sensitive_rules
    from ppdm.mining.readers import read_fimi, write_fimi
    from ppdm.progress import RichProgress

    if not Path(args.input).is_file():
        raise ConfigError(f"input file not found: {args.input}")
    check_input_file(args.sensitive, "--sensitive")
    for name in ("output", "report"):
        out = getattr(args, name)
        if out and Path(out).resolve() == Path(args.input).resolve():
            raise ConfigError(f"--{name} would overwrite --input")
    if args.min_support <= 0:
        raise ConfigError("--min-support must be positive")
    if not args.time_limit > 0:
        raise ConfigError("--time-limit must be a positive number of seconds")
    db = read_fimi(args.input)
    rules = [_fimi_rule(r) for r in load_sensitive_rules(args.sensitive)]
    fallback = None if str(args.fallback).lower() == "none" else args.fallback
    result = hide_rules(
        db,
        rules,
        min_support=args.min_support,
        min_confidence=args.min_confidence,
        method=args.method,
        evaluate=not args.no_evaluate,
        solver=args.solver,
        time_limit=args.time_limit,
        max_vars=args.max_vars,
        fallback=fallback,
        progress=RichProgress(),
    )
    with atomic_file(args.output) as tmp:  # renamed into place only when written whole
        write_fimi(result.sanitized, tmp)
    report = result.report()
    report["input"] = str(args.input)
    report["output"] = str(args.output)
    if args.report:
        write_json(report, args.report, echo=False)
    for line in hide_summary(report):
        print(line)
    log.info(
        "hid %d rules with %s in %.2f s: %s",
        len(rules),
        result.method,
        result.time_s,
        result.operations,
    )
    return 0


def hide_summary(report: dict[str, Any]) -> list[str]:
    """The terminal's account of a hiding run: the sensitive rules hidden, the non-
    sensitive rules lost and the ghost rules created (Oliveira and Zaiane's side effects),
    how much the data changed, and where the result went."""
    ops = report.get("operations") or {}
    changed = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in ops.items() if v) or "nothing"
    lines = [
        f"hid {len(report.get('sensitive_rules') or [])} sensitive rule(s) with method "
        f"{report.get('method')} in {float(report.get('time_s') or 0):.2f} s "
        f"({report.get('n_transactions_sanitized')} transactions; changed: {changed}); "
        f"wrote {report.get('output')}"
    ]
    se = report.get("side_effects")
    if not se:
        lines.append("side effects not measured (--no-evaluate)")
        return lines
    before, after = se["rules_before"], se["rules_after"]
    dropped = before - after
    share = f"{100 * dropped / before:.1f} %" if before else "0 %"
    lines.append(
        f"rules: {before} before, {after} after ({dropped} fewer, {share}); "
        f"sensitive still minable: {se['hiding_failure']} of {se['sensitive_minable_before']}"
    )
    lines.append(
        f"side effects: {se['lost_rules']} non-sensitive rules lost (misses cost "
        f"{100 * se['misses_cost']:.1f} %), {se['ghost_rules']} ghost rules "
        f"({100 * se['artifactual_patterns']:.1f} % of the rules after), "
        f"{se['lost_itemsets']} frequent itemsets lost, {se['ghost_itemsets']} new; "
        f"dissimilarity {se['dissimilarity']:.4f}"
    )
    return lines
