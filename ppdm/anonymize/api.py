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

__all__ = ["ALGORITHMS", "MODELS", "anonymize", "build_model", "text_hierarchy"]

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
    qi: str | Sequence[str],
    k: int | None = None,
    *,
    sensitive: str | None = None,
    identifiers: str | Sequence[str] | None = None,
    hierarchies: Mapping[str, Hierarchy] | str | Path | None = None,
    model: str | Sequence[str] | PrivacyModel = "k-anonymity",
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
    k : int, optional
        The minimum class size of k-anonymity (``anonymize(df, ["age", "zip"], 5)``).
    sensitive : str, optional
        The sensitive attribute (needed by l-diversity and t-closeness).
    identifiers : str or list of str, optional
        Explicit identifiers, dropped from the release.
    hierarchies : mapping or directory, optional
        Hierarchy per attribute, or a directory with ``*_hierarchy_<attribute>.csv``
        files (``;``-separated). The full-domain algorithms need one for every QI; a QI
        without one gets one built from its values, listed in
        ``release.info["built_hierarchies"]``: a numeric QI an interval hierarchy
        (:func:`~ppdm.anonymize.hierarchy_builders.default_interval_hierarchy`), a text QI
        :func:`text_hierarchy` (masking for codes such as ZIP codes, else the values
        rarer than ``k``, ``2k``, ... grouped level by level). A hierarchy of the
        sensitive attribute enables the hierarchical EMD.
    model, l, l_variant, c, t, t_distance, t_ground
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
        built = _default_hierarchies(table, qi_list, hier, k=privacy.min_class_size)
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


#: The label of the values a frequency level groups together (see :func:`text_hierarchy`).
OTHER = "(other)"


def text_hierarchy(values: object, *, attribute: str, k: int = 2) -> Hierarchy:
    """A hierarchy for a text quasi-identifier that has none, built from its values.

    Two kinds, chosen from the data:

    * codes (every value the same length, at least three letters or digits, at least one
      digit: ZIP codes, ids) are masked from the right one character per level, as ARX's
      redaction hierarchy does
      (:func:`~ppdm.anonymize.hierarchy_builders.masking_hierarchy`);
    * any other text is generalized by frequency: level ``j`` keeps the values that occur
      at least ``k * 2**(j-1)`` times and groups the rarer ones into ``(other)``, until
      every value is grouped; the top level is ``*``. Level 1 thus hides exactly the
      values rarer than ``k``, the ones that single out few records whatever the other
      quasi-identifiers say (the suppression-based recoding of Sweeney, *Achieving
      k-anonymity privacy protection using generalization and suppression*, 2002,
      section 4; global recoding as in Aggarwal, *Data Mining: The Textbook*, 2015,
      section 20.3.1.1).

    The hierarchy depends only on the value counts of the column, which the release
    shows anyway (up to the grouping). Missing values are an error.

    >>> h = text_hierarchy(["a", "a", "a", "a", "b", "b", "c"], attribute="x", k=2)
    >>> [h.generalize(["a", "b", "c"], level).tolist() for level in range(h.height)]
    [['a', 'b', 'c'], ['a', 'b', '(other)'], ['a', '(other)', '(other)'], ['*', '*', '*']]
    >>> text_hierarchy(["02139", "02138", "10598"], attribute="zip").generalize(["02139"], 1)
    array(['0213*'], dtype=object)
    """
    labels = pd.Series(as_labels(values), dtype=object)
    if labels.isna().any():
        raise ConfigError(
            f"quasi-identifier {attribute!r} has missing values; fill them or give it a hierarchy"
        )
    counts = labels.value_counts(sort=False)
    distinct = [str(v) for v in counts.index]
    if _is_code(distinct):
        from ppdm.anonymize.hierarchy_builders import masking_hierarchy

        return masking_hierarchy(labels, attribute=attribute)
    other = OTHER
    while other in counts.index:  # a label no value has
        other = f"({other})"
    columns: list[list[str]] = [distinct]
    kept = set(distinct)
    threshold = max(int(k), 1)
    while kept:
        now = {v for v in distinct if int(counts[v]) >= threshold}
        if now != kept:
            columns.append([v if v in now else other for v in distinct])
            kept = now
        if threshold > len(labels):
            break
        threshold *= 2
    if len(columns) > 1 and not kept:
        columns.pop()  # everything grouped: the same partition as the top level
    columns.append(["*"] * len(distinct))
    rows = [list(row) for row in zip(*columns, strict=True)]
    return Hierarchy.from_rows(rows, attribute=attribute)


def _is_code(distinct: list[str]) -> bool:
    """Whether distinct text values look like codes (same length, >= 3 alphanumerics, with
    a digit each): ZIP codes, ids."""
    lengths = {len(v) for v in distinct}
    return (
        len(distinct) > 1
        and len(lengths) == 1
        and min(lengths) >= 3
        and all(v.isalnum() and any(ch.isdigit() for ch in v) for v in distinct)
    )


def _default_hierarchies(
    table: pd.DataFrame, qi: list[str], hierarchies: dict[str, Hierarchy], *, k: int = 2
) -> dict[str, str]:
    """Add a hierarchy for every quasi-identifier without one and return ``{column:
    description}`` of what was built (for the report): an interval hierarchy
    (:func:`~ppdm.anonymize.hierarchy_builders.interval_hierarchy` with
    :func:`~ppdm.anonymize.hierarchy_builders.auto_widths`) for a numeric column, and
    :func:`text_hierarchy` (masking for codes, frequency groups for other text, built with
    the model's minimum class size ``k``) for a text column."""
    built: dict[str, str] = {}
    for col in qi:
        if col in hierarchies:
            continue
        s = table[col]
        if pd.api.types.is_numeric_dtype(s.dtype) and not pd.api.types.is_bool_dtype(s.dtype):
            from ppdm.anonymize.hierarchy_builders import auto_widths, interval_hierarchy

            widths = auto_widths(s, attribute=col)
            hierarchies[col] = interval_hierarchy(s, attribute=col, widths=widths)
            built[col] = "intervals of width " + ", ".join(f"{w:g}" for w in widths) + ", then *"
        else:
            h = text_hierarchy(s, attribute=col, k=k)
            hierarchies[col] = h
            if _is_code([str(v) for v in h.values]):
                built[col] = f"masking one more character per level ({h.height - 2}), then *"
            else:
                built[col] = (
                    f"values rarer than {k}, {2 * k}, ... grouped as {OTHER} "
                    f"(levels: {h.height - 2}), then *"
                )
        log.info("built a hierarchy for %r: %s", col, built[col])
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
