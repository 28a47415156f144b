"""Prosecutor, journalist and marketer re-identification risk (El Emam's attacker models).

Let the release be split into equivalence classes ``j`` on its quasi-identifiers (Aggarwal 2015
definition 20.3.1), ``f_j`` the number of release records in class ``j`` and ``n`` the
number of records. Following El Emam and Dankar (2008, "Protecting privacy using
k-anonymity", JAMIA 15(5)) and Dankar and El Emam (2010, "A method for evaluating
marketer re-identification risk"):

* **prosecutor** -- the attacker knows the target *is* in the release. A record in class
  ``j`` is re-identified with probability ``1 / f_j``: maximum risk ``1 / min_j f_j``,
  average risk ``(1/n) sum_records 1 / f_j = J / n`` (``J`` classes), and the share of
  records whose risk exceeds a threshold ``tau``.
* **journalist** -- the attacker does not know who is in the release and links it to an
  identification database covering a population (the ``population`` table, whose exact
  quasi-identifiers are matched against the release's possibly generalized ones).
  ``F_j >= f_j`` is the number of population records compatible with class ``j``; a
  record's risk is ``1 / F_j``: maximum ``1 / min_j F_j``, average
  ``(1/n) sum_j f_j / F_j``.
* **marketer** -- the attacker links *every* record and wins on the ones matched
  correctly; the expected fraction re-identified is ``(1/n) sum_j f_j / F_j`` against a
  population, and ``J / n`` when the release is the whole population.

Without a population table the journalist and marketer figures are computed with
``F_j = f_j`` (the release is its own population: the worst case for them).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from ppdm.errors import ConfigError
from ppdm.risk.linkage import _group, class_matches
from ppdm.risk.matching import Hierarchies, as_frame_labels

__all__ = [
    "ReidentificationRisk",
    "class_sizes",
    "journalist_risk",
    "marketer_risk",
    "population_class_sizes",
    "prosecutor_risk",
    "reidentification_risk",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReidentificationRisk:
    """Summary of one attacker model's risk (all values in [0, 1])."""

    model: str
    max_risk: float
    avg_risk: float
    records_at_risk: float
    threshold: float

    def to_dict(self) -> dict[str, float | str]:
        return asdict(self)


def class_sizes(release: pd.DataFrame, qi: Sequence[str]) -> np.ndarray:
    """``f_j`` for each *record* (size of its equivalence class on ``qi``).

    >>> t = pd.DataFrame({"age": ["2*", "2*", "3*"], "zip": ["520*", "520*", "520*"]})
    >>> class_sizes(t, ["age", "zip"]).tolist()
    [2, 2, 1]
    """
    if not qi:
        return np.full(len(release), len(release), dtype=np.int64)
    codes, _ = _group(as_frame_labels(release, list(qi)))
    return np.bincount(codes)[codes].astype(np.int64)


def population_class_sizes(
    release: pd.DataFrame,
    population: pd.DataFrame,
    qi: Sequence[str],
    *,
    population_qi: Sequence[str] | None = None,
    hierarchies: Hierarchies | None = None,
) -> np.ndarray:
    """``F_j`` for each release record: population records compatible with its class."""
    rel = as_frame_labels(release, list(qi))
    pop = as_frame_labels(population, list(population_qi or qi))
    pop.columns = list(qi)
    r_codes, r_classes = _group(rel)
    p_codes, p_groups = _group(pop)
    match = class_matches(r_classes, p_groups, hierarchies=hierarchies)
    sizes = match @ np.bincount(p_codes, minlength=len(p_groups)).astype(np.int64)
    return np.asarray(sizes)[r_codes].astype(np.int64)


def _summary(model: str, per_record: np.ndarray, threshold: float) -> ReidentificationRisk:
    if not 0 < threshold <= 1:
        raise ValueError("threshold must be in (0, 1]")
    if per_record.size == 0:
        return ReidentificationRisk(model, 0.0, 0.0, 0.0, threshold)
    return ReidentificationRisk(
        model=model,
        max_risk=float(per_record.max()),
        avg_risk=float(per_record.mean()),
        records_at_risk=float(np.mean(per_record > threshold)),
        threshold=threshold,
    )


