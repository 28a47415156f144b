"""Supermarket chains mine association rules together, then hide two sensitive rules.

The scenario (Kantarcioglu & Clifton 2004): three chains each hold their own customers'
baskets (here a random third each of the 6,000 retail baskets shipped with ppdm). They

1. start a real consortium on this machine -- one ``ppdm party serve`` process per chain,
   gRPC with mutual TLS on 127.0.0.1, every node under the default data-owner policy
   (``ppdm.testbed.consortia.GrpcTestbed`` does what ``ppdm consortium init`` and
   ``ppdm party serve`` do by hand);
2. run the ``assoc`` job: the frequent itemsets and rules of the *pooled* baskets, found
   with secure set unions and secure threshold tests, so that no chain sees another's
   baskets or support counts;
3. decide that two of the rules are commercially sensitive, and before publishing the rule
   set every chain sanitizes its own baskets with rule hiding (support reduction,
   ``ppdm.hiding.hide_rules``). Each chain pushes the support of the sensitive itemsets
   below the threshold in its own data, so their pooled support is below it too;
4. run the job again on the sanitized data and publish that rule set: the two sensitive
   rules are gone, and the script reports how many other rules were lost on the way.

Run from the repository root (about 30 s: three node processes start and stop)::

    python examples/supermarket.py --out supermarket-out
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np

from ppdm.data import retail_sample
from ppdm.hiding.api import hide_rules
from ppdm.mining.readers import from_transactions, read_fimi, write_fimi
from ppdm.testbed.consortia import GrpcTestbed

CHAINS = ["north", "south", "east"]
MIN_SUPPORT = 0.02
MIN_CONFIDENCE = 0.4


def rule_set(doc: dict) -> set[tuple[tuple, tuple]]:
    """The rules every chain learned (the same at each), as (antecedent, consequent)."""
    result = doc["parties"][CHAINS[0]]["result"]
    return {(tuple(r["antecedent"]), tuple(r["consequent"])) for r in result["rules"]}


def mine(bed: GrpcTestbed) -> dict:
    doc = bed.run_job(
        "assoc",
        {"mode": "horizontal", "min_support": MIN_SUPPORT, "min_confidence": MIN_CONFIDENCE},
    )
    if doc["state"] != "succeeded":
        raise SystemExit(f"the assoc job {doc['state']}: {doc['error']}")
    return doc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="supermarket-out", help="folder for the rule sets")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    # Each chain's private baskets, in its own FIMI file.
    baskets = retail_sample()
    owner = np.random.default_rng(1).integers(0, len(CHAINS), len(baskets))
    with tempfile.TemporaryDirectory(prefix="ppdm-supermarket-") as tmp:
        work = Path(tmp)
        files = {}
        for i, chain in enumerate(CHAINS):
            files[chain] = work / f"{chain}.dat"
            write_fimi(
                from_transactions([b for b, o in zip(baskets, owner, strict=True) if o == i]),
                files[chain],
            )

        data = {chain: {"transactions": str(path)} for chain, path in files.items()}
        with GrpcTestbed(CHAINS, work / "consortium", data=data) as bed:
            print(f"consortium of {', '.join(CHAINS)} running on 127.0.0.1 (mutual TLS)")
            before = mine(bed)
            rules = rule_set(before)
            print(
                f"mined together: {len(rules)} rules at support {MIN_SUPPORT}, "
                f"confidence {MIN_CONFIDENCE} ({before['wall_time_s']:.1f} s)"
            )

            # Two rules the chains agree are sensitive: the longest ones, from two
            # different itemsets (ties broken by the items).
            sensitive: list[tuple[tuple, tuple]] = []
            for a, c in sorted(rules, key=lambda r: (-len(r[0]) - len(r[1]), r)):
                if len(sensitive) < 2 and all(set(a + c) != set(x + y) for x, y in sensitive):
                    sensitive.append((a, c))
            for a, c in sensitive:
                print(f"  sensitive: {sorted(a)} -> {sorted(c)}")
            rules_json = [{"antecedent": list(a), "consequent": list(c)} for a, c in sensitive]

            # Each chain hides them in its own data. min_confidence=0 makes "hidden" mean
            # "support below the threshold" at every chain, which adds up across chains.
            for chain, path in files.items():
                res = hide_rules(
                    read_fimi(path),
                    rules_json,
                    min_support=MIN_SUPPORT,
                    min_confidence=0.0,
                    method="2.a",
                    evaluate=False,
                )
                write_fimi(res.sanitized, path)  # the node reads it at the next job
                print(f"  {chain}: removed {res.operations['items_removed']} items")

            after = mine(bed)
            published = rule_set(after)
            assert not published & set(sensitive), "a sensitive rule is still minable"
            lost = rules - published - set(sensitive)
            print(
                f"published: {len(published)} rules; the 2 sensitive rules are hidden, "
                f"{len(lost)} other rules were lost as a side effect"
            )
    (out / "rules_published.json").write_text(
        json.dumps([{"antecedent": list(a), "consequent": list(c)} for a, c in sorted(published)])
    )
    print(f"wrote {out}/rules_published.json")


if __name__ == "__main__":
    main()
