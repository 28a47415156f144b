"""Randomizers of large batches are computed on several threads (gmpy2 releases the GIL):
same distribution and correctness as one thread, nothing shared between batches."""

from __future__ import annotations

import gmpy2
import pytest

from ppdm.protocols.paillier import comb, generate_keypair


@pytest.fixture(scope="module")
def keypair():
    return generate_keypair(1024, allow_insecure=True)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_threaded_batches_decrypt_and_never_repeat(keypair, monkeypatch, threads):
    pub, priv = keypair
    monkeypatch.setattr(comb, "MASK_THREADS", threads)
    monkeypatch.setattr(comb, "_mask_pool", None)
    values = list(range(-100, 157))  # above MASK_THREAD_MIN: split among the threads
    cts = pub.encrypt_many(values)
    assert priv.decrypt_many(cts) == values
    owner = priv.encrypt_many(values)
    assert priv.decrypt_many(owner) == values
    # every randomizer is fresh: equal plaintexts give distinct ciphertexts everywhere
    zeros = pub.raw_encrypt_many([0] * 200) + priv.raw_encrypt_many([0] * 200)
    assert len(set(map(int, zeros))) == 400
    # and each is an n-th residue of full order in its half (not 1, not a small power)
    n2 = pub.nsquare
    assert all(gmpy2.gcd(c, pub.n) == 1 and c != 1 and c < n2 for c in zeros)


def test_split_keeps_order_and_count(monkeypatch):
    monkeypatch.setattr(comb, "MASK_THREADS", 3)
    monkeypatch.setattr(comb, "_mask_pool", None)
    calls: list[int] = []

    def work(k: int) -> list[int]:
        calls.append(k)
        return list(range(k))

    out = comb.threaded_batches(work, 200)
    assert len(out) == 200 and sorted(calls) == [66, 67, 67]
    assert comb.threaded_batches(work, 10) == list(range(10))
