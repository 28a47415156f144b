"""What an attacker recovers from what its node actually receives, measured against chance.

Each test plays one party as the attacker, records only what that party's node receives
(or what it could compute from it with its own keys), runs the best attack we know for a
weakened mask, key or random source, and asserts that the attack does no better than
chance. With the randomness weakened the same attack recovers the secret exactly, so each
test fails for the reason it is named (``benchmarks/mutations.py`` applies those
weakenings):

- secure comparison: the party holding ``y`` guesses, from the leaf shares its 1-of-N OTs
  return, whether each 4-bit block of ``x`` equals its own block (chance: one half);
- Paillier dot product: the key holder recovers the other party's binary vector from the
  randomness of the result ciphertext it decrypts (chance: ``2^-d``);
- OT extension: a receiver that fixes its own session nonce cannot force two sessions
  onto the same hash tweaks (the sender's nonce alone keeps the tags apart);
- the library's secure random source: an attacker who replays a differentially private
  release (or a randomized-response release) in a process of its own, on inputs it
  knows, learns nothing about the victim's inputs from the difference.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import subprocess
import sys
from pathlib import Path

import gmpy2
import numpy as np
from gmpy2 import mpz

from ppdm.parties.local import LocalNetwork, simulate
from ppdm.protocols import comparison
from ppdm.protocols.dot_product_paillier import dot_product_paillier
from ppdm.protocols.ot import extension
from ppdm.protocols.ot.base import base_ot_send_random
from ppdm.protocols.paillier import generate_keypair

REPO = Path(__file__).resolve().parents[2]


def test_comparison_leaf_shares_tell_the_y_party_nothing_about_x(monkeypatch):
    """Bob (``y``) sees one 2-bit leaf share per 4-bit block from his 1-of-N OTs. The
    share's equality bit is alice's block-equality bit XOR a random bit of hers: bob's
    best guess of "x's block equals mine" from it is right half the time. Half of the
    planted blocks are equal, so a guess from an unmasked bit would be right every time."""
    gen = np.random.default_rng(7)
    n = 600
    y = gen.integers(0, 256, n).astype(np.int64)
    x = gen.integers(0, 256, n).astype(np.int64)
    equal = gen.integers(0, 2, (n, 2)).astype(bool)  # per block: plant x_block == y_block
    hi = np.where(equal[:, 0], y >> 4, ((y >> 4) + 1 + gen.integers(0, 15, n)) % 16)
    lo = np.where(equal[:, 1], y & 15, ((y & 15) + 1 + gen.integers(0, 15, n)) % 16)
    x = (hi << 4) | lo
    seen: list[np.ndarray] = []
    original = comparison._leaf_receive

    def spy(*args, **kwargs):
        got = original(*args, **kwargs)
        seen.append(np.array(got).reshape(-1, 1))
        return got

    monkeypatch.setattr(comparison, "_leaf_receive", spy)

    def party(net, values):
        return comparison.secure_ge_shares(
            net, values, x_party="alice", y_party="bob", bits=8, block_bits=4
        )

    sim = simulate(party, {"alice": x, "bob": y}, timeout=60)
    assert np.array_equal(sim.results["alice"] ^ sim.results["bob"], (x >= y).astype(np.uint8))
    (leaves,) = seen
    eq_bits = ((leaves[:, 0] >> 1) & 1).reshape(n, 2).astype(bool)
    accuracy = float(np.mean(eq_bits == equal))
    # Binomial(1200, 1/2): 0.5 +- 0.06 is more than four standard deviations.
    assert 0.44 < accuracy < 0.56, f"bob guesses x's block equalities with {accuracy:.2f}"


def _nth_root(c: int, n: int, phi: int) -> mpz:
    """The randomizer ``rho`` of a Paillier ciphertext ``(1 + n)^m rho^n mod n^2``,
    computed by the key holder: ``(c mod n)^(n^-1 mod phi) mod n``."""
    return gmpy2.powmod(mpz(c) % n, gmpy2.invert(mpz(n), mpz(phi)), mpz(n))


def test_paillier_dot_product_result_hides_the_other_vector_from_the_key_holder():
    """The key holder knows the randomizer of every ciphertext it sent and of the result
    it receives (with its private key). The result's randomizer is the product of the
    selected ones times the other party's fresh mask ``r``: with ``r`` uniform in
    ``Z*_n`` no choice of the other's binary vector leaves a small quotient, while with a
    mask below ``2^16`` exactly the true vector does."""
    pub, priv = generate_keypair(512, allow_insecure=True)
    n, phi = int(pub.n), int((priv.p - 1) * (priv.q - 1))
    d, runs, recovered = 8, 3, 0
    gen = np.random.default_rng(11)
    for _ in range(runs):
        x = gen.integers(1, 100, d)
        y = gen.integers(0, 2, d).astype(bool)
        net = LocalNetwork(["alice", "bob"], job_id="dot", timeout=60)
        ep = net.endpoint("alice")
        sent, got = [], []
        send, receive = ep.send, ep.receive

        def spy_send(to, step, value, _send=send, _sent=sent):
            if step.endswith("dot/ciphertexts"):
                _sent.extend(int(c) for c in value)
            return _send(to, step, value)

        def spy_receive(frm, step, _receive=receive, _got=got, **kw):
            value = _receive(frm, step, **kw)
            if step.endswith("dot/result"):
                _got.extend(int(c) for c in value)
            return value

        ep.send, ep.receive = spy_send, spy_receive  # type: ignore[method-assign]

        def party(net, v):
            key = priv if net.me == "alice" else None
            return dot_product_paillier(net, v, output="holder", key=key, min_key_bits=512)

        sim = simulate(party, {"alice": x, "bob": y}, network=net, timeout=60)
        assert list(sim.results["alice"].values) == [int(x @ y)]
        rhos = [_nth_root(c, n, phi) for c in sent]
        rho_result = _nth_root(got[0], n, phi)
        hits = []
        for guess in itertools.product((0, 1), repeat=d):
            prod = mpz(1)
            for bit, rho in zip(guess, rhos, strict=True):
                if bit:
                    prod = prod * rho % n
            quotient = rho_result * gmpy2.invert(prod, n) % n
            if quotient < (1 << 16):
                hits.append(guess)
        if hits == [tuple(int(b) for b in y)]:
            recovered += 1
    assert recovered == 0, f"the key holder recovered the other's vector in {recovered}/{runs}"


def test_ot_extension_sessions_differ_when_the_peer_fixes_its_nonce():
    """A receiver that sends the same session nonce every time still gets a fresh session
    tag (so fresh hash tweaks) from the sender's own random nonce."""

    def fixed_nonce_receiver(net):
        scoped = net.scoped(extension._prefix("alice", net.me))
        scoped.send("alice", extension.STEP_SESSION, bytes(extension.SESSION_NONCE_BYTES))
        theirs = scoped.receive("alice", extension.STEP_SESSION_REPLY, expect=bytes)
        base_ot_send_random(scoped, "alice", extension.KAPPA)
        return extension.session_tag(bytes(extension.SESSION_NONCE_BYTES), theirs)

    def party(net, _):
        if net.me == "alice":
            return extension.IKNPSender.setup(net, "bob")._session
        return fixed_nonce_receiver(net)

    tags = []
    for _ in range(3):
        sim = simulate(party, {"alice": None, "bob": None}, timeout=60)
        assert sim.results["alice"] == sim.results["bob"]
        tags.append(sim.results["bob"])
    assert len(set(tags)) == len(tags), "a fixed peer nonce gave two sessions one tag"


