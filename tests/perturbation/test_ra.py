"""RA and enhanced RA (Yang & Qiao 2010): proposition 7, bias, breaches."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ppdm.perturb._table import encode
from ppdm.perturb.ra import (
    attribute_distributions,
    enhanced_ra,
    expected_relative_bias,
    expected_support,
    gamma_amplification,
    inference_probability,
    optimal_selection_probabilities,
    probabilistic_anonymity,
    ra,
    random_anonymization,
    relative_difference,
)

# Yang & Qiao 2010, Fig. 1 (Age, Job, Country; Disease)
FIG1 = pd.DataFrame(
    [
        ("[50-60]", "Doctor", "USA", "Hypertension"),
        ("[40-50]", "Clerk", "USA", "Hypertension"),
        ("[30-40]", "Clerk", "USA", "Hypertension"),
        ("[30-40]", "Clerk", "Germany", "Hypertension"),
        ("[50-60]", "Trader", "USA", "Diabetes"),
        ("[30-40]", "Clerk", "UK", "Diabetes"),
        ("[50-60]", "Engineer", "USA", "Diabetes"),
        ("[20-30]", "Trader", "UK", "Heart Disease"),
        ("[60-70]", "Banker", "USA", "Cancer"),
        ("[30-40]", "Banker", "India", "Cancer"),
    ],
    columns=["age", "job", "country", "disease"],
)


@pytest.fixture(scope="module")
def adult(adult_dir):
    df = pd.read_csv(adult_dir / "adult.csv", sep=";")
    return encode(
        df,
        ["education", "marital-status", "race", "sex", "workclass", "salary-class", "occupation"],
    )


def test_fig1_probabilistic_anonymity_is_about_11():
    enc = encode(FIG1, ["age", "job", "country"])
    dists = attribute_distributions(enc.codes, enc.dims)
    assert round(probabilistic_anonymity(dists, [1 / 3] * 3)) == 11
    # section 6's example: alpha = P(age anonymized) * 50% ~ 17% > 1 / Pa(D')
    assert 1 / probabilistic_anonymity(dists, [1 / 3] * 3) < (1 / 3) * 0.5


def test_proposition_7_entropy_proportional_p_maximizes_pa(adult):
    qi = adult.codes[:, :-1]
    dists = attribute_distributions(qi, adult.dims[:-1])
    best_p = optimal_selection_probabilities(dists)
    best = probabilistic_anonymity(dists, best_p)
    assert best == pytest.approx(sum(np.exp(-np.sum(d[d > 0] * np.log(d[d > 0]))) for d in dists))
    g = np.random.default_rng(0)
    for _ in range(500):
        alt = g.dirichlet(np.ones(len(dists)) * g.choice([0.3, 1.0, 5.0]))
        assert probabilistic_anonymity(dists, alt) <= best * (1 + 1e-12)
    assert probabilistic_anonymity(dists, np.full(len(dists), 1 / len(dists))) < best


def test_ra_changes_one_attribute_and_keeps_marginals(adult):
    qi = adult.codes[:, :-1]
    dims = adult.dims[:-1]
    out = ra(qi, dims, rng=1)
    assert (out != qi).sum(axis=1).max() <= 1
    for j, d in enumerate(dims):
        assert np.bincount(out[:, j], minlength=d) / len(out) == pytest.approx(
            np.bincount(qi[:, j], minlength=d) / len(qi), abs=0.01
        )
    out3 = enhanced_ra(qi, dims, lam=3, rng=2)
    assert (out3 != qi).sum(axis=1).max() <= 3


@pytest.mark.parametrize("lam", [None, 1, 3])
def test_expected_relative_difference_matches_monte_carlo(adult, lam):
    qi = adult.codes[:, :-1]
    dims = adult.dims[:-1]
    attrs, values = [0, 1], [int(qi[0, 0]), int(qi[0, 1])]
    p = optimal_selection_probabilities(attribute_distributions(qi, dims)) if lam is None else None
    supp = np.mean(np.all(qi[:, attrs] == values, axis=1))
    expected = expected_support(qi, dims, attrs, values, p=p, lam=lam) / supp - 1
    reps = []
    for r in range(40):
        out = ra(qi, dims, p=p, rng=r) if lam is None else enhanced_ra(qi, dims, lam=lam, rng=r)
        reps.append(relative_difference(qi, out, attrs, values))
    assert np.mean(reps) == pytest.approx(expected, abs=4 * np.std(reps) / np.sqrt(40) + 1e-3)


def test_equation_10_lift_form(adult):
    qi = adult.codes[:, :-1]
    dims = adult.dims[:-1]
    m = qi.shape[1]
    attrs, values = [0, 2, 3], [int(v) for v in qi[5, [0, 2, 3]]]
    dists = attribute_distributions(qi, dims)
    supp = np.mean(np.all(qi[:, attrs] == values, axis=1))
    total = 0.0
    for k, a in enumerate(attrs):
        rest = [x for x in range(len(attrs)) if x != k]
        supp_rest = np.mean(
            np.all(qi[:, [attrs[x] for x in rest]] == [values[x] for x in rest], axis=1)
        )
        lift = supp / (supp_rest * dists[a][values[k]])
        total += 1 / lift - 1
    closed = abs(total) / m
    assert expected_relative_bias(qi, dims, attrs, values, p=np.full(m, 1 / m)) == pytest.approx(
        closed
    )
    # single attribute: zero bias (Yang & Qiao 2010, §5.2)
    assert expected_relative_bias(
        qi, dims, [1], [int(qi[0, 1])], p=np.full(m, 1 / m)
    ) == pytest.approx(0.0, abs=1e-12)


def test_inference_probability_within_proposition_10_bound(adult):
    qi = adult.codes[:200, :4]
    dims = adult.dims[:4]
    dists = attribute_distributions(qi, dims)
    for row in range(0, 200, 7):
        q = [int(v) for v in qi[row]]
        prob = inference_probability(qi, dims, q)
        supp = np.mean(np.all(qi == q, axis=1))
        minus = min(
            np.mean(np.all(np.delete(qi, i, axis=1) == np.delete(q, i), axis=1)) for i in range(4)
        )
        pq = [dists[i][q[i]] for i in range(4)]
        bound = max(supp / minus, max(pq) / sum(pq))
        assert 0 < prob <= bound + 1e-12
        assert gamma_amplification(qi, dims, q) >= 1.0


def test_random_anonymization_dataframe():
    rel = random_anonymization(FIG1, qi=["age", "job", "country"], rng=3)
    assert (rel.data["disease"] == FIG1["disease"]).all()
    assert rel.anonymity == pytest.approx(
        probabilistic_anonymity(
            attribute_distributions(encode(FIG1, ["age", "job", "country"]).codes, (5, 5, 4)), rel.p
        )
    )
    assert (
        (rel.data[["age", "job", "country"]] != FIG1[["age", "job", "country"]]).sum(axis=1) <= 1
    ).all()
