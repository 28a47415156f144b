"""Paillier dot product against numpy on random and edge inputs, on the in-process network
and (one test) between ``ppdm party serve`` processes; malicious peers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppdm.errors import ProtocolError
from ppdm.parties.codec import BigInts
from ppdm.parties.local import run_local, simulate
from ppdm.protocols.dot_product_paillier import dot_product_paillier
from ppdm.protocols.paillier import generate_keypair, multi_exp

PUB, PRIV = generate_keypair(1024, allow_insecure=True)
N = int(PUB.n)


def _run(x, y, *, output="shares", chunk=7, key=PRIV, min_key_bits=1024):
    def party(net, v):
        return dot_product_paillier(
            net,
            v,
            output=output,
            key=key if net.me == "alice" else None,
            min_key_bits=min_key_bits,
            chunk=chunk,
        )

    return run_local(party, {"alice": x, "bob": y})


def _plain(x, y):
    y2 = np.atleast_2d(y).astype(object)
    return [int(v) for v in y2 @ np.asarray(x).astype(object)]


@settings(max_examples=10)
@given(
    st.integers(min_value=0, max_value=40),
    st.integers(min_value=1, max_value=3),
    st.sampled_from(["binary", "small", "large"]),
    st.sampled_from(["shares", "holder", "other", "both"]),
    st.integers(min_value=0, max_value=2**32),
)
def test_dot_product_equals_plain(d, rows, kind, output, seed):
    gen = np.random.default_rng(seed)
    if kind == "binary":
        x, y = gen.integers(0, 2, d), gen.integers(0, 2, (rows, d)).astype(bool)
    elif kind == "small":
        x, y = gen.integers(-50, 50, d), gen.integers(-50, 50, (rows, d))
    else:
        x, y = gen.integers(-(2**62), 2**62, d), gen.integers(-(2**62), 2**62, (rows, d))
    out = _run(x, y, output=output)
    want = _plain(x, y)
    a, b = out["alice"], out["bob"]
    assert a.modulus == b.modulus == N
    assert [(s + t) % N for s, t in zip(a.shares, b.shares, strict=True)] == [w % N for w in want]
    learners = {"shares": (), "holder": ("alice",), "other": ("bob",), "both": ("alice", "bob")}
    for party in ("alice", "bob"):
        if party in learners[output]:
            assert [int(v) for v in out[party].values] == want
        else:
            assert out[party].values is None


def test_one_dimensional_y_and_fresh_key():
    x, y = np.array([3, 0, -2]), np.array([1, 5, 4])
    out = run_local(
        lambda net, v: dot_product_paillier(net, v, output="holder", key_bits=2048),
        {"alice": x, "bob": y},
    )
    assert out["alice"].values.tolist() == [-5]
    assert out["alice"].modulus.bit_length() == 2048


def test_chunks_are_even_and_at_most_chunk():
    """The holder sends ``ceil(d / chunk)`` chunks of equal size (no short last chunk)."""
    sizes: list[int] = []

    def party(net, v):
        if net.me == "bob":
            receive = net.receive

            def recording(frm, step, **options):
                got = receive(frm, step, **options)
                if step == "dot/ciphertexts":
                    sizes.append(len(got))
                return got

            net.receive = recording
        return dot_product_paillier(
            net,
            v,
            output="holder",
            key=PRIV if net.me == "alice" else None,
            min_key_bits=1024,
            chunk=4,
        )

    x, y = np.array([1, 0, 1, 1, 0, 1, 1, 1, 0]), np.array([1, 1, 1, 0, 1, 1, 0, 1, 1])
    out = run_local(party, {"alice": x, "bob": y})
    assert out["alice"].values.tolist() == [int(x @ y)]
    assert sizes == [3, 3, 3]


@pytest.mark.parametrize(
    ("d", "workers", "large"), [(4, None, True), (3, None, False), (8, 2, True), (6, 2, False)]
)
def test_fresh_key_tables_sized_for_each_process(monkeypatch, d, workers, large):
    """A fresh key gets the large-batch comb layout when each encrypting process (this
    one, or each of ``workers``) makes at least ``LARGE_BATCH_MIN_POWERS`` encryptions."""
    import ppdm.protocols.dot_product_paillier as module
    from ppdm.protocols.paillier import comb

    monkeypatch.setattr(comb, "LARGE_BATCH_MIN_POWERS", 4)
    monkeypatch.setattr(comb, "LARGE_BATCH_WINDOW", 5)
    monkeypatch.setattr(comb, "LARGE_BATCH_BLOCKS", 3)
    made = []

    def small_keypair(bits, **options):
        made.append(options)
        return generate_keypair(1024, allow_insecure=True, **options)

    monkeypatch.setattr(module, "generate_keypair", small_keypair)
    x, y = np.arange(d) % 2, (np.arange(d) + 1) % 3
    out = run_local(
        lambda net, v: dot_product_paillier(
            net, v, output="holder", min_key_bits=1024, workers=workers, chunk=d
        ),
        {"alice": x, "bob": y},
    )
    assert out["alice"].values.tolist() == [int(x @ y)]
    want = (5, 3) if large else (comb.DEFAULT_WINDOW, comb.DEFAULT_COMB_BLOCKS)
    assert [(o["window"], o["blocks"]) for o in made] == [want]


def test_shares_are_masked():
    x, y = np.array([1, 1]), np.array([1, 1])
    seen = {_run(x, y)["alice"].shares[0] for _ in range(3)}
    assert len(seen) == 3 and 2 not in seen


def test_edge_inputs():
    assert _run(np.zeros(0, dtype=int), np.zeros((2, 0), dtype=int), output="both")[
        "bob"
    ].values.tolist() == [0, 0]
    extreme = np.array([-(2**63) + 1, 2**63 - 1])
    got = _run(extreme, np.array([[2**63 - 1, 2**63 - 1]]), output="holder")["alice"].values
    assert got.tolist() == _plain(extreme, np.array([[2**63 - 1, 2**63 - 1]]))
    with pytest.raises(ProtocolError, match="length") as info:
        _run(np.array([1, 2, 3]), np.array([1, 2]))
    assert info.value.party == "alice" and info.value.step == "dot/key"
    with pytest.raises(ProtocolError, match="bits") as info:
        _run(np.array([1]), np.array([1]), min_key_bits=2048)
    assert info.value.party == "alice"
    with pytest.raises(TypeError):
        _run(np.array([1.5]), np.array([1]))


@given(st.lists(st.integers(min_value=-(2**63) + 1, max_value=2**63 - 1), min_size=0, max_size=25))
def test_multi_exp_matches_plain(exps):
    xs = list(range(-12, -12 + len(exps)))
    cts = PUB.encrypt_many(xs)
    assert PRIV.decrypt(multi_exp(PUB, cts, np.array(exps, dtype=np.int64))) == sum(
        a * b for a, b in zip(xs, exps, strict=True)
    )


def _malicious(alice_script):
    def party(net, v):
        if net.me == "alice":
            alice_script(net)
            net.receive("bob", "dot/result", timeout=5)
            return None
        return dot_product_paillier(net, v, min_key_bits=1024)

    return simulate(party, {"alice": None, "bob": np.array([1, 0, 1])}, timeout=10)


@pytest.mark.parametrize(
    "hello, batch, step, reason",
    [
        ({"n": N, "length": 3, "chunks": 1}, [1, 0, 1], "dot/ciphertexts", "ciphertext 1"),
        (
            {"n": N, "length": 3, "chunks": 1},
            [1, 2, int(PRIV.p)],
            "dot/ciphertexts",
            "ciphertext 2",
        ),
        ({"n": N, "length": 3, "chunks": 1}, [1, 2, N * N], "dot/ciphertexts", "ciphertext 2"),
        ({"n": N, "length": 3, "chunks": 1}, [1, 2, 3, 4], "dot/ciphertexts", "more"),
        ({"n": N, "length": 3, "chunks": 2}, [1, 2, 3], "dot/ciphertexts", "more"),
        ({"n": N, "length": 3, "chunks": 9}, [1], "dot/key", "chunk count"),
        ({"n": N + 1, "length": 3, "chunks": 1}, [1], "dot/key", "valid"),
        ({"n": "x", "length": 3, "chunks": 1}, [1], "dot/key", "integer"),
    ],
)
def test_bad_holder_messages_raise_protocol_error(hello, batch, step, reason):
    def script(net):
        net.send("bob", "dot/key", hello)
        net.send("bob", "dot/ciphertexts", BigInts(batch))
        if hello.get("chunks") == 2:
            net.send("bob", "dot/ciphertexts", BigInts([5]))

    with pytest.raises(ProtocolError, match=reason) as info:
        _malicious(script)
    assert info.value.party == "alice" and info.value.step == step


@pytest.mark.parametrize("reply", [BigInts([0]), BigInts([]), BigInts([N * N + 1]), [1]])
def test_bad_results_raise_protocol_error(reply):
    def party(net, v):
        if net.me == "bob":
            net.receive("alice", "dot/key")
            net.receive("alice", "dot/ciphertexts")
            net.send("alice", "dot/result", reply)
            net.receive("alice", "never", timeout=5)
            return None
        return dot_product_paillier(net, v, key=PRIV)

    with pytest.raises(ProtocolError) as info:
        simulate(party, {"alice": np.array([1, 2]), "bob": None}, timeout=10)
    assert info.value.party == "bob" and info.value.step == "dot/result"


@pytest.mark.grpc
@pytest.mark.timeout(120)
def test_jobs_between_party_processes(tmp_path):
    from ppdm.jobs.paillier import generated_input
    from ppdm.testbed.consortia import GrpcTestbed

    # Naming an aggregator changes who learns the sum: the owners allow it explicitly.
    policy = "version = 1\n[jobs.secure-sum-shared.params]\naggregator = { any = true }\n"
    with GrpcTestbed(["alice", "bob", "carol"], tmp_path, timeout=60, policy=policy) as bed:
        doc = bed.run_job(
            "paillier-dot-product",
            {"length": 300, "seed": 7, "bits": 16, "output": "both", "chunk": 128},
            parties=["alice", "bob"],
        )
        assert doc["state"] == "succeeded", doc["error"]
        x, y = generated_input("alice", 7, 300, 16), generated_input("bob", 7, 300, 16)
        for party in ("alice", "bob"):
            assert doc["parties"][party]["result"]["values"] == [int(x @ y)]
        assert doc["parties"]["alice"]["totals"]["bytes_sent"] > 300 * 256

        doc = bed.run_job("secure-sum-shared", {"aggregator": "bob"})
        assert doc["state"] == "succeeded", doc["error"]
        inputs = bed.private_inputs()
        raw = [inputs[p]["secure_sum"] for p in ("alice", "bob", "carol")]
        want = sum(raw) if isinstance(raw[0], int) else [sum(c) for c in zip(*raw, strict=True)]
        assert {str(doc["parties"][p]["result"]["sum"]) for p in bed.parties} == {str(want)}