_REPLAY = """
import json, sys
import numpy as np
from ppdm.dp.mechanisms import DiscreteLaplaceMechanism
from ppdm.perturb.randomized_response import randomize_codes
values = np.array(json.loads(sys.argv[1]), dtype=np.int64)
noisy = DiscreteLaplaceMechanism(epsilon=0.5, sensitivity=1).randomise(values)
codes = randomize_codes(values[:, None] % 2, [2], [0.7])
print(json.dumps({"noisy": np.asarray(noisy).tolist(), "codes": np.asarray(codes).ravel().tolist()}))
"""


def _release(values: np.ndarray) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", _REPLAY, json.dumps(values.tolist())],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_replaying_a_release_in_another_process_recovers_nothing():
    """The attacker runs the same release code in a process of its own on all-zero
    inputs and subtracts (or XORs) its output from the victim's: with OS randomness the
    DP noise left over keeps the exact-recovery rate near the mechanism's own chance of
    zero noise, and the randomized-response bits stay at the mechanism's accuracy; with a
    fixed-seed generator both processes draw the same noise and the attacker recovers
    every value and bit exactly."""
    gen = np.random.default_rng(5)
    secret = gen.integers(0, 1000, 400)
    victim = _release(secret)
    replica = _release(np.zeros_like(secret))
    guess = np.array(victim["noisy"]) - np.array(replica["noisy"])
    exact = float(np.mean(guess == secret))
    # P(noise difference = 0) for two independent discrete Laplace(eps=0.5) draws is
    # about 0.13; a shared generator makes it 1.
    assert exact < 0.3, f"the replay recovered {exact:.0%} of the values exactly"
    bits = np.array(victim["codes"]) ^ np.array(replica["codes"])
    bit_accuracy = float(np.mean(bits == secret % 2))
    # Independent flips (keep with 0.7 each): agreement 0.7^2 + 0.3^2 = 0.58.
    assert bit_accuracy < 0.7, f"the replay recovered {bit_accuracy:.0%} of the bits"


