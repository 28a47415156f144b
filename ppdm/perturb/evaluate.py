"""Privacy-utility evaluation of a method over a range of privacy parameters.

The engine behind ``ppdm evaluate``: run one method (randomized response RR-Both / RR-S /
RR-QI, anatomy, l-diversity, RA) for every value of its privacy parameter, turn every
release into an estimate of the original contingency table over ``QI x S`` and measure
the utility measures of :mod:`ppdm.perturb.utility` (Guo, Ying & Wu 2011, §V,
Yang & Qiao 2010, §7). Results are rows of plain values, written as CSV and JSON, and a
privacy-utility plot (PNG, matplotlib's Agg backend).

Parameters: ``l`` for RR (risk bound ``tau = 1/l``), anatomy and l-diversity; ``lambda``
(attributes replaced per record) for RA.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ppdm.errors import ConfigError
from ppdm.perturb._table import contingency, encode
from ppdm.perturb.anatomy import (
    anatomy,
    generalized_table_estimate,
    grouped_table_estimate,
)
from ppdm.perturb.ra import random_anonymization
from ppdm.perturb.randomized_response import (
    Scheme,
    em_estimate_table,
    estimate_table,
    randomized_response,
)
from ppdm.perturb.utility import (
    answer_count_queries,
    as_distribution,
    base_query_error,
    chi2_distance,
    cube_query_error,
    kl_distance,
    kl_reconstruction,
    mean_relative_error,
    quasi_sensitive_rules,
    random_count_queries,
    rule_recovery_rate,
    rules_from_table,
    uncertainty_coefficient,
)
from ppdm.progress import Progress, progress_task
from ppdm.randomness import RandomSource, make_rng

__all__ = ["METHODS", "EvaluationRow", "evaluate", "write_results"]

log = logging.getLogger(__name__)

METHODS: tuple[str, ...] = ("rr-both", "rr-s", "rr-qi", "anatomy", "l-diversity", "ra")
_ROW_ID = "__ppdm_row__"

#: Probability floor of a reconstructed cell in the KL distance: a reconstruction that
#: puts no mass on a cell occupied in the original is charged as if it put 1e-6 there
#: (0.03 records of Adult's 30,162), otherwise KL would be infinite.
DISTANCE_FLOOR = 1e-6


@dataclass
class EvaluationRow:
    """Utility and privacy of one release (one method, one parameter value)."""

    method: str
    param: str
    value: float
    kl: float
    kl_reverse: float
    chi2: float
    base_query_error: float
    cube_query_error: float
    random_query_error: float
    uncertainty_s_qi: float
    uncertainty_s_qi_original: float
    rule_recovery: float
    max_risk: float
    seconds: float
    details: dict[str, Any] = field(default_factory=dict)


def _l_diversity_release(
    table: pd.DataFrame,
    qi: Sequence[str],
    sensitive: str,
    l: float,  # noqa: E741 - the literature's name
    hierarchies: Mapping[str, Any] | None,
    rng: RandomSource,
) -> pd.DataFrame:
    """Entropy l-diversity by generalization, as in Guo, Ying & Wu 2011 (Incognito): ppdm's optimal
    full-domain search when hierarchies are given, else Mondrian (flat hierarchies).
    The row id column rides along as a non-QI column."""
    from ppdm.anonymize.api import anonymize

    release = anonymize(
        table,
        qi=list(qi),
        sensitive=sensitive,
        hierarchies=hierarchies,
        model="l-diversity",
        l=l,
        l_variant="entropy",
        algorithm="optimal" if hierarchies else "mondrian",
        rng=rng,
    )
    return release.data


def _estimate(
    method: str,
    value: float,
    table: pd.DataFrame,
    qi: Sequence[str],
    sensitive: str,
    codes: np.ndarray,
    dims: tuple[int, ...],
    categories: tuple[tuple[str, ...], ...],
    hierarchies: Mapping[str, Any] | None,
    rng: RandomSource,
    estimator: str = "inverse",
) -> tuple[np.ndarray, float, dict[str, Any]]:
    """Release with ``method`` at ``value``; return (estimated table in counts, max risk,
    details)."""
    if method in ("rr-both", "rr-s", "rr-qi"):
        scheme: Scheme = method  # type: ignore[assignment]
        rel = randomized_response(
            table, qi=qi, sensitive=sensitive, scheme=scheme, l=value, rng=rng
        )
        # the release is coded over its own categories; recode over the original's
        enc = encode(rel.data, [*qi, sensitive], categories=categories)
        lam = contingency(enc.codes, dims)
        est = (
            estimate_table(lam, rel.ps)
            if estimator == "inverse"
            else em_estimate_table(lam, rel.ps)
        )
        params = rel.parameters
        risk = params.max_risk if params is not None else math.nan
        return est, risk, {"ps": [None if p is None else round(p, 6) for p in rel.ps]}
    if method == "anatomy":
        rel_a = anatomy(table, qi=qi, sensitive=sensitive, l=int(value), rng=rng)
        est = grouped_table_estimate(codes[:, :-1], codes[:, -1], rel_a.groups, dims)
        return est, _grouped_risk(codes, rel_a.groups), {"groups": int(rel_a.groups.max() + 1)}
    if method == "l-diversity":
        tagged = table[[*qi, sensitive]].assign(**{_ROW_ID: np.arange(len(table))})
        data = _l_diversity_release(tagged, qi, sensitive, value, hierarchies, rng)
        rows = data[_ROW_ID].to_numpy(dtype=np.int64)
        est = generalized_table_estimate(
            codes[rows, :-1], data[list(qi)].reset_index(drop=True), codes[rows, -1], dims
        )
        labels = data[list(qi)].astype(str)
        gid = (
            pd.factorize(pd.MultiIndex.from_frame(labels))[0]
            if len(qi) > 1
            else pd.factorize(labels.iloc[:, 0])[0]
        )
        sub = codes[rows]
        risk = _grouped_risk(sub, gid)
        return est, risk, {"released": len(rows), "classes": int(gid.max() + 1)}
    if method == "ra":
        n_attrs = int(value)
        rel_r = random_anonymization(table, qi=qi, lam=n_attrs, rng=rng)
        enc = encode(rel_r.data, [*qi, sensitive], categories=categories)
        est = contingency(enc.codes, dims)
        risk = 1.0 / rel_r.anonymity if rel_r.anonymity else math.nan
        return est, risk, {"probabilistic_anonymity": rel_r.anonymity}
    raise ConfigError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")


def _grouped_risk(codes: np.ndarray, groups: np.ndarray) -> float:
    """Largest share of one sensitive value inside a group: the linking risk of a
    group-based release."""
    g = pd.factorize(np.asarray(groups))[0]
    # the group-by-value count table, counted at once (a crosstab aggregates in Python)
    _, rows = np.unique(g, return_inverse=True)
    _, cols = np.unique(codes[:, -1], return_inverse=True)
    n_cols = int(cols.max()) + 1
    counts = np.bincount(rows * n_cols + cols, minlength=(int(rows.max()) + 1) * n_cols)
    counts = counts.reshape(-1, n_cols).astype(np.float64)
    return float((counts.max(axis=1) / counts.sum(axis=1)).max())


def _mean_u(table: np.ndarray) -> float:
    """Mean uncertainty coefficient ``U(S | A_i)`` over the QI attributes."""
    s = table.ndim - 1
    vals = []
    for i in range(s):
        drop = tuple(a for a in range(s) if a != i)
        joint = np.clip(table.sum(axis=drop), 0, None)  # (d_i, d_s)
        vals.append(uncertainty_coefficient(joint.T))
    return float(np.mean(vals))


def evaluate(
    table: pd.DataFrame,
    *,
    qi: Sequence[str],
    sensitive: str,
    method: str,
    values: Sequence[float],
    hierarchies: Mapping[str, Any] | None = None,
    queries: int = 1000,
    query_attributes: int = 2,
    min_support: float = 0.08,
    min_confidence: float = 0.15,
    estimator: str = "inverse",
    rng: int | RandomSource | None = None,
    progress: Progress | None = None,
) -> list[EvaluationRow]:
    """Run ``method`` at every privacy parameter in ``values`` and measure utility.

    Parameters
    ----------
    table : pandas.DataFrame
        Original records.
    qi, sensitive : column names
    method : {"rr-both", "rr-s", "rr-qi", "anatomy", "l-diversity", "ra"}
    values : sequence of float
        ``l`` values (RR, anatomy, l-diversity) or ``lambda`` values (RA).
    hierarchies : mapping, optional
        Generalization hierarchies for l-diversity.
    queries, query_attributes : int
        Number of random count queries and QI attributes per query (Yang & Qiao 2010, §7.2).
    min_support, min_confidence : float
        Apriori thresholds of the rule recovery rate (Yang & Qiao 2010, §7.3: 8% and 15%).
    estimator : {"inverse", "em"}
        Randomized response reconstruction: Guo, Ying & Wu's (2011) unbiased ``P^-1 lambda`` (negative
        cells clipped for the distances) or the maximum-likelihood EM estimate.
    rng : int or RandomSource, optional
        ``os.urandom`` by default; an int makes the run reproducible.
    """
    if method not in METHODS:
        raise ConfigError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    if not values:
        raise ConfigError("no parameter values to evaluate")
    if estimator not in ("inverse", "em"):
        raise ConfigError(f"estimator must be 'inverse' or 'em', not {estimator!r}")
    r = make_rng(rng)
    enc = encode(table, [*qi, sensitive])
    dims = enc.dims
    pi = contingency(enc.codes, dims)
    p = pi / pi.sum()
    qs = random_count_queries(dims, queries, qi_attributes=min(query_attributes, len(qi)), rng=r)
    act = answer_count_queries(pi, qs)
    u_orig = _mean_u(pi)
    rules_orig = quasi_sensitive_rules(
        enc.codes, dims, min_support=min_support, min_confidence=min_confidence
    )
    param = "lambda" if method == "ra" else "l"
    rows: list[EvaluationRow] = []
    with progress_task(progress, f"evaluate {method}", len(values)) as bar:
        for v in values:
            t0 = time.perf_counter()
            est, risk, details = _estimate(
                method,
                v,
                table,
                qi,
                sensitive,
                enc.codes,
                dims,
                enc.categories,
                hierarchies,
                r,
                estimator,
            )
            seconds = time.perf_counter() - t0
            q = as_distribution(est, floor=DISTANCE_FLOOR)
            rules = rules_from_table(est, min_support=min_support, min_confidence=min_confidence)
            rows.append(
                EvaluationRow(
                    method=method,
                    param=param,
                    value=float(v),
                    kl=kl_distance(p, q),
                    kl_reverse=kl_reconstruction(pi, est),
                    chi2=chi2_distance(p, q),
                    base_query_error=base_query_error(pi, est),
                    cube_query_error=cube_query_error(pi, est),
                    random_query_error=mean_relative_error(act, answer_count_queries(est, qs)),
                    uncertainty_s_qi=_mean_u(est),
                    uncertainty_s_qi_original=u_orig,
                    rule_recovery=rule_recovery_rate(rules_orig, rules) if rules_orig else math.nan,
                    max_risk=risk,
                    seconds=seconds,
                    details=details,
                )
            )
            log.info(
                "%s %s=%s: KL %.4g, cube error %.4g",
                method,
                param,
                v,
                rows[-1].kl,
                rows[-1].cube_query_error,
            )
            bar.advance()
    return rows


#: The measures drawn against the parameter: column, panel title, y-axis label.
_PLOTTED = (
    ("kl", "KL distance", "KL(original || estimate)"),
    ("kl_reverse", "reverse KL distance", "KL(estimate || original)"),
    ("chi2", "chi-square distance", "chi-square distance"),
    ("base_query_error", "base query error", "mean relative error"),
    ("cube_query_error", "CUBE query error", "mean relative error"),
    ("random_query_error", "random query error", "mean relative error"),
    ("rule_recovery", "rule recovery", "share of rules recovered"),
)
#: Parameter names as axis labels.
_PARAM_LABELS = {
    "l": "l (risk bound 1/l; larger = more private)",
    "lambda": "lambda (attributes replaced per record)",
}


def write_results(
    rows: Sequence[EvaluationRow], out: str | Path, *, title: str = ""
) -> dict[str, Path]:
    """Write ``results.csv``, ``results.json`` and ``plot.png`` into the folder ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    records = [asdict(r) for r in rows]
    flat = pd.DataFrame(
        [
            {k: v for k, v in rec.items() if k != "details"}
            | {"details": json.dumps(rec["details"])}
            for rec in records
        ]
    )
    paths = {"csv": out / "results.csv", "json": out / "results.json", "png": out / "plot.png"}
    flat.to_csv(paths["csv"], index=False)

    def clean(x: Any) -> Any:
        if isinstance(x, float) and not math.isfinite(x):
            return None
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        if isinstance(x, list):
            return [clean(v) for v in x]
        return x

    paths["json"].write_text(json.dumps([clean(rec) for rec in records], indent=2) + "\n")
    _plot(flat, paths["png"], title=title)
    return paths


