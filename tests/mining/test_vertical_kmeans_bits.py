"""Vertical k-means compares only the bits its distances can reach (issue 25, item 4),
and those bits cover distances to explicit starting centres outside the records' range.

The bound: every party announces ``exp`` with its partial distances below ``2^(exp - 1)``
(over its records and starting centres), so the summed fixed-point distances stay below
``2^(max(exp) - 1 + fraction_bits + ceil(log2 n_parties))``; the secure argmin gets one
bit more than that instead of a fixed 60.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from ppdm.mining.kmeans import assign, vertical_kmeans
from ppdm.parties.local import simulate
from ppdm.protocols import comparison


def _plain_lloyd(x: np.ndarray, init: np.ndarray, max_iter: int) -> np.ndarray:
    centers = np.array(init, dtype=np.float64)
    prev = None
    for _ in range(max_iter):
        labels, _ = assign(x, centers)
        for j in range(len(centers)):
            if (labels == j).any():
                centers[j] = x[labels == j].mean(axis=0)
        if prev is not None and np.array_equal(labels, prev):
            return labels
        prev = labels
    return assign(x, centers)[0]


def _run(x: np.ndarray, init: np.ndarray, cols: dict[str, slice], monkeypatch) -> tuple:
    seen: list[int] = []
    original = comparison.secure_argmin

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs["value_bits"])
        return original(*args, **kwargs)

    monkeypatch.setattr(comparison, "secure_argmin", spy)

    def party(net: Any, part: np.ndarray) -> Any:
        return vertical_kmeans(net, part, k=len(init), init=init[:, cols[net.me]], max_iter=50)

    sim = simulate(party, {p: x[:, c] for p, c in cols.items()}, timeout=300)
    return sim.results, seen


@pytest.mark.parametrize("parties", [2, 3])
def test_argmin_gets_the_bits_the_distances_reach(monkeypatch, parties: int) -> None:
    gen = np.random.default_rng(parties)
    x = np.round(gen.uniform(0, 16, (90, 6)))  # digits-like: integers in [0, 16]
    init = x[[0, 30, 60]].copy()
    names = ["alice", "bob", "carol"][:parties]
    width = 6 // parties
    cols = {p: slice(i * width, (i + 1) * width) for i, p in enumerate(names)}
    results, seen = _run(x, init, cols, monkeypatch)
    spread = float(x.max() - x.min())
    exp = math.ceil(math.log2(spread**2 * width + 1.0)) + 1
    want = exp + 40 + math.ceil(math.log2(parties))  # default 40 fraction bits fit here
    assert seen and set(seen) == {want} and want < 60
    assert np.array_equal(results["alice"].labels, _plain_lloyd(x, init, 50))


def test_explicit_centres_far_outside_the_records_keep_exact_labels(monkeypatch) -> None:
    """Starting centres a thousand spreads away: their distances are about 2^21 times
    the records' own; the bound covers them, so the argmin is still exact."""
    gen = np.random.default_rng(9)
    x = np.concatenate([gen.normal(c, 1.0, (30, 4)) for c in (0.0, 8.0, 16.0)])
    init = np.array([[-1000.0] * 4, [8.0] * 4, [1000.0] * 4])
    cols = {"alice": slice(0, 2), "bob": slice(2, 4)}
    results, seen = _run(x, init, cols, monkeypatch)
    assert seen and max(seen) <= 60
    assert np.array_equal(results["alice"].labels, results["bob"].labels)
    assert np.array_equal(results["alice"].labels, _plain_lloyd(x, init, 50))
