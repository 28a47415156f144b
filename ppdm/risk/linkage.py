"""The linkage attack: join a public identified table to a release on quasi-identifiers.

Aggarwal 2015, §20.3 (tables 20.1-20.3): with the SSN removed from the medical table
20.1, joining it to the voter registration rolls of table 20.2 on age and ZIP code gives
each medical record its list of possible names -- Joy and Sue are the only two matches of
a record with HIV (50 % each), William the only match of a record with hepatitis C. After
3-anonymization (table 20.3) every record matches several voters, but the class
``([20, 30], Northeastern US)`` contains only HIV, so every voter who falls in it is
exposed anyway (the homogeneity problem that motivates l-diversity, Aggarwal 2015, §20.3.2).

:func:`linkage_attack` performs this join for any release whose quasi-identifiers may be
generalized (see :mod:`ppdm.risk.matching` for the labels understood) and
reports, per release record, how many public individuals it could be (identity
disclosure), and per public individual, which records and sensitive values are
compatible with them (attribute disclosure).

The join is done between equivalence classes of the release and groups of identical
quasi-identifier tuples of the public table, attribute by attribute on distinct values,
so its cost is ``#classes x #groups`` bit operations, not ``#rows x #rows``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ppdm.errors import ConfigError
from ppdm.extras import require
from ppdm.risk.matching import Hierarchies, as_frame_labels, cover_matrix

if TYPE_CHECKING:
    from scipy.sparse import csr_matrix

sparse = require("scipy.sparse", "stats", "ppdm.risk")

__all__ = ["LinkageResult", "class_matches", "linkage_attack"]

_BLOCK = 1 << 22


def _group(frame: pd.DataFrame) -> tuple[np.ndarray, pd.DataFrame]:
    """Row -> group code, and the distinct tuples (one row per code)."""
    keys = frame.astype(object).where(frame.notna(), "\x00<NA>")
    codes, uniques = pd.factorize(pd.MultiIndex.from_frame(keys))
    distinct = pd.DataFrame(list(uniques), columns=frame.columns)
    distinct = distinct.replace("\x00<NA>", None)
    return codes.astype(np.int64), distinct


def class_matches(
    release_classes: pd.DataFrame,
    public_groups: pd.DataFrame,
    *,
    hierarchies: Hierarchies | None = None,
) -> csr_matrix:
    """Sparse boolean matrix: release class ``c`` is compatible with public group ``g``.

    Both frames hold one distinct quasi-identifier tuple per row, in the same column
    order (public column ``j`` is compared with release column ``j``).
    """
    if release_classes.shape[1] != public_groups.shape[1]:
        raise ValueError("release and public need the same number of quasi-identifiers")
    hierarchies = hierarchies or {}
    per_attr = []
    for j, col in enumerate(release_classes.columns):
        r_codes, r_uniq = pd.factorize(release_classes.iloc[:, j].astype(object), sort=False)
        p_codes, p_uniq = pd.factorize(public_groups.iloc[:, j].astype(object), sort=False)
        m = cover_matrix(list(r_uniq), list(p_uniq), hierarchies.get(col))
        per_attr.append((r_codes, p_codes, m))
    n_c, n_g = len(release_classes), len(public_groups)
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    block = max(1, _BLOCK // max(n_g, 1))
    for start in range(0, n_c, block):
        stop = min(n_c, start + block)
        ok = np.ones((stop - start, n_g), dtype=bool)
        for r_codes, p_codes, m in per_attr:
            ok &= m[r_codes[start:stop]][:, p_codes]
        r, c = np.nonzero(ok)
        rows.append(r + start)
        cols.append(c)
    r_all = np.concatenate(rows) if rows else np.empty(0, dtype=np.int64)
    c_all = np.concatenate(cols) if cols else np.empty(0, dtype=np.int64)
    data = np.ones(len(r_all), dtype=np.int64)
    return sparse.csr_matrix((data, (r_all, c_all)), shape=(n_c, n_g))


@dataclass
class LinkageResult:
    """Outcome of :func:`linkage_attack`.

    Attributes
    ----------
    records : DataFrame
        One row per release record (same index as the release): ``class_id``,
        ``candidates`` (public individuals compatible with it) and ``identity_risk``
        (``1 / candidates``, 0 when none: the probability that a guessed name is right
        if the record's subject is in the public table).
    individuals : DataFrame
        One row per public individual (same index as the public table):
        ``matching_records``, and with a sensitive attribute ``top_value``,
        ``top_probability`` (share of compatible records with that value: the attacker's
        confidence if the individual is in the release) and ``disclosed``
        (``top_probability == 1``).
    sensitive_distribution : DataFrame or None
        Public individuals x sensitive values: share of compatible records.
    """

    records: pd.DataFrame
    individuals: pd.DataFrame
    sensitive_distribution: pd.DataFrame | None
    _match: csr_matrix
    _release_codes: np.ndarray
    _public_codes: np.ndarray

    def pairs(self, limit: int = 1_000_000) -> pd.DataFrame:
        """Every (release record, public individual) compatible pair, by index labels."""
        total = int(self.records["candidates"].sum())
        if total > limit:
            raise ValueError(f"{total} pairs exceed limit={limit}")
        coo = self._match.tocoo()
        rel_by_class = pd.Series(np.arange(len(self._release_codes))).groupby(self._release_codes)
        pub_by_group = pd.Series(np.arange(len(self._public_codes))).groupby(self._public_codes)
        rel_members = {k: v.to_numpy() for k, v in rel_by_class}
        pub_members = {k: v.to_numpy() for k, v in pub_by_group}
        out_r, out_p = [], []
        for c, g in zip(coo.row.tolist(), coo.col.tolist(), strict=True):
            rr, pp = rel_members[c], pub_members[g]
            out_r.append(np.repeat(rr, len(pp)))
            out_p.append(np.tile(pp, len(rr)))
        r = np.concatenate(out_r) if out_r else np.empty(0, dtype=np.int64)
        p = np.concatenate(out_p) if out_p else np.empty(0, dtype=np.int64)
        frame = pd.DataFrame(
            {
                "release_index": self.records.index.to_numpy()[r],
                "public_index": self.individuals.index.to_numpy()[p],
            }
        )
        return frame.sort_values(["release_index", "public_index"]).reset_index(drop=True)

    def reidentified(self) -> pd.DataFrame:
        """Release records compatible with exactly one public individual, and who."""
        pairs = self.pairs()
        unique = self.records.index[self.records["candidates"] == 1]
        return pairs[pairs["release_index"].isin(unique)].reset_index(drop=True)

    def summary(self) -> dict[str, float | int]:
        rec = self.records
        ind = self.individuals
        out: dict[str, float | int] = {
            "release_records": len(rec),
            "public_individuals": len(ind),
            "records_linked": int((rec["candidates"] > 0).sum()),
            "records_reidentified": int((rec["candidates"] == 1).sum()),
            "max_identity_risk": float(rec["identity_risk"].max()) if len(rec) else 0.0,
            "mean_identity_risk": float(rec["identity_risk"].mean()) if len(rec) else 0.0,
            "individuals_matched": int((ind["matching_records"] > 0).sum()),
        }
        if "disclosed" in ind:
            out["individuals_attribute_disclosed"] = int(ind["disclosed"].sum())
        return out


def linkage_attack(
    release: pd.DataFrame,
    public: pd.DataFrame,
    *,
    qi: Sequence[str],
    public_qi: Sequence[str] | Mapping[str, str] | None = None,
    sensitive: str | None = None,
    hierarchies: Hierarchies | None = None,
) -> LinkageResult:
    """Link ``public`` (identified, exact quasi-identifiers) to ``release``.

    Parameters
    ----------
    release : DataFrame
        The published table; its ``qi`` columns may be generalized.
    public : DataFrame
        External identified data (e.g. voter rolls) with exact values.
    qi : sequence of str
        Quasi-identifier columns of the release.
    public_qi : sequence or mapping, optional
        The matching public columns (same order as ``qi``, or ``{release_col:
        public_col}``); default: the same names.
    sensitive : str, optional
        Sensitive column of the release, for attribute disclosure.
    hierarchies : mapping, optional
        ``{release_col: {original: [ancestor labels]}}`` for hierarchy labels.

    Examples
    --------
    Aggarwal 2015, tables 20.1 and 20.2 (SSN removed from the release):

    >>> release = pd.DataFrame({"Age": [24, 37, 26, 38, 36, 25],
    ...     "ZIP": ["10598", "90210", "10547", "90345", "89119", "02139"],
    ...     "Disease": ["HIV", "Hepatitis C", "HIV", "Hepatitis C", "Diabetes", "HIV"]})
    >>> voters = pd.DataFrame({"Name": ["Mary A.", "John S.", "Ann L.", "Jack M.", "Joy M.",
    ...     "Victor B.", "Peter P.", "Diana X.", "William W.", "Sue G."],
    ...     "Age": [38, 36, 31, 57, 26, 46, 25, 24, 37, 26],
    ...     "ZIP": ["90345", "89119", "02139", "10562", "10547", "90345", "02139", "10598",
    ...             "90210", "10547"]}).set_index("Name")
    >>> result = linkage_attack(release, voters, qi=["Age", "ZIP"], sensitive="Disease")
    >>> result.records["candidates"].tolist()
    [1, 1, 2, 1, 1, 1]
    >>> result.pairs().query("release_index == 2")["public_index"].tolist()
    ['Joy M.', 'Sue G.']
    """
    qi = list(qi)
    if not qi:
        raise ConfigError("give at least one quasi-identifier")
    if public_qi is None:
        pub_cols = qi
    elif isinstance(public_qi, Mapping):
        pub_cols = [public_qi.get(c, c) for c in qi]
    else:
        pub_cols = list(public_qi)
        if len(pub_cols) != len(qi):
            raise ConfigError("public_qi must list one public column per quasi-identifier")
    if sensitive is not None and sensitive not in release.columns:
        raise ConfigError(f"sensitive column {sensitive!r} not in the release")
    rel = as_frame_labels(release, qi)
    pub = as_frame_labels(public, pub_cols)
    pub.columns = qi
    r_codes, r_classes = _group(rel)
    p_codes, p_groups = _group(pub)
    match = class_matches(r_classes, p_groups, hierarchies=hierarchies)

    group_sizes = np.bincount(p_codes, minlength=len(p_groups)).astype(np.int64)
    class_sizes = np.bincount(r_codes, minlength=len(r_classes)).astype(np.int64)
    cand_per_class = match @ group_sizes
    recs_per_group = match.T @ class_sizes
    candidates = cand_per_class[r_codes]
    records = pd.DataFrame(
        {
            "class_id": r_codes,
            "candidates": candidates,
            "identity_risk": np.where(candidates > 0, 1.0 / np.maximum(candidates, 1), 0.0),
        },
        index=release.index,
    )
    individuals = pd.DataFrame({"matching_records": recs_per_group[p_codes]}, index=public.index)
    dist: pd.DataFrame | None = None
    if sensitive is not None:
        s_codes, s_values = pd.factorize(release[sensitive].astype(object), sort=True)
        counts = sparse.csr_matrix(
            (np.ones(len(s_codes), dtype=np.int64), (r_codes, s_codes)),
            shape=(len(r_classes), len(s_values)),
        )
        per_group = (match.T @ counts).toarray().astype(np.float64)
        totals = per_group.sum(axis=1, keepdims=True)
        share = np.divide(per_group, totals, out=np.zeros_like(per_group), where=totals > 0)
        dist = pd.DataFrame(share[p_codes], index=public.index, columns=list(s_values))
        top = share.argmax(axis=1)
        top_p = share.max(axis=1)
        matched = totals[:, 0] > 0
        top_value = np.asarray(s_values, dtype=object)[top]
        top_value[~matched] = None
        individuals["top_value"] = top_value[p_codes]
        individuals["top_probability"] = np.where(matched, top_p, 0.0)[p_codes]
        individuals["disclosed"] = individuals["top_probability"] >= 1.0
    return LinkageResult(records, individuals, dist, match, r_codes, p_codes)
