"""Horizontal association rules from the attacker's side: a member that crafts its own
baskets must not turn "is X frequent" into "does another member hold a basket with X".

The attack (issue 21): the release bar of an itemset is a pooled count ``T`` (with a
minimum aggregation ``m``: ``max(T, m)``). Mallory, a member with free choice of its own
data and of every job parameter, holds exactly ``bar - 1`` baskets with each of many
probe items; a probe then reaches the bar iff alice or bob holds at least one basket with
it. The secrets are planted where the job reads them (each party's transaction file);
the job runs as ``ppdm simulate assoc`` runs it (:func:`ppdm.jobs.document.simulate_job`).

What mallory's node learns is recorded at the miner's calls: the union of every level,
the output of every secure threshold test and every secure sum it takes part in (the
protocols reveal nothing else: ring messages are masked, comparison shares uniform), and
the released result. Every decoder mallory could read off that view is scored against
the secrets:

- with the job's default ``min_aggregate`` (10) the best decoder must do no better than
  chance plus a margin (below);
- the same attack must succeed (accuracy ~1) with ``min_aggregate=0``, and with the
  release rule weakened to reveal its single tests -- so the test fails if the rule is
  dropped or leaks.

Margin: 48 probes, exactly half of them held (24 by alice or bob, 12 each); a decoder
whose view does not depend on the secrets scores ``Bin(48, 1/2) / 48`` (sd 0.072). The
best of at most ``D`` such decoders reaches 0.7 (34 of 48) with probability at most
``D * 0.0028``; ``D`` is below 10 here. Data and secrets come from fixed seeds, so the
outcome is deterministic; the margin says that passing is not luck.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ppdm.mining.horizontal_rules as hr
from ppdm.jobs.document import simulate_job
from ppdm.jobs.registry import PartyContext
from ppdm.mining.assoc_common import decode_itemset
from ppdm.mining.itemsets import min_count

PARTIES = ["alice", "mallory", "bob"]  # mallory in the middle: it sees tests' results only
BACKGROUND = list(range(1, 13))
PROBES = list(range(100, 148))
CHANCE = 0.5
MARGIN = 0.2  # module docstring
T0 = 4  # the pooled support threshold mallory aims the job's min_support at


def _secrets(seed: int) -> dict[int, str | None]:
    """Each probe held by nobody (half), alice or bob (a quarter each), seeded."""
    owners: list[str | None] = [None] * 24 + ["alice"] * 12 + ["bob"] * 12
    order = np.random.default_rng(seed).permutation(len(PROBES))
    return {PROBES[i]: owners[j] for j, i in enumerate(order)}


def _background(seed: int, n: int) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return [
        sorted(set(rng.choice(BACKGROUND, size=int(rng.integers(1, 3))).tolist())) for _ in range(n)
    ]


def _write(path: Path, baskets: list[list[int]]) -> None:
    path.write_text("".join(" ".join(map(str, b)) + "\n" for b in baskets))


def _plant(tmp_path: Path, secrets: dict[int, str | None], min_aggregate: int) -> float:
    """Write the three transaction files; return the min_support mallory asks for.

    alice and bob: 300 background baskets each, one of them with each probe they hold
    (the secret). mallory: ``bar - 1`` baskets ``{probe}`` per probe, where ``bar`` is
    ``max(T, min_aggregate)`` and ``T = T0`` by its choice of min_support (it knows the
    others' sizes: the pooled size is published by every run)."""
    rng = np.random.default_rng(7)
    data = {p: _background(s, 300) for p, s in (("alice", 1), ("bob", 2))}
    for probe, owner in secrets.items():
        if owner is not None:
            basket = data[owner][int(rng.integers(0, 300))]
            basket.append(probe)
            basket.sort()
    bar = max(T0, min_aggregate)
    data["mallory"] = [[probe] for probe in PROBES for _ in range(bar - 1)]
    n = sum(len(v) for v in data.values())
    support = (T0 - 0.5) / n
    assert min_count(support, n) == T0
    for party, baskets in data.items():
        _write(tmp_path / f"{party}.dat", baskets)
    return support


class MalloryView:
    """What mallory's node learns, recorded at the miner's calls (module docstring)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def wrap(self, monkeypatch: pytest.MonkeyPatch) -> None:
        def recorder(kind: str, fn: Any) -> Any:
            def wrapped(net: Any, *args: Any, **kw: Any) -> Any:
                out = fn(net, *args, **kw)
                if net.me == "mallory":
                    self.events.append((kind, out))
                return out

            return wrapped

        for name in ("secure_all_nonnegative", "secure_sum_nonnegative", "secure_sum"):
            monkeypatch.setattr(hr, name, recorder("output", getattr(hr, name)))
        monkeypatch.setattr(hr, "secure_set_union", recorder("union", hr.secure_set_union))

    def decoders(self, released: set[frozenset], bar: int) -> dict[str, dict[int, bool]]:
        """Every guess "someone else holds probe p" that mallory can read off its view:
        the released result, and each column of each output that follows the level-1
        union (a bit, or a count compared with mallory's own ``bar - 1``)."""
        out = {"released": {p: frozenset([p]) in released for p in PROBES}}
        union: list[tuple] | None = None
        for i, (kind, value) in enumerate(self.events):
            if kind == "union":
                if union is not None:
                    break  # level 2 and later hold no probe
                union = [
                    decode_itemset(b, label_bytes=4, kind=int) for b in value
                ]  # the job's width for int labels
                continue
            if union is None:
                continue
            arr = np.asarray(value).reshape(-1)
            if not len(union) or len(arr) % len(union):
                continue
            table = arr.reshape(len(union), -1)
            row = {u: j for j, u in enumerate(union)}
            for col in range(table.shape[1]):
                guess = {}
                for p in PROBES:
                    cell = table[row[(p,)], col] if (p,) in row else 0
                    guess[p] = bool(cell) if table.dtype == bool else int(cell) >= bar
                out[f"output{i}/col{col}"] = guess
        return out


def _attack(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, params: dict[str, Any], min_aggregate: int
) -> tuple[float, dict[str, float]]:
    secrets = _secrets(11)
    support = _plant(tmp_path, secrets, min_aggregate)
    view = MalloryView()
    view.wrap(monkeypatch)
    contexts = {
        p: PartyContext(p, {"data": {"transactions": f"{p}.dat"}}, base_dir=tmp_path)
        for p in PARTIES
    }
    doc = simulate_job(
        "assoc",
        contexts,
        {"mode": "horizontal", "min_support": support, "min_confidence": 0.5, **params},
        timeout=300,
    )
    result = doc["parties"]["mallory"]["result"]
    released = {frozenset(e["items"]) for e in result["frequent_itemsets"]}
    truth = {p: owner is not None for p, owner in secrets.items()}
    assert sum(truth.values()) == len(PROBES) // 2
    scores = {
        name: float(np.mean([guess[p] == truth[p] for p in PROBES]))
        for name, guess in view.decoders(released, max(T0, min_aggregate)).items()
    }
    assert len(scores) < 10  # the margin's union bound
    # The background is found in every run: the job is doing real work.
    assert {frozenset([x]) for x in BACKGROUND} <= released
    return max(scores.values()), scores


@pytest.mark.parametrize("reveal_counts", [False, True])
def test_default_min_aggregate_defeats_crafted_probes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reveal_counts: bool
) -> None:
    """With the job's default min_aggregate (10), no decoder beats chance + margin,
    whether or not mallory also asks for the counts to be published."""
    best, scores = _attack(tmp_path, monkeypatch, {"reveal_counts": reveal_counts}, 10)
    assert best <= CHANCE + MARGIN, scores


@pytest.mark.parametrize("reveal_counts", [False, True])
def test_crafted_probes_decode_without_min_aggregate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reveal_counts: bool
) -> None:
    """The same attack with ``min_aggregate=0`` (plain KC) reads every secret."""
    best, scores = _attack(
        tmp_path, monkeypatch, {"min_aggregate": 0, "reveal_counts": reveal_counts}, 0
    )
    assert best >= 0.95, scores
    assert scores["released"] == 1.0


