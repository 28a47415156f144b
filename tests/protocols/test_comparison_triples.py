"""The AND tree's multiplication triples (ppdm/protocols/bit_triples.py): exact over many
triples on both kinds of OT (IKNP 1-out-of-2, KK13 1-out-of-16 with tables), each party's
view from the attacker's side, bad tables, and a batch-length mismatch between the parties
ending in a ProtocolError at once instead of a hang (issue 25, item 4)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ppdm.errors import ProtocolError
from ppdm.parties.local import simulate
from ppdm.protocols import bit_triples, comparison
from ppdm.protocols.bit_triples import STEP_TRIPLES, BitEngine
from ppdm.protocols.ot.extension import OTSession


def _make(count: int, pairs: int, *, spy: bool = False, lie=None, batches: int = 1):
    """Both parties' triple buffers after ``batches`` batches of ``count`` triples and
    ``pairs`` pair triples each (and bob's received tables)."""

    def party(net, _):
        peer = "bob" if net.me == "alice" else "alice"
        seen: list[np.ndarray] = []
        if spy and net.me == "bob":
            original = net.receive

            def receive(frm, step, **kw):
                value = original(frm, step, **kw)
                if step == STEP_TRIPLES:
                    seen.append(value.copy())
                return value

            net.receive = receive
        if lie is not None and net.me == "bob":
            send = net.send

            def bad_send(to, step, value):
                send(to, step, lie if step == STEP_TRIPLES else value)

            net.send = bad_send
        engine = BitEngine(OTSession(net, peer))
        for k in range(1, batches + 1):  # each call makes the missing ones: one batch
            engine.make_triples(k * count, k * pairs)
            engine.settle()
        return engine._a, engine._b, engine._c, engine._pairs, seen

    return simulate(party, {"alice": None, "bob": None}, timeout=120)


#: False-failure probability of one balance check (:func:`_balanced`).
_FALSE_FAILURE = 1e-9


def _balanced(bits: np.ndarray) -> bool:
    """Whether the count of ones in ``n`` uniform bits is as close to ``n / 2`` as a
    fair coin's with probability ``1 - 1e-9`` (exact two-sided binomial tail): never a
    flaky failure, yet at ``n >= 1000`` a mean off by 0.1 (and all zeros) fails."""
    n, ones = len(bits), int(np.count_nonzero(bits))
    low = min(ones, n - ones)
    tail = 2 * sum(math.comb(n, i) for i in range(low + 1))  # P(|X - n/2| >= n/2 - low)
    return tail / 2**n > _FALSE_FAILURE


def test_the_balance_check_catches_biased_bits():
    ok = np.arange(1000) % 2
    assert _balanced(ok) and _balanced(ok[:999]) and _balanced(np.r_[ok, np.ones(50)])
    for bad in (np.zeros(1000), np.ones(1000), np.arange(1000) < 400, np.arange(1000) < 600):
        assert not _balanced(bad)


@pytest.mark.parametrize(
    ("count", "pairs", "batches", "kk13"), [(300, 200, 5, False), (1500, 2501, 1, True)]
)
def test_triples_are_exact(count, pairs, batches, kk13):
    """``c = a AND b`` (and ``c' = a AND b'`` of pair triples) on the XOR of the two
    parties' shares, for every triple of a batch; KK13 from 1,024 cross terms up (five
    IKNP batches: at least 1,000 bits for every balance check)."""
    sim = _make(count, pairs, batches=batches)
    a0, b0, c0, p0, _ = sim.results["alice"]
    a1, b1, c1, p1, _ = sim.results["bob"]
    count, pairs = count * batches, pairs * batches
    assert len(a0) == len(a1) == count and len(p0) == len(p1) == pairs
    a, b, c = a0 ^ a1, b0 ^ b1, c0 ^ c1
    assert np.array_equal(c, a & b)
    p = p0 ^ p1
    assert np.array_equal(p[:, 3], p[:, 0] & p[:, 1])
    assert np.array_equal(p[:, 4], p[:, 0] & p[:, 2])
    # Not all zero or constant: every bit about half ones (a binomial tail at 1e-9, not a
    # fixed 0.4 .. 0.6 that 200 fair bits miss about once in 200 runs).
    for bits in (a, b, p[:, 0], p[:, 1], p[:, 2], a0, b0, p0[:, 1]):
        assert len(bits) >= 1000 and _balanced(bits), bits.mean()
    steps = {s["step"] for s in sim.metrics["alice"]}
    assert ("cmp/triples" in steps) == kk13 == ("ot/ss16/bob>alice/u" in steps)


def _guess_b(tables: np.ndarray) -> np.ndarray:
    """A receiver's guess of the sender's ``b`` lanes of every slot ``k`` of every OT:
    ``T[e_i] XOR T[e_i | e_k]`` on slot ``k`` (``i = k + 1 mod 4``): ``F(e_k)``, that is
    ``b_k``, if the tables were not masked by the keys ``x^v``. ``(OTs * 4, 2)``."""
    out = np.zeros((len(tables), 4, 2), dtype=np.uint8)
    for k in range(4):
        i = (k + 1) % 4
        both = tables[:, (1 << i) - 1] ^ tables[:, ((1 << i) | (1 << k)) - 1]
        out[:, k, 0] = (both >> (2 * k)) & 1
        out[:, k, 1] = (both >> (2 * k + 1)) & 1
    return out.reshape(-1, 2)


def test_receiver_view_predicts_the_senders_b_at_chance():
    """Attacker's side: bob, receiver of alice's KK13 triple OTs, sees alice's tables.
    The predictor ``_guess_b`` of alice's ``b`` and ``b'`` bits from them agrees with
    them about half the time (8,000 pair triples, 16,000 bits: 0.5 +- 0.004 one sigma;
    the bound is over 6 sigma), and so does bob's own ``c`` share read as a guess of
    ``a AND b`` from alice's side."""
    pairs = 8000
    sim = _make(0, pairs, spy=True)
    _, _, _, p_alice, _ = sim.results["alice"]
    _, _, _, p_bob, seen = sim.results["bob"]
    tables = np.concatenate(seen)
    guess = _guess_b(tables)[:pairs]
    agree = float(np.mean(guess == p_alice[:, 1:3]))
    assert abs(agree - 0.5) < 0.025, agree
    cross = p_bob[:, 0] & p_alice[:, 1]  # what bob would hold without alice's x^0 mask
    assert abs(float(np.mean(p_bob[:, 3] == cross)) - 0.5) < 0.025


def test_the_predictor_wins_on_unmasked_tables():
    """The predictor is not blind: on tables without the key masks (``T[v] = x^0 XOR
    F(v)``) it recovers every ``b`` bit, so the test above fails on such a bug
    (``kk13-triples-unmasked`` in ``benchmarks/mutations.py``)."""
    rng = np.random.default_rng(5)
    m = 500
    b = rng.integers(0, 4, (m, 4)).astype(np.uint8)
    x0 = rng.integers(0, 256, m).astype(np.uint8)
    d = b << np.array([0, 2, 4, 6], dtype=np.uint8)
    f = np.zeros((m, 16), dtype=np.uint8)
    for v in range(1, 16):
        for i in range(4):
            if v >> i & 1:
                f[:, v] ^= d[:, i]
    tables = (x0[:, None] ^ f)[:, 1:]
    guess = _guess_b(tables).reshape(m, 4, 2)
    assert np.array_equal(guess[:, :, 0], b & 1) and np.array_equal(guess[:, :, 1], b >> 1)


@pytest.mark.parametrize(
    "bad", [np.zeros((10, 15), np.uint8), np.zeros((1200, 16), np.uint8), b"\x00" * 15]
)
def test_bad_tables_raise_naming_party_and_step(bad):
    with pytest.raises(ProtocolError) as info:
        _make(0, 4800, lie=bad)
    assert info.value.party == "bob" and info.value.step == STEP_TRIPLES


def test_kk13_triples_only_for_large_batches_and_honest_receivers():
    """Below 1,024 cross terms a direction, or in a session checked against a malicious
    receiver, the triples stay on IKNP random OTs."""
    assert bit_triples.use_kk13_triples(
        type("S", (), {"malicious_receiver": False, "kk13": True})(), 1024
    )
    assert not bit_triples.use_kk13_triples(
        type("S", (), {"malicious_receiver": False, "kk13": True})(), 1023
    )
    assert not bit_triples.use_kk13_triples(
        type("S", (), {"malicious_receiver": True, "kk13": True})(), 10**6
    )
    assert not bit_triples.use_kk13_triples(
        type("S", (), {"malicious_receiver": False, "kk13": False})(), 10**6
    )


# A batch-length mismatch -------------------------------------------------------------------


@pytest.mark.parametrize(("n_alice", "n_bob"), [(17, 18), (18, 17), (40, 30), (3, 5)])
def test_length_mismatch_is_a_protocol_error_at_once(n_alice, n_bob):
    """Issue 25, item 4 (review): the leaf OTs are KK13 or Naor-Pinkas by each party's
    own leaf count (256 leaves: 17 comparisons of 57 bits have 255, 18 have 270). With
    different lengths on the two sides of that threshold the parties used to wait on
    different steps until the job's timeout; now the ``y_party`` sends its count first
    and the ``x_party`` stops at once, naming it and the step. The simulation's 60 s
    timeout only catches a hang (it would raise something else)."""
    rng = np.random.default_rng(n_alice * 100 + n_bob)
    inputs = {
        "alice": rng.integers(0, 2**57, n_alice, dtype=np.uint64),
        "bob": rng.integers(0, 2**57, n_bob, dtype=np.uint64),
    }

    def party(net, mine):
        return comparison.secure_ge(net, mine, x_party="alice", y_party="bob", bits=57)

    with pytest.raises(ProtocolError) as info:
        simulate(party, inputs, timeout=60)
    assert info.value.party == "bob" and info.value.step == comparison.STEP_LEAF_COUNT
    assert str(n_alice) not in info.value.reason and str(n_bob) not in info.value.reason
