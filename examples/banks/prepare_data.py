"""Write each bank's customer books for the banks consortium example.

Stands in for each bank's own books: the Adult census records (``../shared/data/adult``,
``PPDM_SHARED`` to point elsewhere) split at random among the banks, one customer per
record, as ``examples/banks.py`` splits them.

    python examples/banks/prepare_data.py --banks bank1,bank2,bank3,bank4 --out banks-data

writes ``banks-data/BANK.csv`` for every bank, and ``banks-data/BANK-next.csv``: the one
customer who joins the bank next month (step 4 of the example appends it to the books, so
the bank's second report is on books that really changed). In a real consortium each bank
exports its own file on its own host.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np
import pandas as pd

SHARED = Path(os.environ.get("PPDM_SHARED", Path(__file__).resolve().parents[3] / "shared"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--banks", required=True, help="comma-separated bank names")
    parser.add_argument("--out", default="banks-data", help="folder for the books")
    parser.add_argument("--seed", type=int, default=7, help="seed of the customer split")
    args = parser.parse_args()
    banks = [b.strip() for b in args.banks.split(",") if b.strip()]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    adult = pd.read_csv(SHARED / "data" / "adult" / "adult.csv", sep=";")
    owner = np.random.default_rng(args.seed).integers(0, len(banks), len(adult))
    for i, bank in enumerate(banks):
        books = adult[owner == i]
        books.iloc[:-1].to_csv(out / f"{bank}.csv", sep=";", index=False)
        books.iloc[-1:].to_csv(out / f"{bank}-next.csv", sep=";", index=False, header=False)
        print(f"{bank}: {len(books) - 1} customers (and 1 joining next month)")


if __name__ == "__main__":
    main()
