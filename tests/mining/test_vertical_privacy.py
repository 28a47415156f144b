"""What a crafted co-party learns from vertical association rules (issue 21, items 3-4).

The attacker ``mallory`` holds items it chose freely; the honest ``alice`` holds random
item columns (bits ``v_j[i]``, probability 1/2 each). Attacks, played from mallory's node
(everything its party code receives: the opened counts, recorded where they are opened,
and its result):

- *indicator columns*: one item per row (``1000 + i`` in row ``i`` only), so the
  2-item candidate ``{j, 1000 + i}`` counts ``v_j[i]``;
- *differencing*: items over ``R + {i}`` and over ``R`` (``|R| = min_aggregate``), so
  the difference of the two counts with ``j`` is ``v_j[i]``, and no item is rarer than
  the minimum aggregate;
- *prefix crossings* (``protect="exact"``): items over the first ``k`` rows for every
  ``k``; the smallest frequent prefix places alice's ``T``-th one, and differences of the
  (exact) frequent counts after it give every later bit.

``protect="dp"`` at the job's defaults (epsilon 1 over 256 counts): mallory's per-bit
decoding accuracy must stay below ``e^eps' / (1 + e^eps') + margin`` (``eps'`` the
per-count epsilon; the bound of any test between ``v = 0`` and ``v = 1`` from one
``eps'``-DP observation, attained by the threshold decoder used here). Mallory is given
its own noise for free (its sampler returns 0), as an attacker who subtracts it. The
same check run with alice's noise removed too must fail (accuracy 1), so the test can
fail. ``protect="exact"``: no count below the threshold is ever opened to mallory; the
indicator attack is stopped by ``min_aggregate`` (and recovers every bit without it);
what remains is measured: differencing of frequent counts and prefix crossings recover
the bits past the crossing exactly. ``exact`` is for trusted partners only.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import ppdm.mining.vertical_rules as vr
import ppdm.protocols.dot_product_ot as dpo
import ppdm.protocols.gmw as gmw
from ppdm.jobs.document import simulate_job
from ppdm.jobs.registry import PartyContext
from ppdm.mining.readers import from_transactions
from ppdm.parties.local import simulate

ATTACKER = "mallory"
HONEST = "alice"
CONSTANT = 50  # an honest item in every row (no empty lines in the job's FIMI files)


class View:
    """What mallory's party code saw: every shared group's candidates and, in the same
    order, the values opened to it (noisy counts, or exact counts of frequent ones)."""

    def __init__(self) -> None:
        self.groups: list[list[tuple]] = []
        self.noisy: list[np.ndarray] = []
        self.opened: list[np.ndarray] = []
        self.own_noise_calls = 0  # mallory's sampler calls (its noise set to 0)

    def noisy_counts(self) -> dict[frozenset, int]:
        assert len(self.groups) == len(self.noisy)
        out: dict[frozenset, int] = {}
        for cands, values in zip(self.groups, self.noisy, strict=True):
            out.update({frozenset(c): int(v) for c, v in zip(cands, values, strict=True)})
        return out


@pytest.fixture
def view(monkeypatch: pytest.MonkeyPatch) -> Iterator[View]:
    """Record mallory's view; its own noise is zero (it knows it anyway)."""
    seen = View()
    count_group, open_noisy, open_shares = vr._count_group, gmw.open_noisy, dpo.open_shares
    sampler = gmw.two_sided_geometric

    def mine(net: Any) -> bool:
        return bool(net.me == ATTACKER)

    def rec_group(net: Any, root: Any, db: Any, owners: tuple, cands: list, *a: Any) -> Any:
        if mine(net) and len(owners) > 1 and ATTACKER in owners:
            seen.groups.append(list(cands))
        return count_group(net, root, db, owners, cands, *a)

    def rec_noisy(net: Any, share: Any, **kw: Any) -> Any:
        out = open_noisy(net, share, **kw)
        if mine(net):
            seen.noisy.append(np.asarray(out))
        return out

    def rec_open(net: Any, share: Any, **kw: Any) -> Any:
        out = open_shares(net, share, **kw)
        if mine(net):
            seen.opened.append(np.asarray(out))
        return out

    def own_noise_known(scale: Any, size: int) -> np.ndarray:
        if threading.current_thread().name == f"ppdm-{ATTACKER}":
            seen.own_noise_calls += 1
            return np.zeros(size, dtype=np.int64)
        return sampler(scale, size)

    monkeypatch.setattr(vr, "_count_group", rec_group)
    monkeypatch.setattr(gmw, "open_noisy", rec_noisy)
    monkeypatch.setattr(dpo, "open_shares", rec_open)
    monkeypatch.setattr(gmw, "two_sided_geometric", own_noise_known)
    yield seen


