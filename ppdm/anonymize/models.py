"""Privacy models checked on equivalence classes (Aggarwal 2015, §20.3.1-20.3.3).

Every model sees an equivalence class only through the counts of each sensitive value in
it, so one interface serves every anonymization algorithm: full-domain lattice searches
(Samarati, Incognito, the optimal search), Mondrian, microaggregation and clustering.

* :class:`KAnonymity` — Definition 20.3.1: every class has at least ``k`` records.
* :class:`DistinctLDiversity` — at least ``l`` distinct sensitive values per class
  (Seidl 2016, "Distinct l-Diversity"; Machanavajjhala et al. 2007).
* :class:`EntropyLDiversity` — Definition 20.3.3, eq. (20.10): the entropy of the class's
  sensitive distribution is at least ``log(l)``.
* :class:`RecursiveCLDiversity` — Definition 20.3.4, eq. (20.11): with sorted counts
  ``r_1 >= ... >= r_m``, ``r_1 < c * (r_l + ... + r_m)``.
* :class:`TCloseness` — Definition 20.3.5, eq. (20.12): ``Dist(P, Q) <= t`` with the
  variational distance (20.13), the KL distance (20.14) or the earth mover's distance
  (the LP of section 20.3.3) under an equal, ordered or hierarchical ground distance
  (Li, Li and Venkatasubramanian 2007, whose closed forms solve that LP exactly).

All of them are monotone under generalization (Lemmas 20.3.1-20.3.4): merging classes
that satisfy the model gives a class that satisfies it. With tuple suppression
(``MaxSup``) that stays true for k-anonymity and distinct l-diversity (a merged class
violates only if all its parts did) but not for entropy/recursive l-diversity or
t-closeness; :attr:`PrivacyModel.monotone_with_suppression` says which is which, and the
lattice searches stop predictive tagging when it is False.

Examples
--------
Table 20.3's two classes (HIV x3; Hepatitis C x2 + Diabetes):

>>> counts = np.array([[3, 0, 0], [0, 2, 1]])
>>> KAnonymity(3).check_classes(counts).tolist()
[True, True]
>>> DistinctLDiversity(2).check_classes(counts).tolist()
[False, True]
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import numpy as np

from ppdm.anonymize.hierarchy import Hierarchy
from ppdm.errors import ConfigError

__all__ = [
    "DistinctLDiversity",
    "EntropyLDiversity",
    "KAnonymity",
    "ModelSet",
    "PrivacyModel",
    "RecursiveCLDiversity",
    "TCloseness",
    "emd_equal",
    "emd_hierarchical",
    "emd_ordered",
    "kl_distance",
    "make_models",
    "variational_distance",
]

_EPS = 1e-12


def _as_counts(counts: np.ndarray) -> np.ndarray:
    arr = np.asarray(counts, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2:
        raise ValueError("counts must be a vector or a (classes x values) matrix")
    return arr


class PrivacyModel(ABC):
    """A syntactic privacy model checked class by class on sensitive-value counts.

    Life cycle: :meth:`prepare` once with the whole table's sensitive column (coded
    ``0 .. d-1``), then :meth:`check_classes` (vectorized) or :meth:`check_class` for
    any number of candidate partitions.
    """

    #: Smallest class that can satisfy the model (k for k-anonymity, l for l-diversity).
    min_class_size: int = 1
    #: Whether the model needs a sensitive attribute.
    needs_sensitive: bool = False
    #: Whether "rows in violating classes <= MaxSup" is monotone under generalization.
    monotone_with_suppression: bool = True
    #: Short name used in reports.
    name: str = "model"

    def prepare(
        self,
        sensitive_codes: np.ndarray,
        domain: Sequence[str],
        *,
        hierarchy: Hierarchy | None = None,
    ) -> None:
        """Learn whatever the model needs from the whole table (default: nothing)."""
        return None

    def check_class(self, counts: np.ndarray) -> bool:
        """Whether one class with these sensitive-value counts satisfies the model."""
        return bool(self.check_classes(np.asarray(counts)[None, :])[0])

    @abstractmethod
    def check_classes(self, counts: np.ndarray) -> np.ndarray:
        """Boolean per row of ``counts`` (classes x sensitive values)."""

    def describe(self) -> dict[str, Any]:
        """The model's parameters for reports."""
        return {"model": self.name}

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.describe().items() if k != "model")
        return f"{type(self).__name__}({params})"


