"""Write each hospital's patient records for the hospitals consortium example.

Stands in for each hospital's own extract from its records system: scikit-learn's
diabetes data (442 patients, shipped with scikit-learn) split by columns, each hospital
holding only the patients it has seen (about 85 %), in its own order. The general
hospital's file also holds the patients' postcodes, which its policy lets no job read.

    python examples/hospitals/prepare_data.py --out hospitals-data

writes ``general.csv``, ``laboratory.csv`` and ``clinic.csv``; in a real consortium each
hospital exports its own file on its own host and no one ever holds all three.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from sklearn.datasets import load_diabetes

#: The columns each hospital holds (besides the patient id).
HOSPITALS = {
    "general": ["age", "sex", "bmi", "bp"],
    "laboratory": ["s1", "s2", "s3"],
    "clinic": ["s4", "s5", "s6"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="hospitals-data", help="folder for the three files")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    patients = load_diabetes(as_frame=True, scaled=False).frame.drop(columns="target")
    patients.insert(0, "record_id", [f"patient-{i:04d}" for i in range(len(patients))])
    rng = np.random.default_rng(7)  # the same split as examples/hospitals.py
    for name, cols in HOSPITALS.items():
        seen = rng.random(len(patients)) < 0.85
        table = patients.loc[seen, ["record_id", *cols]].sample(frac=1.0, random_state=1)
        if name == "general":
            table["postcode"] = [f"{2000 + i % 97:05d}" for i in range(len(table))]
        table.to_csv(out / f"{name}.csv", index=False)
        print(f"{name}: {len(table)} patients, columns {', '.join(table.columns)}")


if __name__ == "__main__":
    main()
