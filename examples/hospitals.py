"""Hospitals cluster their shared patients without pooling their records.

The scenario (vertical partitioning, Vaidya & Clifton 2003): three hospitals hold
different measurements of diabetes patients (scikit-learn's diabetes data, shipped with
scikit-learn): the general hospital has age, sex, BMI and blood pressure, the laboratory
has three blood serum measurements and the clinic the other three. Each hospital has seen
only some of the 442 patients (overlapping sets, each file in its own order, with its own
patient ids), and none may tell the others which patients it has. One job first aligns
the records privately (``align=true``: an OT-based private set intersection of the
patient ids; every hospital learns only the common patients) and then runs k-means over
all ten attributes of the common patients. Each hospital's data owner sets a policy:

* only the ``kmeans`` job may read the records, and only the hospital's own clinical
  columns and the patient id it aligns on (in this vertical setting each node checks the
  job's columns that its file holds; the general hospital's file also holds patients'
  postcodes, which no job may read);
* every released cluster must hold at least 20 patients (a minimum aggregation size);
* at least three hospitals in every job;
* one opt-in beyond the default policy: vertical k-means tells every hospital each
  common patient's cluster (a value of one record), which the default refuses
  (``allow_records = true``, docs/governance.md).

The script starts one node per hospital on 127.0.0.1 (gRPC, mutual TLS), runs the job,
checks the centres against scikit-learn's k-means started from the same points on the
pooled data, and shows that a job asking for a column outside a hospital's policy is
refused before anything runs. Run from the repository root (about 20 s)::

    python examples/hospitals.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from sklearn.cluster import KMeans
from sklearn.datasets import load_diabetes

from ppdm.testbed.consortia import GrpcTestbed

HOSPITALS = {
    "general": ["age", "sex", "bmi", "bp"],
    "laboratory": ["s1", "s2", "s3"],
    "clinic": ["s4", "s5", "s6"],
}
# Two clusters: with three, about one run in ten passes through an iteration with a
# cluster of fewer than 20 patients (the random-partition start is coin-tossed), which the
# policies' minimum cluster size stops with aggregation_too_small.
K = 2


def policy(columns: list[str]) -> str:
    """A hospital's data-owner policy (docs/governance.md)."""
    return f"""version = 1
[defaults]
jobs = ["kmeans"]
min_parties = 3
allow_records = true   # the opt-in: the cluster label of every common patient is published

[data.records]
jobs = ["kmeans"]
columns = {[*columns, "record_id"]!r}
min_cluster_size = 20
""".replace("'", '"')


def main() -> None:
    patients = load_diabetes(as_frame=True, scaled=False).frame.drop(columns="target")
    patients.insert(0, "record_id", [f"patient-{i:04d}" for i in range(len(patients))])
    columns = [c for cols in HOSPITALS.values() for c in cols]
    with tempfile.TemporaryDirectory(prefix="ppdm-hospitals-") as tmp:
        work = Path(tmp)
        data = {}
        held: dict[str, set[str]] = {}
        rng = np.random.default_rng(7)
        for name, cols in HOSPITALS.items():
            path = work / f"{name}.csv"
            seen = rng.random(len(patients)) < 0.85  # the patients this hospital has seen
            table = patients.loc[seen, ["record_id", *cols]].sample(frac=1.0, random_state=1)
            held[name] = set(table["record_id"])
            if name == "general":
                table["postcode"] = [f"{2000 + i % 97:05d}" for i in range(len(table))]
            table.to_csv(path, index=False)
            data[name] = {"records": str(path)}
        bed = GrpcTestbed(
            list(HOSPITALS),
            work / "consortium",
            data=data,
            policy={name: policy(cols) for name, cols in HOSPITALS.items()},
        )
        with bed:
            print(f"hospitals {', '.join(HOSPITALS)} running on 127.0.0.1, each under its policy")
            params = {
                "mode": "vertical",
                "align": True,  # private record alignment first
                "k": K,
                "columns": columns,
                "max_iter": 100,
                "min_cluster_size": 20,  # what the policies demand
            }
            doc = bed.run_job("kmeans", params)
            if doc["state"] != "succeeded":
                raise SystemExit(f"kmeans {doc['state']}: {doc['error']}")
            result = doc["parties"]["general"]["result"]
            common = sorted(set.intersection(*held.values()))
            print(
                f"aligned privately: {len(common)} patients common to all three "
                f"(of {', '.join(str(len(h)) for h in held.values())} seen)"
            )
            print(
                f"k-means over {len(columns)} attributes of {len(common)} patients: "
                f"{result['iterations']} iterations, converged={result['converged']}, "
                f"cluster sizes {result['cluster_sizes']}"
            )
            # Each hospital learns the centres on its own columns only.
            for name, rec in doc["parties"].items():
                print(f"  {name:<10} sees centres on {rec['result']['columns']}")

            # The oracle: scikit-learn on the pooled records of the common patients (in the
            # alignment's order, the sorted ids), from the same starting centres: the
            # means of random groups of patients (no patient's record is a centre).
            pooled = patients.set_index("record_id").loc[common]
            x = pooled[columns].to_numpy(dtype=float)
            start = np.concatenate(
                [np.asarray(doc["parties"][h]["result"]["initial_centers"]) for h in HOSPITALS],
                axis=1,
            )
            ref = KMeans(K, init=start, n_init=1, max_iter=100, tol=0.0, algorithm="lloyd")
            ref.fit(x)
            ours = np.concatenate(
                [np.asarray(doc["parties"][h]["result"]["centers"]) for h in HOSPITALS], axis=1
            )
            assert np.allclose(ours, ref.cluster_centers_, rtol=1e-6, atol=1e-6)
            print("centres equal scikit-learn's k-means on the pooled data")

            # A job that asks for a column the general hospital holds but does not allow
            # is refused by that hospital's node, naming the rule, before anything runs.
            refused = bed.run_job("kmeans", {**params, "columns": [*columns, "postcode"]})
            print(f"asking for the postcodes: {refused['state']} ({refused['error']})")
            assert refused["state"] == "refused"


if __name__ == "__main__":
    main()
