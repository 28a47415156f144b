"""k-means releases only aggregates (issue 21): random-partition starting centres, the
bound on ``k`` before anything record-derived is sent, and the per-party floor.

- ``init="random-partition"`` gives scikit-learn's Lloyd result started from the same
  (aggregate) centres on the pooled data, horizontal and vertical; the starting centres
  are means of random groups of about ``N / k`` records.
- ``k * min_cluster_size > N`` stops every party after the pooled count and nothing else:
  the test reads every message a party *receives*.
- The attacker's side: a party that chooses ``k`` (up to ``N``) and its own data, and
  subtracts its own records from every aggregate released to it, recovers no honest
  record under the job defaults; the same attacker finds records with ``init="first-k"``
  or without the per-party floor, so the count can fail.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs

import ppdm.mining.kmeans_horizontal as kmeans_mod
from ppdm.errors import AggregationTooSmall, ConfigError, PPDMError, ProtocolError
from ppdm.jobs.registry import PartyContext, get_job
from ppdm.mining.kmeans import KMeansResult, horizontal_kmeans, vertical_kmeans
from ppdm.parties.local import LocalNetwork, simulate

PARTIES = ["alice", "bob", "mallory"]
MATCH = 1e-6  # a recovered row within this of a record (coordinates have 4 decimals)


def _blobs(n: int, d: int, k: int, seed: int) -> np.ndarray:
    x, _ = make_blobs(n_samples=n, n_features=d, centers=k, cluster_std=1.5, random_state=seed)
    return np.round(x, 4)


def _lloyd(x: np.ndarray, init: np.ndarray) -> KMeans:
    return KMeans(len(init), init=init, n_init=1, algorithm="lloyd", tol=0.0).fit(x)


# -- random-partition equals sklearn from the same aggregate centres -----------------------


def _lloyd_keeping_empty(x: np.ndarray, init: np.ndarray) -> tuple[np.ndarray, int]:
    """Plain Lloyd by ppdm's documented rules (ties to the lowest index, an emptied
    cluster keeps its centre), until no assignment changes: centres and iterations."""
    c = np.array(init, dtype=np.float64)
    prev = None
    for it in range(1, 301):
        lab = ((x[:, None, :] - c[None, :, :]) ** 2).sum(axis=2).argmin(axis=1)
        for j in range(len(c)):
            if np.any(lab == j):
                c[j] = x[lab == j].mean(axis=0)
        if prev is not None and np.array_equal(lab, prev):
            return c, it
        prev = lab
    return c, 300


@pytest.mark.parametrize("n_parties", [2, 3, 5])
def test_horizontal_random_partition_matches_sklearn(n_parties: int) -> None:
    """Every run equals Lloyd from its aggregate starting centres; runs in which no
    cluster empties equal scikit-learn's (which relocates an emptied cluster instead:
    random groups start every centre near the mean, and in about 4 runs in 10 here a
    first-iteration cell is empty), and the test goes on until it has seen one."""
    k = 4
    x = _blobs(1200, 3, k, seed=n_parties)
    owner = np.random.default_rng(n_parties).integers(0, n_parties, len(x))
    names = ["alice", "bob", "carol", "dave", "erin"][:n_parties]
    parts = {p: x[owner == i] for i, p in enumerate(names)}
    pooled = np.vstack([parts[p] for p in names])
    starts: list[np.ndarray] = []
    for _ in range(20):
        res = simulate(lambda net, xi: horizontal_kmeans(net, xi, k=k), parts, timeout=120).results
        first = res["alice"]
        start, sizes = first.initial_centers, np.array(first.initial_sizes)
        starts.append(start)
        for r in res.values():
            np.testing.assert_array_equal(r.initial_centers, start)
            assert r.initial_sizes == first.initial_sizes
        # Aggregates of a random balanced deal: the sizes add up to N, each between the
        # parties' floors and ceilings of n_i / k, and size-weighted means give the total.
        assert sizes.sum() == len(pooled)
        lo = sum(len(v) // k for v in parts.values())
        hi = sum(-(-len(v) // k) for v in parts.values())
        assert np.all((sizes >= lo) & (sizes <= hi))
        np.testing.assert_allclose(
            (start * sizes[:, None]).sum(axis=0), pooled.sum(axis=0), atol=1e-5
        )
        d2 = ((pooled[:, None, :] - start[None, :, :]) ** 2).sum(axis=2)
        assert d2.min() > 1e-6  # no starting centre is a record
        want, iterations = _lloyd_keeping_empty(pooled, start)
        assert first.iterations == iterations
        for r in res.values():
            np.testing.assert_allclose(r.centers, want, rtol=0, atol=1e-6)
        if all(min(h["sizes"]) > 0 for h in first.history):
            break
    else:
        pytest.fail("20 runs, each with an emptied cluster")
    km = _lloyd(pooled, start)
    assert km.n_iter_ == first.iterations
    offset = 0
    for p in names:
        r = res[p]
        np.testing.assert_allclose(r.centers, km.cluster_centers_, rtol=0, atol=1e-6)
        np.testing.assert_array_equal(r.labels, km.labels_[offset : offset + len(r.labels)])
        assert r.inertia == pytest.approx(km.inertia_, rel=1e-6)
        offset += len(r.labels)
    # Fresh randomness: no two runs start from the same centres.
    assert len(starts) == 1 or not np.allclose(starts[0], starts[1])
    again = simulate(lambda net, xi: horizontal_kmeans(net, xi, k=k), parts, timeout=120)
    assert not np.allclose(again.results["alice"].initial_centers, start)


def test_horizontal_random_slabs_match_sklearn() -> None:
    """``random-slabs``: every party's own quantile slabs along a jointly drawn direction;
    the starting centres are aggregates, ordered along that direction, and Lloyd from
    them equals scikit-learn's."""
    k = 5
    x = _blobs(1500, 4, k, seed=31)
    owner = np.random.default_rng(31).integers(0, 3, len(x))
    parts = {p: x[owner == i] for i, p in enumerate(PARTIES)}
    pooled = np.vstack([parts[p] for p in PARTIES])
    res = simulate(
        lambda net, xi: horizontal_kmeans(net, xi, k=k, init="random-slabs"), parts, timeout=120
    ).results
    first = res["alice"]
    start, sizes = first.initial_centers, np.array(first.initial_sizes)
    assert all(np.array_equal(r.initial_centers, start) for r in res.values())
    assert sizes.sum() == len(pooled)
    assert np.all(sizes >= sum(len(v) // k for v in parts.values()))
    np.testing.assert_allclose((start * sizes[:, None]).sum(axis=0), pooled.sum(axis=0), atol=1e-5)
    # Spread along one direction: the centres lie far apart compared with random groups'.
    spread = np.linalg.norm(start - pooled.mean(axis=0), axis=1).max()
    assert spread > 0.2 * pooled.std(axis=0).max()  # random groups: ~0.05
    want, iterations = _lloyd_keeping_empty(pooled, start)
    assert first.iterations == iterations
    for r in res.values():
        np.testing.assert_allclose(r.centers, want, rtol=0, atol=1e-6)
    if all(min(h["sizes"]) > 0 for h in first.history):  # then scikit-learn agrees too
        km = _lloyd(pooled, start)
        assert km.n_iter_ == first.iterations
        np.testing.assert_allclose(first.centers, km.cluster_centers_, rtol=0, atol=1e-6)


def test_slab_and_random_deals_respect_the_floor() -> None:
    """Each party's share of every group it uses is at least ``min_party_records``."""
    rng = np.random.default_rng(3)
    for n in (0, 1, 2, 5, 7, 12, 100):
        x = rng.normal(size=(n, 3))
        u = kmeans_mod._common_direction(bytes(32), 3)
        for labels in (
            kmeans_mod._random_groups(n, 4, 3),
            kmeans_mod._slab_groups(x @ u, 4, 3),
        ):
            counts = np.bincount(labels, minlength=4)
            assert counts.sum() == n and len(counts) == 4
            assert n < 3 or counts[counts > 0].min() >= 3, (n, counts)
        slabs = kmeans_mod._slab_groups(x @ u, 4, 0)
        proj = x @ u
        for j in range(3):  # ordered along u
            if np.any(slabs == j) and np.any(slabs == j + 1):
                assert proj[slabs == j].max() <= proj[slabs == j + 1].min()


@pytest.mark.parametrize("n_parties", [2, 3])
def test_vertical_random_partition_matches_sklearn(n_parties: int) -> None:
    """As horizontally: every run equals Lloyd from the stitched aggregate starting
    centres, and a run without an emptied cluster equals scikit-learn's."""
    k = 3
    x = _blobs(301, 4, k, seed=20 + n_parties)
    cols = np.array_split(np.arange(4), n_parties)
    names = PARTIES[:n_parties]
    inputs = {p: x[:, c] for p, c in zip(names, cols, strict=True)}
    for _ in range(20):
        res = simulate(lambda net, xi: vertical_kmeans(net, xi, k=k), inputs, timeout=120).results
        sizes = np.array(res[names[0]].initial_sizes)
        assert all(r.initial_sizes == list(sizes) for r in res.values())
        assert sorted(sizes) == [100, 100, 101]  # the same balanced deal at every party
        start = np.empty((k, 4))
        centers = np.empty((k, 4))
        for c, p in zip(cols, names, strict=True):
            start[:, c] = res[p].initial_centers
            centers[:, c] = res[p].centers
            np.testing.assert_array_equal(res[p].labels, res[names[0]].labels)
        np.testing.assert_allclose((start * sizes[:, None]).sum(axis=0), x.sum(axis=0), atol=1e-8)
        want, iterations = _lloyd_keeping_empty(x, start)
        assert res[names[0]].iterations == iterations
        np.testing.assert_allclose(centers, want, rtol=0, atol=1e-6)
        if all(min(h["sizes"]) > 0 for h in res[names[0]].history):
            break
    else:
        pytest.fail("20 runs, each with an emptied cluster")
    km = _lloyd(x, start)
    np.testing.assert_array_equal(res[names[0]].labels, km.labels_)
    np.testing.assert_allclose(centers, km.cluster_centers_, rtol=0, atol=1e-6)
    assert res[names[0]].iterations == km.n_iter_


def test_vertical_deal_is_a_joint_coin_toss_a_bad_reveal_is_refused() -> None:
    """A party whose reveal does not open its commitment is named in a ProtocolError (so
    no party can choose the deal after seeing the others' draws)."""
    x = _blobs(60, 2, 2, seed=5)
    inputs = {"alice": x[:, :1], "bob": x[:, 1:]}
    net = LocalNetwork(list(inputs), timeout=30)
    bob = net.endpoint("bob")
    send = bob.send

    def cheat(to: str, step: str, value: Any) -> None:
        if step.endswith("/reveal"):
            value = bytes(32)
        send(to, step, value)

    bob.send = cheat  # type: ignore[method-assign]
    with pytest.raises(ProtocolError) as info:
        simulate(lambda n, xi: vertical_kmeans(n, xi, k=2), inputs, network=net, timeout=30)
    assert info.value.party == "bob" and info.value.step == "vkmeans/init/reveal"


# -- the attacker's runs: job-level, every message it receives -----------------------------


def _write(tmp_path: Path, name: str, x: np.ndarray, ids: np.ndarray, cols: list[str]) -> None:
    df = pd.DataFrame(x, columns=cols)
    df.insert(0, "record_id", ids)
    df.to_csv(tmp_path / f"{name}.csv", index=False)


def _contexts(tmp_path: Path, names: list[str]) -> dict[str, PartyContext]:
    return {p: PartyContext(p, {"data": {"records": f"{p}.csv"}}, base_dir=tmp_path) for p in names}


class Run:
    """One kmeans job with the observer's received messages and released aggregates."""

    def __init__(self) -> None:
        self.received: list[tuple[str, str, Any]] = []
        self.releases: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        self.results: dict[str, Any] | None = None
        self.error: PPDMError | None = None

    @property
    def steps(self) -> set[str]:
        return {step for _, step, _ in self.received}


def run_job(
    contexts: dict[str, PartyContext],
    params: dict[str, Any],
    observer: str,
    monkeypatch: pytest.MonkeyPatch,
) -> Run:
    out = Run()
    spec = get_job("kmeans")
    merged = spec.params(params)
    net = LocalNetwork(list(contexts), timeout=60)
    ep = net.endpoint(observer)
    original = ep.receive

    def spy(frm: str, step: str, **kw: Any) -> Any:
        value = original(frm, step, **kw)
        out.received.append((frm, step, value))
        return value

    ep.receive = spy  # type: ignore[method-assign]
    release = kmeans_mod._release_sums

    def record(net_: Any, step: str, sums: np.ndarray, counts: np.ndarray, *a: Any, **kw: Any):
        got = release(net_, step, sums, counts, *a, **kw)
        if net_.me == observer:  # the observer's own contribution and the pooled totals
            out.releases.append((sums.copy(), counts.copy(), got[0], got[1]))
        return got

    monkeypatch.setattr(kmeans_mod, "_release_sums", record)
    try:
        out.results = simulate(
            lambda e, ctx: spec.run(e, merged, ctx), contexts, network=net, timeout=60
        ).results
    except PPDMError as exc:
        out.error = exc
    finally:
        monkeypatch.setattr(kmeans_mod, "_release_sums", release)
    return out


def _floats(value: Any) -> Iterator[np.ndarray]:
    """Every float array in a received value or a JSON document."""
    if isinstance(value, np.ndarray):
        if value.dtype.kind == "f":
            yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _floats(v)
    elif isinstance(value, list | tuple):
        arr = np.asarray(value, dtype=object) if value else None
        if arr is not None and all(isinstance(v, float | int) for v in np.ravel(arr)):
            yield np.asarray(value, dtype=np.float64)
        else:
            for v in value:
                yield from _floats(v)


def recovered(run: Run, honest: np.ndarray, d: int) -> int:
    """Honest records the observer holds a copy of: a row of any float array it received
    or of the job document, or a released cluster aggregate minus its own part where the
    other parties hold exactly one record (count the honest records matched)."""
    candidates: list[np.ndarray] = []
    for _, _, value in run.received:
        candidates += [a.reshape(-1, d) for a in _floats(value) if a.size and a.size % d == 0]
    if run.results is not None:
        for result in run.results.values():
            candidates += [a.reshape(-1, d) for a in _floats(result) if a.size and a.size % d == 0]
    for own_sums, own_counts, g_sums, g_counts in run.releases:
        single = (g_counts - own_counts) == 1
        if np.any(single):
            candidates.append(g_sums[single] - own_sums[single])
    if not candidates:
        return 0
    rows = np.vstack(candidates)
    found = np.zeros(len(honest), dtype=bool)
    for lo in range(0, len(rows), 256):
        part = rows[lo : lo + 256]
        dist = np.abs(honest[:, None, :] - part[None, :, :]).max(axis=2)
        found |= (dist < MATCH).any(axis=1)
    return int(found.sum())


@pytest.fixture
def three_parties(tmp_path: Path) -> tuple[dict[str, PartyContext], dict[str, np.ndarray]]:
    """alice 35, bob 40 honest records; mallory (the attacker) 45 of its own choice."""
    x = _blobs(120, 2, 3, seed=11)
    data = {"alice": x[:35], "bob": x[35:75], "mallory": x[75:]}
    for i, (p, xi) in enumerate(data.items()):
        _write(tmp_path, p, xi, np.arange(len(xi)) + 1000 * i, ["u", "v"])
    return _contexts(tmp_path, PARTIES), data


def test_k_bound_refuses_before_anything_record_derived_is_sent(three_parties, monkeypatch):
    contexts, data = three_parties
    n = sum(len(v) for v in data.values())  # 120
    for observer in PARTIES:
        run = run_job(contexts, {"k": 13}, observer, monkeypatch)  # 13 * 10 > 120
        assert isinstance(run.error, ConfigError), run.error
        msg = str(run.error)
        assert "k * min_cluster_size exceeds the pooled number of records" in msg
        for count in (*(len(v) for v in data.values()), n):
            assert not re.search(rf"\b{count}\b", msg), msg
        # Only the public schema and the secure sum of (d, 1, n_i) reached this party.
        assert run.steps and all(
            s == "kmeans/schema" or s.startswith("kmeans/dim/") for s in run.steps
        ), run.steps
        assert not run.releases
    # Control: k = 12 passes the bound, and the precision exchange follows it.
    run = run_job(contexts, {"k": 12}, "mallory", monkeypatch)
    assert "kmeans/magnitude" in run.steps


def test_vertical_k_bound_refuses_before_ids_or_alignment(tmp_path, monkeypatch):
    x = _blobs(60, 3, 2, seed=4)
    ids = np.arange(60) + 7
    for p, c in zip(PARTIES, "uvw", strict=True):
        _write(tmp_path, p, x[:, "uvw".index(c) : "uvw".index(c) + 1], ids, [c])
    contexts = _contexts(tmp_path, PARTIES)
    run = run_job(contexts, {"mode": "vertical", "k": 7}, "bob", monkeypatch)
    assert isinstance(run.error, ConfigError) and "60" not in str(run.error)
    assert run.steps <= {"vkmeans/schema"}  # no id digest, no labels, no scale
    run = run_job(contexts, {"mode": "vertical", "k": 7, "align": True}, "bob", monkeypatch)
    assert isinstance(run.error, ConfigError)
    assert run.steps == set()  # refused before the private alignment
    run = run_job(contexts, {"mode": "vertical", "k": 3}, "bob", monkeypatch)
    assert run.error is None or isinstance(run.error, AggregationTooSmall), run.error
    assert "vkmeans/init/reveal" in run.steps  # the bound passed: the job went on


def test_attacker_choosing_k_recovers_no_honest_record(three_parties, monkeypatch):
    """Mallory initiates the job under the defaults with every k up to N and subtracts
    its own records from every released aggregate: 0 honest records recovered. The same
    attacker with ``init="first-k"`` (which the default policy refuses) finds them."""
    contexts, data = three_parties
    honest = np.vstack([data["alice"], data["bob"]])
    n = len(honest) + len(data["mallory"])
    runs = {}
    for k in (n, 13, 12, 6, 3, 2):
        runs[k] = run_job(contexts, {"k": k}, "mallory", monkeypatch)
        assert recovered(runs[k], honest, 2) == 0, k
    assert isinstance(runs[n].error, ConfigError) and isinstance(runs[13].error, ConfigError)
    # Not vacuous: with k = 3 the starting groups (~40 records) were released to mallory.
    assert runs[3].releases and runs[3].releases[0][3].sum() == n
    # The same measurement finds records when the starting centres are records.
    leaky = run_job(contexts, {"k": 12, "init": "first-k"}, "mallory", monkeypatch)
    assert recovered(leaky, honest, 2) == 12
    leaky = run_job(
        contexts, {"k": 12, "init": "first-k", "min_cluster_size": 0}, "mallory", monkeypatch
    )
    assert recovered(leaky, honest, 2) == 12


# -- the per-party floor ------------------------------------------------------------------


def _floor_case(outliers: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Alice holds ``outliers`` records far away; mallory holds 12 records around them
    (and bob, say, colludes by holding none there): a released centre of that cluster
    minus mallory's own records is alice's records."""
    rng = np.random.default_rng(outliers)
    near = np.round(rng.normal(0, 1, size=(30, 2)), 4)
    far = np.round(rng.normal(50, 1, size=(outliers, 2)), 4)
    data = {
        "alice": np.vstack([near[:15], far]),
        "bob": near[15:],
        "mallory": np.vstack([np.round(rng.normal(0, 1, (20, 2)), 4), np.full((12, 2), 50.0)]),
    }
    return data, far


def _floor_run(
    data: dict[str, np.ndarray], min_party_records: int
) -> tuple[Run, KMeansResult | None]:
    init = np.array([[0.0, 0.0], [50.0, 50.0]])
    out = Run()
    mallory: dict[str, KMeansResult] = {}

    def fn(net: Any, xi: np.ndarray) -> KMeansResult:
        return horizontal_kmeans(
            net, xi, k=2, init=init, min_cluster_size=10, min_party_records=min_party_records
        )

    release = kmeans_mod._release_sums

    def record(net_: Any, step: str, sums: np.ndarray, counts: np.ndarray, *a: Any, **kw: Any):
        got = release(net_, step, sums, counts, *a, **kw)
        if net_.me == "mallory":
            out.releases.append((sums.copy(), counts.copy(), got[0], got[1]))
        return got

    kmeans_mod._release_sums = record  # type: ignore[assignment]
    try:
        mallory = simulate(fn, data, timeout=60).results
    except PPDMError as exc:
        out.error = exc
    finally:
        kmeans_mod._release_sums = release  # type: ignore[assignment]
    return out, mallory.get("mallory")


def test_per_party_floor_stops_a_coalition_singling_out_a_record() -> None:
    data, far = _floor_case(1)
    # Without the floor, mallory subtracts its 12 records from the released cluster.
    run, _ = _floor_run(data, 0)
    assert run.error is None
    assert recovered(run, far, 2) == 1
    # With the floor, every party stops before the cluster's sums are added.
    run, result = _floor_run(data, 3)
    assert isinstance(run.error, AggregationTooSmall) and result is None
    msg = str(run.error)
    assert "min_party_records" in msg
    assert not re.search(r"\d", re.sub(r"iteration \d+", "", msg)), msg  # no count in it
    assert recovered(run, far, 2) == 0


@pytest.mark.parametrize(("outliers", "refused"), [(2, True), (3, False)])
def test_per_party_floor_threshold(outliers: int, refused: bool) -> None:
    data, far = _floor_case(outliers)
    run, result = _floor_run(data, 3)
    assert isinstance(run.error, AggregationTooSmall) if refused else run.error is None
    assert recovered(run, far, 2) == 0
    if not refused:
        assert result is not None and sorted(result.history[-1]["sizes"]) == [15, 50]


def test_per_party_floor_on_the_starting_groups() -> None:
    """A party with fewer records than the floor cannot fill any random group."""
    x = _blobs(80, 2, 2, seed=8)
    x[1] = x[0]  # alice's two records coincide: they share every cell
    parts = {"alice": x[:2], "bob": x[2:40], "mallory": x[40:]}
    with pytest.raises(AggregationTooSmall, match="starting groups: a party holds fewer"):
        simulate(
            lambda n, xi: horizontal_kmeans(n, xi, k=2, min_cluster_size=10, min_party_records=3),
            parts,
            timeout=30,
        )
    ok = simulate(
        lambda n, xi: horizontal_kmeans(n, xi, k=2, min_cluster_size=0, min_party_records=2),
        parts,
        timeout=30,
    )
    assert sum(ok.results["bob"].initial_sizes) == 80


def test_vertical_per_party_floor() -> None:
    """Vertically a party's share of a cluster is the cluster: the floor bounds its size."""
    rng = np.random.default_rng(2)
    x = np.vstack([rng.normal(0, 1, (40, 2)), rng.normal(30, 1, (2, 2))])
    inputs = {"alice": x[:, :1], "bob": x[:, 1:]}
    init = {"alice": np.array([[0.0], [30.0]]), "bob": np.array([[0.0], [30.0]])}

    def fn(min_party_records: int) -> Callable[[Any, np.ndarray], KMeansResult]:
        return lambda n, xi: vertical_kmeans(
            n, xi, k=2, init=init[n.me], min_party_records=min_party_records
        )

    with pytest.raises(AggregationTooSmall, match="iteration 1: a party holds fewer"):
        simulate(fn(3), inputs, timeout=60)
    ok = simulate(fn(2), inputs, timeout=60)
    assert sorted(ok.results["alice"].history[-1]["sizes"]) == [2, 40]
