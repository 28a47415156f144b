"""Samples per second of ppdm's exact DP samplers (issue 7 goal: 10^6 DP samples/s).

Baselines measured in the same run:
* numpy's ``Generator.laplace`` -- fast but floating-point and PCG64: the insecure
  sampler Mironov (2012) attacks, shown for scale;
* a naive secure loop -- one ``secrets``-drawn 53-bit uniform per sample and
  ``-b * log(u)`` in Python: what "use secrets" looks like without vectorization (and it
  is still the floating-point Laplace).

Run: ``python benchmarks/dp.py --quick`` (CI) or ``python benchmarks/dp.py``.
"""

from __future__ import annotations

import math
import secrets
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Report, Row, parser, timed

from ppdm.dp import (
    ExponentialMechanism,
    SnappingMechanism,
    sample_discrete_gaussian,
    sample_discrete_laplace,
    sample_geometric,
)


def naive_secrets_laplace(scale: float, n: int) -> list[float]:
    out = []
    for _ in range(n):
        u = (secrets.randbits(53) + 1) / 2.0**53
        sign = 1 if secrets.randbits(1) else -1
        out.append(-scale * sign * math.log(u))
    return out


def main() -> int:
    args = parser(__doc__ or "").parse_args()
    n = 200_000 if args.quick else 2_000_000
    n_slow = 20_000 if args.quick else 200_000
    repeat = 1 if args.quick else 3
    report = Report("ppdm DP samplers (os.urandom, exact)")

    t_np, _ = timed(lambda: np.random.default_rng().laplace(0, 10.0, n), repeat=repeat)
    t_naive, _ = timed(lambda: naive_secrets_laplace(10.0, n_slow), repeat=1)
    np_rate, naive_rate = n / t_np, n_slow / t_naive

    t, _x = timed(lambda: sample_discrete_laplace(10, n), repeat=repeat)
    report.add(
        Row(
            "discrete_laplace_scale10_per_s",
            n / t,
            "samples/s",
            naive_rate,
            "naive secrets loop (float Laplace)",
            ">= 1e6",
        )
    )
    report.add(
        Row(
            "discrete_laplace_scale10_vs_numpy_per_s",
            n / t,
            "samples/s",
            np_rate,
            "numpy laplace (insecure)",
            "reference",
        )
    )
    t, _ = timed(lambda: sample_discrete_laplace(1000, n), repeat=repeat)
    report.add(
        Row(
            "discrete_laplace_scale1000_per_s",
            n / t,
            "samples/s",
            naive_rate,
            "naive secrets loop (float Laplace)",
            ">= 1e6",
        )
    )
    t, _ = timed(lambda: sample_geometric(10, n), repeat=repeat)
    report.add(
        Row(
            "geometric_scale10_per_s",
            n / t,
            "samples/s",
            naive_rate,
            "naive secrets loop (float Laplace)",
            ">= 1e6",
        )
    )
    t, _ = timed(lambda: sample_discrete_gaussian(10, n), repeat=repeat)
    report.add(
        Row(
            "discrete_gaussian_sigma10_per_s",
            n / t,
            "samples/s",
            naive_rate,
            "naive secrets loop (float Laplace)",
            ">= 1e6",
        )
    )
    snap = SnappingMechanism(epsilon=0.1, sensitivity=1.0, bound=1e6)
    t, _ = timed(lambda: snap.randomise(np.zeros(n_slow)), repeat=1)
    report.add(
        Row(
            "snapping_per_s",
            n_slow / t,
            "samples/s",
            naive_rate,
            "naive secrets loop (float Laplace)",
            "MPFR log per sample",
        )
    )
    em = ExponentialMechanism(epsilon=1.0, sensitivity=1.0)
    utilities = -np.arange(100, dtype=float) / 10
    t, _ = timed(lambda: em.select(utilities, size=n_slow), repeat=1)
    report.add(
        Row("exponential_mechanism_100_candidates_per_s", n_slow / t, "samples/s", None, "", "-")
    )
    report.extra["numpy_laplace_per_s"] = np_rate
    report.extra["naive_secrets_laplace_per_s"] = naive_rate
    report.extra["samples"] = n
    report.finish(args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