class KAnonymity(PrivacyModel):
    """k-anonymity (Aggarwal 2015, Definition 20.3.1): every class has at least ``k`` rows."""

    name = "k-anonymity"

    def __init__(self, k: int) -> None:
        if int(k) != k or k < 1:
            raise ConfigError(f"k must be a positive integer, got {k!r}")
        self.k = int(k)
        self.min_class_size = self.k

    def check_classes(self, counts: np.ndarray) -> np.ndarray:
        return _as_counts(counts).sum(axis=1) >= self.k

    def check_sizes(self, sizes: np.ndarray) -> np.ndarray:
        """Fast path on class sizes only (no sensitive attribute needed)."""
        return np.asarray(sizes) >= self.k

    def describe(self) -> dict[str, Any]:
        return {"model": self.name, "k": self.k}


class _LDiversity(PrivacyModel):
    needs_sensitive = True

    def __init__(self, l: float) -> None:  # noqa: E741 - the literature's name
        if l < 1:
            raise ConfigError(f"l must be >= 1, got {l!r}")
        self.l = l
        self.min_class_size = math.ceil(l)


class DistinctLDiversity(_LDiversity):
    """Distinct l-diversity: at least ``l`` distinct sensitive values in every class
    (Seidl 2016, l-diversity; Aggarwal 2015, Definition 20.3.2 with "well represented" read as
    "present")."""

    name = "distinct-l-diversity"

    def __init__(self, l: int) -> None:  # noqa: E741
        if int(l) != l:
            raise ConfigError(f"l must be an integer for distinct l-diversity, got {l!r}")
        super().__init__(int(l))

    def check_classes(self, counts: np.ndarray) -> np.ndarray:
        return (_as_counts(counts) > 0).sum(axis=1) >= self.l

    def describe(self) -> dict[str, Any]:
        return {"model": self.name, "l": self.l}


class EntropyLDiversity(_LDiversity):
    """Entropy l-diversity (Aggarwal 2015, Definition 20.3.3, eq. 20.10):
    ``-sum p_i log p_i >= log(l)`` (natural logarithms).

    >>> EntropyLDiversity(2).check_classes(np.array([[1, 1], [3, 1]])).tolist()
    [True, False]
    """

    name = "entropy-l-diversity"
    monotone_with_suppression = False

    def check_classes(self, counts: np.ndarray) -> np.ndarray:
        return entropy(counts) >= math.log(self.l) - 1e-9

    def describe(self) -> dict[str, Any]:
        return {"model": self.name, "l": self.l}


def entropy(counts: np.ndarray) -> np.ndarray:
    """Shannon entropy (nats) of each row of a count matrix."""
    arr = _as_counts(counts)
    total = arr.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(total > 0, arr / np.where(total > 0, total, 1), 0.0)
        terms = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return -terms.sum(axis=1)


