"""Secure set union and intersection cardinality: in process and over gRPC.

Issue 4 goals: secure set union of 3 parties x 100,000 items (~50% overlap) over gRPC in
<= 60 s; intersection cardinality of 3 parties x 100,000 ids over gRPC: report. Baselines
measured in the same run: the plain (insecure, centralized) set operation on the same
data, and commutative encryption by 2048-bit modular exponentiation (Pohlig-Hellman, the
classic choice) against ppdm's secp256k1 scalar multiplication.
"""

from __future__ import annotations

import secrets
import sys
import tempfile
import time
from pathlib import Path

import gmpy2

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import Report, Row, parser, timed
from ppdm.jobs.document import simulate_job
from ppdm.jobs.registry import PartyContext
from ppdm.jobs.set_ops import generated_ids
from ppdm.protocols import commutative, ecgroup

PARTIES = ["alice", "bob", "carol"]


def modexp_rate(seconds: float = 1.0) -> float:
    """2048-bit Pohlig-Hellman encryptions per second (gmpy2 powmod)."""
    p = gmpy2.next_prime(gmpy2.mpz(secrets.randbits(2048)) | (1 << 2047))
    e = gmpy2.mpz(secrets.randbits(2040))
    x = gmpy2.mpz(secrets.randbits(2000))
    n = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(20):
            gmpy2.powmod(x + n, e, p)
        n += 20
    return n / (time.perf_counter() - t0)


def ec_rate(count: int = 20000) -> float:
    pts = commutative.hash_items([i.to_bytes(4, "big") for i in range(count)], domain=b"bench")
    key = commutative.CommutativeKey.generate()
    commutative.set_workers(1)
    t, _ = timed(lambda: key.encrypt(pts))
    return count / t


def plain_union(n: int) -> float:
    sets = [set(generated_ids(i, n, 0.5, 1)) for i in range(len(PARTIES))]
    t, _ = timed(lambda: set().union(*sets), repeat=3)
    return t


def plain_intersection(n: int) -> float:
    sets = [set(generated_ids(i, n, 0.5, 1)) for i in range(len(PARTIES))]
    t, _ = timed(lambda: len(set.intersection(*sets)), repeat=3)
    return t


def check(job: str, doc: dict, n: int) -> None:
    """The benchmark checks its own results: every party's union (size and SHA-256 of the
    sorted items) or cardinality equals the plain computation on the same generated sets."""
    from ppdm.jobs.set_ops import _digest

    if not doc.get("ok"):
        raise SystemExit(f"{job} failed: {doc.get('error')}")
    sets = [set(generated_ids(i, n, 0.5, 1)) for i in range(len(PARTIES))]
    for party, record in doc["parties"].items():
        result = record["result"]
        if job == "set-union":
            union = sorted(x.to_bytes(8, "big", signed=True) for x in set.union(*sets))
            if result["union_size"] != len(union) or result["union_sha256"] != _digest(union):
                raise SystemExit(f"set union at {party} differs from the plain union")
        elif result["cardinality"] != len(set.intersection(*sets)):
            raise SystemExit(f"intersection cardinality at {party} differs from the plain one")


def in_process(job: str, n: int) -> tuple[float, dict]:
    contexts = {p: PartyContext(p) for p in PARTIES}
    t0 = time.perf_counter()
    doc = simulate_job(job, contexts, {"generate_n": n, "workers": 1}, timeout=3600)
    elapsed = time.perf_counter() - t0
    check(job, doc, n)
    return elapsed, doc


def over_grpc(job: str, n: int) -> tuple[float, dict]:
    from ppdm.testbed.consortia import GrpcTestbed

    with (
        tempfile.TemporaryDirectory() as tmp,
        GrpcTestbed(PARTIES, Path(tmp), timeout=600, log_level="WARNING") as bed,
    ):
        t0 = time.perf_counter()
        doc = bed.run_job(job, {"generate_n": n}, timeout=600)
        elapsed = time.perf_counter() - t0
        check(job, doc, n)
        return elapsed, doc


def main() -> None:
    args = parser(__doc__.splitlines()[0]).parse_args()
    n = 2_000 if args.quick else 100_000
    n_local = 2_000 if args.quick else 20_000
    report = Report(f"secure set operations, 3 parties (n = {n:,} items each, 50% overlap)")
    ec = ec_rate(4000 if args.quick else 20000)
    mod = modexp_rate(0.5 if args.quick else 2.0)
    report.add(
        Row(
            "commutative_encryptions_per_s",
            ec,
            "1/s",
            mod,
            "2048-bit modexp (gmpy2)",
            "EC >> modexp",
        )
    )
    report.add(
        Row(
            "ecgroup_hash_to_point_per_s",
            2000
            / timed(lambda: [ecgroup.hash_to_point(i.to_bytes(4, "big")) for i in range(2000)])[0],
            "1/s",
        )
    )
    t, doc = in_process("set-union", n_local)
    size = doc["parties"]["alice"]["result"]["union_size"]
    report.add(
        Row(
            f"set_union_in_process_{n_local}_s",
            t,
            "s",
            plain_union(n_local),
            "plain set union",
            "",
            higher_is_better=False,
        )
    )
    report.extra["set_union_in_process_union_size"] = size
    t, doc = in_process("intersection-cardinality", n_local)
    report.add(
        Row(
            f"intersection_in_process_{n_local}_s",
            t,
            "s",
            plain_intersection(n_local),
            "plain intersection",
            "",
            higher_is_better=False,
        )
    )
    t, doc = over_grpc("set-union", n)
    if not doc.get("ok"):
        raise SystemExit(f"set union over gRPC failed: {doc.get('error')}")
    report.add(
        Row(
            f"set_union_grpc_{n}_s",
            t,
            "s",
            plain_union(n),
            "plain set union",
            "<= 60 s at 100,000",
            higher_is_better=False,
        )
    )
    report.extra["set_union_grpc_union_size"] = doc["parties"]["alice"]["result"]["union_size"]
    report.extra["set_union_grpc_bytes_sent_alice"] = doc["parties"]["alice"]["totals"][
        "bytes_sent"
    ]
    t, doc = over_grpc("intersection-cardinality", n)
    if not doc.get("ok"):
        raise SystemExit(f"intersection over gRPC failed: {doc.get('error')}")
    report.add(
        Row(
            f"intersection_grpc_{n}_s",
            t,
            "s",
            plain_intersection(n),
            "plain intersection",
            "report",
            higher_is_better=False,
        )
    )
    report.extra["intersection_grpc_cardinality"] = doc["parties"]["alice"]["result"]["cardinality"]
    report.finish(args.json)


if __name__ == "__main__":
    main()