def remove_all_noise(monkeypatch: pytest.MonkeyPatch) -> None:
    """The control: alice adds no noise either."""
    monkeypatch.setattr(
        gmw, "two_sided_geometric", lambda scale, size: np.zeros(size, dtype=np.int64)
    )


def honest_columns(n: int, items: int, seed: int, p: float = 0.5) -> np.ndarray:
    return np.random.default_rng(seed).random((items, n)) < p


def run_library(honest: np.ndarray, attacker_rows: list[list[int]], **kw: Any) -> dict[str, Any]:
    """Both parties run :func:`vertical_association_rules` on their own columns."""
    n = honest.shape[1]
    alice = [[j for j in range(len(honest)) if honest[j, i]] for i in range(n)]
    inputs = {HONEST: from_transactions(alice), ATTACKER: from_transactions(attacker_rows)}
    return simulate(
        lambda net, db: vr.vertical_association_rules(net, db, min_confidence=0.5, **kw),
        inputs,
        timeout=120,
    ).results


def skewed_columns() -> np.ndarray:
    """4 items over 40 rows: few ones in rows 0-19 (``R``), many in rows 20-39, so each
    item is frequent (threshold 16) while its count within ``R`` is not."""
    low = honest_columns(20, 4, seed=300, p=0.25)
    high = honest_columns(20, 4, seed=301, p=0.9)
    cols = np.hstack([low, high])
    assert (cols.sum(axis=1) >= 16).all() and (low.sum(axis=1) + 1 < 16).all()
    return cols


def indicator_rows(n: int) -> list[list[int]]:
    return [[1000 + i] for i in range(n)]


def differencing_rows(n: int, base: int) -> list[list[int]]:
    """Item 2000 over ``R`` (rows ``0 .. base - 1``), item ``1000 + i`` over ``R + {i}``."""
    return [[2000, *range(1000 + base, 1000 + n)] if i < base else [1000 + i] for i in range(n)]


def decode(counts: dict[frozenset, int], honest: np.ndarray, pairs: Callable) -> tuple[int, int]:
    """(correct, total) of mallory's threshold decoder over every bit it has a count for:
    ``v_j[i] = [signal >= 1]`` with ``signal`` from ``pairs(counts, j, i)`` (``None``:
    no count for that bit, not decoded)."""
    correct = total = 0
    for j in range(len(honest)):
        for i in range(honest.shape[1]):
            signal = pairs(counts, j, i)
            if signal is None:
                continue
            total += 1
            correct += int((signal >= 1) == bool(honest[j, i]))
    return correct, total


def indicator_signal(counts: dict[frozenset, int], j: int, i: int) -> int | None:
    return counts.get(frozenset((j, 1000 + i)))


def differencing_signal(counts: dict[frozenset, int], j: int, i: int) -> int | None:
    a, b = counts.get(frozenset((j, 1000 + i))), counts.get(frozenset((j, 2000)))
    return None if a is None or b is None else a - b


def dp_bound(eps_per_count: float, bits: int) -> float:
    """``e^eps' / (1 + e^eps')`` plus 4 binomial standard deviations for ``bits``
    decoded bits (each decoded correctly with that probability at most, independently
    given the columns: the noise of each count is independent), a false alarm below
    ``4e-5``."""
    p = math.exp(eps_per_count) / (1 + math.exp(eps_per_count))
    return p + 4 * math.sqrt(p * (1 - p) / bits)


# -- protect="dp" ---------------------------------------------------------------------------


def dp_indicator_accuracy(view: View, runs: int) -> tuple[float, int, float]:
    """The indicator attack at the default budget: 4 honest items x 64 rows = 256 shared
    counts (every indicator item frequent: min_support 1/n, no minimum aggregate)."""
    correct = total = 0
    eps = 0.0
    for r in range(runs):
        honest = honest_columns(64, 4, seed=100 + r)
        view.groups.clear()
        view.noisy.clear()
        res = run_library(honest, indicator_rows(64), min_support=1 / 64, protect="dp", max_len=2)
        prot = res[ATTACKER].protection
        assert prot["noisy_counts"] == 256 and prot["budget_exhausted"] is False
        eps = prot["epsilon_per_count"]
        c, t = decode(view.noisy_counts(), honest, indicator_signal)
        assert t == 256  # a noisy count for every bit
        correct, total = correct + c, total + t
    return correct / total, total, eps


def test_dp_indicator_attack_decodes_no_better_than_the_dp_bound(view: View) -> None:
    acc, bits, eps = dp_indicator_accuracy(view, runs=4)
    assert eps == 1.0 / 256 and view.own_noise_calls == 4  # mallory's noise was removed
    assert acc <= dp_bound(eps, bits), acc


