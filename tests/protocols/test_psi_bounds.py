"""The alignment's bounds, from the attacker's side (issue 21, PSI).

A party that chooses its own ids (and may win the coin toss) must not turn the alignment
into a membership oracle for another party's id list:

- a crafted superset of all possible ids (50x the others' sets) is refused before any
  PSI message (no OPRF traffic leaves an honest party);
- at the default ratio bound, the leader's recovery of honest ids outside the
  intersection is measured against chance, and the same measurement recovers every id
  once the ratio check is disabled;
- a party that announces a smaller set than it uses is caught by the two-party PSI;
- the coin toss makes the leader uniform even when one party fixes its coin, and a
  reveal that does not match its commitment is a ProtocolError naming the party;
- an intersection below the minimum reaches no party.
"""

from __future__ import annotations

import math
import re
import secrets
from collections import Counter
from functools import partial

import numpy as np
import pytest

from ppdm.errors import AggregationTooSmall, PartyFailure, ProtocolError
from ppdm.parties.local import run_local, simulate
from ppdm.protocols import psi as psi_module
from ppdm.protocols.psi import IdSet, align, opening

pytestmark = pytest.mark.timeout(300)

#: Chi-square critical value, 2 degrees of freedom, p = 1e-4: the survival function of
#: chi2(2) is exp(-x / 2), so a uniform leader fails the test with probability 1e-4.
CHI2_2DF_P1E4 = -2 * math.log(1e-4)


def _force_leader(monkeypatch, index: int) -> None:
    """The party at ``index`` of the group leads (it won the toss; probability 1/n)."""
    monkeypatch.setattr(opening, "leader_index", lambda coins, n: index)


def _watch(net, log: list) -> None:
    """Log ``(sender, receiver, step, value)`` of every message ``net`` sends."""
    send = net.send

    def logged(to, step, value):
        log.append((net.me, to, step, value))
        send(to, step, value)

    net.send = logged


def _tamper(net, suffix: str, fn) -> None:
    send = net.send

    def tampered(to, step, value):
        send(to, step, fn(value) if step.endswith(suffix) else value)

    net.send = tampered


class _LeaderView:
    """Records what a leader learns from each two-party PSI it runs as receiver: the
    ids of its (padded) running set that the sender holds."""

    def __init__(self, monkeypatch):
        self.found: dict[str, set] = {}
        original = psi_module._receive
        view = self

        def receive(net, peer, blocks, method, peer_size):
            mask = original(net, peer, blocks, method, peer_size)
            view.found.setdefault(peer, set()).update(bytes(b) for b in blocks[mask])
            return mask

        monkeypatch.setattr(psi_module, "_receive", receive)

    def ids(self, peer: str, candidates) -> set:
        blocks = IdSet.of(list(candidates)).blocks()
        return {c for c, b in zip(candidates, blocks, strict=True) if bytes(b) in self.found[peer]}


# Sets of the attack scenarios --------------------------------------------------------
# A dense id space (patient numbers 0..5999): alice and bob each hold 120 ids, 60 of them
# common to all three parties (mallory's legitimate records), 60 their own.
UNIVERSE = 6000
rng = np.random.default_rng(21)
_perm = rng.permutation(UNIVERSE).tolist()
COMMON = sorted(_perm[:60])
ALICE = COMMON + _perm[60:120]
BOB = COMMON + _perm[120:180]
ALICE_OWN = set(ALICE) - set(COMMON)


def _attack(attacker_ids, *, method: str = "oprf", log: list | None = None, **bounds):
    """Run the 3-party alignment with mallory (third in the group) holding
    ``attacker_ids``; returns the simulation's results or raises its error."""
    sets = {"alice": ALICE, "bob": BOB, "mallory": attacker_ids}

    def party(net, ids):
        if log is not None:
            _watch(net, log)
        return align(net, ids, method=method, **bounds)

    return simulate(party, sets, timeout=60).results


# (a) a crafted superset is refused before any PSI message ------------------------------


