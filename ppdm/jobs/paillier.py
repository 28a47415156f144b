"""Jobs for the Paillier dot product and the collusion-resistant (additive) secure sum.

``paillier-dot-product``
    The first job party (or ``holder``) holds ``x`` and the key, the second ``y``. With
    ``length > 0`` each party generates its own random input of that length from
    ``seed`` and its name (:func:`generated_input`: binary with ``bits = 1``, else signed
    ``bits``-bit integers), for benchmarks; with ``length = 0`` it reads the list
    ``[inputs] dot_product`` of its settings file. ``output`` says who learns the value.
``secure-sum-shared``
    :func:`ppdm.protocols.additive_sum.additive_sum` of ``[inputs] secure_sum`` (an int or
    a list of ints), or of a generated random vector when ``length > 0``.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from ppdm.errors import ConfigError
from ppdm.jobs.registry import JobSpec, PartyContext, register_job
from ppdm.parties.network import Network

__all__ = ["generated_input"]


def _int_param(params: Mapping[str, Any], name: str, *, low: int, high: int) -> int:
    v = params.get(name)
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= high:
        raise ConfigError(f"parameter {name!r} must be an integer in [{low}, {high}]")
    return v


def generated_input(party: str, seed: int, length: int, bits: int) -> np.ndarray:
    """The benchmark input of ``party``: ``length`` values, binary for ``bits == 1`` else
    uniform signed ``bits``-bit integers, from numpy's PCG64 seeded with ``seed`` and the
    party name (test data, not secrets; anyone can recompute it to check a result)."""
    digest = hashlib.blake2b(f"{seed}/{party}".encode(), digest_size=8).digest()
    gen = np.random.Generator(np.random.PCG64(int.from_bytes(digest, "big")))
    if bits == 1:
        return gen.integers(0, 2, size=length, dtype=np.int64)
    return gen.integers(-(1 << (bits - 1)), 1 << (bits - 1), size=length, dtype=np.int64)


def _private_vector(ctx: PartyContext, key: str) -> np.ndarray:
    raw = ctx.private_input(key)
    if isinstance(raw, bool) or not isinstance(raw, int | list):
        raise ConfigError(f"party {ctx.name!r}: inputs.{key} must be an int or a list of ints")
    values = raw if isinstance(raw, list) else [raw]
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise ConfigError(f"party {ctx.name!r}: inputs.{key} must hold integers")
    return np.asarray(values, dtype=np.int64)


def run_dot_product(net: Network, params: Mapping[str, Any], ctx: PartyContext) -> dict[str, Any]:
    """Run :func:`dot_product_paillier` between ``holder`` and ``other``."""
    # Imported per run: a node registers every job at start, and gmpy2 and the
    # Paillier tables are not needed until a Paillier job runs.
    from ppdm.protocols.dot_product_paillier import dot_product_paillier

    length = _int_param(params, "length", low=0, high=100_000_000)
    seed = _int_param(params, "seed", low=0, high=2**63 - 1)
    bits = _int_param(params, "bits", low=1, high=62)
    key_bits = _int_param(params, "key_bits", low=2048, high=8192)
    chunk = _int_param(params, "chunk", low=1, high=32768)
    workers = _int_param(params, "workers", low=0, high=64)
    output = params.get("output")
    holder = params.get("holder") or net.parties[0]
    other = params.get("other") or next(p for p in net.parties if p != holder)
    if holder not in net.parties or other not in net.parties or holder == other:
        raise ConfigError("holder and other must be two different parties of the job")
    if net.me not in (holder, other):
        return {"role": "none"}
    if length:
        vector = generated_input(net.me, seed, length, bits)
    else:
        vector = _private_vector(ctx, "dot_product")
    t0 = time.perf_counter()
    res = dot_product_paillier(
        net,
        vector,
        holder=holder,
        other=other,
        output=output,  # type: ignore[arg-type]
        key_bits=key_bits,
        chunk=chunk,
        workers=workers or None,
        progress=ctx.progress,
    )
    out: dict[str, Any] = {
        "role": "holder" if net.me == holder else "other",
        "length": len(vector),
        "protocol_s": round(time.perf_counter() - t0, 6),
    }
    if res.values is not None:
        out["values"] = [int(v) for v in res.values]
    return out


def run_secure_sum_shared(
    net: Network, params: Mapping[str, Any], ctx: PartyContext
) -> dict[str, Any]:
    """Run :func:`additive_sum` on this party's input."""
    from ppdm.protocols.additive_sum import additive_sum

    length = _int_param(params, "length", low=0, high=100_000_000)
    seed = _int_param(params, "seed", low=0, high=2**63 - 1)
    aggregator = params.get("aggregator") or None
    if aggregator is not None and aggregator not in net.parties:
        raise ConfigError(f"aggregator {aggregator!r} is not a party of the job")
    if length:
        vector = generated_input(net.me, seed, length, 32)
        scalar = False
    else:
        raw = ctx.private_input("secure_sum")
        scalar = isinstance(raw, int)
        vector = _private_vector(ctx, "secure_sum")
    t0 = time.perf_counter()
    total = additive_sum(net, vector, aggregator=aggregator)
    out: dict[str, Any] = {
        "parties": list(net.parties),
        "protocol_s": round(time.perf_counter() - t0, 6),
    }
    if length:
        out["sum_head"] = [int(v) for v in total[:8]]
        out["length"] = length
    else:
        out["sum"] = int(total[0]) if scalar else [int(v) for v in total]
    return out


register_job(
    JobSpec(
        name="paillier-dot-product",
        summary="dot product of two parties' vectors with Paillier (Goethals et al. 2004)",
        run=run_dot_product,
        defaults={
            "length": 0,
            "seed": 0,
            "bits": 1,
            "key_bits": 2048,
            "chunk": 4096,
            "workers": 0,
            "output": "holder",
            "holder": "",
            "other": "",
        },
    )
)

register_job(
    JobSpec(
        name="secure-sum-shared",
        summary="sum of private integers, secure against n-1 colluders (additive sharing)",
        run=run_secure_sum_shared,
        defaults={"length": 0, "seed": 0, "aggregator": ""},
    )
)
