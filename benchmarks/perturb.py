"""Perturbation benchmark (issue 7): randomized response, RA and DP sampling on Adult.

Rows (all measured in one run):

* optimal RR-Both parameters (Guo, Ying & Wu 2011 problem 1, tau = 1/3) on the ESGRO setting
  (education, salary-class, sex, race; occupation sensitive), and the whole RR-Both
  release (parameters + randomization + reconstruction ``P^-1 lambda``), against ppdm's
  Mondrian with entropy 3-diversity on the same data (Guo, Ying & Wu 2011: its own RR-Both was
  10x slower than generalization; the goal is to be faster than Mondrian);
* the maximum-likelihood (EM) reconstruction of the same randomized table;
* RA (Yang & Qiao 2010, algorithm 1, proposition 7's probabilities) on Adult's 8 QI, records/s;
* additive Gaussian noise + EM reconstruction of 10^5 ages (Aggarwal 2015, §20.2);
* B2's exact discrete Laplace sampler (``ppdm.dp.sample_discrete_laplace``):
  samples per second, goal 10^6/s, against numpy's floating-point Laplace (not safe
  for privacy, Mironov 2012) as a speed reference.

    python benchmarks/perturb.py --quick
    python benchmarks/perturb.py --json perturb.json
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ANONBENCH_QI, Report, Row, load_adult, parser, timed

from ppdm.anonymize.models import EntropyLDiversity
from ppdm.anonymize.mondrian import mondrian
from ppdm.perturb._table import contingency, encode
from ppdm.perturb.ra import random_anonymization
from ppdm.perturb.randomization import Noise, add_noise, em_reconstruct
from ppdm.perturb.randomized_response import (
    em_estimate_table,
    optimal_parameters,
    randomized_response,
)

ESGRO = ["education", "salary-class", "sex", "race"]


def main() -> int:
    args = parser(__doc__.splitlines()[0]).parse_args()
    table = load_adult(Path(args.shared) / "data" / "adult")
    if args.quick:
        table = table.head(5000)
    n = len(table)
    report = Report(f"perturbation on Adult ({n:,} records)")
    repeat = 1 if args.quick else 3

    enc = encode(table, [*ESGRO, "occupation"])
    pi = contingency(enc.codes, enc.dims)
    t_opt, params = timed(
        lambda: optimal_parameters(pi, tau=1 / 3, scheme="rr-both"), repeat=repeat
    )
    t_mondrian, _ = timed(
        lambda: mondrian(
            table, qi=ESGRO, model=EntropyLDiversity(3), sensitive="occupation", rng=0
        ),
        repeat=repeat,
    )

    def rr_release() -> np.ndarray:
        rel = randomized_response(table, qi=ESGRO, sensitive="occupation", l=3, rng=1)
        return rel.estimate()

    t_rr, _ = timed(rr_release, repeat=repeat)
    report.add(
        Row(
            "rr_both_optimal_params_s",
            t_opt,
            "s",
            t_mondrian,
            "Mondrian entropy 3-div",
            "faster than Mondrian",
            higher_is_better=False,
        )
    )
    report.add(
        Row(
            "rr_both_release_and_estimate_s",
            t_rr,
            "s",
            t_mondrian,
            "Mondrian entropy 3-div",
            "faster than Mondrian",
            higher_is_better=False,
        )
    )
    rel = randomized_response(table, qi=ESGRO, sensitive="occupation", l=3, rng=2)
    lam = rel.observed_table()
    t_em, _ = timed(lambda: em_estimate_table(lam, rel.ps), repeat=repeat)
    report.add(Row("rr_em_reconstruction_s", t_em, "s", goal="< 1 s", higher_is_better=False))
    report.extra["rr_both_ps_l3"] = [p for p in params.ps]

    t_ra, ra_rel = timed(lambda: random_anonymization(table, qi=ANONBENCH_QI, rng=3), repeat=repeat)
    report.add(Row("ra_adult_records_per_s", n / t_ra, "records/s", goal="> 10^5/s"))
    report.extra["ra_probabilistic_anonymity"] = ra_rel.anonymity

    m = 20_000 if args.quick else 100_000
    ages = np.resize(table["age"].to_numpy(dtype=float), m)
    noise = Noise("gaussian", 10.0)
    z = add_noise(ages, noise, rng=4)
    t_rec, _ = timed(
        lambda: em_reconstruct(z, noise, bins=15, bounds=(15, 90), z_bins=2000), repeat=repeat
    )
    report.add(Row("noise_em_reconstruction_values_per_s", m / t_rec, "values/s", goal="> 10^5/s"))

    try:
        from ppdm.dp import sample_discrete_laplace
    except ImportError:  # B2's module not present
        sample_discrete_laplace = None
    size = 100_000 if args.quick else 1_000_000
    t_np, _ = timed(lambda: np.random.default_rng(0).laplace(0.0, 2.0, size), repeat=repeat)
    if sample_discrete_laplace is not None:
        t_dp, _ = timed(lambda: sample_discrete_laplace(2, size), repeat=repeat)
        report.add(
            Row(
                "dp_discrete_laplace_samples_per_s",
                size / t_dp,
                "samples/s",
                size / t_np,
                "numpy float Laplace (unsafe)",
                "> 10^6/s",
            )
        )
    report.finish(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