@pytest.mark.parametrize("method", ["oprf", "ec"])
@pytest.mark.parametrize("mallory_leads", [True, False])
def test_superset_is_refused_before_any_psi_message(monkeypatch, method, mallory_leads):
    _force_leader(monkeypatch, 2 if mallory_leads else 0)
    view = _LeaderView(monkeypatch)
    log: list = []
    superset = list(range(UNIVERSE))  # 50x the honest parties' 120 ids
    with pytest.raises(ProtocolError) as info:
        _attack(superset, method=method, log=log)
    err = info.value
    assert err.party == "mallory" and err.step == opening.STEP_ANNOUNCE
    assert not re.search(r"\b\d+\b", err.reason)  # no set size in the reason
    honest_steps = {step for sender, _to, step, _v in log if sender != "mallory"}
    assert honest_steps == {opening.STEP_ANNOUNCE}  # no reveal, no OPRF/EC, no result
    to_mallory = [v for _s, to, step, v in log if to == "mallory"]
    assert all(set(v) == {"size", "commit"} for v in to_mallory)
    assert view.found == {}  # no PSI ran at all
    assert not any("kkrt" in step or "/ec/" in step for _s, _t, step, _v in log)


def test_two_party_superset_is_refused_by_either_role(monkeypatch):
    for index in (0, 1):
        _force_leader(monkeypatch, index)
        log: list = []

        def party(net, ids, log=log):
            _watch(net, log)
            return align(net, ids)

        with pytest.raises(ProtocolError) as info:
            simulate(party, {"alice": ALICE, "mallory": list(range(UNIVERSE))}, timeout=30)
        assert info.value.party == "mallory"
        assert {s for p, _t, s, _v in log if p == "alice"} == {opening.STEP_ANNOUNCE}


def test_ratio_is_checked_by_every_party_at_the_bound():
    small, double = list(range(100)), list(range(200))
    out = run_local(align, {"a": small, "b": double}, timeout=30)  # exactly 2x: accepted
    assert out["a"].ids == small
    with pytest.raises(ProtocolError) as info:
        run_local(align, {"a": small, "b": list(range(201))}, timeout=30)
    assert info.value.party == "b"
    # A party's own bound applies to it: "a" accepts 3x with max_set_ratio=3.
    out = run_local(partial(align, max_set_ratio=3.0), {"a": small, "b": list(range(300))})
    assert len(out["b"].ids) == 100


# (b) what the leader recovers at the default bound -------------------------------------


def _adaptive_attack(monkeypatch) -> set:
    """Mallory leads and tries the superset of the whole id space first; if refused,
    she runs again with the largest set the default bound admits: her 60 legitimate
    (common) ids plus a random sample of the id space. Returns alice's own ids she
    recovered over both runs."""
    _force_leader(monkeypatch, 2)
    view = _LeaderView(monkeypatch)
    try:
        out = _attack(list(range(UNIVERSE)))
    except ProtocolError as err:
        assert err.party == "mallory" and view.found == {}
        cap = int(opening.DEFAULT_MAX_SET_RATIO * len(ALICE))
        rest = [i for i in range(UNIVERSE) if i not in set(COMMON)]
        pick = np.random.default_rng(secrets.randbits(64)).permutation(len(rest))[: cap - 60]
        crafted = COMMON + [rest[i] for i in pick.tolist()]
        assert len(crafted) == 2 * len(ALICE)
        out = _attack(crafted)
    assert out["mallory"].ids == COMMON  # the legitimate output
    return view.ids("alice", list(range(UNIVERSE))) - set(COMMON)


def test_leader_recovers_no_more_than_chance_at_the_default_ratio(monkeypatch):
    """Refused with the superset, the leader's best set at the bound (2 x 120 ids of a
    space of 6,000) finds alice's own ids only where its random guesses hit them: about
    180 * 60 / 5940 = 1.8 of 60. The assertion (at most 15; a hypergeometric tail below
    1e-7) fails when the ratio check is disabled: the superset then finds all 60."""
    recovered = _adaptive_attack(monkeypatch)
    assert recovered <= ALICE_OWN
    assert len(recovered) <= 15


