"""One JSON-friendly risk report for a release (the engine behind ``ppdm risk``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from ppdm.errors import ConfigError
from ppdm.risk.attribute import background_knowledge_check, homogeneity_attack
from ppdm.risk.linkage import linkage_attack
from ppdm.risk.matching import Hierarchies
from ppdm.risk.reidentification import reidentification_risk

__all__ = ["risk_report"]


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, str):
        return value.item()
    return value


def risk_report(
    release: pd.DataFrame,
    *,
    qi: Sequence[str],
    sensitive: str | None = None,
    population: pd.DataFrame | None = None,
    public: pd.DataFrame | None = None,
    hierarchies: Hierarchies | None = None,
    threshold: float = 0.2,
    statements: int = 1,
    max_listed: int = 20,
) -> dict[str, Any]:
    """Re-identification risk (prosecutor/journalist/marketer), attribute disclosure
    (homogeneity, background knowledge) and, with ``public``, a linkage attack.

    >>> t = pd.DataFrame({"Age": ["[20, 30]", "[30, 40]"] * 3,
    ...     "ZIP": ["Northeastern US", "Western US"] * 3,
    ...     "Disease": ["HIV", "Hepatitis C", "HIV", "Hepatitis C", "HIV", "Diabetes"]})
    >>> r = risk_report(t, qi=["Age", "ZIP"], sensitive="Disease")
    >>> r["reidentification"]["prosecutor"]["max_risk"], r["homogeneity"]["homogeneous_classes"]
    (0.3333333333333333, 1)
    """
    qi = list(qi)
    missing = [c for c in [*qi, *([sensitive] if sensitive else [])] if c not in release.columns]
    if missing:
        raise ConfigError(f"columns not in the release: {', '.join(missing)}")
    report: dict[str, Any] = {
        "quasi_identifiers": qi,
        "sensitive": sensitive,
        "reidentification": reidentification_risk(
            release, qi, population=population, hierarchies=hierarchies, threshold=threshold
        ),
    }
    if sensitive is not None:
        homog = homogeneity_attack(release, qi=qi, sensitive=sensitive)
        listed = homog.pop("disclosed")
        homog["disclosed_classes"] = list(listed)[:max_listed]  # type: ignore[call-overload]
        report["homogeneity"] = homog
        report["background_knowledge"] = background_knowledge_check(
            release, qi=qi, sensitive=sensitive, statements=statements
        )
    if public is not None:
        absent = [c for c in qi if c not in public.columns]
        if absent:
            raise ConfigError(f"public table lacks quasi-identifiers: {', '.join(absent)}")
        link = linkage_attack(release, public, qi=qi, sensitive=sensitive, hierarchies=hierarchies)
        section: dict[str, Any] = dict(link.summary())
        if sensitive is not None:
            disclosed = link.individuals[link.individuals["disclosed"]]
            section["disclosed_individuals"] = [
                {"public_index": idx, "value": row["top_value"]}
                for idx, row in disclosed.head(max_listed).iterrows()
            ]
        report["linkage"] = section
    return _plain(report)