def test_crafted_probes_decode_if_the_release_tests_are_revealed_one_by_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The release rule must reveal only its conjunction: deciding the same tests with
    one opened bit each (here: pooled support first, as a two-stage "(a) then (b)" would)
    hands mallory the membership bit again, although the released result is unchanged."""

    def leaky(net: Any, table: np.ndarray, *, session: Any = None, **kw: Any) -> np.ndarray:
        bits = hr.secure_sum_nonnegative(net, np.ascontiguousarray(table).reshape(-1), **kw)
        return bits.reshape(table.shape).all(axis=1)

    monkeypatch.setattr(hr, "secure_all_nonnegative", leaky)
    best, scores = _attack(tmp_path, monkeypatch, {}, 10)
    assert best >= 0.95, scores
    assert scores["released"] == CHANCE  # the result alone says nothing


def test_job_defaults_and_parameter_checks(tmp_path: Path) -> None:
    """The job's default is the protecting one; bad values are refused before any run."""
    from ppdm.errors import ConfigError
    from ppdm.jobs.mining import check_params

    opts = check_params("assoc", {})
    assert opts["min_aggregate"] == 10 and opts["colluders"] == 1
    for bad in ({"min_aggregate": -1}, {"min_aggregate": "ten"}, {"colluders": 0}):
        with pytest.raises(ConfigError, match=next(iter(bad))):
            check_params("assoc", bad)
    _plant(tmp_path, _secrets(11), 10)
    contexts = {
        p: PartyContext(p, {"data": {"transactions": f"{p}.dat"}}, base_dir=tmp_path)
        for p in PARTIES
    }
    with pytest.raises(ConfigError, match="more parties than colluders"):
        simulate_job("assoc", contexts, {"min_support": 0.01, "colluders": 3}, timeout=60)


