"""k-means over partitioned data: horizontal (rows split) and vertical (columns split).

Both run Lloyd's algorithm exactly as a centralized run on the pooled data would
(scikit-learn's ``KMeans(algorithm="lloyd", n_init=1, init=<same centers>)``): each
iteration assigns every record to its closest center (ties to the lowest index), recomputes
each center as the mean of its records, and stops when no assignment changes, when the
total squared center shift is at most ``tol`` times the mean per-attribute variance, or
after ``max_iter`` iterations. An empty cluster keeps its previous center (scikit-learn
would relocate it; the tests avoid empty clusters).

Starting centers
    ``init="random-partition"`` (the default; the Random Partition method, Hamerly & Elkan
    2002) deals every record uniformly at random (``secrets``-based) into one of ``k``
    groups and starts from the group means: aggregates over about ``N / k`` records each,
    never a record. Horizontally every party deals its own records (a random balanced
    deal, so its share of every group is about ``n_i / k``; with ``min_party_records``
    it uses only as many randomly chosen groups as it can fill with that many records)
    and the group sums and counts go through the same secure sums as an iteration (no
    party sees another's sums or counts). Vertically the deal must be the same at every
    party for each aligned row: it is expanded (SHAKE-256) from a joint seed that the
    parties draw by commit-then-reveal coin tossing (Blum 1981), so no party chooses it;
    every party then computes its own columns' group means. A random deal reveals
    nothing; the starting centers and group sizes are aggregates.
    Random groups start every center near the pooled mean, so the first iteration's
    cells can be thin and stop the job on the bounds below (measured: a quarter to two
    thirds of runs with the floor at 3 on Gaussian blobs). ``"random-slabs"``
    (horizontal) deals every party's records instead into ``k`` slabs of equal count
    along a direction drawn by the same coin tossing (its own quantiles of ``x @ u``):
    the same release of aggregates over about ``N / k`` records (at least
    ``min_party_records`` of each party's), with centers spread along ``u``. It is not
    offered vertically: a row's projection needs every party's columns.
    ``"first-k"``, ``"kmeans++"`` (horizontal), ``"random"`` (vertical) and explicit
    centers remain available; they start from real records (below).

Aggregation bounds (checked before anything is published)
    The pooled number of records ``N`` comes first (horizontal: by secure sum with the
    dimension, so each party's count stays private; vertical: the common record count).
    If ``k * max(min_cluster_size, 1) > N`` every party stops with
    :class:`~ppdm.errors.ConfigError` before any value derived from the records is sent.
    With ``min_cluster_size > 0`` the sizes of the starting groups and of the clusters
    of every iteration are summed first and the job stops
    (:class:`~ppdm.errors.AggregationTooSmall`) before a center over fewer records is
    computed (an emptied cluster keeps its previous center and is not a new release; an
    empty starting group stops the job). With ``min_party_records = m > 1`` a party
    whose own share of a starting group or cluster is between 1 and ``m - 1`` records
    contributes nothing but a flag to that secure sum, and every party stops with
    :class:`~ppdm.errors.AggregationTooSmall` (a fixed reason, no count): a coalition
    holding the other records of a cluster can never single out one or two of an
    honest party's records by subtracting its own. The stop reveals that *some* party
    fell below the floor (to a coalition of all other parties: that this one did).

Horizontal k-means (:func:`horizontal_kmeans`)
    Every party holds whole records. Per iteration each party assigns its own records and
    computes per-cluster sums and counts; these are added by secure sum
    (:mod:`ppdm.protocols.secure_sum`, fixed-point encoding with ``fraction_bits``), so
    every party learns the new centers and nothing about another party's records beyond
    what the centers and counts reveal. Aggarwal 2015, §20.5; the standard secure-sum
    construction (e.g. Jagannathan & Wright 2005 describe the arbitrarily partitioned
    generalization).

    Leaks: the pooled record count ``N``; the order of magnitude of each party's column
    sums (for the precision); with ``random-partition`` the starting centers and group
    sizes (aggregates); the centers and cluster sizes of every iteration, the number of
    records that changed cluster, the total inertia; whether some party fell below
    ``min_party_records``. With ``init="first-k"`` the first ``k`` records of the pooled
    data (held by the first parties) become the initial centers and so are revealed, and
    every party's record count is revealed to place them; with ``init="kmeans++"`` the
    chosen records and each party's sum of squared distances per seeding step are
    revealed.

    Cost per iteration: one secure sum of ``k*d + k + 1`` values (``n`` ring messages and
    ``n - 1`` result messages of ``8 (k d + k + 1)`` bytes); with ``min_cluster_size`` or
    ``min_party_records`` the ``k + 2`` counts go first in a secure sum of their own.
    ``random-partition`` costs one such round (or pair of rounds) before the first
    iteration.

Modules: :mod:`~ppdm.mining.kmeans_common` (the result, the local records seam, the
aggregation bounds, coin tossing), :mod:`~ppdm.mining.kmeans_horizontal` and
:mod:`~ppdm.mining.kmeans_vertical`; this module re-exports their public names.
"""

from __future__ import annotations

from ppdm.mining.kmeans_common import KMeansResult as KMeansResult
from ppdm.mining.kmeans_common import LocalRecords as LocalRecords
from ppdm.mining.kmeans_common import assign as assign
from ppdm.mining.kmeans_horizontal import Init as Init
from ppdm.mining.kmeans_horizontal import horizontal_kmeans as horizontal_kmeans
from ppdm.mining.kmeans_vertical import vertical_kmeans as vertical_kmeans

__all__ = ["KMeansResult", "LocalRecords", "assign", "horizontal_kmeans", "vertical_kmeans"]