def test_dp_check_fails_without_noise(view: View, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same attack and check with the noise removed: the check fails (accuracy 1)."""
    remove_all_noise(monkeypatch)
    acc, bits, eps = dp_indicator_accuracy(view, runs=1)
    assert acc == 1.0
    with pytest.raises(AssertionError):
        assert acc <= dp_bound(eps, bits), acc


def write_fimi(path: Any, rows: list[list[int]]) -> str:
    path.write_text("".join(" ".join(map(str, r)) + "\n" for r in rows))
    return str(path)


def dp_job_differencing(tmp_path: Any, view: View, runs: int) -> tuple[float, int, float]:
    """The differencing attack on the ``assoc`` job with its default parameters
    (protect=dp, epsilon 1, 256 counts, min_aggregate 10), the data in the parties'
    files: alice 3 random items and one in every row; mallory 64 items over ``R`` and
    ``R + {i}``, ``|R| = 10`` (4 x 64 = 256 shared counts at level 2)."""
    correct = total = 0
    eps = 0.0
    n, base = 73, 10
    for r in range(runs):
        honest = np.vstack([honest_columns(n, 3, seed=200 + r), np.ones((1, n), dtype=bool)])
        items = [*range(3), CONSTANT]
        alice = [[items[j] for j in range(4) if honest[j, i]] for i in range(n)]
        files = {
            HONEST: write_fimi(tmp_path / f"a{r}.dat", alice),
            ATTACKER: write_fimi(tmp_path / f"m{r}.dat", differencing_rows(n, base)),
        }
        ctx = {p: PartyContext(p, {"data": {"transactions": f}}) for p, f in files.items()}
        view.groups.clear()
        view.noisy.clear()
        doc = simulate_job("assoc", ctx, {"mode": "vertical", "min_support": 0.01}, timeout=120)
        assert doc["ok"], doc.get("error")
        prot = doc["parties"][ATTACKER]["result"]["protection"]
        assert prot["protect"] == "dp" and prot["threshold_count"] == 10
        assert prot["noisy_counts"] == 256 and prot["refused_level"] == 3
        eps = prot["epsilon_per_count"]
        counts = view.noisy_counts()
        honest3 = honest[:3, base:]  # the target rows, alice's random items

        def signal(c: dict[frozenset, int], j: int, i: int) -> int | None:
            return differencing_signal(c, j, i + base)

        c, t = decode(counts, honest3, signal)
        assert t == 3 * (n - base)
        correct, total = correct + c, total + t
    return correct / total, total, eps


def test_dp_job_differencing_attack_decodes_no_better_than_the_dp_bound(
    tmp_path: Any, view: View
) -> None:
    acc, bits, eps = dp_job_differencing(tmp_path, view, runs=5)
    assert eps == 1.0 / 256 and view.own_noise_calls == 5
    assert acc <= dp_bound(eps, bits), acc


def test_dp_job_check_fails_without_noise(
    tmp_path: Any, view: View, monkeypatch: pytest.MonkeyPatch
) -> None:
    remove_all_noise(monkeypatch)
    acc, bits, eps = dp_job_differencing(tmp_path, view, runs=1)
    assert acc == 1.0
    with pytest.raises(AssertionError):
        assert acc <= dp_bound(eps, bits), acc


# -- protect="exact" ------------------------------------------------------------------------


def test_exact_never_opens_a_count_below_the_threshold(view: View) -> None:
    """Differencing with ``R`` frequent (20 rows, threshold 16) but alice's ones in it
    too few: every count mallory could difference is below the threshold, so none is
    opened; it learns only that they are infrequent. Every value opened to it (none
    here) reaches the threshold."""
    honest = skewed_columns()
    res = run_library(
        honest, differencing_rows(40, 20), min_support=0.4, protect="exact", max_len=2
    )
    t = res[ATTACKER].protection["threshold_count"]
    assert t == 16 and sum(len(g) for g in view.groups) == 4 * 21  # all compared
    assert res[ATTACKER].protection["compared_counts"] == 4 * 21
    opened = np.concatenate(view.opened) if view.opened else np.zeros(0)
    assert (opened >= t).all()
    counts = {k: v for k, v in res[ATTACKER].itemsets.items() if len(k) == 2}
    _, decoded = decode(counts, honest, differencing_signal)
    assert decoded == 0  # no pair of counts to difference


def test_exact_check_fails_if_every_count_were_opened(
    view: View, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control: with the rule dropped (every shared count opened, as before issue
    21), the same check sees counts below the threshold and mallory decodes every bit."""

    def open_all(
        net: Any, root: Any, share: Any, widths: Any, owners: Any, bounds: Any, *rest: Any
    ) -> tuple[np.ndarray, np.ndarray]:
        others = [p for p in owners if p != net.me]
        counts = dpo.open_shares(net, share, widths=widths, bounds=bounds, to=others)
        return np.ones(len(share), dtype=bool), counts

    monkeypatch.setattr(vr, "_open_protected", open_all)
    honest = skewed_columns()
    res = run_library(
        honest, differencing_rows(40, 20), min_support=0.4, protect="exact", max_len=2
    )
    opened = np.concatenate(view.opened)
    assert not (opened >= res[ATTACKER].protection["threshold_count"]).all()
    # the "frequent" result now carries every pair's exact count
    counts = {k: v for k, v in res[ATTACKER].itemsets.items() if len(k) == 2}
    correct, decoded = decode(
        counts, honest[:, 20:], lambda c, j, i: differencing_signal(c, j, i + 20)
    )
    assert decoded == 4 * 20 and correct == decoded


def test_exact_indicator_attack_needs_no_minimum_aggregate(view: View) -> None:
    """With ``min_aggregate`` 10 the one-row items are infrequent and never paired with
    alice's: nothing about her rows is computed. Without it (and min_support 1/n), the
    frequent flags alone give every bit back: that rule is what stops the attack."""
    honest = honest_columns(48, 3, seed=301)
    res = run_library(
        honest, indicator_rows(48), min_support=1 / 48, protect="exact", min_aggregate=10
    )
    assert not view.groups and not view.opened
    assert all(lv["shared_candidates"] == 0 for lv in res[ATTACKER].levels)
    res = run_library(honest, indicator_rows(48), min_support=1 / 48, protect="exact", max_len=2)
    frequent = set(res[ATTACKER].itemsets)

    def flag(_: Any, j: int, i: int) -> int:
        return int(frozenset((j, 1000 + i)) in frequent)

    correct, total = decode({}, honest, flag)
    assert total == 3 * 48 and correct == total


def test_exact_leaves_differencing_and_crossings_measured(view: View) -> None:
    """What ``exact`` leaves (why it is for trusted partners only), measured: prefix
    items ``P_k`` (rows ``0 .. k - 1``). Mallory sees ``S_j(k)`` (alice's ones among the
    first ``k`` rows) exactly for every frequent ``{j, P_k}`` (``S_j(k) >= T``) and
    nothing else. It recovers exactly the bits of rows ``k*_j - 1 ..`` (``k*_j`` the
    first crossing: its bit is 1) and none before; measured against that prediction."""
    n, items = 60, 3
    honest = honest_columns(n, items, seed=302)
    t = 12
    prefixes = [[3000 + k for k in range(max(i + 1, t), n + 1)] for i in range(n)]
    res = run_library(honest, prefixes, min_support=t / n, protect="exact", max_len=2)
    counts = res[ATTACKER].itemsets
    recovered = predicted = 0
    for j in range(items):
        s = {k: counts.get(frozenset((j, 3000 + k))) for k in range(t, n + 1)}
        opened = {k: v for k, v in s.items() if v is not None}
        assert all(v >= t for v in opened.values())
        cross = min(opened)  # the smallest frequent prefix
        assert honest[j, cross - 1] and honest[j, :cross].sum() == t
        bits = {cross - 1: 1}
        for k in range(cross + 1, n + 1):
            bits[k - 1] = opened[k] - opened[k - 1]
        recovered += sum(int(bits[i] == honest[j, i]) for i in bits)
        predicted += n - cross + 1
    assert recovered == predicted
    # the leak, measured: the fraction of alice's bits mallory knows exactly
    fraction = recovered / (items * n)
    assert 0.5 < fraction < 1.0


def test_job_defaults_protect_and_bad_values_are_refused() -> None:
    """The ``assoc`` job defaults to ``dp`` with epsilon 1 over 256 counts and a minimum
    aggregate of 10; invalid values are refused before anything runs."""
    from ppdm.errors import ConfigError
    from ppdm.jobs.mining import check_params

    opts = check_params("assoc", {"mode": "vertical"})
    assert (opts["protect"], opts["epsilon"], opts["max_shared_candidates"]) == ("dp", 1.0, 256)
    assert opts["min_aggregate"] == 10
    for bad in (
        {"protect": "none"},
        {"epsilon": 0},
        {"epsilon": float("inf")},
        {"epsilon": "1"},
        {"max_shared_candidates": 0},
    ):
        with pytest.raises(ConfigError):
            check_params("assoc", {"mode": "vertical", **bad})
