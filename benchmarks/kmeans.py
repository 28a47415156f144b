"""Vertical k-means on scikit-learn's digits (1,797 x 64) split over two parties, against
scikit-learn's ``KMeans`` on the pooled data from the same initial centres (issue 25,
item 4).

Rows: ppdm's wall time in process (two parties, one thread each) against scikit-learn's
(``algorithm="lloyd"``, ``n_init=1``, ``tol=0``) measured in the same run, the bytes both
parties sent (no baseline: scikit-learn sends none; the issue measured 491 MB before),
and the per-iteration figures. Every run checks its own result: the labels equal
scikit-learn's and the centres agree to 1e-9.

    python benchmarks/kmeans.py [--quick] [--json FILE]
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import Report, Row, parser

K = 10
SEED = 3


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    args = p.parse_args()

    from sklearn.cluster import KMeans, kmeans_plusplus
    from sklearn.datasets import load_digits

    from ppdm.mining.kmeans import vertical_kmeans
    from ppdm.parties.local import simulate

    x = load_digits().data.astype(np.float64)
    if args.quick:
        x = x[:400]
    n, d = x.shape
    init, _ = kmeans_plusplus(x, K, random_state=SEED)  # public starting centres
    half = d // 2
    cols = {"alice": slice(0, half), "bob": slice(half, d)}

    t0 = time.perf_counter()
    sk = KMeans(K, init=init, n_init=1, algorithm="lloyd", max_iter=300, tol=0.0).fit(x)
    t_sk = time.perf_counter() - t0

    def party(net, part):
        return vertical_kmeans(net, part, k=K, init=init[:, cols[net.me]], max_iter=300)

    t0 = time.perf_counter()
    sim = simulate(party, {p: x[:, c] for p, c in cols.items()}, timeout=3600)
    t_ppdm = time.perf_counter() - t0
    res = sim.results["alice"]
    centers = np.hstack([sim.results["alice"].centers, sim.results["bob"].centers])
    if not np.array_equal(res.labels, sk.labels_):
        raise SystemExit("vertical k-means labels differ from scikit-learn's")
    if not np.allclose(centers, sk.cluster_centers_, rtol=0, atol=1e-9):
        raise SystemExit("vertical k-means centres differ from scikit-learn's")
    total_bytes = sum(t["bytes_sent"] for t in sim.totals.values())
    # Lloyd iterations plus the final assignment when max_iter stops the run.
    assignments = res.iterations + (0 if res.converged else 1)

    load = os.getloadavg()[0]
    report = Report(
        f"vertical k-means, digits {n} x {d} over 2 parties, k = {K} "
        f"(load average {load:.1f} on {os.cpu_count()} cores)"
    )
    report.add(
        Row(
            f"vkmeans_digits_{n}_s",
            t_ppdm,
            "s",
            t_sk,
            "scikit-learn KMeans (pooled, same init)",
            ">= 5x less than before (issue 25: 120-235x scikit-learn)",
            higher_is_better=False,
        )
    )
    report.add(
        Row(
            f"vkmeans_digits_{n}_mb",
            total_bytes / 1e6,
            "MB",
            None,
            "",
            ">= 5x less than before (issue 25: 491 MB)",
            higher_is_better=False,
        )
    )
    report.add(
        Row(
            "vkmeans_seconds_per_assignment",
            t_ppdm / max(assignments, 1),
            "s",
            t_sk / max(sk.n_iter_, 1),
            "scikit-learn per iteration",
            "",
            higher_is_better=False,
        )
    )
    report.add(
        Row(
            "vkmeans_bytes_per_comparison",
            total_bytes / max(assignments * n * (K - 1), 1),
            "B",
            None,
            "",
            "(n (k - 1) secure comparisons per assignment)",
            higher_is_better=False,
        )
    )
    report.extra["iterations"] = int(res.iterations)
    report.extra["sklearn_iterations"] = int(sk.n_iter_)
    report.extra["load_average"] = round(load, 2)
    report.finish(args.json)


if __name__ == "__main__":
    main()