def _plot(frame: pd.DataFrame, path: Path, *, title: str) -> None:
    """Eight panels: the seven measures of :data:`_PLOTTED` against the parameter (one
    line per method; log scales named in the axis label; integer ticks for integer
    parameters) and the privacy-utility view, maximum risk against the KL distance."""
    from ppdm.extras import require

    matplotlib = require("matplotlib", "plot", "the plot of ppdm evaluate")

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    param = str(frame["param"].iloc[0]) if len(frame) else ""
    xlabel = _PARAM_LABELS.get(param, param)
    values = frame["value"].to_numpy(dtype=float) if len(frame) else np.zeros(0)
    integral = bool(len(values) and np.all(values == np.round(values)))
    fig, axes = plt.subplots(2, 4, figsize=(18, 8), constrained_layout=True)
    flat_axes = axes.ravel()
    methods = list(dict.fromkeys(frame["method"].tolist()))
    colors = {m: f"C{i}" for i, m in enumerate(methods)}
    for ax, (col, label, ylabel) in zip(flat_axes, _PLOTTED, strict=False):
        for method, part in frame.groupby("method", sort=False):
            part = part.sort_values("value")
            ax.plot(part["value"], part[col], marker="o", label=str(method), color=colors[method])
        ax.set_title(label)
        ax.set_xlabel(xlabel)
        log = col in ("kl", "kl_reverse", "chi2") and bool((frame[col] > 0).all())
        if log:
            ax.set_yscale("log")
        ax.set_ylabel(ylabel + (" (log scale)" if log else ""))
        if integral:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(True, alpha=0.3)
    ax = flat_axes[len(_PLOTTED)]
    for method, part in frame.groupby("method", sort=False):
        part = part.sort_values("value")
        ax.plot(part["max_risk"], part["kl"], marker="o", color=colors[method], label=method)
        at: dict[tuple[float, float], list[str]] = {}
        for x, y, v in zip(part["max_risk"], part["kl"], part["value"], strict=True):
            at.setdefault((round(float(x), 9), round(float(y), 9)), []).append(f"{float(v):g}")
        for (x, y), vs in at.items():  # one label per point, all values that land there
            ax.annotate(
                f"{param}={','.join(vs)}",
                (x, y),
                textcoords="offset points",
                xytext=(4, 4),
                fontsize=7,
            )
    ax.set_title("privacy against utility")
    ax.set_xlabel("max disclosure risk Pr(S | QI) (lower = more private)")
    ax.margins(x=0.12, y=0.1)
    log = bool((frame["kl"] > 0).all()) if len(frame) else False
    if log:
        ax.set_yscale("log")
    ax.set_ylabel("KL(original || estimate)" + (" (log scale)" if log else ""))
    ax.grid(True, alpha=0.3)
    flat_axes[0].legend(title="method")
    fig.suptitle(title or "privacy-utility trade-off")
    fig.savefig(path, dpi=110)
    plt.close(fig)
