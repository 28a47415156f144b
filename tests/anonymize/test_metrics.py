"""Utility metrics against hand-computed values and brute force on generated data."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ppdm.anonymize.api import anonymize
from ppdm.anonymize.hierarchy import Hierarchy
from ppdm.anonymize.lattice import FullDomainProblem
from ppdm.anonymize.metrics import (
    average_class_size,
    classification_metric,
    discernibility,
    generalization_metrics,
    objective,
    objective_lower_bound,
    partition_metrics,
    release_class_metrics,
)
from ppdm.anonymize.models import make_models

COLOR = Hierarchy.from_rows(
    [["red", "warm", "*"], ["orange", "warm", "*"], ["blue", "cold", "*"], ["green", "cold", "*"]],
    attribute="color",
)
SIZE = Hierarchy.from_rows([["1", "*"], ["2", "*"], ["3", "*"]], attribute="size")
TABLE = pd.DataFrame(
    {
        "color": ["red", "orange", "red", "blue", "green", "blue", "green"],
        "size": ["1", "1", "2", "3", "3", "3", "1"],
        "label": ["y", "y", "n", "n", "n", "y", "n"],
    }
)


def test_hand_computed_generalization_metrics():
    problem = FullDomainProblem(
        TABLE,
        qi=["color", "size"],
        hierarchies={"color": COLOR, "size": SIZE},
        model=make_models(k=2),
        suppression=0.2,
    )
    # node (1, 0): classes warm/1 (2 rows), warm/2 (1 row: suppressed), cold/3 (3), cold/1 (1: suppressed)
    m = generalization_metrics(problem, (1, 0), target=TABLE["label"].to_numpy())
    assert m["suppressed"] == 2 and m["classes"] == 2
    assert m["suppression_rate"] == pytest.approx(2 / 7)
    assert m["generalization_height"] == 1
    assert m["discernibility"] == 2**2 + 3**2 + 7 * 2
    assert m["avg_class_size"] == pytest.approx((5 / 2) / 2)
    # precision: released rows: color level 1/2, size 0; suppressed rows count 1 + 1
    assert m["precision"] == pytest.approx(1 - (5 * 0.5 + 2 * 2) / (7 * 2))
    # ILoss: warm/cold cover 2 of 4 colors -> 1/4; root color 3/4, root size 2/3
    assert m["iloss"] == pytest.approx((5 * 0.25 + 2 * (0.75 + 2 / 3)) / 14)
    # NCP: categorical label with u=2 leaves -> 2/4; suppressed rows 1 per attribute
    assert m["ncp"] == pytest.approx((5 * 0.5 + 2 * 2) / 14)
    # CM: 2 suppressed; warm/1 = {y, y} ok; cold/3 = {n, n, y} -> 1 minority
    assert m["classification_metric"] == pytest.approx(3 / 7)


def test_small_metric_functions():
    assert discernibility(np.array([3, 3]), suppressed=1, n=7) == 25
    assert average_class_size(6, 2, 3) == 1.0
    assert average_class_size(0, 0, 3) == 0.0
    assert classification_metric(
        np.array([0, 0, 1]), np.array(["a", "b", "b"]), keep=np.array([True, True, False])
    ) == pytest.approx(2 / 3)


def test_partition_metrics_ranges_and_sets():
    df = pd.DataFrame({"age": [20, 30, 40, 50], "c": ["a", "b", "a", "a"], "y": [1, 1, 0, 0]})
    m = partition_metrics(df, qi=["age", "c"], class_ids=np.array([0, 0, 1, 1]), k=2, target="y")
    # age ranges 10 and 10 over span 30; c: class 0 {a, b} (2 of 2 values), class 1 {a}
    assert m["ncp"] == pytest.approx((4 * 10 / 30 + 2 * 1.0 + 2 * 0.0) / 8)
    assert m["iloss"] == pytest.approx((4 * 10 / 30 + 2 * 0.5 + 0) / 8)
    assert m["discernibility"] == 8 and m["classification_metric"] == 0.0
    h = Hierarchy.from_rows([["a", "ab", "*"], ["b", "ab", "*"], ["c", "c", "*"]], attribute="c")
    m2 = partition_metrics(df, qi=["c"], class_ids=np.array([0, 0, 1, 1]), hierarchies={"c": h})
    assert m2["ncp"] == pytest.approx(2 * (2 / 3) / 4)


def test_release_class_metrics_match_generalization_metrics():
    r = anonymize(
        TABLE,
        qi=["color", "size"],
        hierarchies={"color": COLOR, "size": SIZE},
        k=2,
        suppression=0.3,
        cm_target="label",
        rng=2,
    )
    m = release_class_metrics(r, k=2, target="label")
    for key in (
        "discernibility",
        "avg_class_size",
        "classes",
        "suppressed",
        "classification_metric",
    ):
        assert m[key] == pytest.approx(r.metrics[key]), key


@given(
    st.integers(0, 10_000),
    st.sampled_from([0.0, 0.1, 0.3]),
    st.sampled_from(["loss", "precision", "ncp", "height"]),
)
def test_lower_bound_never_exceeds_objective(seed, suppression, metric):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 40))
    df = pd.DataFrame(
        {
            "color": rng.choice(["red", "orange", "blue", "green"], n),
            "size": rng.choice(["1", "2", "3"], n),
        }
    )
    problem = FullDomainProblem(
        df,
        qi=["color", "size"],
        hierarchies={"color": COLOR, "size": SIZE},
        model=make_models(k=int(rng.integers(1, 4))),
        suppression=suppression,
    )
    for node in [(a, b) for a in range(3) for b in range(2)]:
        fs = problem.node_frequency_set(node)
        value = objective(problem, fs, metric)
        bound = objective_lower_bound(problem, node, metric)
        assert bound <= value + 1e-12
        if problem.evaluate(fs).suppressed == 0:
            assert bound == pytest.approx(value)
