"""Tests that fail when privacy breaks, not only when an answer is wrong.

Each test guards one property that a plausible bug would break while every output stays
correct (issue 12; ``benchmarks/mutations.py`` applies those bugs to a copy of the tree
and shows these tests failing):

- the ring secure sum's first message is masked (a party's view of its predecessor's
  message is uniform, not its input);
- the OT-extension hash keeps its final XOR (``H(i, x) = pi(pi(x) ^ i) ^ pi(x)``: without
  it, anyone inverts the public permutation and recovers ``pi(x)``);
- OT-extension tweaks are never reused across chunks of one session;
- differentially private counts carry noise of the declared scale;
- Mondrian cuts the widest dimension first (its information loss on Adult stays low);
- base OT: a sender never reuses its secret scalar across sessions, and the sender's
  best guess of the receiver's choices from the points it receives stays at chance;
- EC PSI: the receiver cannot tell where its matches sit in the sender's list.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pandas as pd
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from scipy import stats

from ppdm.parties.local import LocalNetwork, simulate
from ppdm.protocols.secure_sum import secure_sum


def test_ring_secure_sum_first_message_is_masked():
    """Bob's view of alice's ring message must not depend on alice's input: over a long
    vector of zeros from alice, what bob receives is uniform over Z_2^64 (chi-square on
    the top byte), never the zeros themselves."""
    n = 20_000
    inputs = {
        "alice": np.zeros(n, dtype=np.int64),
        "bob": np.arange(n, dtype=np.int64),
        "carol": np.ones(n, dtype=np.int64),
    }
    net = LocalNetwork(list(inputs), job_id="mask", timeout=30)
    seen: list[np.ndarray] = []
    ep = net.endpoint("bob")
    original = ep.receive

    def spy(frm, step, **kw):
        value = original(frm, step, **kw)
        if frm == "alice" and step.endswith("secure-sum/ring"):
            seen.append(value)
        return value

    ep.receive = spy  # type: ignore[method-assign]
    sim = simulate(secure_sum, inputs, network=net, timeout=30)
    assert np.array_equal(sim.results["bob"], np.arange(n) + 1)
    (view,) = seen
    top = (view >> np.uint64(56)).astype(np.int64)
    counts = np.bincount(top, minlength=256)
    assert stats.chisquare(counts).pvalue > 1e-6
    assert np.count_nonzero(view == 0) < 5


def _aes_decrypt(blocks: np.ndarray) -> np.ndarray:
    from ppdm.protocols.ot.crhash import FIXED_KEY

    dec = Cipher(algorithms.AES(FIXED_KEY), modes.ECB()).decryptor()
    return np.frombuffer(dec.update(blocks.tobytes()), np.uint8).reshape(blocks.shape)


def test_ot_hash_cannot_be_inverted_from_public_data():
    """``H(i, x) = pi(pi(x) ^ i) ^ pi(x)`` (Guo et al. 2020): the final XOR is what keeps
    ``pi(x)`` (and so ``x``) out of reach of anyone who sees an output."""
    from ppdm.protocols.ot.crhash import aes_permute, make_tweaks, tccr_hash

    x = np.frombuffer(np.random.default_rng(1).bytes(16 * 64), np.uint8).reshape(64, 16)
    tw = make_tweaks(10, 64, session=3)
    h = tccr_hash(x, tw)
    px = aes_permute(x)
    recovered = _aes_decrypt(h) ^ tw
    assert not np.all(recovered == px, axis=1).any()
    assert np.array_equal(h, aes_permute(px ^ tw) ^ px)  # the construction, exactly


def test_ot_extension_never_reuses_a_tweak_across_chunks(monkeypatch):
    """Every tweak the hash uses in a session is fresh: at most twice at the sender (for
    ``q_i`` and ``q_i ^ s``, which the TCCR hash allows) and once at the receiver, over
    several chunks and multi-block outputs."""
    from collections import Counter

    import ppdm.protocols.ot.crhash as crhash
    from ppdm.protocols.ot.extension import IKNPReceiver, IKNPSender

    used: dict[str, Counter[bytes]] = {}
    real = crhash.make_tweaks

    def spy(start, count, session, block=0):
        out = real(start, count, session, block)
        counter = used.setdefault(threading.current_thread().name, Counter())
        counter.update(bytes(row) for row in out)
        return out

    monkeypatch.setattr(crhash, "make_tweaks", spy)
    choices = np.random.default_rng(2).integers(0, 2, 5000).astype(bool)

    def party(net, _):
        if net.me == "alice":
            return IKNPSender.setup(net, "bob", chunk=1024).random(5000, length=48)
        return IKNPReceiver.setup(net, "alice", chunk=1024).random(choices, length=48)

    sim = simulate(party, {"alice": None, "bob": None}, timeout=30)
    x0, x1 = sim.results["alice"]
    assert np.array_equal(np.where(choices[:, None], x1, x0), sim.results["bob"])
    assert len(used) == 2
    for thread, counter in used.items():
        limit = 1 if "bob" in thread else 2
        assert sum(counter.values()) >= 5000 * 3  # three 16-byte blocks per OT
        assert max(counter.values()) <= limit, f"{thread} reused a tweak"


def test_dp_count_noise_has_the_declared_scale():
    """At epsilon = 1 the discrete Laplace noise has variance 2r/(1-r)^2, r = e^-1
    (about 1.84); a mechanism with 100x less noise (variance ~0) fails."""
    from ppdm.dp.mechanisms import DiscreteLaplaceMechanism
    from ppdm.dp.queries import dp_count

    mech = DiscreteLaplaceMechanism(epsilon=1.0)
    data = np.ones(500, dtype=bool)
    draws = np.array([dp_count(data, epsilon=1.0) for _ in range(3000)]) - 500
    var = float(draws.var())
    assert 0.8 * mech.variance() < var < 1.25 * mech.variance()
    assert abs(float(draws.mean())) < 0.2
    noise = np.asarray(mech.randomise(np.zeros(20_000, dtype=np.int64)))
    assert 0.9 * mech.variance() < float(noise.var()) < 1.1 * mech.variance()


def test_mondrian_cuts_the_widest_dimension_first(adult_dir: Path):
    """On Adult (k = 10, the anonymization benchmark's quasi-identifiers) Mondrian's
    normalized certainty penalty is about 0.13; cutting the narrowest dimension first
    raises it to about 0.22."""
    from ppdm.anonymize.hierarchy import load_hierarchies
    from ppdm.anonymize.models import KAnonymity
    from ppdm.anonymize.mondrian import mondrian

    qi = [
        "age",
        "education",
        "marital-status",
        "native-country",
        "race",
        "salary-class",
        "sex",
        "workclass",
    ]
    table = pd.read_csv(adult_dir / "adult.csv", sep=";")
    hierarchies = load_hierarchies(adult_dir, qi)
    r = mondrian(table, qi=qi, model=KAnonymity(10), hierarchies=hierarchies, rng=1)
    assert r.metrics["ncp"] < 0.16, r.metrics["ncp"]


# -- base OT (Chou-Orlandi), played by the attacker -------------------------------------------


def test_base_ot_sender_keys_are_never_reused_across_sessions():
    """The receiver's view of the sender across sessions: every session's first message
    ``A = aG`` is new. A reused sender scalar shows as a repeated ``A``: it links the
    sessions, and one scalar that leaks (or one fixed in the code, which every receiver
    knows) then gives away both keys of every OT of every session."""
    from ppdm.protocols.ot.base import ChouOrlandiSender

    firsts = [ChouOrlandiSender().first_message for _ in range(64)]
    assert len(set(firsts)) == len(firsts), "a sender scalar was reused across sessions"


def test_base_ot_sender_cannot_tell_the_receivers_choices():
    """The sender plays the attacker on what it receives (the points ``B_i``): it guesses
    ``c_i = 1`` when ``B_i - A`` is also among the received points (true whenever the
    receiver's scalars repeat: ``B = bG`` or ``bG + A``). Its accuracy must stay at
    chance (binomial bound), not reach the choices."""
    from coincurve import PublicKey

    from ppdm.protocols import ecgroup
    from ppdm.protocols.ot.base import ChouOrlandiReceiver, ChouOrlandiSender

    n = 400
    choices = np.frombuffer(np.random.default_rng(2024).bytes(n), dtype=np.uint8) & 1
    sender = ChouOrlandiSender()
    receiver = ChouOrlandiReceiver(sender.first_message, peer="alice")
    seen = [bytes(p) for p in receiver.points(choices)]
    minus_a = PublicKey(ecgroup.neg(sender.first_message))
    pool = set(seen)

    def guess(point: bytes) -> int:
        try:
            shifted = PublicKey.combine_keys([PublicKey(point), minus_a]).format()
        except ValueError:  # B = A
            return 1
        return int(shifted in pool)

    guesses = np.array([guess(p) for p in seen], dtype=np.uint8)
    accuracy = float(np.mean(guesses == choices))
    majority = max(float(np.mean(choices)), 1 - float(np.mean(choices)))
    # chance for a guesser that ignores the view is at most the majority share
    assert accuracy <= majority + 4 * np.sqrt(0.25 / n), accuracy


def test_ec_psi_receiver_cannot_place_the_matches_in_the_senders_list(monkeypatch):
    """EC PSI, played by the receiver: besides the intersection it must not learn where
    the matching ids sit in the sender's list (its file order: often sorted or by
    date). The receiver uses its own key to double-encrypt what it received
    (``b H(y)``), matches it against ``b a H(x)``, and guesses each match's position
    in the sender's list as its position in the message. Its accuracy must stay at
    chance (1 / |Y|), which only the sender's shuffle gives."""
    import threading

    from ppdm.protocols.psi import ec

    keys: dict[int, object] = {}
    generate = ec.CommutativeKey.generate

    def remember() -> object:
        key = generate()
        keys[threading.get_ident()] = key
        return key

    monkeypatch.setattr(ec.CommutativeKey, "generate", staticmethod(remember))
    sender_ids = [f"id{i:05d}".encode() for i in range(300)]  # the sender's file order
    receiver_ids = sender_ids[::3] + [f"other{i}".encode() for i in range(100)]
    views: dict[str, object] = {}
    mine: dict[str, int] = {}

    def party(net, items):
        if net.me == "bob":
            ec.ec_send(net, "alice", items)
            return None
        mine["thread"] = threading.get_ident()
        original = net.receive

        def spy(frm, step, **kw):
            value = original(frm, step, **kw)
            views[step.rsplit("/", 1)[-1]] = value
            return value

        net.receive = spy  # type: ignore[method-assign]
        return ec.ec_receive(net, "bob", items)

    sim = simulate(party, {"alice": receiver_ids, "bob": sender_ids}, timeout=60)
    found = sim.results["alice"]
    assert int(np.sum(found)) == 100  # the protocol works: the attacker's view is real
    key = keys[mine["thread"]]
    theirs = key.encrypt_received(views["theirs"], "bob", "theirs", chunks=1)  # type: ignore[attr-defined]
    back = np.asarray(views["back"])
    position = {np.ascontiguousarray(r).tobytes(): j for j, r in enumerate(theirs)}
    hits = 0
    for i, x in enumerate(receiver_ids):
        j = position.get(np.ascontiguousarray(back[i]).tobytes())
        if j is not None:
            hits += int(sender_ids[j] == x)
    # 100 matches; guessing at random places about 100/300 correctly
    assert hits <= 10, f"the receiver placed {hits} of 100 matches in the sender's list"


def test_set_union_collector_cannot_read_a_partys_set_size():
    """Secure set union, played by the collector (the first party): it receives fully
    encrypted sets (every party holds 40 items; which set comes from whom is the
    protocol's business) and guesses a set's true size as the number of items in its
    message. With the default fakes (uniform in
    ``[0, ceil(0.25 n)]`` = ``[0, 10]``) that guess is exact about once in eleven;
    without fakes, always."""
    from ppdm.protocols.set_union import secure_set_union

    n, runs = 40, 12
    exact = guesses = 0
    for r in range(runs):
        inputs = {
            "alice": [f"a{r}-{i}".encode() for i in range(n)],
            "bob": [f"b{r}-{i}".encode() for i in range(n)],
            "carol": [f"c{r}-{i}".encode() for i in range(n)],
        }
        net = LocalNetwork(list(inputs), job_id=f"union-{r}", timeout=60)
        ep = net.endpoint("alice")
        original = ep.receive
        sizes: list[int] = []

        def spy(frm, step, original=original, sizes=sizes, **kw):
            value = original(frm, step, **kw)
            if step.endswith("set-union/encrypted"):
                sizes.append(len(value))
            return value

        ep.receive = spy  # type: ignore[method-assign]
        sim = simulate(lambda net, items: secure_set_union(net, items), inputs, network=net)
        assert len(sim.results["alice"]) == 3 * n
        assert len(sizes) == 2  # the attacker's view is real: two fully encrypted sets
        exact += sum(int(seen == n) for seen in sizes)
        guesses += len(sizes)
    # about 24 / 11 exact guesses by chance; without fakes all 24
    assert exact <= guesses // 2, f"the collector read {exact} of {guesses} set sizes"
