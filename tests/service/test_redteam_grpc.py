"""Red team over real nodes (issue 21): a member runs its own node, chooses its own data
and every parameter the default policy accepts, and tries to read the others' data.

Every honest node runs the policy ``ppdm consortium init`` writes, with its secrets
planted in its settings files (the node re-reads ``[inputs]`` and ``[data]`` from there
for every job). For each attack class the job is refused, or a decoder run on what the
attacker's node received (the job document) recovers the honest parties' bits no better
than chance plus a margin; positive controls show each decoder *does* recover them when
the owner opts out of the protection, so a weakened default makes these tests fail.

Margins: a decoder's accuracy over ``m`` independent bits under the null has standard
deviation ``sqrt(p(1-p)/m) <= 0.5/sqrt(m)``; with ``m >= 120`` bits four standard
deviations are ``<= 0.19``, so "chance + 0.2" fails with probability below 1e-4 for a
protection that works, while a working attack scores ~1.0.
"""

from __future__ import annotations

import json
import math
import secrets
import time

import pytest

from ppdm.service.policy import DEFAULT_POLICY_TOML
from ppdm.testbed.consortia import GrpcTestbed

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(600)]

PARTIES = ["alice", "bob", "carol", "mallory"]
HONEST = PARTIES[:3]
N = 60  # vertical transactions
R = 24  # mallory's base rows for the differencing attack
ITEMS = {"alice": [1, 2, 3], "bob": [11, 12, 13, 14], "carol": [21, 22, 23]}
MARGIN = 0.2


