"""Benchmark of association-rule hiding (issue 8): time and side effects of every method.

For mushroom and retail, with 5, 10 and 20 sensitive rules drawn at random (seeded) among
the mined rules, every method of :mod:`ppdm.hiding` hides the rules; the table lists its
wall time, lost (non-sensitive) rules and ghost rules, recounted by mining the sanitized
data at the same thresholds. The baseline of every row is Verykios et al.'s algorithm 1.b
measured in the same run on the same rules (ratios > 1 mean fewer side effects or less
time than 1.b). ``exact`` falls back to the border method when its program is too large or
unsolved in the time limit; the JSON output records that (``..._fallback``).

    python benchmarks/hiding.py --quick
    python benchmarks/hiding.py --json hiding.json
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Report, Row, parser

from ppdm.hiding.api import METHODS, hide_rules
from ppdm.hiding.metrics import mine
from ppdm.hiding.problem import SensitiveRule
from ppdm.mining.readers import read_fimi
from ppdm.randomness import make_rng

BASELINE = "1.b"


def main() -> None:
    p = parser(__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=8, help="seed of the sensitive-rule draw")
    args = p.parse_args()
    logging.basicConfig(level=logging.ERROR)
    fimi = Path(args.shared) / "data" / "fimi"
    cases = [
        ("mushroom", None, 0.4, 0.9),
        ("retail", 20_000 if args.quick else None, 0.005, 0.3),
    ]
    sizes = (5,) if args.quick else (5, 10, 20)
    time_limit = 5.0 if args.quick else 30.0
    report = Report(
        "Rule hiding: time and side effects per method "
        f"(baseline = Verykios 1.b on the same rules, same run; seed {args.seed})"
    )
    for name, rows, s, c in cases:
        db = read_fimi(fimi / f"{name}.dat")
        if rows is not None:
            db = db.subset(np.arange(rows))
        before = mine(db, min_support=s, min_confidence=c)
        report.extra[f"{name}_transactions"] = db.n_transactions
        report.extra[f"{name}_rules"] = len(before.rules)
        report.extra[f"{name}_itemsets"] = len(before.itemsets)
        for k in sizes:
            rng = make_rng(args.seed + k)
            pick = rng.permutation(len(before.rules))[:k].tolist()
            sens = [SensitiveRule.of(before.rules[i]) for i in pick]
            results = {}
            for m in (BASELINE, *[m for m in METHODS if m != BASELINE]):
                res = hide_rules(
                    db,
                    sens,
                    min_support=s,
                    min_confidence=c,
                    method=m,
                    before=before,
                    time_limit=time_limit,
                    max_vars=100_000,
                )
                if res.side_effects is None or res.side_effects.hiding_failure:
                    raise SystemExit(f"{m} failed to hide the rules on {name}")
                results[m] = res
                tag = f"{name}_k{k}_{m.replace('.', '')}"
                if res.method != m:
                    report.extra[f"{tag}_fallback"] = res.method
                print(
                    f"{name} k={k} {m:7s} {res.time_s:8.3f} s  lost={res.side_effects.lost_rules}"
                    f"  ghost={res.side_effects.ghost_rules}  ({res.method})",
                    file=sys.stderr,
                )
            base = results[BASELINE]
            for m, res in results.items():
                tag = f"{name}_k{k}_{m.replace('.', '')}"
                label = m if res.method == m else f"{m}->{res.method}"
                fe, fb = res.side_effects, base.side_effects
                assert fe is not None and fb is not None
                report.add(
                    Row(
                        f"{tag}_time_s",
                        res.time_s,
                        "s",
                        base.time_s,
                        "1.b",
                        label,
                        higher_is_better=False,
                    )
                )
                report.add(
                    Row(
                        f"{tag}_lost_rules",
                        fe.lost_rules,
                        "rules",
                        fb.lost_rules,
                        "1.b",
                        label,
                        higher_is_better=False,
                    )
                )
                report.add(
                    Row(
                        f"{tag}_ghost_rules",
                        fe.ghost_rules,
                        "rules",
                        fb.ghost_rules,
                        "1.b",
                        label,
                        higher_is_better=False,
                    )
                )
                report.add(
                    Row(
                        f"{tag}_lost_itemsets",
                        fe.lost_itemsets,
                        "itemsets",
                        fb.lost_itemsets,
                        "1.b",
                        label,
                        higher_is_better=False,
                    )
                )
    report.finish(args.json)


if __name__ == "__main__":
    main()
