"""A data publisher releases the Adult census extract without re-identifying anyone.

The scenario: a statistics office holds 30,162 census records (age, education, marital
status, race, sex, native country, occupation, ...) and wants to publish them for
research. Occupation is sensitive; the other attributes are quasi-identifiers an attacker
could link to a voter list. The script

1. measures the re-identification risk of the raw table,
2. publishes three anonymized versions (5-anonymity; 5-anonymity + distinct 3-diversity of
   occupation; 5-anonymity + 0.3-closeness of occupation) with ARX's hierarchies and
   measures their risk again,
3. shows the perturbative alternative, randomized response (each record's values replaced
   at random with public probabilities chosen so that Pr(occupation | QI) <= 1/3), and
4. draws the privacy-utility figure of randomized response, anatomy and l-diversity for
   l = 2..5 (``privacy_utility.png``) on a random sample of 10,000 of the records (the
   figure's title says so).

Run from the repository root (takes about 20 s)::

    python examples/data_publisher.py --out publisher-out
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pandas as pd

from ppdm.anonymize.api import anonymize
from ppdm.anonymize.hierarchy import load_hierarchies
from ppdm.perturb.evaluate import evaluate, write_results
from ppdm.perturb.randomized_response import randomized_response
from ppdm.risk.report import risk_report

# The shared data sets live beside the checkout (../shared/data); PPDM_SHARED overrides.
SHARED = Path(os.environ.get("PPDM_SHARED", Path(__file__).resolve().parents[2] / "shared"))
ADULT = SHARED / "data" / "adult"

QI = ["age", "education", "marital-status", "race", "sex"]
SENSITIVE = "occupation"


def risk_line(name: str, table: pd.DataFrame) -> str:
    """One line of the risk report: prosecutor risk and homogeneity of a table."""
    r = risk_report(table, qi=QI, sensitive=SENSITIVE)
    pros = r["reidentification"]["prosecutor"]
    homog = r["homogeneity"]
    # records_at_risk is the share of records whose risk exceeds the threshold (0.2)
    at_risk = round(pros["records_at_risk"] * len(table))
    return (
        f"{name:<28} max risk {pros['max_risk']:.3f}  records at risk {at_risk:>6,} "
        f"({pros['records_at_risk']:.1%})  homogeneous classes {homog['homogeneous_classes']}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="publisher-out", help="folder for the outputs")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    table = pd.read_csv(ADULT / "adult.csv", sep=";")
    # ARX's hierarchy files for Adult (adult_hierarchy_<attribute>.csv, ';'-separated)
    hierarchies = load_hierarchies(ADULT, [*QI, SENSITIVE, "salary-class"])
    print(f"Adult: {len(table)} records; quasi-identifiers {', '.join(QI)}; sensitive {SENSITIVE}")
    print("\n1. Risk of the raw table (an attacker who knows a person's QI values):")
    print(risk_line("raw", table))

    print("\n2. Anonymized releases (optimal full-domain generalization, 1% suppression):")
    releases = {
        "5-anonymity": {"model": "k-anonymity", "k": 5},
        "+ distinct 3-diversity": {"model": "k-anonymity+l-diversity", "k": 5, "l": 3},
        "+ 0.3-closeness": {"model": "k-anonymity+t-closeness", "k": 5, "t": 0.3},
    }
    for name, params in releases.items():
        rel = anonymize(
            table,
            qi=QI,
            sensitive=SENSITIVE,
            hierarchies=hierarchies,
            algorithm="optimal",
            suppression=0.01,
            rng=1,
            **params,
        )
        file = out / f"adult-{name.strip('+ ').replace(' ', '-')}.csv"
        rel.data.to_csv(file, sep=";", index=False)
        print(risk_line(name, rel.data), f" node {rel.info['node']}")

    print("\n3. Randomized response instead of generalization (Pr(occupation | QI) <= 1/3):")
    rr = randomized_response(table, qi=QI, sensitive=SENSITIVE, scheme="rr-both", l=3, rng=1)
    rr.data.to_csv(out / "adult-randomized-response.csv", sep=";", index=False)
    kept = (rr.data[[*QI, SENSITIVE]].to_numpy() == table[[*QI, SENSITIVE]].to_numpy()).mean()
    print(f"   {kept:.0%} of the cells kept their value; the published probabilities let a")
    print("   researcher estimate the original contingency table without bias.")

    sample = table.sample(n=10_000, random_state=0)  # a sample keeps the example quick
    about = f"a random sample of {len(sample):,} of the {len(table):,} records"
    print(f"\n4. Privacy-utility trade-off over l = 2..5 on {about} (a few seconds):")
    rows = []
    for method in ("rr-both", "anatomy", "l-diversity"):
        rows += evaluate(
            sample,
            qi=["education", "salary-class", "sex", "race"],
            sensitive=SENSITIVE,
            method=method,
            values=[2, 3, 4, 5],
            hierarchies=hierarchies,
            queries=200,
            rng=1,
        )
    paths = write_results(rows, out, title=f"Adult ({about}): privacy against utility")
    (out / "privacy_utility.png").write_bytes(paths["png"].read_bytes())
    for r in rows:
        print(
            f"   {r.method:<12} l={r.value:g}  KL {r.kl:.3f}  "
            f"max Pr(occupation | QI) {r.max_risk:.3f}"
        )
    print(f"\nwrote {out}/privacy_utility.png, {out}/results.csv and the releases")


if __name__ == "__main__":
    main()
