"""The ``psi-align`` job and ``align=true`` with the alignment's bounds: who led and the
bounds used are in the result, no set size is; a crafted superset, a set or an
intersection below the minimum end the job at every party with no id in any result."""

from __future__ import annotations

import math

import pytest

from ppdm.errors import AggregationTooSmall, ConfigError, ProtocolError
from ppdm.jobs.document import simulate_job
from ppdm.jobs.mining import check_params
from ppdm.jobs.registry import PartyContext

PARTIES = ("alice", "bob", "carol")


def _contexts(sets: dict) -> dict:
    return {p: PartyContext(p, {"inputs": {"ids": v}}) for p, v in sets.items()}


def _run(sets: dict, **params) -> dict:
    doc = simulate_job("psi-align", _contexts(sets), {"inputs": "ids", **params}, timeout=60)
    assert doc["ok"], doc["error"]
    return {p: e["result"] for p, e in doc["parties"].items()}


def test_result_names_the_leader_and_the_bounds_but_no_set_size():
    sets = {
        "alice": [f"id{i}" for i in range(0, 40)],
        "bob": [f"id{i}" for i in range(10, 60)],
        "carol": [f"id{i}" for i in range(5, 45)],
    }
    got = _run(sets)
    common = sorted(f"id{i}" for i in range(10, 40))
    leaders = {r["leader"] for r in got.values()}
    assert len(leaders) == 1 and leaders <= set(PARTIES)
    for r in got.values():
        assert r["ids"] == common and r["size"] == len(common)
        assert r["max_set_ratio"] == 2.0 and r["min_set_size"] == 10
        assert set(r) == {
            "party",
            "method",
            "leader",
            "max_set_ratio",
            "min_set_size",
            "size",
            "ids_sha256",
            "ids",
        }
        # No party's own set size (40, 50, 40) is anywhere in the result.
        assert not {40, 50} & {v for v in r.values() if isinstance(v, int)}


def test_a_superset_ends_the_job_before_any_id_moves():
    sets = {
        "alice": list(range(100, 200)),
        "bob": list(range(150, 250)),
        "carol": list(range(0, 5000)),  # every id: 50x
    }
    with pytest.raises(ProtocolError) as info:
        _run(sets)
    assert info.value.party == "carol"
    # The owners may allow more: then the job runs (the policy bounds this parameter).
    got = _run(sets, max_set_ratio=50.0)
    assert got["carol"]["ids"] == list(range(150, 200))


def test_below_the_minimum_no_party_outputs_ids():
    sets = {"alice": list(range(0, 20)), "bob": list(range(15, 35)), "carol": list(range(12, 32))}
    with pytest.raises(AggregationTooSmall):  # 5 common ids
        _run(sets)
    got = _run(sets, min_set_size=5)
    assert got["bob"]["ids"] == [15, 16, 17, 18, 19]
    with pytest.raises(AggregationTooSmall):  # a set of 4 ids
        _run({"alice": [1, 2, 3, 4], "bob": [1, 2, 3, 4]})


@pytest.mark.parametrize(
    "bad",
    [
        {"max_set_ratio": 0.5},
        {"max_set_ratio": math.inf},
        {"max_set_ratio": "2"},
        {"max_set_ratio": True},
        {"min_set_size": -1},
        {"min_set_size": 2.5},
    ],
)
def test_bad_bounds_are_config_errors(bad):
    with pytest.raises(ConfigError):
        _run({"alice": list(range(20)), "bob": list(range(20))}, **bad)
    with pytest.raises(ConfigError):
        check_params("kmeans", {"mode": "vertical", "align": True, **bad})


def test_align_true_takes_the_same_bounds():
    opts = check_params("kmeans", {"mode": "vertical", "align": True})
    assert (opts["max_set_ratio"], opts["min_set_size"]) == (2.0, 10)
    opts = check_params(
        "assoc", {"mode": "vertical", "align": True, "max_set_ratio": 3, "min_set_size": 20}
    )
    assert (opts["max_set_ratio"], opts["min_set_size"]) == (3.0, 20)