def prosecutor_risk(
    release: pd.DataFrame, qi: Sequence[str], *, threshold: float = 0.2
) -> ReidentificationRisk:
    """Prosecutor risk: per record ``1 / f_j``.

    Aggarwal 2015, table 20.3 (two classes of 3): every record has risk 1/3.

    >>> t = pd.DataFrame({"Age": ["[20, 30]", "[30, 40]"] * 3,
    ...                   "ZIP": ["Northeastern US", "Western US"] * 3})
    >>> r = prosecutor_risk(t, ["Age", "ZIP"], threshold=0.2)
    >>> round(r.max_risk, 4), round(r.avg_risk, 4), r.records_at_risk
    (0.3333, 0.3333, 1.0)
    """
    return _summary("prosecutor", 1.0 / class_sizes(release, qi), threshold)


def _population_sizes(
    release: pd.DataFrame,
    qi: Sequence[str],
    f: np.ndarray,
    population: pd.DataFrame | None,
    population_qi: Sequence[str] | None,
    hierarchies: Hierarchies | None,
) -> np.ndarray:
    """``F_j`` per record given the release's own ``f_j`` (``f`` itself without a population)."""
    if population is None:
        return f
    big_f = population_class_sizes(
        release, population, qi, population_qi=population_qi, hierarchies=hierarchies
    )
    short = big_f < f
    if short.any():
        log.warning(
            "population is smaller than the release for %d records; using F_j = f_j there "
            "(is the population really a superset of the release?)",
            int(short.sum()),
        )
        big_f = np.maximum(big_f, f)
    return big_f


def journalist_risk(
    release: pd.DataFrame,
    qi: Sequence[str],
    *,
    population: pd.DataFrame | None = None,
    population_qi: Sequence[str] | None = None,
    hierarchies: Hierarchies | None = None,
    threshold: float = 0.2,
) -> ReidentificationRisk:
    """Journalist risk: per record ``1 / F_j`` against ``population``."""
    f = class_sizes(release, qi)
    big_f = _population_sizes(release, qi, f, population, population_qi, hierarchies)
    return _summary("journalist", 1.0 / big_f, threshold)


def marketer_risk(
    release: pd.DataFrame,
    qi: Sequence[str],
    *,
    population: pd.DataFrame | None = None,
    population_qi: Sequence[str] | None = None,
    hierarchies: Hierarchies | None = None,
) -> float:
    """Marketer risk: expected fraction of records re-identified,
    ``(1/n) sum_j f_j / F_j`` (``J / n`` without a population).

    >>> t = pd.DataFrame({"a": [1, 1, 2, 3]})
    >>> marketer_risk(t, ["a"])  # 3 classes / 4 records
    0.75
    """
    f = class_sizes(release, qi)
    big_f = _population_sizes(release, qi, f, population, population_qi, hierarchies)
    return _marketer(big_f)


def _marketer(big_f: np.ndarray) -> float:
    if big_f.size == 0:
        return 0.0
    # Per record 1 / F_j summed over the f_j records of class j gives f_j / F_j.
    return float(np.mean(1.0 / big_f))


def reidentification_risk(
    release: pd.DataFrame,
    qi: Sequence[str],
    *,
    population: pd.DataFrame | None = None,
    population_qi: Sequence[str] | None = None,
    hierarchies: Hierarchies | None = None,
    threshold: float = 0.2,
) -> dict[str, object]:
    """All three models in one JSON-friendly dict."""
    missing = [c for c in qi if c not in release.columns]
    if missing:
        raise ConfigError(f"quasi-identifiers not in the release: {', '.join(missing)}")
    # f_j and F_j once for all three models (the population match is the costly part).
    f = class_sizes(release, qi)
    prosecutor = _summary("prosecutor", 1.0 / f, threshold)
    big_f = _population_sizes(release, qi, f, population, population_qi, hierarchies)
    out: dict[str, object] = {
        "records": len(release),
        "equivalence_classes": len(np.unique(_group(as_frame_labels(release, list(qi)))[0]))
        if len(release)
        else 0,
        "smallest_class": int(f.min()) if f.size else 0,
        "prosecutor": prosecutor.to_dict(),
        "journalist": _summary("journalist", 1.0 / big_f, threshold).to_dict(),
        "marketer": _marketer(big_f),
        "population_given": population is not None,
    }
    return out
