"""One entry point for every anonymization algorithm: :func:`anonymize`.

It reads the table (a DataFrame or a CSV/Parquet path), validates attribute roles and
hierarchies, builds the privacy model(s), runs the chosen algorithm and returns a
:class:`~ppdm.anonymize.release.Release` whose rows are shuffled and whose
:attr:`~ppdm.anonymize.release.Release.metrics` always include the suppression rate.
``ppdm anonymize`` is a thin wrapper around it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from ppdm.anonymize.data import AttributeRoles, load_table
from ppdm.anonymize.hierarchy import Hierarchy, as_labels, load_hierarchies
from ppdm.anonymize.lattice import ALGORITHMS as LATTICE_ALGORITHMS
from ppdm.anonymize.lattice import FullDomainProblem, search
from ppdm.anonymize.metrics import (
    OBJECTIVES,
    generalization_metrics,
    release_class_metrics,
)
from ppdm.anonymize.models import PrivacyModel, make_models
from ppdm.anonymize.release import Release, make_release
from ppdm.errors import ConfigError
from ppdm.progress import Progress
from ppdm.randomness import RandomSource

__all__ = ["ALGORITHMS", "MODELS", "anonymize", "build_model"]

log = logging.getLogger(__name__)

#: Algorithms :func:`anonymize` accepts.
ALGORITHMS = (
    "samarati",
    "incognito",
    "optimal",
    "exhaustive",
    "mondrian",
    "mdav",
    "k-member",
    "condensation",
)
#: Model names accepted by ``model=`` (several may be combined with ``+`` or a list).
MODELS = ("k-anonymity", "l-diversity", "t-closeness")


def build_model(
    model: str | Sequence[str] | PrivacyModel,
    *,
    k: int | None = None,
    l: float | None = None,  # noqa: E741
    l_variant: str = "distinct",
    c: float | None = None,
    t: float | None = None,
    t_distance: str = "variational",
    t_ground: str | None = None,
) -> PrivacyModel:
    """The privacy model(s) named by ``model`` with their parameters.

    ``k`` is enforced whenever it is given (so ``model='l-diversity', k=5, l=3`` is
    5-anonymity and distinct 3-diversity); ``l-diversity`` requires ``l`` and
    ``t-closeness`` requires ``t``.
    """
    if isinstance(model, PrivacyModel):
        return model
    names = model.split("+") if isinstance(model, str) else list(model)
    names = [n.strip() for n in names if n.strip()]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        raise ConfigError(f"unknown privacy model {unknown[0]!r} (choose from {', '.join(MODELS)})")
    if "k-anonymity" in names and k is None:
        raise ConfigError("k-anonymity needs k")
    if "l-diversity" in names and l is None:
        raise ConfigError("l-diversity needs l")
    if "t-closeness" in names and t is None:
        raise ConfigError("t-closeness needs t")
    return make_models(
        k=k,
        l=l if "l-diversity" in names else None,
        l_variant=l_variant,
        c=c if "l-diversity" in names else None,
        t=t if "t-closeness" in names else None,
        t_distance=t_distance,
        t_ground=t_ground,
    )


def _names(value: str | Iterable[str] | None) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return [str(v) for v in value]


def anonymize(
    table: pd.DataFrame | str | Path,
    *,
    qi: str | Sequence[str],
    sensitive: str | None = None,
    identifiers: str | Sequence[str] | None = None,
    hierarchies: Mapping[str, Hierarchy] | str | Path | None = None,
    model: str | Sequence[str] | PrivacyModel = "k-anonymity",
    k: int | None = None,
    l: float | None = None,  # noqa: E741
    l_variant: str = "distinct",
    c: float | None = None,
    t: float | None = None,
    t_distance: str = "variational",
    t_ground: str | None = None,
    algorithm: str = "optimal",
    suppression: float = 0.0,
    metric: str = "loss",
    cm_target: str | None = None,
    sep: str = ",",
    rng: int | RandomSource | None = None,
    progress: Progress | None = None,
) -> Release:
    """Anonymize a table.

    Parameters
    ----------
    table : DataFrame or path
        The microdata (CSV with separator ``sep``, or Parquet).
    qi : str or list of str
        Quasi-identifiers (comma-separated string or list).
    sensitive : str, optional
        The sensitive attribute (needed by l-diversity and t-closeness).
    identifiers : str or list of str, optional
        Explicit identifiers, dropped from the release.
    hierarchies : mapping or directory, optional
        Hierarchy per attribute, or a directory with ``*_hierarchy_<attribute>.csv``
        files (``;``-separated). The full-domain algorithms need one for every QI: a
        numeric QI without one gets an interval hierarchy built from its range
        (:func:`~ppdm.anonymize.hierarchy_builders.default_interval_hierarchy`, listed in
        ``release.info["built_hierarchies"]``); a hierarchy of the sensitive attribute
        enables the hierarchical EMD.
    model, k, l, l_variant, c, t, t_distance, t_ground
        Privacy model(s), see :func:`build_model` and :mod:`ppdm.anonymize.models`.
    algorithm : str
        ``samarati``, ``incognito``, ``optimal``, ``exhaustive`` (full-domain
        generalization, :mod:`ppdm.anonymize.lattice`), or ``mondrian``, ``mdav``,
        ``k-member``, ``condensation``.
    suppression : float
        MaxSup as a fraction of the rows (full-domain algorithms).
    metric : str
        Objective of the node choice (:data:`~ppdm.anonymize.metrics.OBJECTIVES`).
    cm_target : str, optional
        Class label for the classification metric (default: the sensitive attribute).
    rng : int, RandomSource or None
        Randomness for shuffling the output (``None``: the OS CSPRNG).
    progress : Progress, optional
        Progress display for long searches.
    """
    start = time.perf_counter()
    if not isinstance(table, pd.DataFrame | str | Path):
        raise TypeError(
            "table must be a pandas DataFrame, a CSV or Parquet path (str or Path); got "
            f"{type(table).__name__}"
        )
    if not isinstance(table, pd.DataFrame):
        table = load_table(table, sep=sep)
    if algorithm not in ALGORITHMS:
        raise ConfigError(f"unknown algorithm {algorithm!r} (choose from {', '.join(ALGORITHMS)})")
    if metric not in OBJECTIVES:
        raise ConfigError(f"unknown metric {metric!r} (choose from {', '.join(OBJECTIVES)})")
    if not 0.0 <= suppression < 1.0:
        raise ConfigError(f"suppression must be in [0, 1), got {suppression!r}")
    roles = AttributeRoles.from_columns(
        list(table.columns), qi=_names(qi), sensitive=sensitive, identifiers=identifiers
    )
    qi_list = list(roles.quasi_identifiers)
    if isinstance(hierarchies, str | Path):
        wanted = qi_list + ([sensitive] if sensitive else [])
        hier = load_hierarchies(hierarchies, wanted)
    else:
        hier = dict(hierarchies or {})
    privacy = build_model(
        model, k=k, l=l, l_variant=l_variant, c=c, t=t, t_distance=t_distance, t_ground=t_ground
    )
    if privacy.needs_sensitive and sensitive is None:
        raise ConfigError(f"{privacy.describe()['model']} needs a sensitive attribute")
    target = cm_target if cm_target is not None else sensitive
    if target is not None and target not in table.columns:
        raise ConfigError(f"classification target {target!r} is not a column")
    built: dict[str, str] = {}
    if algorithm in LATTICE_ALGORITHMS:
        built = _default_hierarchies(table, qi_list, hier)
        release = _full_domain(
            table,
            roles=roles,
            hierarchies=hier,
            model=privacy,
            sensitive=sensitive,
            algorithm=algorithm,
            suppression=suppression,
            metric=metric,
            target=target,
            rng=rng,
            progress=progress,
        )
    else:
        release = _clustering(
            table,
            roles=roles,
            hierarchies=hier,
            model=privacy,
            sensitive=sensitive,
            algorithm=algorithm,
            suppression=suppression,
            rng=rng,
            progress=progress,
        )
        for key, value in release_class_metrics(
            release, k=privacy.min_class_size, target=target
        ).items():
            release.metrics.setdefault(key, value)
    if built:
        release.info["built_hierarchies"] = built
    release.info.setdefault("model", privacy.describe())
    release.info["total_runtime_s"] = time.perf_counter() - start
    return release


def _default_hierarchies(
    table: pd.DataFrame, qi: list[str], hierarchies: dict[str, Hierarchy]
) -> dict[str, str]:
    """Add an interval hierarchy (:func:`~ppdm.anonymize.hierarchy_builders.
    interval_hierarchy` with :func:`~ppdm.anonymize.hierarchy_builders.auto_widths`, what
    ``default_interval_hierarchy`` builds) for every numeric quasi-identifier without one; return
    ``{column: description}`` of what was built (for the report). A text quasi-identifier
    without a hierarchy is an error naming the builders."""
    built: dict[str, str] = {}
    text: list[str] = []
    for col in qi:
        if col in hierarchies:
            continue
        s = table[col]
        if pd.api.types.is_numeric_dtype(s.dtype) and not pd.api.types.is_bool_dtype(s.dtype):
            from ppdm.anonymize.hierarchy_builders import auto_widths, interval_hierarchy

            widths = auto_widths(s, attribute=col)
            hierarchies[col] = interval_hierarchy(s, attribute=col, widths=widths)
            built[col] = "intervals of width " + ", ".join(f"{w:g}" for w in widths) + ", then *"
            log.info("built an interval hierarchy for %r: %s", col, built[col])
        else:
            text.append(col)
    if text:
        raise ConfigError(
            "full-domain generalization needs a hierarchy for every quasi-identifier; "
            f"missing: {', '.join(text)} (text: build one with "
            "ppdm.anonymize.hierarchy_builders or 'ppdm hierarchy mask|dates|intervals', "
            "or use the mondrian algorithm)"
        )
    return built


def _full_domain(
    table: pd.DataFrame,
    *,
    roles: AttributeRoles,
    hierarchies: dict[str, Hierarchy],
    model: PrivacyModel,
    sensitive: str | None,
    algorithm: str,
    suppression: float,
    metric: str,
    target: str | None,
    rng: int | RandomSource | None,
    progress: Progress | None,
) -> Release:
    qi = list(roles.quasi_identifiers)
    problem = FullDomainProblem(
        table,
        qi=qi,
        hierarchies=hierarchies,
        model=model,
        sensitive=sensitive,
        suppression=suppression,
        sensitive_hierarchy=hierarchies.get(sensitive) if sensitive else None,
    )
    result = search(problem, algorithm=algorithm, metric=metric, progress=progress)
    if result.chosen is None:
        raise ConfigError(
            f"no generalization satisfies {model.describe()['model']} with at most "
            f"{problem.max_suppressed} suppressed rows (suppression {suppression:g}); "
            "relax the model or allow more suppression"
        )
    node = result.chosen
    class_ids, keep = problem.row_classes(node)
    labels = problem.row_labels(node)
    target_values = as_labels(table[target]) if target is not None else None
    metrics = generalization_metrics(problem, node, target=target_values)
    info = result.info(qi)
    info["model"] = model.describe()
    info["suppression_limit"] = suppression
    return make_release(
        table,
        qi=qi,
        released_values=labels,
        class_ids=class_ids,
        keep=keep,
        algorithm=algorithm,
        sensitive=sensitive,
        identifiers=roles.identifiers,
        info=info,
        metrics=metrics,
        rng=rng,
    )


def _clustering(
    table: pd.DataFrame,
    *,
    roles: AttributeRoles,
    hierarchies: dict[str, Hierarchy],
    model: PrivacyModel,
    sensitive: str | None,
    algorithm: str,
    suppression: float,
    rng: int | RandomSource | None,
    progress: Progress | None,
) -> Release:
    """Dispatch to the partition/cluster-based anonymizers (imported lazily)."""
    if suppression:
        log.warning("suppression applies to full-domain algorithms only; ignored by %s", algorithm)
    qi = list(roles.quasi_identifiers)
    source = table.drop(columns=list(roles.identifiers))
    common: dict[str, Any] = {"qi": qi, "rng": rng, "progress": progress}
    if algorithm == "mondrian":
        from ppdm.anonymize.mondrian import mondrian

        release = mondrian(
            source, model=model, sensitive=sensitive, hierarchies=hierarchies or None, **common
        )
    elif algorithm == "mdav":
        from ppdm.anonymize.microaggregation import mdav

        release = mdav(
            source, model=model, sensitive=sensitive, hierarchies=hierarchies or None, **common
        )
    elif algorithm == "k-member":
        from ppdm.anonymize.kmember import k_member

        release = k_member(
            source, model=model, sensitive=sensitive, hierarchies=hierarchies or None, **common
        )
    else:
        from ppdm.anonymize.condensation import condensation

        release = condensation(source, k=model.min_class_size, **common)
    release.n_input = release.n_input or len(table)
    return release