def _bits(rng_bytes: bytes, n: int) -> list[int]:
    return [(rng_bytes[i // 8] >> (i % 8)) & 1 for i in range(n)]


def _vertical(root) -> tuple[dict[str, dict[int, list[int]]], dict[str, dict[str, str]]]:
    """Honest parties' random item columns (secret), mallory's crafted columns."""
    columns: dict[str, dict[int, list[int]]] = {}
    files: dict[str, dict[str, str]] = {p: {} for p in PARTIES}
    for p, items in ITEMS.items():
        columns[p] = {it: _bits(secrets.token_bytes(N // 8 + 1), N) for it in items}
        lines = [" ".join(str(it) for it in items if columns[p][it][i]) for i in range(N)]
        path = root / f"{p}-vertical.dat"
        path.write_text("\n".join(lines) + "\n")
        files[p].update(vt_ind=str(path), vt_diff=str(path), vt_adapt=str(path))
    # Indicator columns: item 1000+i in row i only.
    ind = root / "mallory-indicator.dat"
    ind.write_text("\n".join(str(1000 + i) for i in range(N)) + "\n")
    # Differencing columns: item 1999 on rows 0..R-1, item 2000+i on rows 0..R-1 and i.
    rows = []
    for i in range(N):
        items = [1999, *(2000 + k for k in range(R, N))] if i < R else [2000 + i]
        rows.append(" ".join(map(str, items)))
    diff = root / "mallory-differencing.dat"
    diff.write_text("\n".join(rows) + "\n")
    files["mallory"].update(
        vt_ind=str(ind), vt_diff=str(diff), vt_adapt=str(root / "mallory-adaptive.dat")
    )
    (root / "mallory-adaptive.dat").write_text("\n" * N)
    return columns, files


def _records(root, files) -> dict[str, list[tuple[int, int]]]:
    """Three well-separated blobs, five records of each per party; unique values."""
    out = {}
    used: set[int] = set()
    for p in PARTIES:
        recs = []
        for centre in (1000, 5000, 9000):
            for _ in range(5):
                while True:
                    x = centre + secrets.randbelow(400)
                    if x not in used:
                        used.add(x)
                        break
                recs.append((x, centre + secrets.randbelow(400)))
        out[p] = recs
        path = root / f"{p}-records.csv"
        start = PARTIES.index(p) * 100
        path.write_text(
            "record_id,ssn,x,y\n"
            + "".join(
                f"{start + i},{900000 + start + i},{a},{b}\n" for i, (a, b) in enumerate(recs)
            )
        )
        files[p]["records"] = str(path)
    return out


def _ids() -> dict[str, list[str]]:
    universe = [f"patient-{i:04d}" for i in range(200)]
    common = universe[:20]
    out = {}
    for k, p in enumerate(HONEST):
        own = universe[20 + 20 * k : 40 + 20 * k]
        out[p] = sorted(common + own)
    out["mallory"] = list(universe)  # every possible id
    return out


def _baskets(root, files) -> None:
    """bob holds the one basket with item 777; mallory crafts 9 of them."""
    for p in PARTIES:
        lines = ["1 2", "2 3", "1 3", "1 2 3"] * 5
        if p == "bob":
            lines[0] = "1 2 777"
        if p == "mallory":
            lines += ["777"] * 9
        path = root / f"{p}-baskets.dat"
        path.write_text("\n".join(lines) + "\n")
        files[p]["transactions"] = str(path)


@pytest.fixture(scope="module")
def red(tmp_path_factory):
    root = tmp_path_factory.mktemp("redteam")
    columns, files = _vertical(root)
    records = _records(root, files)
    _baskets(root, files)
    ids = _ids()
    inputs = {
        p: {
            "secure_sum": 1_000_003 * (k + 1),
            "set_union": [f"{p}-only-{i}" for i in range(4)] + ["shared-a", "shared-b"],
            "intersection": [f"x{i}" for i in range(30)],
            "ids": ids[p],
        }
        for k, p in enumerate(PARTIES)
    }
    inputs["mallory"]["intersection"] = ["x7"]  # a crafted one-item set: a membership test
    bob_policy = DEFAULT_POLICY_TOML + '\n[data.records]\ncolumns = ["x", "y", "record_id"]\n'
    bed = GrpcTestbed(
        PARTIES,
        root / "bed",
        timeout=30,
        inputs=inputs,
        data=files,
        policy={"bob": bob_policy},
    )
    with bed:
        yield bed, columns, records, ids, root


def _refused(doc: dict, *, rule: str | None = None) -> str:
    assert doc["state"] == "refused", json.dumps(doc, indent=1)[:3000]
    honest = {p: d for p, d in doc["decisions"].items() if p in HONEST and d.get("rule")}
    assert honest, doc["decisions"]
    if rule is not None:
        assert rule in {d["rule"] for d in honest.values()}, doc["decisions"]
    return doc["failed_party"]


def _frequent(doc: dict) -> list[dict]:
    result = doc["parties"]["mallory"]["result"] or {}
    return list(result.get("frequent_itemsets", []))


def _itemset_counts(doc: dict) -> dict[frozenset, float | None]:
    out = {}
    for entry in _frequent(doc):
        out[frozenset(int(x) for x in entry["items"])] = entry.get("support_count")
    return out


def _accuracy(guess: dict[tuple[int, int], int], truth: dict[tuple[int, int], int]) -> float:
    return sum(guess[k] == truth[k] for k in truth) / len(truth)


def _chance(truth: dict[tuple[int, int], int]) -> float:
    ones = sum(truth.values()) / len(truth)
    return max(ones, 1 - ones)


def _decode_indicator(doc, columns) -> tuple[float, float]:
    found = _itemset_counts(doc) if doc["state"] == "succeeded" else {}
    truth, guess = {}, {}
    for p in ("bob", "carol", "alice"):
        for it, col in columns[p].items():
            for i in range(N):
                truth[(it, i)] = col[i]
                guess[(it, i)] = int(frozenset({1000 + i, it}) in found)
    return _accuracy(guess, truth), _chance(truth)


def _decode_differencing(doc, columns) -> tuple[float, float]:
    found = _itemset_counts(doc) if doc["state"] == "succeeded" else {}
    truth, guess = {}, {}
    for p in ("bob", "carol", "alice"):
        for it, col in columns[p].items():
            base = found.get(frozenset({1999, it}))
            for i in range(R, N):
                truth[(it, i)] = col[i]
                got = found.get(frozenset({2000 + i, it}), "absent")
                if base is not None and got not in (None, "absent"):
                    guess[(it, i)] = int(float(got) - float(base) > 0.5)
                else:
                    # Without counts: frequent while the base is not (a threshold crossing).
                    guess[(it, i)] = int(got != "absent" and frozenset({1999, it}) not in found)
    return _accuracy(guess, truth), _chance(truth)


VERTICAL = {"mode": "vertical", "min_support": 0.01, "min_confidence": 0.5, "max_len": 2}


def test_crafted_vertical_columns_recover_nothing(red):
    bed, columns, *_ = red
    # Exact counts are refused: mallory is nobody's exact partner.
    doc = bed.run_job(
        "assoc", {**VERTICAL, "data": "vt_ind", "protect": "exact"}, initiator="mallory"
    )
    _refused(doc, rule="exact_partners")
    # Under the default (each owner's own noise, minimum aggregation) the job runs ...
    for data, decode in (("vt_ind", _decode_indicator), ("vt_diff", _decode_differencing)):
        doc = bed.run_job(
            "assoc", {**VERTICAL, "data": data, "reveal_counts": False}, initiator="mallory"
        )
        # accepted and run: the protection is the noise, not a refusal
        assert doc["state"] == "succeeded", doc["error"]
        accuracy, chance = decode(doc, columns)
        # ... and the decoder does no better than guessing the majority bit.
        assert accuracy <= chance + MARGIN, (data, accuracy, chance)


def _write_columns(path, columns: dict[int, set[int]]) -> None:
    path.write_text(
        "\n".join(" ".join(str(it) for it, rows in columns.items() if i in rows) for i in range(N))
        + "\n"
    )


def test_adaptive_threshold_crossings_recover_nothing(red):
    """A variant of our own, without counts: job 1 finds, with prefix columns, where the
    count of bob's item over mallory's prefix rows first reaches the threshold (10); the
    prefix one row shorter then holds exactly 9, so in job 2 a column "that prefix plus
    row i" is frequent with bob's item exactly when bob's bit at row i is 1. Each job
    stays within the 256 noisy counts of one epsilon; 20 bits per run. Without each
    owner's noise this decodes all 20 bits; a decoder at chance reaches 18 of 20 with
    probability 2e-4, so "below 0.9" fails only for a broken protection."""
    bed, columns, _, _, root = red
    target = 11  # one of bob's items
    path = root / "mallory-adaptive.dat"
    prefixes = range(10, 30)
    _write_columns(path, {3000 + m: set(range(m)) for m in prefixes})
    params = {**VERTICAL, "data": "vt_adapt"}
    one = bed.run_job("assoc", params, initiator="mallory")
    assert one["state"] == "succeeded", one["error"]
    found = _itemset_counts(one)
    crossing = next((m for m in prefixes if frozenset({3000 + m, target}) in found), 20)
    base = set(range(crossing - 1))
    probe_rows = [i for i in range(crossing - 1, N)][:20]
    _write_columns(path, {5000 + i: base | {i} for i in probe_rows})
    two = bed.run_job("assoc", params, initiator="mallory")
    assert two["state"] == "succeeded", two["error"]
    found = _itemset_counts(two)
    truth = {(target, i): columns["bob"][target][i] for i in probe_rows}
    guess = {(target, i): int(frozenset({5000 + i, target}) in found) for i in probe_rows}
    assert len(truth) == 20
    assert _accuracy(guess, truth) < 0.9, _accuracy(guess, truth)


def test_minimum_aggregation_hides_a_single_basket(red):
    bed, *_ = red
    doc = bed.run_job("assoc", {"min_support": 0.001, "min_confidence": 0.5}, initiator="mallory")
    assert doc["state"] == "succeeded", doc["error"]
    # bob's one basket with 777 plus mallory's nine reach 10 pooled, but only one lies
    # outside mallory's own: not released.
    assert frozenset({777}) not in _itemset_counts(doc)
    assert frozenset({1, 2}) in _itemset_counts(doc)  # the honest answer is there


def test_kmeans_never_publishes_a_record(red):
    bed, _, records, *_ = red
    for init in ("first-k", "kmeans++"):
        doc = bed.run_job(
            "kmeans", {"k": 3, "init": init, "columns": ["x", "y"]}, initiator="mallory"
        )
        _refused(doc, rule="allow_records")
    # k = the number of records: stopped before anything record-derived is sent.
    doc = bed.run_job("kmeans", {"k": 60, "columns": ["x", "y"]}, initiator="mallory")
    assert doc["state"] != "succeeded"
    doc_small = bed.run_job(
        "kmeans", {"k": 3, "min_cluster_size": 1, "columns": ["x", "y"]}, initiator="mallory"
    )
    _refused(doc_small, rule="min_aggregate")
    # An honest k-means runs, and no published value is one of the honest records.
    honest = bed.run_job("kmeans", {"k": 3, "columns": ["x", "y"]}, initiator="mallory")
    assert honest["state"] == "succeeded", honest["error"]
    text = json.dumps([honest, doc])
    values = {v for p in HONEST for rec in records[p] for v in rec}
    leaked = [v for v in values if f"{v}.0," in text or f" {v}," in text or f"[{v}," in text]
    assert leaked == []


def test_record_alignment_bounds_the_leader_and_the_columns(red):
    bed, _, _, ids, _ = red
    doc = bed.run_job(
        "psi-align",
        {"inputs": "ids"},
        initiator="mallory",
        parties=["mallory", "alice", "bob", "carol"],
    )
    # mallory's set is 3.3x the others': every honest party stops before any PSI message.
    assert doc["state"] != "succeeded"
    text = json.dumps(doc)
    bob_only = set(ids["bob"]) - set(ids["alice"]) - set(ids["carol"])
    assert not [i for i in bob_only if i in text]
    # An id column the owner did not list is never read.
    doc = bed.run_job("psi-align", {"id_column": "ssn"}, initiator="mallory")
    assert _refused(doc, rule="data.records.columns") == "bob"
    doc = bed.run_job(
        "kmeans",
        {"mode": "vertical", "align": True, "id_column": "ssn", "columns": ["x", "y"]},
        initiator="mallory",
    )
    assert doc["state"] == "refused"
    assert "data.records.columns" in {d.get("rule") for d in doc["decisions"].values()}


def test_set_operations_are_audited(red):
    bed, *_ = red
    doc = bed.run_job("set-union", initiator="mallory")
    assert doc["state"] == "succeeded", doc["error"]
    # The union without bob differences out bob's own items.
    doc = bed.run_job("set-union", initiator="mallory", parties=["alice", "carol", "mallory"])
    _refused(doc, rule="audit")
    assert "bob-only-0" not in json.dumps(doc)
    # A variant no sum auditor sees: the union without carol against the full one.
    doc = bed.run_job("set-union", initiator="mallory", parties=["alice", "bob", "mallory"])
    _refused(doc, rule="audit")
    # A crafted one-item set makes an intersection count a membership test: refused.
    doc = bed.run_job("intersection-cardinality", initiator="mallory")
    _refused(doc, rule="exact_partners")


def test_decoders_work_when_the_owner_opts_out(red):
    """Positive control: with exact counts allowed for mallory and no minimum
    aggregation, the same decoders recover the honest columns (so the tests above can
    fail). It changes every node's policy, and puts the written ones back after."""
    bed, columns, *_ = red
    saved = {p: bed.policy_path(p).read_text() for p in PARTIES}
    try:
        _positive_control(bed, columns)
    finally:
        for p, text in saved.items():
            bed.set_policy(p, text)
        time.sleep(1.0)


def _positive_control(bed, columns) -> None:
    opened = (
        DEFAULT_POLICY_TOML.replace("exact_partners = []", 'exact_partners = ["*"]')
        .replace("min_aggregate = 10", "min_aggregate = 0")
        .replace("min_party_records = 3", "min_party_records = 0")
    )
    assert opened != DEFAULT_POLICY_TOML
    for p in PARTIES:  # mallory's own node opts out too: it is the attacker's
        bed.set_policy(p, opened)
    time.sleep(1.0)  # the nodes re-read a policy file once it is 0.3 s old
    doc = bed.run_job(
        "assoc",
        {
            **VERTICAL,
            "data": "vt_diff",
            "protect": "exact",
            "min_aggregate": 0,
            "reveal_counts": True,
        },
        initiator="mallory",
    )
    assert doc["state"] == "refused"  # reveal_counts stays a disclosure-changing value
    for p in PARTIES:
        bed.set_policy(
            p, opened + "\n[jobs.assoc.params]\nreveal_counts = { values = [false, true] }\n"
        )
    time.sleep(1.0)
    doc = bed.run_job(
        "assoc",
        {
            **VERTICAL,
            "data": "vt_diff",
            "protect": "exact",
            "min_aggregate": 0,
            "reveal_counts": True,
        },
        initiator="mallory",
    )
    assert doc["state"] == "succeeded", doc["error"]
    accuracy, chance = _decode_differencing(doc, columns)
    assert accuracy >= 0.95 > chance + MARGIN or math.isclose(accuracy, 1.0), (accuracy, chance)