class RecursiveCLDiversity(_LDiversity):
    """Recursive (c, l)-diversity (Aggarwal 2015, Definition 20.3.4, eq. 20.11).

    With the class's counts sorted ``r_1 >= r_2 >= ... >= r_m``, the class satisfies the
    model when ``r_1 < c * (r_l + r_(l+1) + ... + r_m)``; fewer than ``l`` distinct values
    make the right-hand side 0, so the class fails.

    >>> RecursiveCLDiversity(c=2, l=2).check_classes(np.array([[3, 2, 0], [4, 1, 1]])).tolist()
    [True, False]
    """

    name = "recursive-cl-diversity"
    monotone_with_suppression = False

    def __init__(self, c: float, l: int) -> None:  # noqa: E741
        if int(l) != l or l < 1:
            raise ConfigError(
                f"l must be a positive integer for recursive (c,l)-diversity, got {l!r}"
            )
        if not c > 0:
            raise ConfigError(f"c must be > 0 for recursive (c,l)-diversity, got {c!r}")
        super().__init__(int(l))
        self.c = float(c)

    def check_classes(self, counts: np.ndarray) -> np.ndarray:
        arr = -np.sort(-_as_counts(counts), axis=1)  # descending per row
        tail = arr[:, self.l - 1 :].sum(axis=1) if self.l <= arr.shape[1] else 0.0
        return arr[:, 0] < self.c * tail

    def describe(self) -> dict[str, Any]:
        return {"model": self.name, "c": self.c, "l": self.l}


# -- distances between a class's distribution P and the table's distribution Q ---------


def _fractions(counts: np.ndarray) -> np.ndarray:
    arr = _as_counts(counts)
    total = arr.sum(axis=1, keepdims=True)
    return arr / np.where(total > 0, total, 1.0)


