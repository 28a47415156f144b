"""Banks pool statistics about their customers without showing each other their books.

The scenario: many banks (12 by default) each hold their own customers (here: a random
share of the Adult census records, one customer per record). They want

1. exact totals over all banks -- customers, high-income customers, the sum of ages --
   computed with the collusion-resistant secure sum (``ppdm.protocols.additive_sum``):
   no coalition of up to all-but-one other banks learns a bank's own totals (the ring
   secure sum would expose a bank's input to its two neighbours if they collude);
2. a differentially private count of high-income customers: every bank adds its own
   discrete Laplace noise (scale 1/epsilon, exact integer sampling) to its count *before*
   the secure sum, so each bank's customers are protected by epsilon-differential privacy
   even if every other bank colludes. The price of not trusting anyone: the noise of all
   banks adds up (standard deviation grows with the square root of the number of banks).

Everything runs on the in-process network with ``ppdm.simulate``; the same protocol
function runs unchanged between gRPC nodes. Run from the repository root (a few seconds)::

    python examples/banks.py --banks 12 --epsilon 0.5
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd

import ppdm
from ppdm.dp.samplers import sample_discrete_laplace
from ppdm.protocols.additive_sum import additive_sum

SHARED = Path(os.environ.get("PPDM_SHARED", Path(__file__).resolve().parents[2] / "shared"))


def bank_books(n_banks: int, seed: int) -> dict[str, pd.DataFrame]:
    """Each bank's customers: a random split of the Adult records (public data standing in
    for private books)."""
    adult = pd.read_csv(SHARED / "data" / "adult" / "adult.csv", sep=";")
    owner = np.random.default_rng(seed).integers(0, n_banks, len(adult))
    return {f"bank{i:02d}": adult[owner == i] for i in range(n_banks)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--banks", type=int, default=12, help="number of banks")
    parser.add_argument("--epsilon", type=float, default=0.5, help="privacy budget of the count")
    parser.add_argument("--seed", type=int, default=7, help="seed of the customer split only")
    args = parser.parse_args()
    books = bank_books(args.banks, args.seed)

    # 1. Exact totals with the collusion-resistant sum. Each bank's private vector:
    #    [customers, customers earning >50K, sum of ages].
    def vector(df: pd.DataFrame) -> np.ndarray:
        return np.array(
            [len(df), int((df["salary-class"] == ">50K").sum()), int(df["age"].sum())],
            dtype=np.int64,
        )

    inputs = {bank: vector(df) for bank, df in books.items()}
    sim = ppdm.simulate(additive_sum, inputs)
    total = sim.results["bank00"]
    pooled = vector(pd.concat(books.values()))  # what a trusted third party would compute
    assert np.array_equal(total, pooled), "the secure sum must equal the pooled computation"
    print(f"{args.banks} banks, {int(total[0])} customers in all (secure sum, exact):")
    print(f"  high-income customers: {int(total[1])}  mean age: {total[2] / total[0]:.2f}")
    per_bank_bytes = sim.totals["bank00"]["bytes_sent"]
    print(
        f"  cost: {sum(t['messages_sent'] for t in sim.totals.values())} messages, "
        f"{per_bank_bytes} bytes sent per bank, {sim.wall_time_s:.2f} s"
    )

    # 2. A differentially private count: each bank perturbs its own count first.
    scale = 1.0 / args.epsilon  # one customer changes a bank's count by at most 1
    noisy = {
        bank: np.array([v[1] + int(sample_discrete_laplace(scale, 1)[0])], dtype=np.int64)
        for bank, v in inputs.items()
    }
    released = int(ppdm.simulate(additive_sum, noisy).results["bank00"][0])
    q = math.exp(-args.epsilon)
    std = math.sqrt(args.banks * 2 * q / (1 - q) ** 2)  # variance of a sum of discrete Laplace
    print(f"\nDP count of high-income customers (epsilon = {args.epsilon} per bank):")
    print(f"  released {released}, exact {int(total[1])}, error {released - int(total[1]):+d}")
    print(f"  expected error: standard deviation {std:.1f} ({args.banks} banks' noise)")
    assert abs(released - int(total[1])) < 8 * std + 1


if __name__ == "__main__":
    main()