def test_the_recovery_measure_catches_a_disabled_ratio_check(monkeypatch):
    """The same attack with the ratio check disabled recovers every id of alice's own:
    the bound, not the measurement, keeps the previous test's number low."""
    check = opening.check_bounds
    monkeypatch.setattr(
        opening,
        "check_bounds",
        lambda sizes, me, *, max_set_ratio, min_set_size: check(
            sizes, me, max_set_ratio=math.inf, min_set_size=min_set_size
        ),
    )
    assert _adaptive_attack(monkeypatch) == ALICE_OWN


def test_random_crafted_set_recovers_nothing_outside_the_intersection(monkeypatch):
    """Sparse ids (random 62-bit): a leader filling its 2x set with random ids recovers
    none of the honest parties' non-common ids, in any of its PSI runs."""
    _force_leader(monkeypatch, 2)
    view = _LeaderView(monkeypatch)
    ids = [secrets.randbits(62) for _ in range(400)]
    common, alice, bob = ids[:50], ids[:50] + ids[50:150], ids[:50] + ids[150:250]
    crafted = common + [secrets.randbits(62) for _ in range(150)]
    sets = {"alice": alice, "bob": bob, "mallory": crafted}
    out = run_local(align, sets, timeout=60)
    assert out["mallory"].ids == sorted(common) == out["alice"].ids
    assert view.ids("alice", crafted) == set(common)
    assert view.ids("bob", crafted) == set(common)


# A party that announces less than it holds ----------------------------------------------


def _liar(monkeypatch, *, leads: bool, method: str, lies: tuple[str, ...]):
    """Mallory holds 5,000 ids but announces 100 (in the opening, and in the steps of
    ``lies``); alice is honest with 100 ids."""
    _force_leader(monkeypatch, 1 if leads else 0)

    def small_size(value):
        return {**value, "size": 100}

    def party(net, ids):
        if net.me == "mallory":
            _tamper(net, opening.STEP_ANNOUNCE, small_size)
            for step in lies:
                _tamper(net, step, small_size)
        return align(net, ids, method=method)

    sets = {"alice": list(range(100)), "mallory": list(range(5000))}
    with pytest.raises(ProtocolError) as info:
        simulate(party, sets, timeout=30)
    assert info.value.party == "mallory"
    return info.value


@pytest.mark.parametrize(
    "leads, method, lies, step",
    [
        (True, "oprf", (), "kkrt/mallory>alice/hello"),
        (True, "oprf", ("/hello",), "kkrt/mallory>alice/u"),  # the table is too big
        (False, "oprf", (), "kkrt/alice>mallory/hello-reply"),
        (False, "oprf", ("/hello-reply",), "kkrt/alice>mallory/tags"),  # too many tags
        (True, "ec", (), "ec/mallory>alice/mine"),
        (False, "ec", (), "ec/alice>mallory/theirs"),
    ],
)
def test_a_party_cannot_use_more_ids_than_it_announced(monkeypatch, leads, method, lies, step):
    err = _liar(monkeypatch, leads=leads, method=method, lies=lies)
    assert err.step.endswith(step)
    assert not re.search(r"\b\d+\b", err.reason)


# (c) the coin toss ---------------------------------------------------------------------


def _toss(fixed: bytes | None, parties=("a", "b", "c")) -> dict:
    def party(net, _):
        coin = fixed if fixed is not None and net.me == "a" else secrets.token_bytes(32)
        return opening._negotiate(net, parties, 20, coin, max_set_ratio=2.0, min_set_size=10).leader

    return run_local(party, dict.fromkeys(parties), timeout=10)


def _chi2(counts: Counter, n: int, k: int) -> float:
    expected = n / k
    return sum((counts.get(i, 0) - expected) ** 2 / expected for i in range(k))


def test_leader_is_uniform_when_one_party_fixes_its_coin():
    """200 tosses among three parties, party ``a`` always revealing the same coin: the
    leader counts pass a chi-square test of uniformity at p = 1e-4. A leader fixed by
    the roster, or derived from one party's coin, gives chi2 = 400."""
    runs, parties = 200, ("a", "b", "c")
    counts: Counter = Counter()
    for _ in range(runs):
        leaders = _toss(b"\x00" * 32)
        assert len(set(leaders.values())) == 1  # every party agrees on the leader
        counts[parties.index(leaders["a"])] += 1
    assert _chi2(counts, runs, 3) < CHI2_2DF_P1E4, counts
    assert _chi2(Counter({0: runs}), runs, 3) > CHI2_2DF_P1E4  # the test can fail


