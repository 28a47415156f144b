"""Every protocol's view, tested like its output: what a party receives must not depend on
the other parties' inputs beyond what its own input and output determine.

For each protocol, two input settings ``A`` and ``B`` give the observing party the same
own input and the same output while the *other* parties' inputs differ. The protocol runs
several times under each; the observer's view -- every value it receives, flattened to
bytes -- is recorded. A simulation-based proof says the two view distributions are
identical; the test checks that they have the same structure (lengths) and that a
chi-square test on their byte frequencies cannot tell them apart (false-failure rate
below 1e-6 per protocol). A mask dropped, a value sent in the clear or an input-dependent
message length makes them differ.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import gmpy2
import numpy as np
import pytest
from scipy.stats import chi2_contingency

from ppdm.parties.local import LocalNetwork, simulate

RUNS = 10


def _flatten(value: Any, out: list[bytes]) -> None:
    if isinstance(value, np.ndarray):
        out.append(np.ascontiguousarray(value).tobytes())
    elif isinstance(value, bytes | bytearray):
        out.append(bytes(value))
    elif isinstance(value, bool):
        out.append(b"\x01" if value else b"\x00")
    elif isinstance(value, int) or type(value) is type(gmpy2.mpz(0)):
        v = int(value)
        # Whole 32-byte words, as on the wire (fixed-width batches): a ciphertext a few
        # bits shorter than another is not a different structure.
        nbytes = (v.bit_length() + (8 if v < 0 else 7)) // 8 or 1
        out.append(v.to_bytes(-(-nbytes // 32) * 32, "big", signed=v < 0))
    elif isinstance(value, str):
        out.append(value.encode())
    elif isinstance(value, dict):
        for k in sorted(value):
            _flatten(value[k], out)
    elif isinstance(value, list | tuple):
        for v in value:
            _flatten(v, out)
    elif hasattr(value, "values") and not callable(value.values):
        _flatten(list(value.values), out)  # BigInts and similar wrappers
    elif hasattr(value, "__iter__"):
        _flatten(list(value), out)
    else:
        raise TypeError(f"cannot flatten a {type(value).__name__} from a view")


def view(fn: Callable[[Any, Any], Any], inputs: dict[str, Any], observer: str) -> bytes:
    """Everything ``observer`` receives in one run of ``fn`` (in-process network)."""
    net = LocalNetwork(list(inputs), job_id=uuid.uuid4().hex, timeout=60)
    got: list[bytes] = []
    ep = net.endpoint(observer)
    original = ep.receive

    def spy(frm, step, **kw):
        value = original(frm, step, **kw)
        _flatten(value, got)
        return value

    ep.receive = spy  # type: ignore[method-assign]
    simulate(fn, inputs, network=net, timeout=60)
    return b"".join(got)


def assert_indistinguishable(
    fn: Callable[[Any, Any], Any],
    a: dict[str, Any],
    b: dict[str, Any],
    observer: str,
    *,
    runs: int = RUNS,
) -> None:
    views_a = [view(fn, a, observer) for _ in range(runs)]
    views_b = [view(fn, b, observer) for _ in range(runs)]
    lengths_a = sorted(len(v) for v in views_a)
    lengths_b = sorted(len(v) for v in views_b)
    assert lengths_a == lengths_b, "the view's length depends on others' inputs"
    ha = np.bincount(np.frombuffer(b"".join(views_a), np.uint8), minlength=256)
    hb = np.bincount(np.frombuffer(b"".join(views_b), np.uint8), minlength=256)
    keep = (ha + hb) > 0
    table = np.vstack([ha[keep], hb[keep]])
    if table.shape[1] < 2:
        assert np.array_equal(ha, hb)
        return
    p = chi2_contingency(table).pvalue
    assert p > 1e-6, f"views differ (chi-square p = {p:.2e})"


# -- the protocols ---------------------------------------------------------------------------


def test_collusion_resistant_sum():
    from ppdm.protocols.additive_sum import additive_sum

    def fn(net, x):
        return additive_sum(net, x)

    bob = np.array([3, 4, 5, 6] * 64, dtype=np.int64)
    a = {"alice": np.full(256, 5, np.int64), "bob": bob, "carol": np.full(256, 7, np.int64)}
    b = {"alice": np.full(256, 12, np.int64), "bob": bob, "carol": np.zeros(256, np.int64)}
    assert_indistinguishable(fn, a, b, "bob")


def test_ring_secure_sum():
    from ppdm.protocols.secure_sum import secure_sum

    bob = np.arange(256, dtype=np.int64)
    a = {"alice": np.full(256, 9, np.int64), "bob": bob, "carol": np.full(256, 1, np.int64)}
    b = {"alice": np.zeros(256, np.int64), "bob": bob, "carol": np.full(256, 10, np.int64)}
    assert_indistinguishable(secure_sum, a, b, "bob")


def test_secure_comparison():
    from ppdm.protocols.comparison import secure_ge

    def fn(net, v):
        return secure_ge(net, v, x_party="alice", y_party="bob", bits=32)

    rng = np.random.default_rng(5)
    y = np.full(64, 1000, dtype=np.int64)
    xa = rng.integers(1000, 2**31, 64).astype(np.int64)  # every x >= y in both settings
    xb = rng.integers(1000, 2**31, 64).astype(np.int64)
    assert_indistinguishable(fn, {"alice": xa, "bob": y}, {"alice": xb, "bob": y}, "bob")


def test_ot_binary_dot_product():
    from ppdm.protocols.dot_product_ot import binary_dot_product

    def fn(net, v):
        return binary_dot_product(net, v, x_party="alice", y_party="bob")

    y = np.ones(512, dtype=np.uint8)
    xa = np.zeros(512, dtype=np.uint8)
    xa[:100] = 1
    xb = np.zeros(512, dtype=np.uint8)
    xb[-100:] = 1  # same product with bob's all-ones vector
    assert_indistinguishable(fn, {"alice": xa, "bob": y}, {"alice": xb, "bob": y}, "bob")


@pytest.fixture(scope="module")
def paillier_key():
    from ppdm.protocols.paillier import generate_keypair

    return generate_keypair(512, allow_insecure=True)


def test_paillier_dot_product_other_party_view(paillier_key):
    from ppdm.protocols.dot_product_paillier import dot_product_paillier

    _, priv = paillier_key

    def fn(net, v):
        key = priv if net.me == "alice" else None
        return dot_product_paillier(
            net, v, holder="alice", other="bob", output="holder", key=key, min_key_bits=512
        )

    y = np.ones(64, dtype=np.int64)
    xa = np.arange(64, dtype=np.int64)
    xb = np.full(64, int(xa.sum()) // 64, dtype=np.int64)
    xb[0] += int(xa.sum()) - int(xb.sum())  # same dot product with bob's ones
    assert_indistinguishable(fn, {"alice": xa, "bob": y}, {"alice": xb, "bob": y}, "bob", runs=6)


def test_intersection_cardinality():
    from ppdm.protocols.intersection import secure_intersection_cardinality

    def fn(net, items):
        return secure_intersection_cardinality(net, items)

    common = list(range(20))
    a = {"alice": [*common, *range(100, 140)], "bob": [*common, *range(200, 240)], "carol": common}
    b = {"alice": [*common, *range(500, 540)], "bob": [*common, *range(200, 240)], "carol": common}
    assert_indistinguishable(fn, a, b, "bob", runs=6)


def test_threshold_sign_of_sums():
    from ppdm.protocols.threshold import secure_sum_nonnegative

    bob = np.array([5, -5, 0, 9] * 16, dtype=np.int64)
    a = {"alice": np.full(64, 50, np.int64), "bob": bob, "carol": np.full(64, -10, np.int64)}
    b = {"alice": np.full(64, 7, np.int64), "bob": bob, "carol": np.full(64, 30, np.int64)}
    assert_indistinguishable(secure_sum_nonnegative, a, b, "bob", runs=6)


def test_base_ot_receiver_learns_nothing_of_unchosen():
    from ppdm.protocols.ot.base import base_ot_receive, base_ot_send

    rng = np.random.default_rng(3)
    choices = rng.integers(0, 2, 64)
    chosen = rng.integers(0, 256, (64, 32)).astype(np.uint8)

    def setting(other):
        m0 = np.where(choices[:, None] == 0, chosen, other)
        m1 = np.where(choices[:, None] == 1, chosen, other)
        return {"alice": (m0, m1), "bob": choices}

    def fn(net, v):
        if net.me == "alice":
            return base_ot_send(net, "bob", *v)
        return base_ot_receive(net, "alice", v, length=32)

    a = setting(np.zeros((64, 32), np.uint8))
    b = setting(np.full((64, 32), 0xFF, np.uint8))
    assert_indistinguishable(fn, a, b, "bob")


def test_one_of_n_receiver_learns_nothing_of_unchosen():
    from ppdm.protocols.ot.one_of_n import one_of_n_receive, one_of_n_send

    rng = np.random.default_rng(4)
    n, m, length = 8, 32, 24
    choices = rng.integers(0, n, m)
    chosen = rng.integers(0, 256, (m, length)).astype(np.uint8)

    def setting(fill):
        msgs = np.full((m, n, length), fill, dtype=np.uint8)
        msgs[np.arange(m), choices] = chosen
        return {"alice": msgs, "bob": choices}

    def fn(net, v):
        if net.me == "alice":
            return one_of_n_send(net, "bob", v)
        return one_of_n_receive(net, "alice", v, n=n, length=length)

    assert_indistinguishable(fn, setting(0), setting(0xAB), "bob", runs=6)