def _kkrt_key_guesses(receiver_nonce: bytes, sender_nonce: bytes) -> dict[str, bytes]:
    """The attacker's library of OPRF keys ``s`` (64 bytes) computable from the public
    transcript: digests of the nonces in either order, with and without the protocol's
    label, under the common hash functions, and the trivial keys."""
    out = {"zeros": bytes(64), "ones": b"\xff" * 64}
    label = b"ppdm/psi/kkrt"
    pieces = {
        "r+s": receiver_nonce + sender_nonce,
        "s+r": sender_nonce + receiver_nonce,
        "r": receiver_nonce,
        "s": sender_nonce,
    }
    for name, data in pieces.items():
        for prefix in (b"", label):
            tag = f"{name}{'+label' if prefix else ''}"
            out[f"sha512({tag})"] = hashlib.sha512(prefix + data).digest()
            out[f"sha3_512({tag})"] = hashlib.sha3_512(prefix + data).digest()
            out[f"blake2b({tag})"] = hashlib.blake2b(prefix + data).digest()
            out[f"shake256({tag})"] = hashlib.shake_256(prefix + data).digest(64)
            out[f"shake256-96-tail({tag})"] = hashlib.shake_256(prefix + data).digest(160)[96:]
        out[f"repeat({name})"] = (data * 4)[:64]
    return out


def _id_blocks(ids: np.ndarray) -> np.ndarray:
    blocks = np.zeros((len(ids), 16), dtype=np.uint8)
    blocks[:, :8] = np.asarray(ids, dtype="<u8").view(np.uint8).reshape(-1, 8)
    return blocks