def test_mismatched_reveal_names_the_party():
    def party(net, ids):
        if net.me == "b":
            _tamper(net, opening.STEP_REVEAL, lambda coin: bytes(32))
        return align(net, ids)

    with pytest.raises(ProtocolError) as info:
        simulate(party, {p: list(range(20)) for p in "abc"}, timeout=10)
    assert info.value.party == "b" and info.value.step == opening.STEP_REVEAL


def test_a_commitment_binds_its_party():
    coin = secrets.token_bytes(32)
    assert opening.commitment(coin, "a") != opening.commitment(coin, "b")
    # A party replaying another's commitment cannot open it under its own name.

    def party(net, ids):
        if net.me == "b":
            original = net.send

            def copy(to, step, value):
                if step == opening.STEP_ANNOUNCE:
                    value = {**value, "commit": opening.commitment(b"\x01" * 32, "a")}
                elif step == opening.STEP_REVEAL:
                    value = b"\x01" * 32
                original(to, step, value)

            net.send = copy
        return align(net, ids)

    with pytest.raises(ProtocolError) as info:
        simulate(party, {p: list(range(20)) for p in "abc"}, timeout=10)
    assert info.value.party == "b"


@pytest.mark.parametrize(
    "fn",
    [
        lambda v: {**v, "size": -1},
        lambda v: {**v, "size": True},
        lambda v: {**v, "size": 2**40},
        lambda v: {**v, "commit": b"short"},
        lambda v: {"size": v["size"]},
        lambda v: [v["size"]],
    ],
)
def test_bad_announcements(fn):
    def party(net, ids):
        if net.me == "b":
            _tamper(net, opening.STEP_ANNOUNCE, fn)
        return align(net, ids)

    with pytest.raises(ProtocolError) as info:
        simulate(party, {p: list(range(20)) for p in "abc"}, timeout=10)
    assert info.value.party == "b"


# (d) minimum aggregation ----------------------------------------------------------------


def test_intersection_below_the_minimum_reaches_no_party(monkeypatch):
    _force_leader(monkeypatch, 0)
    log: list = []
    sets = {"a": list(range(0, 20)), "b": list(range(11, 31)), "c": list(range(5, 25))}

    def party(net, ids):
        _watch(net, log)
        return align(net, ids)

    with pytest.raises(AggregationTooSmall) as info:
        simulate(party, sets, timeout=30)
    assert str(info.value) == psi_module.REASON_BELOW
    results = [v for _s, _t, step, v in log if step == psi_module.STEP_RESULT]
    assert results == [psi_module.BELOW_MINIMUM] * 2  # to b and c: no id

    # At 10 common ids (the minimum) every party gets them.
    sets["b"] = list(range(10, 30))
    out = run_local(align, sets, timeout=30)
    assert out["b"].ids == list(range(10, 20))


def test_a_set_below_the_minimum_is_not_even_announced():
    log: list = []

    def party(net, ids):
        _watch(net, log)
        return align(net, ids)

    with pytest.raises((AggregationTooSmall, PartyFailure)):
        simulate(party, {"a": list(range(9)), "b": list(range(20))}, timeout=10)
    assert not [e for e in log if e[0] == "a"]


def test_a_leader_that_sends_too_few_ids_is_blamed(monkeypatch):
    _force_leader(monkeypatch, 0)

    def party(net, ids):
        if net.me == "a":
            _tamper(
                net,
                psi_module.STEP_RESULT,
                lambda v: {"kind": "int", "ids": np.array([12], np.int64)},
            )
        return align(net, ids)

    with pytest.raises(ProtocolError) as info:
        simulate(party, {"a": list(range(40)), "b": list(range(10, 50))}, timeout=30)
    assert info.value.party == "a" and info.value.step == psi_module.STEP_RESULT


def test_bad_bounds_are_refused_locally():
    for bad in ({"max_set_ratio": 0.5}, {"max_set_ratio": math.nan}, {"min_set_size": -1}):
        with pytest.raises(ValueError):
            run_local(partial(align, **bad), {"a": [1], "b": [1]}, timeout=5)
