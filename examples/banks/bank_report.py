"""A bank's own report: its private input to the consortium's secure sum.

Run by each bank on its own host, on its own books. It writes the bank's private vector
``[customers, sum of ages, high-income customers + noise]`` into the ``[inputs]
secure_sum`` entry of the bank's settings file, which its node reads when a job starts
(no restart). The collusion-resistant secure sum (job ``secure-sum-shared``) then gives
the totals over all banks, and no coalition of the other banks learns this bank's
vector. The first two entries are exact; the count of high-income customers, the
sensitive one, carries the bank's own discrete Laplace noise of scale ``1/EPS``, so its
customers are EPS-differentially private in that count even if every other bank
colludes. The noise is charged to the bank's persistent privacy budget of its books
(``ppdm dp budget --input BOOKS`` shows it; :mod:`ppdm.dp.budget`), so
releasing fresh noisy counts again and again cannot average the noise away unnoticed.

    python examples/banks/bank_report.py --books banks-data/bank1.csv \\
        --settings banks-net/bank1.toml --epsilon 0.5
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pandas as pd

from ppdm.dp import dp_count
from ppdm.dp.budget import BudgetFile, default_budget_path


def set_input(settings: Path, values: list[int]) -> None:
    """Write ``secure_sum = [...]`` into the ``[inputs]`` table of ``settings``."""
    text = settings.read_text()
    line = f"secure_sum = {values}"
    if re.search(r"(?m)^secure_sum\s*=.*$", text):
        text = re.sub(r"(?m)^secure_sum\s*=.*$", line, text)
    elif re.search(r"(?m)^\[inputs\]\s*$", text):
        text = re.sub(r"(?m)^\[inputs\]\s*$", f"[inputs]\n{line}", text, count=1)
    else:
        text = text.rstrip("\n") + f"\n\n[inputs]\n{line}\n"
    settings.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--books", required=True, help="the bank's customer records (CSV, ';')")
    parser.add_argument("--settings", required=True, help="the bank's settings file")
    parser.add_argument("--epsilon", type=float, required=True, help="of the noisy count")
    args = parser.parse_args()
    books = pd.read_csv(args.books, sep=";")
    high = (books["salary-class"] == ">50K").to_numpy()
    budget = BudgetFile(default_budget_path(args.books), dataset=str(Path(args.books).resolve()))
    with budget.accountant(query="count", column="salary-class") as acct:
        noisy = int(dp_count(high, epsilon=args.epsilon, accountant=acct))
    values = [len(books), int(books["age"].sum()), noisy]
    left = budget.summary()["epsilon_remaining"]
    print(
        f"report written to {args.settings} [inputs] secure_sum (noisy count: epsilon "
        f"{args.epsilon:g}, {left:g} left of the budget of {args.books})"
    )
    set_input(Path(args.settings), values)


if __name__ == "__main__":
    main()