def variational_distance(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Eq. (20.13): ``sum |p_i - q_i| / 2`` for each row of ``p``."""
    return np.abs(_as_counts(p) - np.asarray(q)[None, :]).sum(axis=1) / 2.0


def kl_distance(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Eq. (20.14): ``sum p_i log p_i - p_i log q_i`` (nats; ``0 log 0 = 0``)."""
    pp = _as_counts(p)
    qq = np.asarray(q, dtype=np.float64)[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(pp > 0, pp * (np.log(np.where(pp > 0, pp, 1.0)) - np.log(qq)), 0.0)
    return terms.sum(axis=1)


def emd_equal(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """EMD with the equal ground distance ``d_ij = 1`` (i != j): the variational distance."""
    return variational_distance(p, q)


def emd_ordered(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """EMD with the ordered ground distance ``d_ij = |i - j| / (m - 1)``:
    ``sum_i |sum_(j<=i) (p_j - q_j)| / (m - 1)``."""
    pp = _as_counts(p)
    m = pp.shape[1]
    if m < 2:
        return np.zeros(pp.shape[0])
    cum = np.cumsum(pp - np.asarray(q)[None, :], axis=1)
    return np.abs(cum[:, :-1]).sum(axis=1) / (m - 1)


def emd_hierarchical(p: np.ndarray, q: np.ndarray, parents: Sequence[np.ndarray]) -> np.ndarray:
    """EMD with the hierarchical ground distance ``d_ij = level(LCA(i, j)) / H``.

    ``parents[j]`` maps the node codes of level ``j`` to those of level ``j + 1``
    (``parents[0]`` maps the ``m`` values); the top level must be a single root, so
    ``H = len(parents)``. Closed form of Li et al. (2007): every internal node ``N`` at
    level ``j`` moves ``min(pos_extra(N), neg_extra(N))`` mass at cost ``j / H``.
    """
    extra = _as_counts(p) - np.asarray(q)[None, :]
    height = len(parents)
    total = np.zeros(extra.shape[0])
    for j, parent in enumerate(parents, start=1):
        n_parent = int(parent.max()) + 1 if len(parent) else 0
        onehot = np.zeros((len(parent), n_parent))
        onehot[np.arange(len(parent)), parent] = 1.0
        pos = np.maximum(extra, 0.0) @ onehot
        neg = np.maximum(-extra, 0.0) @ onehot
        total += (j / height) * np.minimum(pos, neg).sum(axis=1)
        extra = pos - neg
    return total


class TCloseness(PrivacyModel):
    """t-closeness (Aggarwal 2015, Definition 20.3.5): ``Dist(P, Q) <= t`` for every class, Q
    the sensitive distribution of the whole table (learned by :meth:`prepare`).

    Parameters
    ----------
    t : float
        Threshold.
    distance : {'variational', 'kl', 'emd'}
        Eq. (20.13), eq. (20.14) (natural logarithm), or the earth mover's distance.
    ground : {'equal', 'ordered', 'hierarchical'} or None
        Ground distance of the EMD. ``None`` picks ``hierarchical`` when a hierarchy of
        the sensitive attribute is given to :meth:`prepare`, ``ordered`` when the
        sensitive values are all numeric (ordered numerically), else ``equal``.

    >>> m = TCloseness(0.2, distance="variational")
    >>> m.prepare(np.array([0, 0, 1, 1]), ["a", "b"])
    >>> m.check_classes(np.array([[1, 1], [2, 0]])).tolist()
    [True, False]
    """

    name = "t-closeness"
    needs_sensitive = True
    monotone_with_suppression = False

    def __init__(
        self, t: float, *, distance: str = "variational", ground: str | None = None
    ) -> None:
        if not t >= 0:
            raise ConfigError(f"t must be >= 0, got {t!r}")
        if distance not in ("variational", "kl", "emd"):
            raise ConfigError(f"unknown t-closeness distance {distance!r} (variational|kl|emd)")
        if ground not in (None, "equal", "ordered", "hierarchical"):
            raise ConfigError(
                f"unknown EMD ground distance {ground!r} (equal|ordered|hierarchical)"
            )
        self.t = float(t)
        self.distance = distance
        self.ground = ground
        self._q: np.ndarray | None = None
        self._order: np.ndarray | None = None
        self._parents: list[np.ndarray] | None = None
        self.ground_used: str | None = None

    def prepare(
        self,
        sensitive_codes: np.ndarray,
        domain: Sequence[str],
        *,
        hierarchy: Hierarchy | None = None,
    ) -> None:
        codes = np.asarray(sensitive_codes, dtype=np.int64)
        d = len(domain)
        if d == 0 or len(codes) == 0:
            raise ConfigError("t-closeness needs a non-empty sensitive attribute")
        self._q = np.bincount(codes, minlength=d).astype(np.float64) / len(codes)
        self._order = None
        self._parents = None
        if self.distance != "emd":
            self.ground_used = None
            return
        ground = self.ground
        numeric = _numeric_order(domain)
        if ground is None:
            ground = (
                "hierarchical"
                if hierarchy is not None
                else ("ordered" if numeric is not None else "equal")
            )
        if ground == "ordered":
            self._order = numeric if numeric is not None else _hierarchy_order(domain, hierarchy)
        elif ground == "hierarchical":
            if hierarchy is None:
                raise ConfigError(
                    "t-closeness with the hierarchical EMD needs a hierarchy of the "
                    "sensitive attribute"
                )
            self._parents = _hierarchy_parents(domain, hierarchy)
        self.ground_used = ground

    def distances(self, counts: np.ndarray) -> np.ndarray:
        """``Dist(P, Q)`` of each class (row of ``counts``)."""
        if self._q is None:
            raise ValueError("TCloseness.prepare() must be called before checking classes")
        p = _fractions(counts)
        if p.shape[1] != len(self._q):
            raise ValueError(f"counts have {p.shape[1]} values, the domain has {len(self._q)}")
        if self.distance == "variational":
            return variational_distance(p, self._q)
        if self.distance == "kl":
            return kl_distance(p, self._q)
        if self._order is not None:
            return emd_ordered(p[:, self._order], self._q[self._order])
        if self._parents is not None:
            return emd_hierarchical(p, self._q, self._parents)
        return emd_equal(p, self._q)

    def check_classes(self, counts: np.ndarray) -> np.ndarray:
        return self.distances(counts) <= self.t + 1e-9

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"model": self.name, "t": self.t, "distance": self.distance}
        if self.distance == "emd":
            out["ground"] = self.ground_used or self.ground
        return out


def _numeric_order(domain: Sequence[str]) -> np.ndarray | None:
    try:
        nums = np.array([float(v) for v in domain])
    except (TypeError, ValueError):
        return None
    return np.argsort(nums, kind="stable")


def _hierarchy_order(domain: Sequence[str], hierarchy: Hierarchy | None) -> np.ndarray:
    if hierarchy is None:
        raise ConfigError(
            "t-closeness with the ordered EMD needs numeric sensitive values or a hierarchy "
            "whose row order gives the order"
        )
    return np.argsort(hierarchy.leaf_codes(list(domain)), kind="stable")


def _hierarchy_parents(domain: Sequence[str], hierarchy: Hierarchy) -> list[np.ndarray]:
    top = hierarchy.height - 1
    if top < 1 or len(hierarchy.labels(top)) != 1:
        raise ConfigError(
            f"hierarchy of {hierarchy.attribute!r} must end in a single root (e.g. '*') "
            "for the hierarchical EMD"
        )
    leaves = hierarchy.leaf_codes(list(domain))
    parents = [hierarchy.level_map(1)[leaves]]
    parents += [hierarchy.parent_map(level) for level in range(1, top)]
    return parents


class ModelSet(PrivacyModel):
    """Several models that must all hold (e.g. k-anonymity and t-closeness)."""

    name = "model-set"

    def __init__(self, models: Sequence[PrivacyModel]) -> None:
        flat: list[PrivacyModel] = []
        for m in models:
            flat.extend(m.models if isinstance(m, ModelSet) else [m])
        if not flat:
            raise ConfigError("no privacy model given")
        self.models: list[PrivacyModel] = flat
        self.min_class_size = max(m.min_class_size for m in flat)
        self.needs_sensitive = any(m.needs_sensitive for m in flat)
        self.monotone_with_suppression = all(m.monotone_with_suppression for m in flat)

    def prepare(
        self,
        sensitive_codes: np.ndarray,
        domain: Sequence[str],
        *,
        hierarchy: Hierarchy | None = None,
    ) -> None:
        for m in self.models:
            m.prepare(sensitive_codes, domain, hierarchy=hierarchy)

    def check_classes(self, counts: np.ndarray) -> np.ndarray:
        arr = _as_counts(counts)
        ok = np.ones(arr.shape[0], dtype=bool)
        for m in self.models:
            ok &= m.check_classes(arr)
        return ok

    @property
    def k(self) -> int:
        """The largest k of the k-anonymity members (1 if none)."""
        return max((m.k for m in self.models if isinstance(m, KAnonymity)), default=1)

    def describe(self) -> dict[str, Any]:
        return {
            "model": "+".join(m.name for m in self.models),
            "models": [m.describe() for m in self.models],
        }


def make_models(
    *,
    k: int | None = None,
    l: float | None = None,  # noqa: E741
    l_variant: str = "distinct",
    c: float | None = None,
    t: float | None = None,
    t_distance: str = "variational",
    t_ground: str | None = None,
) -> ModelSet:
    """Build the models named by the options (all must hold).

    >>> make_models(k=5, l=2).describe()["model"]
    'k-anonymity+distinct-l-diversity'
    """
    models: list[PrivacyModel] = []
    if k is not None:
        models.append(KAnonymity(k))
    if l is not None:
        if l_variant == "distinct":
            models.append(DistinctLDiversity(int(l)))
        elif l_variant == "entropy":
            models.append(EntropyLDiversity(l))
        elif l_variant == "recursive":
            if c is None:
                raise ConfigError("recursive (c,l)-diversity needs c")
            models.append(RecursiveCLDiversity(c, int(l)))
        else:
            raise ConfigError(
                f"unknown l-diversity variant {l_variant!r} (distinct|entropy|recursive)"
            )
    elif c is not None:
        raise ConfigError("c is only used with recursive (c,l)-diversity; give l as well")
    if t is not None:
        models.append(TCloseness(t, distance=t_distance, ground=t_ground))
    if not models:
        raise ConfigError("no privacy model: give k, l or t")
    return ModelSet(models)
