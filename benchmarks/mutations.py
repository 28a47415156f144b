"""Deliberate privacy bugs, and the tests that catch them (issue 12, item 5).

Each mutation below weakens privacy while every answer stays correct: the kind of bug a
suite that only checks outputs lets through: the six of issue 12, and more that the view
tests of ``tests/privacy/test_views.py`` guard against. For each one this script copies the
package to a temporary folder, applies the mutation there (a text substitution whose
anchor must occur exactly once: a changed anchor is reported, never silently skipped),
runs the listed tests against the copy, and prints a table: the mutation must make at
least one test fail. The working tree is never modified.

    python benchmarks/mutations.py            # all of them
    python benchmarks/mutations.py --only dp  # one (by name prefix)
    python benchmarks/mutations.py --json mutations.json

Exit code 0 if every mutation is caught, 1 otherwise.
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


@dataclass(frozen=True)
class Mutation:
    name: str
    what: str
    file: str
    old: str
    new: str
    tests: tuple[str, ...]


MUTATIONS = (
    Mutation(
        "sum-unmasked",
        "the vector ring secure sum sends its first value unmasked",
        "ppdm/protocols/secure_sum.py",
        "            mask = np.frombuffer(secrets.token_bytes(8 * n), dtype=np.uint64).copy()",
        "            mask = np.zeros(n, dtype=np.uint64)",
        (
            "tests/privacy/test_guards.py",
            "tests/privacy/test_views.py",
            "tests/protocols/test_secure_sum.py",
        ),
    ),
    Mutation(
        "paillier-16-bit",
        "Paillier encryption randomness cut to a 16-bit exponent",
        "ppdm/protocols/paillier/keys.py",
        "            exponent_bits = max(int(n.bit_length()) // 2, 16)",
        "            exponent_bits = 16",
        ("tests/protocols/test_paillier_privacy.py", "tests/protocols/test_paillier.py"),
    ),
    Mutation(
        "ot-hash-no-xor",
        "the OT-extension hash without its final XOR",
        "ppdm/protocols/ot/crhash.py",
        "    y = aes_permute(px ^ tweaks)\n    y ^= px\n    return y",
        "    y = aes_permute(px ^ tweaks)\n    return y",
        ("tests/privacy/test_guards.py", "tests/protocols/test_ot_extension.py"),
    ),
    Mutation(
        "ot-tweak-reuse",
        "the OT-extension hash reusing tweaks across chunks",
        "ppdm/protocols/ot/crhash.py",
        "tccr_hash(x, make_tweaks(start, n, session, b))",
        "tccr_hash(x, make_tweaks(start % 1024, n, session, b))",
        ("tests/privacy/test_guards.py", "tests/protocols/test_ot_extension.py"),
    ),
    Mutation(
        "dp-100x-less-noise",
        "DP queries adding 100x too little noise",
        "ppdm/anonymize/dp/mechanisms.py",
        "        noise = _discrete_laplace(self._eps / self._delta, arr.size, make_rng(rng))",
        "        noise = _discrete_laplace(100 * self._eps / self._delta, arr.size, make_rng(rng))",
        ("tests/privacy/test_guards.py", "tests/dp"),
    ),
    Mutation(
        "additive-sum-unmasked",
        "the collusion-resistant sum with zero pairwise masks",
        "ppdm/protocols/additive_sum.py",
        '    return np.frombuffer(stream, dtype="<u8").astype(np.uint64)',
        "    return np.zeros(length, dtype=np.uint64)",
        ("tests/privacy/test_views.py", "tests/protocols/test_additive_sum.py"),
    ),
    Mutation(
        "mondrian-narrowest",
        "Mondrian splitting the narrowest dimension first",
        "ppdm/anonymize/mondrian.py",
        "                    widths.sort()\n",
        "                    widths.sort(reverse=True)\n",
        ("tests/privacy/test_guards.py", "tests/anonymize/test_mondrian.py"),
    ),
)


def _copy_tree(dest: Path) -> None:
    shutil.copytree(
        REPO / "ppdm", dest / "ppdm", ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    shutil.copytree(
        REPO / "tests", dest / "tests", ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    shutil.copy(REPO / "pyproject.toml", dest / "pyproject.toml")


def run(mutation: Mutation, timeout: float) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix=f"ppdm-mut-{mutation.name}-") as tmp:
        root = Path(tmp)
        _copy_tree(root)
        target = root / mutation.file
        text = target.read_text()
        found = text.count(mutation.old)
        if found != 1:
            return {"verdict": f"ANCHOR NOT FOUND ({found} matches in {mutation.file})"}
        target.write_text(text.replace(mutation.old, mutation.new))
        env = dict(os.environ, PYTHONPATH=str(root), PPDM_SHARED=str(REPO.parent / "shared"))
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-m",
            "not grpc",
            "--rootdir",
            str(root),
            "-o",
            "addopts=--import-mode=importlib",
            *[str(root / t) for t in mutation.tests],
        ]
        t0 = time.perf_counter()
        proc = subprocess.run(
            cmd, cwd=root, env=env, capture_output=True, text=True, timeout=timeout
        )
        tail = [ln for ln in proc.stdout.splitlines() if " passed" in ln or " failed" in ln]
        summary = tail[-1] if tail else proc.stdout[-300:]
        failed = [ln.split(" ")[1] for ln in proc.stdout.splitlines() if ln.startswith("FAILED")]
        # Check the tests ran against the mutated copy, not an installed package.
        imported = subprocess.run(
            [sys.executable, "-c", "import ppdm; print(ppdm.__file__)"],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
        ).stdout.strip()
        return {
            "verdict": "caught" if failed else "NOT CAUGHT",
            "failed": failed,
            "summary": summary,
            "seconds": round(time.perf_counter() - t0, 1),
            "package": imported,
            "mutated_copy_used": imported.startswith(str(root)),
        }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default=None, help="run the mutations whose name starts so")
    p.add_argument("--json", metavar="FILE", help="write the outcome as JSON")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per mutation")
    args = p.parse_args()
    chosen = [m for m in MUTATIONS if args.only is None or m.name.startswith(args.only)]
    if not chosen:
        print(f"no mutation named {args.only!r}", file=sys.stderr)
        return 2
    results = {}
    for m in chosen:
        results[m.name] = run(m, args.timeout)
        r = results[m.name]
        print(f"{m.name:20s} {r['verdict']:12s} {r.get('summary', '')}")
        for test in r.get("failed", [])[:4]:
            print(f"{'':20s}   fails: {test}")
        if r.get("mutated_copy_used") is False:
            print(f"{'':20s}   WARNING: tests imported {r.get('package')}, not the copy")
            r["verdict"] = "NOT CAUGHT (the copy was not used)"
    print()
    print(f"{'mutation':20s} {'what':58s} verdict")
    for m in chosen:
        print(f"{m.name:20s} {m.what:58s} {results[m.name]['verdict']}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0 if all(r["verdict"] == "caught" for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
