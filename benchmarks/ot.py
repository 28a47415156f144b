"""Oblivious transfer and what it powers: base OT, IKNP extension, comparison, dot product.

Rows (each measured in this run; baselines measured in the same run unless marked
"published"):

* Chou–Orlandi base OTs per second, both parties in one process and between two
  ``ppdm party serve`` processes over gRPC with mutual TLS (goal >= 5,000/s); baseline:
  X25519 scalar multiplications per second (PyNaCl, one core);
* random 1-out-of-2 OTs of 128-bit strings via IKNP extension, in process (goal
  >= 2,000,000/s) and over gRPC (goal >= 500,000/s), excluding the one-time 128 base
  OTs (reported separately in the JSON); baselines: AES-128-ECB blocks per second
  (``cryptography``, one core) and emp-ot's published 73M OT/s for IKNP in C++;
* binary dot product, n = 100,000, two processes over gRPC (goal <= 3 s), against the
  Paillier dot product job on the same length (``--quick``: 10,000);
* batched secure comparisons of 32-bit integers per second, in process and over gRPC;
* secure argmin (k = 5 shared distances of 32 bits) rows per second, in process.

    python benchmarks/ot.py --quick
    python benchmarks/ot.py --json ot.json
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Report, Row, parser, timed

from ppdm.jobs.ot import generated_bits, generated_values
from ppdm.parties.local import simulate
from ppdm.protocols.comparison import secure_argmin, secure_ge
from ppdm.protocols.dot_product_ot import binary_dot_product
from ppdm.protocols.ot.base import base_ot_receive_random, base_ot_send_random
from ppdm.protocols.ot.extension import IKNPReceiver, IKNPSender

EMP_OT_IKNP_PER_S = 73e6  # published (emp-toolkit, C++), not measured here


def x25519_per_s(n: int) -> float:
    from nacl.bindings import crypto_scalarmult

    keys = [os.urandom(32) for _ in range(n)]
    point = crypto_scalarmult(os.urandom(32), bytes([9]) + bytes(31))
    seconds, _ = timed(lambda: [crypto_scalarmult(k, point) for k in keys])
    return n / seconds


def aes_blocks_per_s(n: int) -> float:
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    buf = np.frombuffer(os.urandom(16 * n), dtype=np.uint8)
    out = np.empty(16 * n + 16, dtype=np.uint8)
    enc = Cipher(algorithms.AES(os.urandom(16)), modes.ECB()).encryptor()
    seconds, _ = timed(lambda: enc.update_into(buf, out), repeat=3)
    return n / seconds


def local_base_ot(count: int) -> float:
    choices = generated_bits("bob", 1, (count,), 0.5)

    def party(net, _):
        if net.me == "alice":
            return base_ot_send_random(net, "bob", count)
        return base_ot_receive_random(net, "alice", choices)

    sim = simulate(party, {"alice": None, "bob": None}, timeout=300)
    k0, k1 = sim.results["alice"]
    if not np.array_equal(sim.results["bob"], np.where(choices[:, None] == 1, k1, k0)):
        raise SystemExit("base OT returned wrong keys")
    return count / sim.wall_time_s


def local_extension(count: int, *, malicious_receiver: bool = False) -> tuple[float, float]:
    """(OTs per second excluding setup, setup seconds); ``malicious_receiver`` adds the
    KOS15 consistency check to every chunk."""
    choices = generated_bits("bob", 2, (count,), 0.5)
    marks: dict[str, tuple[float, float]] = {}

    def party(net, _):
        t0 = time.perf_counter()
        if net.me == "alice":
            s = IKNPSender.setup(net, "bob", malicious_receiver=malicious_receiver)
            t1 = time.perf_counter()
            sample = None
            for x0, x1 in s.iter_random(count):
                sample = sample if sample is not None else (x0[:1000].copy(), x1[:1000].copy())
        else:
            r = IKNPReceiver.setup(net, "alice", malicious_receiver=malicious_receiver)
            t1 = time.perf_counter()
            sample = None
            for x in r.iter_random(choices):
                sample = sample if sample is not None else x[:1000].copy()
        marks[net.me] = (t1 - t0, time.perf_counter() - t1)
        return sample

    sim = simulate(party, {"alice": None, "bob": None}, timeout=300)
    x0, x1 = sim.results["alice"]
    if not np.array_equal(sim.results["bob"], np.where(choices[:1000, None] == 1, x1, x0)):
        raise SystemExit("OT extension returned wrong messages")
    setup = max(m[0] for m in marks.values())
    run = max(m[1] for m in marks.values())
    return count / run, setup


def local_comparisons(count: int) -> float:
    x = generated_values("alice", 3, count, 32)
    y = generated_values("bob", 3, count, 32)

    def party(net, v):
        return secure_ge(net, v, x_party="alice", y_party="bob", bits=32)

    sim = simulate(party, {"alice": x, "bob": y}, timeout=300)
    if not np.array_equal(sim.results["alice"], x >= y):
        raise SystemExit("comparison returned wrong bits")
    return count / sim.wall_time_s


def local_argmin(points: int, k: int) -> float:
    d = generated_values("alice", 4, points * k, 32).reshape(points, k)
    mask = generated_values("bob", 4, points * k, 64).reshape(points, k)

    def party(net, s):
        peer = "bob" if net.me == "alice" else "alice"
        return secure_argmin(net, s, peer=peer, value_bits=32)

    sim = simulate(party, {"alice": d - mask, "bob": mask}, timeout=300)
    if not np.array_equal(sim.results["alice"], d.argmin(axis=1)):
        raise SystemExit("argmin returned wrong indices")
    return points / sim.wall_time_s


def local_dot(n: int) -> float:
    x = generated_bits("alice", 5, (n,), 0.5)
    y = generated_bits("bob", 5, (n,), 0.5)

    def party(net, v):
        return binary_dot_product(net, v, x_party="alice", y_party="bob")

    sim = simulate(party, {"alice": x, "bob": y}, timeout=300)
    if int(sim.results["alice"]) != int(x.astype(np.int64) @ y):
        raise SystemExit("dot product returned a wrong value")
    return sim.wall_time_s


def _job(bed, name: str, params: dict) -> dict:
    doc = bed.run_job(name, params, parties=["alice", "bob"])
    if doc["state"] != "succeeded":
        raise SystemExit(f"job {name} failed: {doc['error']}")
    return doc


def _seconds(doc: dict) -> float:
    return max(doc["parties"][p]["result"]["seconds"] for p in ("alice", "bob"))


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--no-grpc", action="store_true", help="skip the rows over gRPC")
    args = p.parse_args()
    quick = args.quick
    report = Report("Oblivious transfer (ppdm.protocols.ot) and OT-based protocols")

    n_base = 1000 if quick else 5000
    n_ext = 1 << 20 if quick else 1 << 23
    n_cmp = 5000 if quick else 100_000
    n_dot = 10_000 if quick else 100_000

    x25519 = x25519_per_s(2000 if quick else 20000)
    aes = aes_blocks_per_s(1 << 20 if quick else 1 << 23)
    report.extra["x25519_per_s"] = x25519
    report.extra["aes128_ecb_blocks_per_s"] = aes

    report.add(
        Row(
            "base_ot_local_per_s",
            local_base_ot(n_base),
            "OT/s",
            x25519,
            "X25519 mult/s",
            ">= 5,000/s",
        )
    )
    rate, setup = local_extension(n_ext)
    report.add(
        Row(
            "iknp_random_ot_local_per_s",
            rate,
            "OT/s",
            EMP_OT_IKNP_PER_S,
            "emp-ot IKNP (published)",
            ">= 2,000,000/s",
        )
    )
    report.extra["iknp_setup_local_s"] = setup
    report.extra["iknp_random_ot_local_vs_aes_blocks"] = rate / aes
    kos_rate, _ = local_extension(n_ext, malicious_receiver=True)
    report.add(
        Row(
            "iknp_kos15_random_ot_local_per_s",
            kos_rate,
            "OT/s",
            rate,
            "IKNP without the check (same run)",
            "(malicious_receiver=True: +1 message of 48 B and 192 OTs per chunk)",
        )
    )
    report.add(Row("comparisons_32bit_local_per_s", local_comparisons(n_cmp), "cmp/s"))
    report.add(
        Row("argmin_k5_32bit_local_rows_per_s", local_argmin(2000 if quick else 20000, 5), "rows/s")
    )
    report.add(
        Row(f"dot_product_{n_dot}_binary_local_s", local_dot(n_dot), "s", higher_is_better=False)
    )

    if not args.no_grpc:
        from ppdm.jobs.paillier import generated_input
        from ppdm.testbed.consortia import GrpcTestbed

        with (
            tempfile.TemporaryDirectory() as tmp,
            GrpcTestbed(["alice", "bob"], tmp, timeout=300, log_level="WARNING") as bed,
        ):
            _job(bed, "base-ot", {"count": 200})  # warm up the connections
            doc = _job(bed, "base-ot", {"count": n_base, "verify": 100})
            if doc["parties"]["bob"]["result"]["verified"] is not True:
                raise SystemExit("base OT over gRPC returned wrong keys")
            report.add(
                Row(
                    "base_ot_grpc_per_s",
                    n_base / _seconds(doc),
                    "OT/s",
                    x25519,
                    "X25519 mult/s",
                    ">= 5,000/s",
                )
            )

            doc = _job(bed, "ot-extension", {"count": n_ext, "verify": 1000})
            if doc["parties"]["bob"]["result"]["verified"] is not True:
                raise SystemExit("OT extension over gRPC returned wrong messages")
            report.add(
                Row(
                    "iknp_random_ot_grpc_per_s",
                    n_ext / _seconds(doc),
                    "OT/s",
                    EMP_OT_IKNP_PER_S,
                    "emp-ot IKNP (published)",
                    ">= 500,000/s",
                )
            )
            report.extra["iknp_setup_grpc_s"] = max(
                doc["parties"][q]["result"]["setup_seconds"] for q in ("alice", "bob")
            )
            report.extra["iknp_grpc_bytes_per_ot"] = (
                doc["parties"]["bob"]["totals"]["bytes_sent"] / n_ext
            )

            x = generated_bits("alice", 6, (1, n_dot), 0.5).astype(np.int64)
            y = generated_bits("bob", 6, (1, n_dot), 0.5).astype(np.int64)
            t0 = time.perf_counter()
            doc = _job(bed, "dot-product-ot", {"length": n_dot, "seed": 6})
            wall = time.perf_counter() - t0
            if doc["parties"]["alice"]["result"]["values"] != [int((x * y).sum())]:
                raise SystemExit("OT dot product over gRPC returned a wrong value")
            t0 = time.perf_counter()
            pdoc = _job(bed, "paillier-dot-product", {"length": n_dot, "seed": 11, "bits": 1})
            paillier_wall = time.perf_counter() - t0
            px = generated_input("alice", 11, n_dot, 1)
            py = generated_input("bob", 11, n_dot, 1)
            if pdoc["parties"]["alice"]["result"]["values"] != [int(px @ py)]:
                raise SystemExit("Paillier dot product returned a wrong value")
            report.add(
                Row(
                    f"dot_product_{n_dot}_binary_grpc_s",
                    wall,
                    "s",
                    paillier_wall,
                    "Paillier dot product job",
                    "<= 3 s",
                    higher_is_better=False,
                )
            )
            report.extra["dot_product_grpc_bytes"] = sum(
                doc["parties"][q]["totals"]["bytes_sent"] for q in ("alice", "bob")
            )

            doc = _job(bed, "comparison", {"count": n_cmp, "bits": 32, "seed": 9})
            xv = generated_values("alice", 9, n_cmp, 32)
            yv = generated_values("bob", 9, n_cmp, 32)
            if doc["parties"]["bob"]["result"]["true"] != int((xv >= yv).sum()):
                raise SystemExit("comparison over gRPC returned wrong bits")
            report.add(Row("comparisons_32bit_grpc_per_s", n_cmp / _seconds(doc), "cmp/s"))
            report.extra["comparison_grpc_bytes_per_cmp"] = (
                sum(doc["parties"][q]["totals"]["bytes_sent"] for q in ("alice", "bob")) / n_cmp
            )
    report.finish(args.json)


if __name__ == "__main__":
    main()
