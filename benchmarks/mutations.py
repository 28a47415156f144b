"""Deliberate privacy bugs, and the tests that catch them (issue 12, item 5; issue 22).

A catalogue of mutations across protocols, parties, service, mining and anonymization.
Each one weakens privacy (or a check that protects it) while every answer stays correct:
the kind of bug a suite that only checks outputs lets through. For each mutation this
script copies the checkout to a temporary folder, applies the mutation there (a text
substitution whose anchor must occur exactly once), runs the listed tests against the
copy, and reports:

- ``caught``: at least one listed test fails on the mutant, and the same tests pass on
  the unmutated copy (the *null run*, once per distinct test list);
- ``NOT CAUGHT``: every listed test passes on the mutant;
- ``does not apply``: the anchor text is not in the file (the code was rewritten); such a
  mutation is listed and counted apart, never silently as caught or skipped;
- ``broken``: the mutant does not even import (errors, no failing test): rewrite it;
- ``null run fails``: the tests fail without the mutation, so they prove nothing.

The working tree is never modified. The output ends with caught/total per area (total =
mutations that apply).

    python benchmarks/mutations.py                   # all of them (long: use a quiet machine)
    python benchmarks/mutations.py --quick --only sum-unmasked,ot-base-fixed-key
    python benchmarks/mutations.py --area protocols --json mutations.json
    python benchmarks/mutations.py --list            # the catalogue, and which anchors apply

``--quick`` stops each mutant's run at its first failing test (``pytest -x``); the null
runs always run in full. The gRPC tier is left out unless a mutation needs it
(``grpc=True``), and hypothesis runs derandomized (the ``ci`` profile), so a verdict does
not depend on luck. Exit code 0 if every mutation that applies is caught and every null
run is clean, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
AREAS = ("protocols", "parties", "service", "mining", "anonymize")


@dataclass(frozen=True)
class Mutation:
    area: str
    name: str
    what: str
    file: str
    old: str
    new: str
    tests: tuple[str, ...]
    grpc: bool = False  # run the gRPC tier of the listed tests too


PRIVACY = ("tests/privacy/test_guards.py", "tests/privacy/test_views.py")
SET_OPS = ("tests/protocols/test_set_ops.py", "tests/protocols/test_set_ops_privacy.py")
PSI = ("tests/protocols/test_psi.py",)

MUTATIONS: tuple[Mutation, ...] = (
    # -- protocols ---------------------------------------------------------------------------
    Mutation(
        "protocols",
        "sum-unmasked",
        "the vector ring secure sum sends its first value unmasked",
        "ppdm/protocols/secure_sum.py",
        "            mask = np.frombuffer(secrets.token_bytes(8 * n), dtype=np.uint64).copy()",
        "            mask = np.zeros(n, dtype=np.uint64)",
        (*PRIVACY, "tests/protocols/test_secure_sum.py"),
    ),
    Mutation(
        "protocols",
        "sum-int-mask-small",
        "the integer ring secure sum draws its mask from 256 values",
        "ppdm/protocols/secure_sum.py",
        "        mask = secrets.randbelow(m)\n",
        "        mask = secrets.randbelow(min(m, 256))\n",
        (*PRIVACY, "tests/protocols/test_secure_sum.py"),
    ),
    Mutation(
        "protocols",
        "sum-residue-unchecked",
        "the secure sum accepts a ring value outside Z_m from a peer",
        "ppdm/protocols/secure_sum.py",
        "    if isinstance(v, bool) or not 0 <= v < m:",
        "    if isinstance(v, bool):",
        ("tests/protocols/test_secure_sum.py",),
    ),
    Mutation(
        "protocols",
        "additive-sum-unmasked",
        "the collusion-resistant sum with zero pairwise masks",
        "ppdm/protocols/additive_sum.py",
        '    return np.frombuffer(stream, dtype="<u8").astype(np.uint64)',
        "    return np.zeros(length, dtype=np.uint64)",
        ("tests/privacy/test_views.py", "tests/protocols/test_additive_sum.py"),
    ),
    Mutation(
        "protocols",
        "threshold-mask-zero",
        "the threshold protocol's ring mask is zero",
        "ppdm/protocols/threshold.py",
        "        mask = np.frombuffer(secrets.token_bytes(8 * m), dtype=np.uint64).copy()",
        "        mask = np.zeros(m, dtype=np.uint64)",
        ("tests/protocols/test_threshold.py", *PRIVACY),
    ),
    Mutation(
        "protocols",
        "gmw-reshare-zero",
        "GMW re-sharing hands one party the whole share (the other half is zero)",
        "ppdm/protocols/gmw.py",
        "        half = np.frombuffer(secrets.token_bytes(8 * m), dtype=np.uint64) & masks",
        "        half = np.zeros(m, dtype=np.uint64) & masks",
        ("tests/protocols/test_gmw.py",),
    ),
    Mutation(
        "protocols",
        "comparison-fixed-bits",
        "secure comparison's random bits are all zero",
        "ppdm/protocols/bit_triples.py",
        "    return unpack(np.frombuffer(secrets.token_bytes((n + 7) // 8), dtype=np.uint8), n)",
        "    return unpack(np.zeros((n + 7) // 8, dtype=np.uint8), n)",
        ("tests/protocols/test_comparison.py", "tests/privacy/test_attacker_recovery.py"),
    ),
    Mutation(
        "protocols",
        "paillier-16-bit",
        "Paillier encryption randomness cut to a 16-bit exponent",
        "ppdm/protocols/paillier/keys.py",
        "            exponent_bits = max(int(n.bit_length()) // 2, 16)",
        "            exponent_bits = 16",
        ("tests/protocols/test_paillier_privacy.py", "tests/protocols/test_paillier.py"),
    ),
    Mutation(
        "protocols",
        "paillier-random-module",
        "Paillier randomness from Python's `random` with a fixed seed",
        "ppdm/protocols/paillier/comb.py",
        "        raw = np.frombuffer(os.urandom(nbytes * count), dtype=np.uint8)",
        '        raw = np.frombuffer(__import__("random").Random(7).randbytes(nbytes * count),'
        " dtype=np.uint8)",
        ("tests/protocols/test_paillier_privacy.py", "tests/protocols/test_paillier.py"),
    ),
    Mutation(
        "protocols",
        "paillier-textbook-mask-small",
        "the textbook Paillier randomizer r drawn below 2^16",
        "ppdm/protocols/paillier/keys.py",
        "            r = mpz(secrets.randbelow(int(self.n) - 1) + 1)",
        "            r = mpz(secrets.randbelow(1 << 16) + 1)",
        ("tests/protocols/test_paillier_privacy.py", "tests/privacy/test_attacker_recovery.py"),
    ),
    Mutation(
        "protocols",
        "dot-paillier-unmasked",
        "the Paillier dot product returns unmasked products to the key holder",
        "ppdm/protocols/dot_product_paillier.py",
        '    masks = [0 if output == "holder" else secrets.randbelow(n) for _ in range(k)]',
        "    masks = [0 for _ in range(k)]",
        ("tests/protocols/test_dot_product_paillier.py",),
    ),
    Mutation(
        "protocols",
        "ot-hash-no-xor",
        "the OT-extension hash without its final XOR",
        "ppdm/protocols/ot/crhash.py",
        "    y = aes_permute(px ^ tweaks)\n    y ^= px\n    return y",
        "    y = aes_permute(px ^ tweaks)\n    return y",
        ("tests/privacy/test_guards.py", "tests/protocols/test_ot_extension.py"),
    ),
    Mutation(
        "protocols",
        "ot-tweak-reuse",
        "the OT-extension hash reusing tweaks across chunks",
        "ppdm/protocols/ot/crhash.py",
        "tweaks[:, b] = make_tweaks(start, n, session, b)",
        "tweaks[:, b] = make_tweaks(start % 1024, n, session, b)",
        ("tests/privacy/test_guards.py", "tests/protocols/test_ot_extension.py"),
    ),
    Mutation(
        "protocols",
        "ot-base-fixed-key",
        "the base-OT sender reuses one fixed secret scalar (OT key reuse)",
        "ppdm/protocols/ot/base.py",
        "        self._a = ecgroup.random_scalar()",
        "        self._a = 0x5EED",
        ("tests/protocols/test_ot_base.py", "tests/privacy/test_guards.py"),
    ),
    Mutation(
        "protocols",
        "ot-base-receiver-fixed",
        "the base-OT receiver uses one fixed scalar for every choice",
        "ppdm/protocols/ot/base.py",
        "            bb = _scalar_bytes(secrets.randbelow(ecgroup.ORDER - 1) + 1)",
        "            bb = _scalar_bytes(7)",
        ("tests/protocols/test_ot_base.py", "tests/privacy/test_guards.py"),
    ),
    Mutation(
        "protocols",
        "ot-ext-fixed-s",
        "the IKNP sender's secret choice string s is all zeros",
        "ppdm/protocols/ot/extension.py",
        "        s_bits = np.unpackbits(np.frombuffer(secrets.token_bytes(KAPPA // 8), np.uint8))",
        "        s_bits = np.unpackbits(np.frombuffer(bytes(KAPPA // 8), np.uint8))",
        ("tests/protocols/test_ot_extension.py", "tests/privacy/test_guards.py"),
    ),
    Mutation(
        "protocols",
        "ot-ext-session-fixed",
        "the OT-extension session nonce is a constant (sessions share tweaks)",
        "ppdm/protocols/ot/extension.py",
        "        mine = secrets.token_bytes(SESSION_NONCE_BYTES)\n"
        "        scoped.send(peer, STEP_SESSION_REPLY, mine)",
        "        mine = bytes(SESSION_NONCE_BYTES)\n        scoped.send(peer, STEP_SESSION_REPLY, mine)",
        (
            "tests/protocols/test_ot_extension.py",
            "tests/privacy/test_guards.py",
            "tests/privacy/test_attacker_recovery.py",
        ),
    ),
    Mutation(
        "protocols",
        "kk13-triples-unmasked",
        "the KK13 triple tables without the key masks x^v (the receiver reads the sender's b)",
        "ppdm/protocols/bit_triples.py",
        "    table = keys ^ x0[:, None] ^ f\n",
        "    table = (keys & 0) ^ x0[:, None] ^ f\n",
        ("tests/protocols/test_comparison_triples.py",),
    ),
    Mutation(
        "protocols",
        "kk13-u-unmasked",
        "the KK13 receiver sends its codewords C(r_j) without the PRG masks",
        "ppdm/protocols/ot/kk13.py",
        "            u[row] ^= t[i]\n",
        "            u[row] = 0\n",
        ("tests/protocols/test_ot_kk13.py",),
    ),
    Mutation(
        "protocols",
        "softspoken-u-unmasked",
        "the SoftSpoken receiver sends its choice bits c without the leaf streams' mask",
        "ppdm/protocols/ot/softspoken.py",
        "        u ^= d[_POSITION]",
        "        u[:] = d[_POSITION]",
        ("tests/protocols/test_ot_softspoken.py",),
    ),
    Mutation(
        "protocols",
        "softspoken-fixed-delta",
        "the SoftSpoken sender's Delta is the same in every session (all zero)",
        "ppdm/protocols/ot/softspoken.py",
        "        delta = np.frombuffer(secrets.token_bytes(BLOCKS), np.uint8) & np.uint8(LEAVES - 1)",
        "        delta = np.zeros(BLOCKS, np.uint8)",
        ("tests/protocols/test_ot_softspoken.py",),
    ),
    Mutation(
        "protocols",
        "softspoken-fixed-roots",
        "the SoftSpoken receiver's GGM roots are the same in every session",
        "ppdm/protocols/ot/softspoken.py",
        "        nodes = np.frombuffer(secrets.token_bytes(BLOCKS * BLOCK), np.uint8)",
        "        nodes = np.zeros(BLOCKS * BLOCK, np.uint8)",
        ("tests/protocols/test_ot_softspoken.py",),
    ),
    Mutation(
        "protocols",
        "kk13-tweak-no-index",
        "the KK13 hash without the OT index in its tweak (tweaks reused across OTs)",
        "ppdm/protocols/ot/kk13.py",
        "make_tweaks(start, n, session, block + b)",
        "make_tweaks(0, n, session, block + b)",
        ("tests/protocols/test_ot_kk13.py",),
    ),
    Mutation(
        "protocols",
        "kk13-fixed-s",
        "the KK13 sender's secret s is all zeros (all 16 keys equal the chosen one)",
        "ppdm/protocols/ot/kk13.py",
        "        s_bits = np.unpackbits(np.frombuffer(secrets.token_bytes(CODE_BITS // 8), np.uint8))",
        "        s_bits = np.unpackbits(np.frombuffer(bytes(CODE_BITS // 8), np.uint8))",
        ("tests/protocols/test_ot_kk13.py", "tests/protocols/test_comparison.py"),
    ),
    Mutation(
        "protocols",
        "ec-scalar-small",
        "every EC secret scalar (commutative keys, OT) drawn below 2^16",
        "ppdm/protocols/ecgroup.py",
        "    return secrets.randbelow(ORDER - 1) + 1",
        "    return secrets.randbelow(1 << 16) + 1",
        (*SET_OPS, *PSI, "tests/protocols/test_ot_base.py"),
    ),
    Mutation(
        "protocols",
        "set-no-shuffle",
        "set union / intersection pass encrypted sets on in their original order",
        "ppdm/protocols/commutative.py",
        "    return points[SecureRandom().permutation(points.shape[0])]",
        "    return points",
        (*SET_OPS, *PRIVACY),
    ),
    Mutation(
        "protocols",
        "set-union-no-fakes",
        "set union adds no fake items (set sizes exposed)",
        "ppdm/protocols/set_union.py",
        "    return int(SecureRandom().integers(0, bound + 1, 1)[0]) if bound > 0 else 0",
        "    return 0",
        (*SET_OPS, "tests/privacy/test_guards.py"),
    ),
    Mutation(
        "protocols",
        "fake-items-constant",
        "fake items all carry the same content (recognisable after encryption)",
        "ppdm/protocols/commutative.py",
        "        rnd = os.urandom(CHUNK_BYTES * count)",
        "        rnd = bytes(CHUNK_BYTES * count)",
        SET_OPS,
    ),
    Mutation(
        "protocols",
        "psi-dummy-zero",
        "PSI padding blocks are all zero (one value: padding is recognisable)",
        "ppdm/protocols/psi/ids.py",
        "        out[:, :15] = np.frombuffer(os.urandom(15 * count), dtype=np.uint8).reshape(count, 15)",
        "        out[:, :15] = 0",
        PSI,
    ),
    # Not in the catalogue: "KKRT fills empty cuckoo bins from a fixed key" is an
    # equivalent mutant. The filler rows reach the sender only inside u = G(k0) ^ G(k1) ^
    # columns, pseudorandom whatever the rows are, and the receiver never uses them: no
    # party's view changes, so no test can (or should) catch it.
    Mutation(
        "protocols",
        "psi-oprf-key-from-transcript",
        "the KKRT sender's OPRF key s is derived from the public nonces",
        "ppdm/protocols/psi/kkrt.py",
        "    s_bits = np.unpackbits(np.frombuffer(os.urandom(CODE_BYTES), dtype=np.uint8))",
        "    s_bits = np.unpackbits(\n"
        "        np.frombuffer(hashlib.sha512(theirs + mine).digest(), dtype=np.uint8)\n"
        "    )",
        (*PSI, "tests/privacy/test_attacker_recovery.py"),
    ),
    Mutation(
        "protocols",
        "kkrt-s-fixed",
        "the KKRT sender's OPRF key string s is all zeros",
        "ppdm/protocols/psi/kkrt.py",
        "    s_bits = np.unpackbits(np.frombuffer(os.urandom(CODE_BYTES), dtype=np.uint8))",
        "    s_bits = np.unpackbits(np.frombuffer(bytes(CODE_BYTES), dtype=np.uint8))",
        PSI,
    ),
    Mutation(
        "protocols",
        "column-ots-pad-reuse",
        "a kept column's new products restart their pads at hash block 0 (pads reused)",
        "ppdm/protocols/column_ots.py",
        "        col.block += blocks\n",
        "        col.block += 0\n",
        ("tests/protocols/test_gmw.py",),
    ),
    Mutation(
        "protocols",
        "column-ots-pad-no-index",
        "pads hashed from IKNP rows without the OT index in their tweaks (tweaks reused)",
        "ppdm/protocols/column_ots.py",
        "        part[:, :, 0] = index[j]\n",
        "        part[:, :, 0] = 0\n",
        ("tests/protocols/test_gmw.py",),
    ),
    Mutation(
        "protocols",
        "column-ots-pad-own-session",
        "pads hashed from IKNP rows under a fixed session field, not the IKNP session's tag",
        "ppdm/protocols/column_ots.py",
        "    fields = np.repeat(np.asarray(session, dtype=np.uint64), count) << np.uint64(BLOCK_BITS)\n",
        "    fields = np.repeat(np.ones(m, dtype=np.uint64), count) << np.uint64(BLOCK_BITS)\n",
        ("tests/protocols/test_gmw.py",),
    ),
    Mutation(
        "protocols",
        "kkrt-hash-xor-blocks",
        "the KKRT OPRF hash XORs its blocks' hashes (s guessable half by half, 2^64 work)",
        "ppdm/protocols/psi/kkrt.py",
        "        out = tccr_hash(part ^ out, _tweaks(bins, session, _TWEAK_BLOCK + j))",
        "        out ^= tccr_hash(part, _tweaks(bins, session, _TWEAK_BLOCK + j))",
        ("tests/protocols/test_psi.py",),
    ),
    Mutation(
        "protocols",
        "psi-ec-reply-order",
        "EC PSI sends the sender's encrypted ids in their original order",
        "ppdm/protocols/psi/ec.py",
        "    scoped.send(receiver, STEP_THEIRS, shuffle_rows(mine))",
        "    scoped.send(receiver, STEP_THEIRS, mine)",
        (*PSI, "tests/privacy/test_guards.py"),
    ),
    Mutation(
        "protocols",
        "csprng-fixed-seed",
        "the library's secure random source is a fixed-seed generator",
        "ppdm/randomness.py",
        "        return np.frombuffer(os.urandom(8 * n), dtype=np.uint64).copy()",
        "        return np.random.default_rng(0).integers(0, 2**63, n, dtype=np.uint64)",
        (*PRIVACY, "tests/privacy/test_attacker_recovery.py"),
    ),
    # -- parties -----------------------------------------------------------------------------
    Mutation(
        "parties",
        "endpoint-sender-spoof",
        "an envelope claiming another sender than its connection is accepted",
        "ppdm/parties/network.py",
        "        if sender is not None and claimed != sender:",
        "        if False:",
        ("tests/core/test_endpoint.py", "tests/parties/test_network_contract.py"),
    ),
    Mutation(
        "parties",
        "endpoint-seq-unchecked",
        "replayed or reordered envelopes are accepted (sequence numbers unchecked)",
        "ppdm/parties/network.py",
        "            if envelope.seq != expected:",
        "            if False:",
        ("tests/core/test_endpoint.py", "tests/parties/test_network_contract.py"),
    ),
    Mutation(
        "parties",
        "endpoint-job-unchecked",
        "an envelope of another job is delivered into this one",
        "ppdm/parties/network.py",
        "        elif envelope.job_id != self._job_id:",
        "        elif False:",
        ("tests/core/test_endpoint.py", "tests/parties/test_network_contract.py"),
    ),
    Mutation(
        "parties",
        "frame-seq-unchecked",
        "gRPC frames out of sequence are reassembled anyway",
        "ppdm/parties/framing.py",
        "        if frame.seq != expected_seq:",
        "        if False:",
        ("tests/parties/test_framing.py",),
    ),
    Mutation(
        "parties",
        "codec-shape-unchecked",
        "the codec accepts arrays of any shape from a peer (a dropped range check)",
        "ppdm/parties/codec.py",
        "    if len(shape) > MAX_ARRAY_DIMS or any(s >= 1 << 40 for s in shape):",
        "    if False:",
        ("tests/core/test_codec.py", "tests/parties/test_codec_bounds.py"),
    ),
    Mutation(
        "parties",
        "codec-depth-unchecked",
        "the codec decodes payloads nested without limit",
        "ppdm/parties/codec.py",
        "    if depth > MAX_DEPTH:\n        raise DecodeError",
        "    if False:\n        raise DecodeError",
        ("tests/core/test_codec.py",),
    ),
    Mutation(
        "parties",
        "roster-signature-unchecked",
        "a roster is taken without checking the consortium CA's signature",
        "ppdm/parties/consortium_file.py",
        "        public.verify(signature, payload, ec.ECDSA(hashes.SHA256()))\n"
        "    except InvalidSignature:",
        "        pass\n    except InvalidSignature:",
        ("tests/parties/test_consortium.py", "tests/parties/test_roster_changes.py"),
        grpc=True,
    ),
    # Not in the catalogue: "a caller with an expired (or not yet valid) roster
    # certificate is let in" by dropping the check in `authenticate`. The TLS handshake
    # already refuses such a certificate (BoringSSL checks the dates against the CA), so
    # the check is defence in depth that no caller can reach: an equivalent mutant.
    # tests/parties/test_certificate_lifetime.py dials a node with expired and future
    # certificates and shows every RPC refused.
    # -- service (code being rewritten for issue 21: anchors may stop applying) ---------------
    Mutation(
        "service",
        "abort-carries-exception",
        "a failed job's Abort carries the exception text (private values) to every peer",
        "ppdm/service/lifecycle.py",
        "            job.endpoint.abort(error.text(), code=error.code, party=error.party, step=error.step)",
        "            job.endpoint.abort(error.text() + ' ' + str(exc), code=error.code, "
        "party=error.party, step=error.step)",
        ("tests/service/test_error_privacy.py",),
        grpc=True,
    ),
    Mutation(
        "service",
        "audit-history-fails-open",
        "a co-member whose audit history cannot be read adds nothing (the audit rests on "
        "the histories it could read, and a slow member lets a differencing job through)",
        "ppdm/service/lifecycle.py",
        "            raise AuditHistoryUnavailable(missing)",
        "            pass",
        ("tests/service/test_audit_fail_closed.py",),
        grpc=True,
    ),
    Mutation(
        "service",
        "policy-min-parties-off",
        "the min_parties rule never refuses",
        "ppdm/service/policy.py",
        "        if count < need:",
        "        if False:",
        ("tests/service/test_policy.py",),
    ),
    Mutation(
        "service",
        "policy-columns-unchecked",
        "column control lets a job read columns outside the allowed list",
        "ppdm/service/policy.py",
        "                outside = [c for c in disclosure.columns if c not in d.columns]",
        "                outside = []",
        ("tests/service/test_policy.py", "tests/service/test_disclosure.py"),
    ),
    # issue 21: what a job discloses, bounded by its function
    Mutation(
        "service",
        "statement-records-allowed",
        "the policy lets outputs that are raw records through (first-k centres, labels)",
        "ppdm/service/policy.py",
        '        if o.kind == "records" and not limits["allow_records"]:',
        '        if o.kind == "records" and False:',
        ("tests/service/test_policy.py",),
    ),
    Mutation(
        "service",
        "statement-exact-for-anyone",
        "exact linear queries run whoever chooses their coefficients",
        "ppdm/service/policy.py",
        "                strangers = [p for p in o.chosen_by if not _partner(p, partners)]",
        "                strangers = []",
        ("tests/service/test_policy.py",),
    ),
    Mutation(
        "service",
        "audit-union-isolation-off",
        "unions that single out one member's items are not refused",
        "ppdm/service/disclosure.py",
        "            if len(uncovered) <= colluders and not trusted.intersection(uncovered):",
        "            if False:",
        ("tests/service/test_disclosure.py",),
    ),
    Mutation(
        "service",
        "audit-versions-fresh",
        "a changed input starts afresh: two sums before and after a change pass",
        "ppdm/service/disclosure.py",
        "        if change_disclosed(self.me, mine, colluders):",
        "        if False:",
        ("tests/service/test_disclosure.py",),
    ),
    Mutation(
        "service",
        "audit-budget-unchecked",
        "the privacy budget of a data set is never exhausted",
        "ppdm/service/disclosure.py",
        "            if spent + epsilon > epsilon_budget + 1e-12:",
        "            if False:",
        ("tests/service/test_disclosure.py",),
    ),
    Mutation(
        "mining",
        "vertical-noise-zero",
        "each owner's noise on vertical counts is zero (exact counts for a crafted column)",
        "ppdm/protocols/gmw.py",
        "            out[i] = -y if negative else y",
        "            out[i] = 0",
        (
            "tests/mining/test_vertical_privacy.py",
            "tests/protocols/test_gmw.py",
            "tests/service/test_redteam_grpc.py",
        ),
        grpc=True,
    ),
    Mutation(
        "mining",
        "horizontal-outside-party-off",
        "horizontal rules test only the pooled support, not the support outside each party",
        "ppdm/mining/horizontal_rules.py",
        "    return list(combinations(parties, colluders))",
        "    return []",
        ("tests/mining/test_horizontal_privacy.py",),
    ),
    Mutation(
        "protocols",
        "psi-leader-result-unordered",
        "a non-leader takes the leader's string intersection in any order (a repeat too)",
        "ppdm/protocols/psi/__init__.py",
        "        ordered = all(map(operator.lt, got, got[1:]))",
        "        ordered = True",
        ("tests/protocols/test_psi_ids.py",),
    ),
    Mutation(
        "protocols",
        "spark-align-reads-every-row",
        "a Spark node reads back every row of its source after an alignment, not the common",
        "ppdm/compute/spark_ids.py",
        'return source.join(F.broadcast(keys), on=self._column, how="left_semi").toPandas()',
        "return source.toPandas()",
        ("tests/compute/test_spark_aligned.py",),
    ),
    Mutation(
        "protocols",
        "psi-ratio-unchecked",
        "record alignment runs with a set far larger than this party's",
        "ppdm/protocols/psi/opening.py",
        "        if party != me and math.isfinite(max_set_ratio) and size > max_set_ratio * own:",
        "        if False:",
        ("tests/protocols/test_psi_bounds.py",),
    ),
    Mutation(
        "service",
        "ledger-verify-skips-link",
        "ledger verify does not check each entry's link to the previous one",
        "ppdm/service/ledger_verify.py",
        "        if prev_hash is not None and stored[seq][0] != prev_hash:",
        "        if False:",
        ("tests/service/test_ledger_chain.py",),
        grpc=True,
    ),
    Mutation(
        "service",
        "ledger-hash-skips-kind",
        "the ledger hash leaves out an entry's kind (a field that can be edited unseen)",
        "ppdm/service/ledger_chain.py",
        "    return _json([seq, time, kind, job_id, record, prev]).encode()",
        "    return _json([seq, time, job_id, record, prev]).encode()",
        ("tests/service/test_ledger_chain.py", "tests/service/test_ledger_heads.py"),
        grpc=True,
    ),
    # -- mining (code being rewritten for issue 21: anchors may stop applying) ----------------
    Mutation(
        "mining",
        "kmeans-small-clusters-released",
        "k-means releases centres of clusters below min_cluster_size",
        "ppdm/mining/kmeans_common.py",
        "    if np.any(small):\n        raise AggregationTooSmall(",
        "    if False:\n        raise AggregationTooSmall(",
        ("tests/mining/test_kmeans_min_cluster.py",),
    ),
    Mutation(
        "mining",
        "kmeans-bound-unchecked",
        "k-means accepts k * min_cluster_size above the number of records",
        "ppdm/mining/kmeans_common.py",
        "    if k * max(min_cluster_size, 1) > n_all:",
        "    if False:",
        ("tests/mining/test_kmeans_min_cluster.py", "tests/mining/test_kmeans_aggregate_init.py"),
    ),
    Mutation(
        "mining",
        "kmeans-vertical-share-unmasked",
        "vertical k-means hands a third party's partial distances unmasked to the second party",
        "ppdm/mining/kmeans_vertical.py",
        "        mask = np.frombuffer(secrets.token_bytes(8 * mine.size), dtype=np.uint64)",
        "        mask = np.zeros(mine.size, dtype=np.uint64)",
        ("tests/privacy/test_vertical_kmeans_views.py",),
    ),
    Mutation(
        "mining",
        "assoc-union-no-fakes",
        "horizontal rule mining's itemset union without fake itemsets",
        "ppdm/mining/horizontal_rules.py",
        "max_item_bytes=max_bytes, fake_ratio=fake_ratio",
        "max_item_bytes=max_bytes, fake_ratio=0.0",
        ("tests/mining/test_distributed_assoc.py", "tests/mining/test_horizontal_privacy.py"),
    ),
    # -- anonymize ---------------------------------------------------------------------------
    Mutation(
        "anonymize",
        "dp-100x-less-noise",
        "DP queries adding 100x too little noise",
        "ppdm/dp/mechanisms.py",
        "        noise = _discrete_laplace(self._eps / self._delta, arr.size, make_rng(rng))",
        "        noise = _discrete_laplace(100 * self._eps / self._delta, arr.size, make_rng(rng))",
        ("tests/privacy/test_guards.py", "tests/dp"),
    ),
    Mutation(
        "anonymize",
        "dp-gaussian-sigma-100x-smaller",
        "the discrete Gaussian mechanism with a 100x smaller sigma",
        "ppdm/dp/mechanisms.py",
        "        noise = _discrete_gaussian(self._sigma * self._sigma).sample(arr.size, make_rng(rng))",
        "        noise = _discrete_gaussian(self._sigma * self._sigma / 10000).sample(\n"
        "            arr.size, make_rng(rng)\n        )",
        ("tests/dp",),
    ),
    Mutation(
        "anonymize",
        "rr-always-truthful",
        "Warner's randomized response always tells the truth",
        "ppdm/perturb/randomized_response.py",
        "    truthful = make_rng(rng).random(member.size).reshape(member.shape) < p",
        "    truthful = np.ones(member.shape, dtype=bool)",
        ("tests/perturbation/test_randomized_response.py", "tests/privacy/test_guards.py"),
    ),
    Mutation(
        "anonymize",
        "mondrian-narrowest",
        "Mondrian splitting the narrowest dimension first",
        "ppdm/anonymize/mondrian.py",
        "                    widths.sort()\n",
        "                    widths.sort(reverse=True)\n",
        ("tests/privacy/test_guards.py", "tests/anonymize/test_mondrian.py"),
    ),
    Mutation(
        "anonymize",
        "mondrian-k-minus-one",
        "Mondrian allows parts of k - 1 records",
        "ppdm/anonymize/mondrian.py",
        "            if len(p) < self.min_size:",
        "            if len(p) < self.min_size - 1:",
        ("tests/anonymize/test_mondrian.py", "tests/privacy/test_guards.py"),
    ),
    Mutation(
        "anonymize",
        "k-anonymity-k-minus-one",
        "the k-anonymity check accepts classes of k - 1 records",
        "ppdm/anonymize/models.py",
        "        return _as_counts(counts).sum(axis=1) >= self.k",
        "        return _as_counts(counts).sum(axis=1) >= self.k - 1",
        ("tests/anonymize/test_models.py", "tests/anonymize/test_lattice.py"),
    ),
    Mutation(
        "anonymize",
        "l-diversity-l-minus-one",
        "distinct l-diversity accepts classes with l - 1 sensitive values",
        "ppdm/anonymize/models.py",
        "        return (_as_counts(counts) > 0).sum(axis=1) >= self.l",
        "        return (_as_counts(counts) > 0).sum(axis=1) >= self.l - 1",
        ("tests/anonymize/test_models.py", "tests/anonymize/test_lattice.py"),
    ),
    Mutation(
        "anonymize",
        "mdav-groups-of-k-minus-one",
        "MDAV forms groups of k - 1 records around the farthest record",
        "ppdm/anonymize/microaggregation.py",
        "            near_r = _k_smallest(d_r, k)",
        "            near_r = _k_smallest(d_r, k - 1)",
        ("tests/anonymize/test_mdav.py",),
    ),
)


def _copy_tree(dest: Path) -> None:
    """The checkout (package, tests, docs, examples, data folders) without VCS/caches."""
    ignore = shutil.ignore_patterns(
        ".git", "__pycache__", "*.pyc", ".mypy_cache", ".ruff_cache", ".pytest_cache",
        ".hypothesis", "*.egg-info", "build", "dist",
    )  # fmt: skip
    shutil.copytree(REPO, dest, ignore=ignore, dirs_exist_ok=True)


def _env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "CI"}  # skips stay skips
    env.update(
        PYTHONPATH=str(root),
        PPDM_SHARED=os.environ.get("PPDM_SHARED", str(REPO.parent / "shared")),
        PPDM_HYPOTHESIS_PROFILE="ci",  # derandomized: the same examples every run
    )
    return env


def _pytest(root: Path, tests: tuple[str, ...], *, grpc: bool, quick: bool, timeout: float):
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"]
    if not grpc:
        cmd += ["-m", "not grpc"]
    if quick:
        cmd += ["-x"]
    cmd += ["--rootdir", str(root), "-o", "addopts=--import-mode=importlib"]
    cmd += [str(root / t) for t in tests]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd, cwd=root, env=_env(root), capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return {"outcome": "timeout", "failed": [], "summary": f"no result in {timeout:g} s"}
    lines = proc.stdout.splitlines()
    failed = [ln.split(" ")[1] for ln in lines if ln.startswith("FAILED")]
    errors = [ln.split(" ")[1] for ln in lines if ln.startswith("ERROR")]
    tail = [ln for ln in lines if " passed" in ln or " failed" in ln or " error" in ln]
    if proc.returncode == 0:
        outcome = "passed"
    elif failed:
        outcome = "failed"
    else:
        outcome = "error"  # collection/import errors, usage errors, nothing collected
    return {
        "outcome": outcome,
        "failed": failed,
        "errors": errors,
        "summary": tail[-1] if tail else (proc.stdout + proc.stderr)[-300:],
        "seconds": round(time.perf_counter() - t0, 1),
    }


def _applies(m: Mutation, root: Path = REPO) -> int:
    path = root / m.file
    return path.read_text().count(m.old) if path.is_file() else 0


def run_mutation(m: Mutation, *, quick: bool, timeout: float) -> dict[str, object]:
    found = _applies(m)
    if found != 1:
        where = "file missing" if not (REPO / m.file).is_file() else f"{found} matches"
        return {"verdict": "does not apply", "summary": f"anchor: {where} in {m.file}"}
    with tempfile.TemporaryDirectory(prefix=f"ppdm-mut-{m.name}-") as tmp:
        root = Path(tmp)
        _copy_tree(root)
        target = root / m.file
        target.write_text(target.read_text().replace(m.old, m.new))
        imported = subprocess.run(
            [sys.executable, "-c", "import ppdm; print(ppdm.__file__)"],
            cwd=root,
            env=_env(root),
            capture_output=True,
            text=True,
            timeout=300,
        ).stdout.strip()
        if not imported.startswith(str(root)):
            return {"verdict": "NOT CAUGHT (the copy was not used)", "summary": imported}
        r = _pytest(root, m.tests, grpc=m.grpc, quick=quick, timeout=timeout)
    verdict = {"failed": "caught", "passed": "NOT CAUGHT"}.get(str(r["outcome"]), "broken")
    return {"verdict": verdict, **r}


def null_run(tests: tuple[str, ...], *, grpc: bool, timeout: float) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="ppdm-mut-null-") as tmp:
        root = Path(tmp)
        _copy_tree(root)
        return _pytest(root, tests, grpc=grpc, quick=False, timeout=timeout)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default=None, help="comma-separated names (or name prefixes)")
    p.add_argument("--area", choices=AREAS, default=None, help="one area's mutations")
    p.add_argument("--quick", action="store_true", help="stop each mutant at its first failure")
    p.add_argument("--list", action="store_true", help="list the catalogue and exit")
    p.add_argument("--json", metavar="FILE", help="write the outcome as JSON")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per pytest run")
    args = p.parse_args()
    chosen = [m for m in MUTATIONS if args.area is None or m.area == args.area]
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        chosen = [m for m in chosen if any(m.name.startswith(n) for n in names)]
    if not chosen:
        print(f"no mutation matches {args.only!r} / {args.area!r}", file=sys.stderr)
        return 2
    if args.list:
        for m in chosen:
            state = "applies" if _applies(m) == 1 else "DOES NOT APPLY"
            print(f"{m.area:10s} {m.name:32s} {state:15s} {m.what}")
        print(f"\n{len(MUTATIONS)} mutations in the catalogue, {len(chosen)} listed")
        return 0

    results: dict[str, dict[str, object]] = {}
    nulls: dict[tuple[tuple[str, ...], bool], dict[str, object]] = {}
    for m in chosen:
        r = run_mutation(m, quick=args.quick, timeout=args.timeout)
        if r["verdict"] != "does not apply":
            key = (m.tests, m.grpc)
            if key not in nulls:
                nulls[key] = null_run(m.tests, grpc=m.grpc, timeout=args.timeout)
                n = nulls[key]
                print(
                    f"{'(null run)':32s} {n['outcome']:14s} {n['summary']}  [{', '.join(m.tests)}]"
                )
            if nulls[key]["outcome"] != "passed":
                r["verdict"] = "null run fails"
                r["null_run"] = nulls[key]
        results[m.name] = {"area": m.area, "what": m.what, **r}
        print(f"{m.name:32s} {r['verdict']:14s} {r.get('summary', '')}")
        for test in list(r.get("failed", []))[:3]:  # type: ignore[call-overload]
            print(f"{'':32s}   fails: {test}")

    print()
    print(f"{'area':10s} {'caught/total':>12s}  {'does not apply':>14s}  not caught")
    ok = True
    for area in AREAS:
        mine = [(m, results[m.name]) for m in chosen if m.area == area]
        if not mine:
            continue
        applied = [(m, r) for m, r in mine if r["verdict"] != "does not apply"]
        caught = [m for m, r in applied if r["verdict"] == "caught"]
        missed = [m.name for m, r in applied if r["verdict"] != "caught"]
        na = len(mine) - len(applied)
        ok = ok and not missed
        print(f"{area:10s} {len(caught):>5d}/{len(applied):<6d}  {na:>14d}  {', '.join(missed)}")
    na_names = [n for n, r in results.items() if r["verdict"] == "does not apply"]
    if na_names:
        print(f"\ndoes not apply (anchor text not found; rewrite them): {', '.join(na_names)}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
