"""What horizontal and vertical k-means share: the result, the local records seam, the
aggregation bounds and the coin tossing that draws a seed no party chooses.

The model (starting centers, aggregation bounds, leakage and cost) is described in
:mod:`ppdm.mining.kmeans`, which re-exports the public names.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ppdm.errors import AggregationTooSmall, ConfigError, ProtocolError
from ppdm.parties.network import Network

__all__ = ["KMeansResult", "LocalRecords", "assign"]


@dataclass
class KMeansResult:
    """What one party gets from distributed k-means."""

    centers: np.ndarray  # (k, d) for horizontal; (k, d_own) own columns for vertical
    labels: np.ndarray  # this party's records' clusters (horizontal) / all records (vertical)
    iterations: int
    inertia: float
    converged: bool
    history: list[dict[str, Any]] = field(default_factory=list)
    #: The starting centers (vertical: this party's columns of them) and, for
    #: ``init="random-partition"``, the sizes of the random starting groups.
    initial_centers: np.ndarray | None = None
    initial_sizes: list[int] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "centers": self.centers.tolist(),
            "iterations": self.iterations,
            "inertia": self.inertia,
            "converged": self.converged,
            "cluster_sizes": self.history[-1]["sizes"] if self.history else [],
        }

    def to_frame(self) -> Any:
        """The clusters as a pandas DataFrame: one row per cluster, the center's
        coordinates (``x0``, ``x1``, ...; vertical: this party's columns) and ``size``."""
        import pandas as pd

        centers = np.asarray(self.centers, dtype=float)
        frame = pd.DataFrame(centers, columns=[f"x{j}" for j in range(centers.shape[1])])
        sizes = self.history[-1]["sizes"] if self.history else None
        if sizes is not None and len(sizes) == len(frame):
            frame["size"] = np.asarray(sizes, dtype=np.int64)
        frame.index.name = "cluster"
        return frame


def assign(x: np.ndarray, centers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Closest center of each row (ties to the lowest index) and its squared distance."""
    d2 = ((x[:, None, :] - centers[None, :, :]) ** 2).sum(axis=2)
    labels = np.argmin(d2, axis=1)
    return labels, d2[np.arange(len(x)), labels]


class LocalRecords(Protocol):
    """A party's records for horizontal k-means, when they are not one in-memory array
    (e.g. :class:`ppdm.sources.StreamedRecords`, which scans a data source once per
    iteration in bounded memory): the local work of Lloyd's algorithm behind one seam.

    ``init="random-partition"`` also needs ``group_sums(labels, k)``: the per-group sums
    ``(k, d)`` and counts ``(k,)`` of the records under the given labels (one scan);
    records without it take another ``init``."""

    shape: tuple[int, int]

    def head(self, k: int) -> np.ndarray:
        """The first ``k`` records, ``(k, d)`` float64."""
        ...

    def column_sums(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per column: the sum of ``|x|``, of ``x`` and of ``x**2``."""
        ...

    def cluster_sums(self, centers: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        """Lloyd's local step: every record's closest center (ties to the lowest index),
        the per-cluster sums ``(k, d)`` and counts ``(k,)``, and the total squared
        distance of the records to their centers."""
        ...


class _ArrayRecords:
    """:class:`LocalRecords` of an in-memory array (the default path)."""

    def __init__(self, x: np.ndarray) -> None:
        self.x = x
        self.shape = (int(x.shape[0]), int(x.shape[1]))

    def head(self, k: int) -> np.ndarray:
        return self.x[:k]

    def column_sums(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        x = self.x
        d = x.shape[1]
        return (
            np.abs(x).sum(axis=0) if len(x) else np.zeros(d),
            x.sum(axis=0),
            (x**2).sum(axis=0),
        )

    def cluster_sums(self, centers: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        x = self.x
        k, d = centers.shape
        if not len(x):
            return np.zeros(0, np.int64), np.zeros((k, d)), np.zeros(k, np.int64), 0.0
        labels, d2 = assign(x, centers)
        sums = np.zeros((k, d))
        np.add.at(sums, labels, x)
        counts = np.bincount(labels, minlength=k).astype(np.int64)
        return labels, sums, counts, float(d2.sum())

    def group_sums(self, labels: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        sums = np.zeros((k, self.shape[1]))
        np.add.at(sums, labels, self.x)
        return sums, np.bincount(labels, minlength=k).astype(np.int64)


def _check_int(value: Any, frm: str, step: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ProtocolError(frm, step, "expected an integer")
    return value


def _check_sizes(sizes: np.ndarray, minimum: int, where: str, *, empty_ok: bool = True) -> None:
    """Stop (at every party alike: the sizes are public to all) if a non-empty cluster
    (with ``empty_ok=False``: any group) holds fewer than ``minimum`` records. The message
    names the step (``where``) only."""
    small = (sizes < minimum) & ((sizes > 0) if empty_ok else True)
    if not empty_ok and np.any(sizes <= 0):
        raise AggregationTooSmall(
            f"{where}: a random starting group is empty; no centre is released (run again "
            "or lower k)"
        )
    if np.any(small):
        raise AggregationTooSmall(
            f"{where}: a cluster holds fewer than min_cluster_size = {minimum} "
            "records; its centre is not released"
        )


def _below_floor(counts: np.ndarray, min_party_records: int) -> bool:
    """Whether this party holds between 1 and ``min_party_records - 1`` records of some
    group or cluster (the per-party floor; module docstring)."""
    return min_party_records > 1 and bool(np.any((counts > 0) & (counts < min_party_records)))


def _floor_error(where: str) -> AggregationTooSmall:
    """The per-party floor's stop: a fixed reason, no count and no party."""
    return AggregationTooSmall(
        f"{where}: a party holds fewer than min_party_records records of a cluster (but "
        "not none); no centre is released"
    )


def _check_bound(k: int, min_cluster_size: int, n_all: int) -> None:
    """Refuse ``k`` that cannot give ``k`` clusters of ``min_cluster_size`` records out
    of the ``n_all`` pooled ones (the text names only the public parameters)."""
    if k * max(min_cluster_size, 1) > n_all:
        what = "k * min_cluster_size" if min_cluster_size > 0 else "k"
        raise ConfigError(
            f"{what} exceeds the pooled number of records (k = {k}, min_cluster_size = "
            f"{min_cluster_size}); nothing derived from the records was sent"
        )


def _joint_seed(net: Network, step: str) -> bytes:
    """A 32-byte seed no party chooses: commit-then-reveal coin tossing (Blum 1981).

    Every party draws 32 bytes with ``secrets``, broadcasts a SHA-256 commitment to them
    (bound to its name), and only after receiving every commitment reveals them; a reveal
    that does not open its commitment is a :class:`~ppdm.errors.ProtocolError`. The seed
    is the SHA-256 of all reveals in consortium order, uniform as long as one party's
    draw is. Reveals only the seed (random). Cost: two broadcast rounds of 32 bytes."""

    def commitment(party: str, value: bytes) -> bytes:
        return hashlib.sha256(b"ppdm/kmeans/coin\0" + party.encode() + b"\0" + value).digest()

    mine = secrets.token_bytes(32)
    net.broadcast(f"{step}/commit", commitment(net.me, mine))
    commits: dict[str, bytes] = {}
    for p, v in net.gather(f"{step}/commit").items():
        if not isinstance(v, bytes) or len(v) != 32:
            raise ProtocolError(p, f"{step}/commit", "expected a 32-byte commitment")
        commits[p] = v
    net.broadcast(f"{step}/reveal", mine)
    shares = {net.me: mine}
    for p, v in net.gather(f"{step}/reveal").items():
        if not isinstance(v, bytes) or len(v) != 32 or commitment(p, v) != commits.get(p):
            raise ProtocolError(p, f"{step}/reveal", "the reveal does not open its commitment")
        shares[p] = v
    return hashlib.sha256(b"ppdm/kmeans/seed\0" + b"".join(shares[p] for p in net.parties)).digest()