def test_union_sizes_hide_each_partys_count_of_locally_large_itemsets():
    """The itemset union of every level shows alice how many encrypted rows each other
    party's set holds. With fake itemsets (a fresh random count per run) that size says
    less than the party's exact number of locally large itemsets: over runs on the same
    data it changes. Without fakes it is that exact number in every run, and alice reads
    each party's count off the sizes."""
    from ppdm.mining.readers import from_transactions
    from ppdm.parties.local import LocalNetwork, simulate

    gen = np.random.default_rng(5)
    dbs = {
        p: from_transactions([sorted(set(gen.integers(1, 12, 4).tolist())) for _ in range(60)])
        for p in ("alice", "bob", "carol")
    }
    views = []
    for _ in range(6):
        net = LocalNetwork(list(dbs), job_id="union-sizes", timeout=60)
        ep = net.endpoint("alice")
        sizes: list[int] = []
        receive = ep.receive

        def spy(frm, step, _receive=receive, _sizes=sizes, **kw):
            value = _receive(frm, step, **kw)
            if step.endswith("set-union/encrypt"):
                _sizes.append(len(value))
            return value

        ep.receive = spy  # type: ignore[method-assign]
        simulate(
            lambda net, db: hr.horizontal_association_rules(
                net, db, min_support=0.2, min_confidence=0.5
            ),
            dbs,
            network=net,
            timeout=60,
        )
        views.append(tuple(sizes))
    assert views[0], "alice saw no union message: the test measures nothing"
    # Six runs of a uniform fake count over several unions: all six views equal has
    # probability far below 1e-6 with fakes, and probability 1 without.
    assert len(set(views)) > 1, f"the union sizes are the same in every run: {views[0]}"
