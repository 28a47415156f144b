"""Attribute disclosure: homogeneity and background-knowledge attacks on a release.

Seidl 2016 ("Background Knowledge attack"): in a k-anonymous release, "all females within
20 years have breast cancer" -- an equivalence class whose sensitive values are all the
same discloses the value of everyone linked to it (*homogeneity*); and an attacker who
knows something about the target (Alice is 29 and female; or, in Machanavajjhala et al.'s
example, that the target is very unlikely to have heart disease) can rule values out
until one remains (*background knowledge*). Aggarwal 2015, §20.3.2 draws the same lesson
from table 20.3, whose class ``([20, 30], Northeastern US)`` is all HIV.

* :func:`homogeneity_attack` -- per class: distinct sensitive values, the most frequent
  value and its share (the attacker's confidence), and whether the class is homogeneous;
  plus the distinct, entropy and probabilistic l-diversity the release achieves
  (Seidl 2016: entropy >= log l; most frequent value <= 1/l).
* :func:`background_knowledge_check` -- per class, how many negative statements ("the
  target does not have s") suffice to pin the value down: ``distinct - 1``; classes where
  ``statements`` or fewer do are vulnerable. (Distinct l-diversity resists ``l - 2``.)
* :func:`background_knowledge_attack` -- the concrete attack on one target: match the
  known quasi-identifier values against the (generalized) release, drop the values the
  attacker can exclude, and return the posterior over the rest.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from ppdm.errors import ConfigError
from ppdm.risk.linkage import _group
from ppdm.risk.matching import Hierarchies, as_frame_labels, cover_matrix

__all__ = [
    "background_knowledge_attack",
    "background_knowledge_check",
    "equivalence_class_table",
    "homogeneity_attack",
]


def _check(release: pd.DataFrame, qi: Sequence[str], sensitive: str) -> None:
    missing = [c for c in [*qi, sensitive] if c not in release.columns]
    if missing:
        raise ConfigError(f"columns not in the release: {', '.join(missing)}")


def equivalence_class_table(
    release: pd.DataFrame, qi: Sequence[str], sensitive: str
) -> pd.DataFrame:
    """One row per equivalence class: its QI tuple, ``size``, ``distinct``, ``top_value``,
    ``top_share`` and ``entropy`` (natural log) of the sensitive values."""
    _check(release, qi, sensitive)
    codes, classes = _group(as_frame_labels(release, list(qi)))
    frame = pd.DataFrame({"class_id": codes, "s": release[sensitive].astype(object).to_numpy()})
    counts = frame.groupby(["class_id", "s"], sort=False).size().rename("n").reset_index()
    size = counts.groupby("class_id")["n"].transform("sum")
    counts["p"] = counts["n"] / size
    counts["h"] = -counts["p"] * np.log(counts["p"])
    g = counts.groupby("class_id")
    top_idx = g["n"].idxmax()
    table = classes.copy()
    table.index.name = "class_id"
    table["size"] = g["n"].sum()
    table["distinct"] = g["s"].nunique()
    table["top_value"] = counts.loc[top_idx, "s"].to_numpy()
    table["top_share"] = counts.loc[top_idx, "p"].to_numpy()
    table["entropy"] = g["h"].sum()
    return table


def homogeneity_attack(
    release: pd.DataFrame, *, qi: Sequence[str], sensitive: str
) -> dict[str, object]:
    """Classes whose sensitive values are all equal, and the l-diversity achieved.

    Seidl's (2016) released records: the 2*-aged females all have breast cancer and the
    2*-aged males all have lung cancer.

    >>> t = pd.DataFrame({"Gender": list("FFMMMMF"), "Age": ["2*"] * 4 + ["3*"] * 3,
    ...     "Disease": ["Breast Cancer"] * 2 + ["Lung Cancer"] * 2
    ...                + ["Heart Disease", "Fever", "Nose Pains"]})
    >>> r = homogeneity_attack(t, qi=["Gender", "Age"], sensitive="Disease")
    >>> r["homogeneous_classes"], r["records_disclosed"], r["distinct_l"]
    (3, 5, 1)
    """
    table = equivalence_class_table(release, qi, sensitive)
    homog = table["distinct"] == 1
    n = int(table["size"].sum())
    return {
        "classes": len(table),
        "homogeneous_classes": int(homog.sum()),
        "records_disclosed": int(table.loc[homog, "size"].sum()),
        "share_disclosed": float(table.loc[homog, "size"].sum() / n) if n else 0.0,
        "max_top_share": float(table["top_share"].max()) if n else 0.0,
        "distinct_l": int(table["distinct"].min()) if n else 0,
        "entropy_l": float(np.exp(table["entropy"].min())) if n else 0.0,
        "probabilistic_l": float(1.0 / table["top_share"].max()) if n else 0.0,
        "disclosed": [
            {**{c: row[c] for c in qi}, "value": row["top_value"], "size": int(row["size"])}
            for _, row in table[homog].iterrows()
        ],
    }


def background_knowledge_check(
    release: pd.DataFrame, *, qi: Sequence[str], sensitive: str, statements: int = 1
) -> dict[str, object]:
    """Classes an attacker with ``statements`` negative facts about a target can break.

    In a class with ``d`` distinct sensitive values, ``d - 1`` facts "the target's value is
    not s" leave one value. ``statements=0`` is the homogeneity attack.

    >>> t = pd.DataFrame({"q": [1, 1, 1, 2, 2, 2], "s": ["a", "b", "a", "a", "b", "c"]})
    >>> background_knowledge_check(t, qi=["q"], sensitive="s", statements=1)["vulnerable_classes"]
    1
    """
    if statements < 0:
        raise ValueError("statements must be non-negative")
    table = equivalence_class_table(release, qi, sensitive)
    needed = table["distinct"] - 1
    vulnerable = needed <= statements
    n = int(table["size"].sum())
    return {
        "statements": statements,
        "classes": len(table),
        "vulnerable_classes": int(vulnerable.sum()),
        "records_vulnerable": int(table.loc[vulnerable, "size"].sum()),
        "share_vulnerable": float(table.loc[vulnerable, "size"].sum() / n) if n else 0.0,
        "min_statements_needed": int(needed.min()) if n else 0,
    }


def background_knowledge_attack(
    release: pd.DataFrame,
    *,
    qi: Sequence[str],
    sensitive: str,
    target: Mapping[str, object],
    excluded: Iterable[object] = (),
    hierarchies: Hierarchies | None = None,
) -> pd.Series:
    """Posterior over the target's sensitive value after linking and excluding.

    ``target`` gives the quasi-identifier values the attacker knows (a subset of ``qi``
    is fine: unknown attributes match everything). Records of every compatible class
    count; values in ``excluded`` are removed and the rest renormalized. Returns an
    empty Series when nothing is compatible.

    Seidl 2016: Alice is 29 and female, Jones is 27 and male.

    >>> t = pd.DataFrame({"Gender": list("FFMMMMF"), "Age": ["2*"] * 4 + ["3*"] * 3,
    ...     "Zip": ["520*"] * 7, "Disease": ["Breast Cancer"] * 2 + ["Lung Cancer"] * 2
    ...                + ["Heart Disease", "Fever", "Nose Pains"]})
    >>> background_knowledge_attack(t, qi=["Gender", "Age", "Zip"], sensitive="Disease",
    ...                             target={"Gender": "F", "Age": 29}).to_dict()
    {'Breast Cancer': 1.0}
    >>> background_knowledge_attack(t, qi=["Gender", "Age", "Zip"], sensitive="Disease",
    ...     target={"Gender": "M", "Age": 35}, excluded=["Heart Disease"]).to_dict()
    {'Fever': 1.0}
    """
    _check(release, qi, sensitive)
    unknown = [k for k in target if k not in qi]
    if unknown:
        raise ConfigError(f"target attributes not among the quasi-identifiers: {unknown}")
    hierarchies = hierarchies or {}
    known = [c for c in qi if c in target]
    ok = np.ones(len(release), dtype=bool)
    labels = as_frame_labels(release, known)
    for c in known:
        codes, uniq = pd.factorize(labels[c].astype(object))
        m = cover_matrix(list(uniq), [target[c]], hierarchies.get(c))[:, 0]
        ok &= np.where(codes >= 0, m[np.maximum(codes, 0)], False)
    values = release.loc[ok, sensitive].astype(object)
    excluded_set = {str(v) for v in excluded}
    values = values[~values.astype(str).isin(excluded_set)]
    if values.empty:
        return pd.Series(dtype=np.float64, name=sensitive)
    post = values.value_counts(normalize=True, sort=True)
    post.index = post.index.astype(object)
    post.name = sensitive
    return post
