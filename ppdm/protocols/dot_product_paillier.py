"""Secure dot product with Paillier encryption (Goethals, Laur, Lipmaa, Mielikäinen 2004).

Goethals, Laur, Lipmaa and Mielikäinen, "On private scalar product computation for
privacy-preserving data mining", ICISC 2004 (section 4, the homomorphic protocol); Aggarwal 2015
section 20.5 (dot products of the attribute columns of vertically partitioned data,
e.g. the support count of an itemset split over two parties).

Party A (the *holder*) has an integer vector ``x`` and the Paillier key pair; party B (the
*other*) has one or more integer vectors ``y`` of the same length (a matrix, one dot
product per row).

1. A sends its public key ``n`` and ``E(x_1), ..., E(x_d)`` in chunks (one message per
   ``chunk`` ciphertexts; B starts working on a chunk as soon as it arrives).
2. B checks every ciphertext is in ``Z*_{n^2}``, computes for each row ``y``
   ``c = prod_i E(x_i)^(y_i) * E(r) * s^n`` for a uniform ``r`` in ``Z_n`` and a uniform
   ``s`` in ``Z*_n``, and sends the ``c``'s back. (Binary ``y`` costs one modular
   multiplication per 1-entry; larger entries use the bucket method.)
3. A decrypts: ``x . y + r mod n``. B keeps ``-r mod n``: the two hold additive shares
   of the dot product modulo ``n``. On request one share is sent so that A, B or both
   learn the value (when only A learns it, B uses ``r = 0`` and skips the message).

Security (semi-honest)
----------------------
- B sees only ciphertexts under A's key: nothing about ``x`` under DCR (and, with ppdm's
  default DJN short randomness, the short-exponent assumption; see
  :mod:`ppdm.protocols.paillier.keys`).
- A sees ``x . y + r mod n`` with ``r`` uniform, so its share is uniform and independent
  of ``y``; the fresh ``s^n`` factor makes the ciphertext independent of which
  ciphertexts B combined, even for A who knows the factorization. When A learns the
  value it learns exactly ``x . y`` (for each row) and what follows from it.
- Two parties only; no collusion threshold applies. Against a malicious peer the
  protocol is not secure, but malformed messages (a bad key, ciphertexts outside
  ``Z*_{n^2}``, wrong counts) raise :class:`~ppdm.errors.ProtocolError` naming the party
  and step.
- Results are signed integers with ``|x . y| <= n // 3 - 1`` (else
  :class:`OverflowError`).

Cost: 2 rounds (3 with a revealed result). A -> B: the key (256 bytes) and ``d``
ciphertexts of ``2|n|`` bits (512 bytes at 2048 bits) in ``ceil(d / chunk)`` messages;
B -> A: ``k`` ciphertexts for ``k`` rows of ``y``. Computation: A makes ``d`` encryptions
(fixed-base tables, CRT) and ``k`` decryptions; B about ``d/2`` modular multiplications per
binary row and one full exponentiation per row (the ``s^n``).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from gmpy2 import mpz

from ppdm.errors import ProtocolError
from ppdm.parties.codec import BigInts
from ppdm.parties.network import Network
from ppdm.progress import Progress, progress_task
from ppdm.protocols.paillier.batch import multi_exp
from ppdm.protocols.paillier.comb import comb_layout
from ppdm.protocols.paillier.encoding import decode_signed, to_int64_or_object
from ppdm.protocols.paillier.keys import (
    DEFAULT_KEY_BITS,
    MIN_KEY_BITS,
    PaillierPrivateKey,
    PaillierPublicKey,
    generate_keypair,
)

__all__ = ["DotProductResult", "dot_product_paillier"]

Output = Literal["shares", "holder", "other", "both"]
_OUTPUTS = ("shares", "holder", "other", "both")
#: Ciphertexts per message (512 bytes each at 2048 bits: 2 MiB messages).
DEFAULT_CHUNK = 4096


@dataclass(frozen=True)
class DotProductResult:
    """One party's outcome of :func:`dot_product_paillier`.

    ``shares[j]`` is this party's additive share of the ``j``-th dot product modulo
    ``modulus`` (the two parties' shares add up to it mod ``modulus``). ``values`` holds
    the signed dot products if this party learns them (``output`` option), else ``None``.
    """

    shares: tuple[int, ...]
    modulus: int
    values: np.ndarray | None


def _int_vector(v: Any, what: str) -> np.ndarray:
    a = np.asarray(v)
    if a.dtype == np.bool_:
        a = a.astype(np.int64)
    if not np.issubdtype(a.dtype, np.integer):
        raise TypeError(f"{what} must be an integer or bool array, not {a.dtype}")
    if a.dtype == np.uint64 and a.size and int(a.max()) >= 1 << 63:
        raise OverflowError(f"{what} must fit in int64")
    return a.astype(np.int64)


def dot_product_paillier(
    net: Network,
    vector: np.ndarray,
    *,
    holder: str | None = None,
    other: str | None = None,
    output: Output = "shares",
    key: PaillierPrivateKey | None = None,
    key_bits: int = DEFAULT_KEY_BITS,
    min_key_bits: int = MIN_KEY_BITS,
    chunk: int = DEFAULT_CHUNK,
    workers: int | None = None,
    progress: Progress | None = None,
) -> DotProductResult:
    """Dot products of the holder's ``x`` with each row of the other party's ``y``.

    Both parties call this. The holder passes its 1-D vector ``x`` (and optionally its
    ``key``; default: a fresh ``key_bits`` key); the other party passes a 1-D vector or a
    2-D matrix whose rows have ``len(x)`` entries (one dot product per row; a 1-D ``y``
    is one row).

    Parameters
    ----------
    net
        This party's network.
    vector
        ``x`` at the holder, ``y`` at the other party (integer or bool arrays).
    holder, other
        The two parties (default: the first two parties of the consortium).
    output
        ``"shares"`` (additive shares mod ``n``, nobody learns the value), ``"holder"``,
        ``"other"`` or ``"both"`` (who learns the dot products).
    key
        The holder's Paillier key pair (its private half).
    key_bits, min_key_bits
        Size of a freshly generated key; smallest key the other party accepts.
    chunk
        Ciphertexts per message.
    workers
        Processes for the holder's encryption (``None``: this process only).
    progress
        Progress reporting for the holder's encryption.

    Returns
    -------
    DotProductResult

    Examples
    --------
    >>> import numpy as np
    >>> from ppdm.parties.local import run_local
    >>> from ppdm.protocols.paillier import generate_keypair
    >>> _, sk = generate_keypair(1024, allow_insecure=True)
    >>> x = np.array([1, 0, 1, 1]); y = np.array([[1, 1, 0, 1], [2, -3, 4, 0]])
    >>> out = run_local(
    ...     lambda net, v: dot_product_paillier(
    ...         net, v, output="both", key=sk if net.me == "alice" else None, min_key_bits=1024
    ...     ),
    ...     {"alice": x, "bob": y},
    ... )
    >>> out["alice"].values.tolist(), out["bob"].values.tolist()
    ([2, 6], [2, 6])
    >>> n = out["alice"].modulus
    >>> [(a + b) % n for a, b in zip(out["alice"].shares, out["bob"].shares)]
    [2, 6]
    """
    holder = holder if holder is not None else net.parties[0]
    other = other if other is not None else next(p for p in net.parties if p != holder)
    if holder == other:
        raise ValueError("holder and other must be different parties")
    if output not in _OUTPUTS:
        raise ValueError(f"output must be one of {_OUTPUTS}")
    if chunk < 1:
        raise ValueError("chunk must be positive")
    if net.me == holder:
        x = _int_vector(vector, "x")
        if x.ndim != 1:
            raise ValueError("the holder's vector must be 1-D")
        return _holder(net, x, other, output, key, key_bits, chunk, workers, progress)
    if net.me == other:
        y = _int_vector(vector, "y")
        if y.ndim not in (1, 2):
            raise ValueError("the other party's vector must be 1-D or 2-D")
        return _other(net, y, holder, output, min_key_bits)
    raise ValueError(f"party {net.me!r} is neither the holder nor the other party")


def _holder(
    net: Network,
    x: np.ndarray,
    other: str,
    output: Output,
    key: PaillierPrivateKey | None,
    key_bits: int,
    chunk: int,
    workers: int | None,
    progress: Progress | None,
) -> DotProductResult:
    d = len(x)
    if key is None:
        # A fresh key's encryption tables sized for the encryptions each process makes.
        window, blocks = comb_layout(-(-d // workers) if workers and workers > 1 else d)
        key = generate_keypair(key_bits, window=window, blocks=blocks)[1]
    priv = key
    pub = priv.public_key
    n = int(pub.n)
    chunks = -(-d // chunk)
    net.send(other, "dot/key", {"n": n, "length": d, "chunks": chunks})
    # Chunks of equal size (at most ``chunk``): no small last chunk that a worker pool
    # would leave to this process (and its own encryption tables).
    size = -(-d // chunks) if chunks else chunk
    with progress_task(progress, "dot product: encrypting", total=d) as bar:
        for start in range(0, d, size):
            part = x[start : start + size]
            net.send(other, "dot/ciphertexts", BigInts(priv.encrypt_many(part, workers=workers)))
            bar.advance(len(part))
    step = "dot/result"
    raw = net.receive(other, step, expect=BigInts)
    results = pub.check_ciphertexts(list(raw), other, step)
    if not results:
        raise ProtocolError(other, step, "no dot products returned")
    shares = tuple(int(m) for m in priv.raw_decrypt_many(results))
    values = None
    if output in ("other", "both"):
        net.send(other, "dot/share", BigInts(shares))
    if output == "holder":
        values = _signed(n, shares)
    elif output == "both":
        theirs = _receive_shares(net, other, len(shares), n)
        values = _signed(n, [(a + b) % n for a, b in zip(shares, theirs, strict=True)])
    return DotProductResult(shares, n, values)


def _other(
    net: Network, y: np.ndarray, holder: str, output: Output, min_key_bits: int
) -> DotProductResult:
    rows = y.reshape(1, -1) if y.ndim == 1 else y
    k, d = rows.shape
    step = "dot/key"
    hello = net.receive(holder, step, expect=dict)
    pub = PaillierPublicKey.from_peer(hello.get("n"), holder, step, min_bits=min_key_bits)
    if hello.get("length") != d:
        raise ProtocolError(holder, step, f"vector length {hello.get('length')!r}, expected {d}")
    chunks = hello.get("chunks")
    if isinstance(chunks, bool) or not isinstance(chunks, int) or not 0 <= chunks <= d:
        raise ProtocolError(holder, step, f"chunk count {chunks!r} for {d} entries")
    if (chunks == 0) != (d == 0):
        raise ProtocolError(holder, step, "no chunks for a non-empty vector")
    n2 = pub.nsquare
    acc = [mpz(1)] * k
    received = 0
    step = "dot/ciphertexts"
    for _ in range(chunks):
        batch = net.receive(holder, step, expect=BigInts)
        if received + len(batch) > d or not batch:
            raise ProtocolError(holder, step, "more ciphertexts than vector entries")
        cts = pub.check_ciphertexts(list(batch), holder, step)
        cols = slice(received, received + len(cts))
        for j in range(k):
            acc[j] = acc[j] * multi_exp(pub, cts, rows[j, cols]) % n2
        received += len(cts)
    if received != d:
        raise ProtocolError(holder, step, f"{received} ciphertexts for {d} entries")
    n = int(pub.n)
    masks = [0 if output == "holder" else secrets.randbelow(n) for _ in range(k)]
    out = []
    for c, r in zip(acc, masks, strict=True):
        c = pub._apply(mpz(r), c) if r else c
        out.append(c * pub.statistical_mask() % n2)
    net.send(holder, "dot/result", BigInts(out))
    shares = tuple((-r) % n for r in masks)
    values = None
    if output in ("other", "both"):
        theirs = _receive_shares(net, holder, k, n)
        values = _signed(n, [(a + b) % n for a, b in zip(shares, theirs, strict=True)])
        if output == "both":
            net.send(holder, "dot/share", BigInts(shares))
    return DotProductResult(shares, n, values)


def _receive_shares(net: Network, frm: str, count: int, n: int) -> list[int]:
    step = "dot/share"
    got = net.receive(frm, step, expect=BigInts)
    if len(got) != count or any(not 0 <= v < n for v in got):
        raise ProtocolError(frm, step, f"expected {count} shares in Z_n")
    return [int(v) for v in got]


def _signed(n: int, residues: Sequence[int]) -> np.ndarray:
    try:
        return to_int64_or_object([decode_signed(n, m) for m in residues])
    except OverflowError as exc:
        raise OverflowError(f"dot product overflowed the key's signed range: {exc}") from None
