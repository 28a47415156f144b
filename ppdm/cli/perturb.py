"""``ppdm perturb``: randomization-based releases (docs/perturbation.md).

Sub-commands::

    ppdm perturb rr      --input T.csv --qi a,b --sensitive s --scheme rr-both --l 3 --output R.csv
    ppdm perturb ra      --input T.csv --qi a,b,c --lambda 1 --output R.csv
    ppdm perturb anatomy --input T.csv --qi a,b --sensitive s --l 3 --out DIR
    ppdm perturb noise   --input T.csv --columns age --noise gaussian --scale 5 --output R.csv
    ppdm perturb reconstruct --input R.csv --column age --noise gaussian --scale 5 --bins 20

Randomness comes from ``os.urandom`` unless ``--seed`` is given (experiments only).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ppdm.cli._args import atomic_file, atomic_folder, bounded_int, finite_float
from ppdm.errors import ConfigError

if TYPE_CHECKING:
    import pandas as pd


def _read(args: argparse.Namespace) -> pd.DataFrame:
    import pandas as pd

    path = Path(args.input)
    if not path.is_file():
        raise ConfigError(f"input file not found: {path}")
    return pd.read_csv(path, sep=args.sep, dtype=str, keep_default_na=False)


def _columns(text: str | None, what: str) -> list[str]:
    cols = [c.strip() for c in (text or "").split(",") if c.strip()]
    if not cols:
        raise ConfigError(f"no {what} given")
    return cols


#: Most bins a reconstruction may have (each costs an n-by-bins matrix per iteration).
MAX_BINS = 10_000


def _write(frame: pd.DataFrame, path: str | None, sep: str) -> None:
    if path:
        with atomic_file(path) as tmp:  # renamed into place only when written whole
            frame.to_csv(tmp, sep=sep, index=False)
    else:
        frame.to_csv(sys.stdout, sep=sep, index=False)


def _seed(args: argparse.Namespace) -> int | None:
    return None if args.seed is None else int(args.seed)


def _rr(args: argparse.Namespace) -> int:
    from ppdm.perturb.randomized_response import randomized_response

    table = _read(args)
    qi = _columns(args.qi, "quasi-identifiers")
    ps = None
    if args.p:
        ps = [
            None if v.strip().lower() in ("", "none", "-") else float(v) for v in args.p.split(",")
        ]
    if (args.l is None) == (ps is None):
        raise ConfigError("give exactly one of --l (optimal parameters) or --p")
    rel = randomized_response(
        table, qi=qi, sensitive=args.sensitive, scheme=args.scheme, l=args.l, ps=ps, rng=_seed(args)
    )
    out = table.copy()
    for col in rel.data.columns:
        out[col] = rel.data[col].to_numpy()
    _write(out, args.output, args.sep)
    meta = {
        "scheme": args.scheme,
        "columns": [*rel.qi, rel.sensitive],
        "retention_probabilities": list(rel.ps),
        "max_disclosure_risk": None if rel.parameters is None else rel.parameters.max_risk,
        "tau": None if rel.parameters is None else rel.parameters.tau,
    }
    if args.params:
        with atomic_file(args.params) as tmp:
            tmp.write_text(json.dumps(meta, indent=2) + "\n")
    print(json.dumps(meta), file=sys.stderr)
    return 0


def _ra(args: argparse.Namespace) -> int:
    from ppdm.perturb.ra import random_anonymization

    table = _read(args)
    rel = random_anonymization(
        table, qi=_columns(args.qi, "quasi-identifiers"), lam=args.lam, rng=_seed(args)
    )
    _write(rel.data, args.output, args.sep)
    print(
        json.dumps({"lambda": rel.lam, "p": rel.p, "probabilistic_anonymity": rel.anonymity}),
        file=sys.stderr,
    )
    return 0


def _anatomy(args: argparse.Namespace) -> int:
    from ppdm.perturb.anatomy import anatomy

    table = _read(args)
    rel = anatomy(
        table,
        qi=_columns(args.qi, "quasi-identifiers"),
        sensitive=args.sensitive,
        l=args.l,
        rng=_seed(args),
    )
    with atomic_folder(args.out) as out:  # the folder appears only when written whole
        rel.qit.to_csv(out / "qit.csv", sep=args.sep, index=False)
        rel.st.to_csv(out / "st.csv", sep=args.sep, index=False)
        rel.permuted.to_csv(out / "permuted.csv", sep=args.sep, index=False)
    print(
        json.dumps({"groups": int(rel.groups.max() + 1) if len(rel.groups) else 0, "l": rel.l}),
        file=sys.stderr,
    )
    return 0


def _noise(args: argparse.Namespace) -> int:
    import numpy as np

    from ppdm.perturb.randomization import Noise, add_noise

    table = _read(args)
    noise = Noise(args.noise, args.scale)
    out = table.copy()
    rng = _seed(args)
    for col in _columns(args.columns, "columns"):
        if col not in table.columns:
            raise ConfigError(f"column {col!r} not in the input")
        try:
            x = table[col].astype(float).to_numpy()
        except ValueError as exc:
            raise ConfigError(f"column {col!r} is not numeric") from exc
        with np.errstate(over="ignore", invalid="ignore"):  # checked on the next line
            noisy = add_noise(x, noise, rng=rng)
        if not np.isfinite(noisy).all():
            raise ConfigError(
                f"--scale {args.scale:g}: the noisy values of column {col!r} are not finite "
                "(the scale or the values are too large)"
            )
        out[col] = noisy
        if rng is not None:
            rng += 1
    _write(out, args.output, args.sep)
    return 0


def _reconstruct(args: argparse.Namespace) -> int:
    import numpy as np
    import pandas as pd

    from ppdm.perturb.randomization import Noise, bayes_reconstruct, em_reconstruct

    table = _read(args)
    if args.column not in table.columns:
        raise ConfigError(f"column {args.column!r} not in the input")
    try:
        z = table[args.column].astype(float).to_numpy()
    except ValueError:
        raise ConfigError(f"column {args.column!r} is not numeric") from None
    if not np.isfinite(z).all():
        raise ConfigError(f"column {args.column!r} holds values that are not finite")
    bounds = None
    if args.bounds:
        parts = args.bounds.split(",")
        try:
            lo, hi = (finite_float()(v) for v in parts)
        except (ValueError, argparse.ArgumentTypeError):
            raise ConfigError(
                f"--bounds must be lo,hi (two finite numbers), not {args.bounds!r}"
            ) from None
        if not lo < hi:
            raise ConfigError("--bounds: lo must be below hi")
        bounds = (lo, hi)
    fn = em_reconstruct if args.method == "em" else bayes_reconstruct
    rec = fn(
        z, Noise(args.noise, args.scale), bins=args.bins, bounds=bounds, stopping=args.stopping
    )
    frame = pd.DataFrame(
        {"low": rec.edges[:-1], "high": rec.edges[1:], "probability": rec.probabilities}
    )
    _write(frame, args.output, args.sep)
    print(json.dumps({"iterations": rec.iterations, "converged": rec.converged}), file=sys.stderr)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``ppdm perturb ...``."""
    top = subparsers.add_parser(
        "perturb",
        help="randomized response, RA, anatomy, additive noise",
        description="Randomization-based releases: randomized response (PRAM), random "
        "anonymization, anatomy, additive noise and the reconstruction of a perturbed "
        "column's distribution (docs/perturbation.md).",
    )
    sub = top.add_subparsers(dest="perturb_command", metavar="METHOD")

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--input", required=True, help="CSV file")
        p.add_argument(
            "--sep",
            default=None,
            help="field separator (default: sniffed from the input, ';' or ',')",
        )
        p.add_argument(
            "--seed",
            type=bounded_int(0, 2**63 - 1),
            help="reproducible randomness (experiments only)",
        )

    p = sub.add_parser(
        "rr",
        help="randomized response / PRAM on QI, S or both",
        description="Randomized response (PRAM) on the quasi-identifiers, the sensitive "
        "attribute or both, with retention probabilities chosen for a risk bound 1/l or "
        "given explicitly.",
    )
    common(p)
    p.add_argument("--qi", required=True, help="comma-separated quasi-identifiers")
    p.add_argument("--sensitive", required=True)
    p.add_argument("--scheme", default="rr-both", choices=["rr-both", "rr-s", "rr-qi"])
    p.add_argument(
        "--l", type=finite_float(1.0), help="risk bound 1/l; parameters chosen optimally"
    )
    p.add_argument("--p", help="explicit retention probabilities QI...,S ('none' = keep)")
    p.add_argument("--output", help="randomized CSV (default: stdout)")
    p.add_argument("--params", help="write the published parameters as JSON")
    p.set_defaults(handler=_rr)

    p = sub.add_parser(
        "ra",
        help="random anonymization (replace attributes by random values)",
        description="Random anonymization: in every record, lambda quasi-identifier "
        "values are replaced by values drawn from their column.",
    )
    common(p)
    p.add_argument("--qi", required=True)
    p.add_argument(
        "--lambda",
        dest="lam",
        type=bounded_int(0, 100_000),
        default=1,
        help="attributes replaced per record",
    )
    p.add_argument("--output")
    p.set_defaults(handler=_ra)

    p = sub.add_parser(
        "anatomy",
        help="anatomy with l-diverse groups (Xiao & Tao 2006)",
        description="Anatomy (Xiao & Tao 2006): publish the quasi-identifiers and the "
        "sensitive values in two tables linked only by l-diverse group ids.",
    )
    common(p)
    p.add_argument("--qi", required=True)
    p.add_argument("--sensitive", required=True)
    p.add_argument("--l", type=bounded_int(1, 1_000_000), required=True)
    p.add_argument("--out", required=True, help="folder for qit.csv, st.csv, permuted.csv")
    p.set_defaults(handler=_anatomy)

    p = sub.add_parser(
        "noise",
        help="additive uniform/Gaussian noise",
        description="Add uniform or Gaussian noise of a public scale to numeric columns "
        "(randomization at collection time, Agrawal & Srikant 2000).",
    )
    common(p)
    p.add_argument("--columns", required=True, help="numeric columns to perturb")
    p.add_argument("--noise", choices=["uniform", "gaussian"], default="gaussian")
    p.add_argument(
        "--scale",
        type=finite_float(0.0, lo_open=True),
        required=True,
        help="half-width (uniform) or sigma",
    )
    p.add_argument("--output")
    p.set_defaults(handler=_noise)

    p = sub.add_parser(
        "reconstruct",
        help="reconstruct a perturbed column's distribution",
        description="Reconstruct the histogram of the original values of a perturbed "
        "column from the public noise distribution (EM or iterative Bayes), stopping by "
        "default with Agrawal & Srikant's chi-square rule.",
    )
    common(p)
    p.add_argument("--column", required=True)
    p.add_argument("--noise", choices=["uniform", "gaussian"], default="gaussian")
    p.add_argument("--scale", type=finite_float(0.0, lo_open=True), required=True)
    p.add_argument("--bins", type=bounded_int(1, MAX_BINS), default=20)
    p.add_argument("--bounds", help="lo,hi range of the original values")
    p.add_argument("--method", choices=["em", "bayes"], default="em")
    p.add_argument(
        "--stopping",
        choices=["chi2", "mean-change"],
        default="chi2",
        help="convergence test: chi2 (default, Agrawal & Srikant's early stop) or "
        "mean-change (iterate until the density stops changing; overfits the noise)",
    )
    p.add_argument("--output")
    p.set_defaults(handler=_reconstruct)

    def _help(_: argparse.Namespace) -> int:
        top.print_help(sys.stderr)
        return 2

    top.set_defaults(handler=_help)


__all__ = ["register"]