def test_kkrt_receiver_cannot_evaluate_the_senders_oprf_from_the_transcript(monkeypatch):
    """The PSI receiver knows both base-OT keys of every column, the ``u`` it sent and
    both nonces. If it could also name the sender's OPRF key ``s`` it would rebuild the
    sender's ``q`` and compute the sender's tag of *any* id: then every id of a known
    domain that the sender holds, intersection or not, shows up among the tags it
    received. Against every key in its library derived from the public transcript the
    attacker recovers no id outside the intersection (chance: none), and against a key it
    does know (a control run where the test reads the sender's real ``s``) it recovers
    all of them, so the attack itself works."""
    from ppdm.protocols.ot.bits import pack, transpose_bits
    from ppdm.protocols.ot.crhash import AESCTRStream
    from ppdm.protocols.psi import kkrt, tagset

    gen = np.random.default_rng(3)
    domain = np.arange(1, 1001, dtype=np.uint64)
    shuffled = gen.permutation(domain)
    common, only_sender, only_receiver = shuffled[:40], shuffled[40:240], shuffled[240:400]
    sender_ids = np.concatenate([common, only_sender])
    receiver_ids = np.concatenate([common, only_receiver])

    ot_keys: list[tuple[np.ndarray, np.ndarray]] = []
    real_s: list[np.ndarray] = []
    original_random = extension.IKNPSender.random
    original_ot_receive = extension.IKNPReceiver.random

    def spy_random(self, m, **kw):
        pair = original_random(self, m, **kw)
        ot_keys.append(pair)
        return pair

    def spy_ot_receive(self, choices, **kw):
        real_s.append(np.array(choices))  # the control run only: the sender's true key
        return original_ot_receive(self, choices, **kw)

    monkeypatch.setattr(extension.IKNPSender, "random", spy_random)
    monkeypatch.setattr(extension.IKNPReceiver, "random", spy_ot_receive)
    net = LocalNetwork(["alice", "bob"], job_id="psi", timeout=60)
    ep = net.endpoint("alice")  # alice receives, bob sends
    sent: dict[str, list] = {"hello": [], "u": []}
    got: dict[str, list] = {"reply": [], "tags": []}
    send, receive = ep.send, ep.receive

    def spy_send(to, step, value):
        if step.endswith(f"/{kkrt.STEP_HELLO}"):
            sent["hello"].append(value)
        elif step.endswith(f"{kkrt._prefix('alice', 'bob')}/{kkrt.STEP_U}"):
            sent["u"].append(np.array(value))
        return send(to, step, value)

    def spy_receive(frm, step, **kw):
        value = receive(frm, step, **kw)
        if step.endswith(f"/{kkrt.STEP_HELLO_REPLY}"):
            got["reply"].append(value)
        elif step.endswith(f"/{kkrt.STEP_TAGS}"):
            got["tags"].append(value)
        return value

    ep.send, ep.receive = spy_send, spy_receive  # type: ignore[method-assign]

    def party(net, ids):
        if net.me == "alice":
            return kkrt.kkrt_receive(net, "bob", _id_blocks(ids))
        return kkrt.kkrt_send(net, "alice", _id_blocks(ids))

    sim = simulate(party, {"alice": receiver_ids, "bob": sender_ids}, network=net, timeout=60)
    assert set(receiver_ids[sim.results["alice"]].tolist()) == set(common.tolist())
    ((k0, k1),) = ot_keys
    r_nonce, s_nonce = sent["hello"][0]["nonce"], got["reply"][0]["nonce"]
    keys = kkrt._Keys(r_nonce, s_nonce)
    bins = kkrt.cuckoo_bins(len(receiver_ids))
    length = kkrt.tag_bytes(len(receiver_ids), len(sender_ids))
    bits = kkrt.tag_bits(len(receiver_ids), len(sender_ids))
    width = len(k0)  # the code width: one base-OT pair per code bit
    tag_sets = [
        {bytes(t) for t in tagset.decode(v, len(sender_ids), bits, party="bob", step="tags")}
        for v in got["tags"]
    ]
    candidates = _id_blocks(domain)
    positions = kkrt._positions(candidates, keys, bins)

    def recovered_with(s_bytes: bytes) -> set[int]:
        s_bits = np.unpackbits(np.frombuffer(s_bytes, dtype=np.uint8))[:width]
        chosen = s_bits.astype(bool)
        streams = [AESCTRStream(bytes(k1[j] if chosen[j] else k0[j])) for j in range(width)]
        parts = []
        for (_, m), u in zip(kkrt._spans(bins), sent["u"], strict=True):
            g = np.empty_like(u)
            for j in range(width):
                g[j] = streams[j].read(m // 8)
            g[chosen] ^= u[chosen]
            parts.append(transpose_bits(g))
        q = np.concatenate(parts)
        s_row = pack(s_bits)
        # An id counts as found only if its tag matches under all three hash functions
        # (a wrong key can still hit the one bin an intersection item shares with it).
        hit = np.ones(len(domain), dtype=bool)
        for k in range(kkrt.HASHES):
            b = positions[:, k]
            rows = q[b] ^ (kkrt._codes(candidates, k, keys, width // 8) & s_row)
            tags = tagset.truncate(kkrt.oprf_hash(rows, b, keys.session, length), bits)
            hit &= np.array([bytes(t) in tag_sets[k] for t in tags])
        return {int(v) for v in domain[hit]}

    outside = set(only_sender.tolist())
    (true_s,) = real_s
    control = recovered_with(np.packbits(true_s.astype(np.uint8)).tobytes())
    assert outside <= control, "the attack itself does not work: the test proves nothing"
    for name, guess in _kkrt_key_guesses(r_nonce, s_nonce).items():
        leaked = recovered_with(guess) & outside
        assert not leaked, f"key guess {name} recovers {len(leaked)} of the sender's ids"
