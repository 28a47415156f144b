"""Randomized response and PRAM on categorical attributes (Guo, Ying & Wu 2011; Warner 1965).

Every record's attribute ``A_i`` (``d_i`` categories) is kept with probability ``p_i`` and
otherwise replaced by one of the other ``d_i - 1`` categories, uniformly (Guo, Ying & Wu 2011,
equation 1)::

    P_i[u, v] = Pr(A~_i = u | A_i = v) = p_i if u == v else q_i = (1 - p_i) / (d_i - 1)

The randomized table's contingency vector has expectation ``E(lambda) = P pi`` with
``P = P_1 (x) ... (x) P_m (x) P_s`` (Kronecker product), the unbiased estimate of the
original one is ``pi^ = P^-1 lambda`` and its covariance (Guo, Ying & Wu 2011 equation 2) is::

    Sigma = (1/N) P^-1 ((P pi)^delta - P pi pi^T P^T) P^-T

``P`` has ``D = prod d_i`` rows, so it is never built: every product with it is computed
with the "vec trick" of Guo, Ying & Wu 2011, lemma 2, ``(A (x) B) vec(X) = vec(B X A^T)``, applied
recursively, i.e. by multiplying the ``s``-dimensional contingency tensor by ``P_i`` along
its axis ``i`` (:func:`kron_apply`), at cost ``O(D sum d_i)`` instead of ``O(D^2)``.

Attribute disclosure under linking attacks (Guo, Ying & Wu 2011, §IV): the attacker knows the
target's quasi-identifier ``QI_r = alpha`` and the matrices, reconstructs values with the
posterior of equation 4, and succeeds with probability (result 1, equation 6)::

    Pr(S_r | QI_r) = Pr(QI^_r = QI_r) * Pr(S^_r = S_r | QI_r)

where ``Pr(QI^ = alpha) = sum_beta P_QI[beta, alpha]^2 pi_alpha / lambda_beta`` (equations
7 and 9, the reconstruction probability of lemma 1) and ``Pr(S^ = S = u | alpha) =
(pi_{alpha u} / pi_alpha) sum_v P_s[v, u]^2 pi_{alpha u} / lambda_{alpha v}`` (equation 8).
Without randomization of S the second factor is the plain group frequency
``pi_{alpha u} / pi_alpha``; without randomization of QI the first is 1. The three schemes
are RR-S, RR-QI and RR-Both. Property 1: each factor is minimized at ``p = 1/d``.

:func:`optimal_parameters` solves Guo, Ying & Wu's (2011) problem 1 in the form of result 2: minimize
``trace(Sigma)``, which for matrices of form (1) is ``(1/N)(prod_i ||P_i^-1||_F^2 / d_i -
||pi||^2)`` (lemmas 3-5), subject to ``Pr(S_r | QI_r) <= tau`` for every record, with
``tau = 1/l`` to match l-diversity.

Warner's randomized response is the one-attribute, two-category case
(:func:`warner_randomize`, :func:`warner_estimate`, :func:`warner_variance`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pandas as pd

from ppdm.errors import ConfigError
from ppdm.extras import require
from ppdm.perturb._table import Encoded, contingency, encode
from ppdm.randomness import RandomSource, make_rng

__all__ = [
    "RRParameters",
    "RRRelease",
    "Scheme",
    "covariance",
    "covariance_diagonal",
    "disclosure_risk",
    "distortion_inverse",
    "distortion_matrix",
    "em_estimate_table",
    "estimate_table",
    "inverse_frobenius_sq",
    "kron_apply",
    "optimal_parameters",
    "qi_reconstruction_probability",
    "randomize_codes",
    "randomized_response",
    "sensitive_reconstruction_probability",
    "trace_covariance",
    "warner_estimate",
    "warner_randomize",
    "warner_variance",
]

log = logging.getLogger(__name__)

Scheme = Literal["rr-s", "rr-qi", "rr-both"]
SCHEMES: tuple[str, ...] = ("rr-s", "rr-qi", "rr-both")


def _check_p(d: int, p: float) -> float:
    p = float(p)
    if d < 1:
        raise ValueError(f"an attribute needs at least one category, not {d}")
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"retention probability p must be in [0, 1], not {p}")
    return p


def distortion_matrix(d: int, p: float) -> np.ndarray:
    """The distortion matrix ``P_i`` of Guo, Ying & Wu 2011 equation 1 (columns sum to 1).

    >>> distortion_matrix(3, 0.6)
    array([[0.6, 0.2, 0.2],
           [0.2, 0.6, 0.2],
           [0.2, 0.2, 0.6]])
    """
    p = _check_p(d, p)
    if d == 1:
        return np.ones((1, 1))
    q = (1.0 - p) / (d - 1)
    m = np.full((d, d), q)
    np.fill_diagonal(m, p)
    return m


def distortion_inverse(d: int, p: float) -> np.ndarray:
    """Closed-form inverse of :func:`distortion_matrix` (Guo, Ying & Wu 2011, lemma 4).

    ``P = (p - q) I + q 1 1^T`` and the columns sum to 1, so by the binomial inverse
    theorem ``P^-1 = (I - q 1 1^T) / (p - q)``; singular when ``p = 1/d``.

    >>> np.allclose(distortion_inverse(4, 0.7) @ distortion_matrix(4, 0.7), np.eye(4))
    True
    """
    p = _check_p(d, p)
    if d == 1:
        return np.ones((1, 1))
    q = (1.0 - p) / (d - 1)
    if abs(p - q) < 1e-12:
        raise ValueError(f"the distortion matrix is singular at p = 1/d = {1 / d:.6g}")
    return (np.eye(d) - q) / (p - q)


def inverse_frobenius_sq(d: int, p: float) -> float:
    """``||P_i^-1||_F^2 = d ((1 - q)^2 + (d - 1) q^2) / (p - q)^2`` (Guo, Ying & Wu 2011, lemma 4).

    >>> round(inverse_frobenius_sq(2, 1.0), 12)
    2.0
    """
    p = _check_p(d, p)
    if d == 1:
        return 1.0
    q = (1.0 - p) / (d - 1)
    if abs(p - q) < 1e-12:
        return math.inf
    return d * ((1.0 - q) ** 2 + (d - 1) * q * q) / (p - q) ** 2


def kron_apply(mats: Sequence[np.ndarray | None], x: np.ndarray) -> np.ndarray:
    """``(M_1 (x) ... (x) M_s) vec(x)`` without building the Kronecker product.

    ``x`` is the ``s``-dimensional tensor whose C-order ravel is the vector; ``M_i``
    (``None`` = identity) multiplies axis ``i``. This is Guo, Ying & Wu 2011, lemma 2,
    ``(A (x) B) vec(X) = vec(B X A^T)``, applied recursively: cost
    ``O(prod d_i * sum d_i)``, memory ``O(prod d_i)``. Extra trailing axes of ``x``
    (beyond ``s``) are carried along, so a matrix of column vectors works too.

    >>> a, b = np.array([[1.0, 2], [3, 4]]), np.array([[0.0, 1], [1, 0]])
    >>> x = np.arange(4.0).reshape(2, 2)
    >>> np.allclose(kron_apply([a, b], x).ravel(), np.kron(a, b) @ x.ravel())
    True
    """
    out = np.asarray(x, dtype=np.float64)
    if out.ndim < len(mats):
        raise ValueError(f"x has {out.ndim} axes, fewer than the {len(mats)} matrices")
    for axis, m in enumerate(mats):
        if m is None:
            continue
        if m.shape[1] != out.shape[axis]:
            raise ValueError(f"matrix {axis} has {m.shape[1]} columns, axis has {out.shape[axis]}")
        out = np.moveaxis(np.tensordot(m, out, axes=(1, axis)), 0, axis)
    return out


def randomize_codes(
    codes: np.ndarray,
    dims: Sequence[int],
    ps: Sequence[float | None],
    *,
    rng: int | RandomSource | None = None,
) -> np.ndarray:
    """Randomize every column ``j`` of ``codes`` with the matrix of equation 1.

    Each value is kept with probability ``ps[j]`` and otherwise replaced by one of the
    other ``dims[j] - 1`` categories uniformly at random (``None`` leaves the column as
    it is). Uses ``os.urandom`` unless ``rng`` is a seed.
    """
    r = make_rng(rng)
    codes = np.asarray(codes, dtype=np.int64)
    out = codes.copy()
    n = len(codes)
    for j, (d, p) in enumerate(zip(dims, ps, strict=True)):
        if p is None or d == 1:
            continue
        p = _check_p(d, p)
        move = r.random(n) >= p
        k = int(move.sum())
        if k:
            # a uniform choice among the other d - 1 categories
            shift = r.integers(1, d, k)
            out[move, j] = (codes[move, j] + shift) % d
    return out


def _safe_reciprocal(x: np.ndarray) -> np.ndarray:
    out = np.zeros_like(x)
    np.divide(1.0, x, out=out, where=x > 0)
    return out


def _matrices(dims: Sequence[int], ps: Sequence[float | None]) -> list[np.ndarray | None]:
    return [None if p is None else distortion_matrix(d, p) for d, p in zip(dims, ps, strict=True)]


def _inverses(dims: Sequence[int], ps: Sequence[float | None]) -> list[np.ndarray | None]:
    return [None if p is None else distortion_inverse(d, p) for d, p in zip(dims, ps, strict=True)]


def estimate_table(observed: np.ndarray, ps: Sequence[float | None]) -> np.ndarray:
    """The unbiased estimate ``pi^ = P^-1 lambda`` of the original contingency table.

    ``observed`` is the randomized table's contingency tensor (counts or proportions);
    the result has the same scale and may have negative cells (it is unbiased, not a
    distribution). ``ps`` gives each axis's retention probability (``None``: not
    randomized). Guo, Ying & Wu 2011, §III.
    """
    lam = np.asarray(observed, dtype=np.float64)
    return kron_apply(_inverses(lam.shape, ps), lam)


def em_estimate_table(
    observed: np.ndarray,
    ps: Sequence[float | None],
    *,
    tol: float = 1e-8,
    max_iter: int = 5000,
) -> np.ndarray:
    """Maximum-likelihood estimate of the original table by EM (iterative Bayes).

    The randomized-response analogue of :func:`ppdm.perturb.randomization.
    em_reconstruct`: starting from the uniform table, ``pi <- pi x P^T (lambda / (P pi))``
    (elementwise ``x`` and ``/``), every product by the vec trick. Unlike ``P^-1
    lambda`` the result is a distribution (no negative cells); it is the estimate within
    the simplex that maximizes the likelihood of the randomized table. Same scale as
    ``observed``; stops when the largest change of a cell's share is below ``tol``.
    """
    lam = np.asarray(observed, dtype=np.float64)
    total = float(lam.sum())
    if total <= 0:
        raise ValueError("the randomized table is empty")
    lam = lam / total
    mats = _matrices(lam.shape, ps)
    mats_t = [None if m is None else m.T for m in mats]
    pi = np.full(lam.shape, 1.0 / lam.size)
    for _ in range(max_iter):
        pred = kron_apply(mats, pi)
        new = pi * kron_apply(mats_t, lam * _safe_reciprocal(pred))
        new /= new.sum()
        done = float(np.max(np.abs(new - pi))) < tol
        pi = new
        if done:
            break
    return pi * total


def covariance_diagonal(pi: np.ndarray, ps: Sequence[float | None], n: int) -> np.ndarray:
    """Variances of ``pi^`` (the diagonal of Guo, Ying & Wu 2011 equation 2), shape of ``pi``.

    ``Var(pi^_k) = (1/N) (sum_j (P^-1)_{kj}^2 lambda_j - pi_k^2)`` with ``lambda = P pi``;
    the elementwise square of a Kronecker product is the Kronecker product of the
    squares, so this is two vec-trick products. ``pi`` holds proportions.
    """
    pi = np.asarray(pi, dtype=np.float64)
    lam = kron_apply(_matrices(pi.shape, ps), pi)
    inv2 = [None if m is None else m * m for m in _inverses(pi.shape, ps)]
    return (kron_apply(inv2, lam) - pi * pi) / n


def trace_covariance(pi: np.ndarray, ps: Sequence[float | None], n: int) -> float:
    """``trace(Sigma)``, the expected squared error of ``pi^`` (Guo, Ying & Wu 2011, lemma 3)."""
    return float(covariance_diagonal(pi, ps, n).sum())


def covariance(pi: np.ndarray, ps: Sequence[float | None], n: int) -> np.ndarray:
    """The full ``D x D`` covariance matrix of ``pi^`` (Guo, Ying & Wu 2011 equation 2).

    ``Sigma = (1/N) (P^-1 diag(lambda) P^-T - pi pi^T)``: ``diag(lambda)`` is reshaped to
    a ``2s``-dimensional tensor and ``P^-1`` applied along the first ``s`` axes and the
    last ``s`` axes with the vec trick, never forming ``P`` or ``P^-1``. The result is
    ``D^2`` numbers, so this is for small domains; use :func:`covariance_diagonal` or
    :func:`trace_covariance` on large ones.
    """
    pi = np.asarray(pi, dtype=np.float64)
    dims = pi.shape
    size = pi.size
    if size > 5000:
        raise ValueError(f"the full covariance has {size}^2 cells; use covariance_diagonal")
    lam = kron_apply(_matrices(dims, ps), pi).ravel()
    inv = _inverses(dims, ps)
    m = np.diag(lam).reshape(dims + dims)
    m = kron_apply(inv, m)  # rows: P^-1 diag(lambda)
    m = np.moveaxis(m, range(len(dims), 2 * len(dims)), range(len(dims)))
    m = kron_apply(inv, m)  # columns: ... P^-T
    m = np.moveaxis(m, range(len(dims), 2 * len(dims)), range(len(dims)))
    flat = m.reshape(size, size)
    v = pi.ravel()
    return (flat - np.outer(v, v)) / n


def qi_reconstruction_probability(pi_qi: np.ndarray, ps: Sequence[float | None]) -> np.ndarray:
    """``Pr(QI^ = QI = alpha)`` for every cell ``alpha`` (Guo, Ying & Wu 2011 equations 7 and 9).

    ``eta = pi_QI x [(P_1^2 (x) ... (x) P_m^2)^T lambda_QI^-1]`` with ``lambda_QI = P_QI
    pi_QI``, ``x`` elementwise; here as the probability conditional on ``QI = alpha``
    (lemma 1): ``sum_beta P[beta, alpha]^2 pi_alpha / lambda_beta``. Two vec-trick
    products. ``pi_qi`` is the QI contingency tensor (proportions or counts).
    """
    pi = np.asarray(pi_qi, dtype=np.float64)
    pi = pi / pi.sum()
    mats = _matrices(pi.shape, ps)
    lam = kron_apply(mats, pi)
    sq_t = [None if m is None else (m * m).T for m in mats]
    back = kron_apply(sq_t, _safe_reciprocal(lam))
    eta = pi * back
    # Unrandomized (p = 1 everywhere) gives exactly 1 where pi > 0.
    return np.where(pi > 0, eta, 0.0)


def sensitive_reconstruction_probability(pi: np.ndarray, p_s: float | None) -> np.ndarray:
    """``Pr(S^_r = S_r = u | QI_r = alpha)`` for every cell (Guo, Ying & Wu 2011 equation 8).

    ``pi`` is the full contingency tensor with the sensitive attribute on the last axis.
    Returns ``(pi_{alpha u} / pi_alpha) sum_v P_s[v, u]^2 pi_{alpha u} / lambda_{alpha v}``
    where ``lambda_{alpha v} = sum_w P_s[v, w] pi_{alpha w}``; with ``p_s = None`` (S not
    randomized) the group frequency ``pi_{alpha u} / pi_alpha``.
    """
    pi = np.asarray(pi, dtype=np.float64)
    pi = pi / pi.sum()
    group = pi.sum(axis=-1, keepdims=True)
    freq = np.zeros_like(pi)
    np.divide(pi, group, out=freq, where=group > 0)
    if p_s is None:
        return freq
    ps_m = distortion_matrix(pi.shape[-1], p_s)
    lam = pi @ ps_m.T  # lambda_{alpha v}
    recon = pi * (_safe_reciprocal(lam) @ (ps_m * ps_m))
    return freq * recon


def disclosure_risk(
    pi: np.ndarray,
    *,
    p_qi: Sequence[float] | None,
    p_s: float | None,
) -> np.ndarray:
    """Attribute disclosure risk ``Pr(S_r | QI_r)`` of every cell (Guo, Ying & Wu 2011, result 1).

    Parameters
    ----------
    pi : numpy.ndarray
        Contingency tensor of the original table (counts or proportions), the QI
        attributes first and the sensitive attribute on the last axis.
    p_qi : sequence of float or None
        Retention probabilities of the QI attributes (``None``: QI not randomized, RR-S).
    p_s : float or None
        Retention probability of the sensitive attribute (``None``: RR-QI).

    Returns
    -------
    numpy.ndarray
        Same shape as ``pi``; the risk of an individual whose record falls in the cell,
        ``nan`` where the cell is empty.

    Examples
    --------
    Without randomization the risk is the share of the target's sensitive value in his
    QI group; at ``p = 1/d`` for every attribute it is ``pi_{alpha u}^2 / pi_alpha``:

    >>> pi = np.array([[30.0, 10.0], [12.0, 48.0]])
    >>> disclosure_risk(pi, p_qi=None, p_s=None)[1, 0].round(3)
    np.float64(0.2)
    >>> disclosure_risk(pi, p_qi=[0.5], p_s=0.5)[1, 0].round(4)  # 0.12^2 / 0.6
    np.float64(0.024)
    """
    pi = np.asarray(pi, dtype=np.float64)
    if pi.ndim < 2:
        raise ValueError("pi needs at least one QI axis and the sensitive axis")
    pi = pi / pi.sum()
    s_part = sensitive_reconstruction_probability(pi, p_s)
    if p_qi is None:
        qi_part = np.ones(pi.shape[:-1])
    else:
        if len(p_qi) != pi.ndim - 1:
            raise ValueError(f"need {pi.ndim - 1} QI retention probabilities, got {len(p_qi)}")
        qi_part = qi_reconstruction_probability(pi.sum(axis=-1), list(p_qi))
    risk = qi_part[..., None] * s_part
    return np.where(pi > 0, risk, np.nan)


class _CellRisks:
    """``disclosure_risk(pi, p_qi=..., p_s=...)[pi > 0]`` for the many parameter vectors
    that :func:`optimal_parameters` tries on one table.

    The same arithmetic as :func:`disclosure_risk`, operation for operation, so the same
    numbers, without the work a search repeats: the table's normalizations and group
    frequencies are computed once; the sensitive factor only on the blocks of ``pi``
    (its last two axes, the products numpy's ``@`` makes one at a time) that hold a
    record, a few thousand of Adult's 40,320; the product only on the occupied cells.
    And each factor is kept for the last parameters it was computed for: SLSQP's finite
    differences move one attribute at a time, so a step of the QI retention
    probabilities reuses the sensitive factor and the reverse.
    """

    _KEEP = 8  # factors kept per kind (a finite-difference Jacobian needs up to two)

    def __init__(self, pi: np.ndarray) -> None:
        pi = np.asarray(pi, dtype=np.float64)
        if pi.ndim < 2:
            raise ValueError("pi needs at least one QI axis and the sensitive axis")
        pi = pi / pi.sum()  # disclosure_risk's normalization
        # sensitive_reconstruction_probability's normalization and group frequencies
        pi_s = pi / pi.sum()
        group = pi_s.sum(axis=-1, keepdims=True)
        freq = np.zeros_like(pi_s)
        np.divide(pi_s, group, out=freq, where=group > 0)
        occupied = pi > 0
        if pi.ndim > 2:  # the blocks with a record, in order (a 2-d pi is one block)
            blocks = occupied.reshape(-1, *pi.shape[-2:]).any(axis=(1, 2))
            pi_s, freq, occupied = (
                a.reshape(-1, *pi.shape[-2:])[blocks] for a in (pi_s, freq, occupied)
            )
        self._pi_s = pi_s
        self._occupied = occupied
        self._freq = freq[occupied]
        # qi_reconstruction_probability's table and each occupied cell's QI cell
        pi_qi = pi.sum(axis=-1)
        self._pi_qi = pi_qi / pi_qi.sum()
        self._qi_cell = np.flatnonzero(pi > 0) // pi.shape[-1]
        self._s_part: dict[float, np.ndarray] = {}
        self._qi_part: dict[tuple[float, ...], np.ndarray] = {}

    @staticmethod
    def _keep(cache: dict, key: object, value: np.ndarray) -> np.ndarray:
        if len(cache) >= _CellRisks._KEEP:
            del cache[next(iter(cache))]
        cache[key] = value
        return value

    def _sensitive(self, p_s: float | None) -> np.ndarray:
        """:func:`sensitive_reconstruction_probability` on the occupied cells."""
        if p_s is None:
            return self._freq
        if p_s in self._s_part:
            return self._s_part[p_s]
        pi = self._pi_s
        ps_m = distortion_matrix(pi.shape[-1], p_s)
        lam = pi @ ps_m.T
        recon = pi * (_safe_reciprocal(lam) @ (ps_m * ps_m))
        return self._keep(self._s_part, p_s, self._freq * recon[self._occupied])

    def _qi(self, p_qi: tuple[float, ...]) -> np.ndarray:
        """:func:`qi_reconstruction_probability` on the occupied cells."""
        if p_qi in self._qi_part:
            return self._qi_part[p_qi]
        pi = self._pi_qi
        mats = _matrices(pi.shape, p_qi)
        lam = kron_apply(mats, pi)
        sq_t = [None if m is None else (m * m).T for m in mats]
        back = kron_apply(sq_t, _safe_reciprocal(lam)).ravel()[self._qi_cell]
        return self._keep(self._qi_part, p_qi, pi.ravel()[self._qi_cell] * back)

    def __call__(self, p_qi: Sequence[float] | None, p_s: float | None) -> np.ndarray:
        s_part = self._sensitive(p_s)
        if p_qi is None:  # disclosure_risk multiplies by ones
            return s_part.copy()
        return self._qi(tuple(p_qi)) * s_part


@dataclass(frozen=True)
class RRParameters:
    """Optimal retention probabilities found by :func:`optimal_parameters`.

    ``p_qi[i]`` is ``None`` for a QI attribute that is not randomized (RR-S), and
    ``p_s`` is ``None`` when S is not randomized (RR-QI).
    """

    scheme: str
    tau: float
    p_qi: tuple[float | None, ...]
    p_s: float | None
    max_risk: float
    trace: float
    success: bool
    message: str = ""

    @property
    def ps(self) -> tuple[float | None, ...]:
        """Retention probabilities of all axes (QI first, then S)."""
        return (*self.p_qi, self.p_s)


def optimal_parameters(
    pi: np.ndarray,
    *,
    tau: float,
    scheme: Scheme = "rr-both",
    n: int | None = None,
) -> RRParameters:
    """Retention probabilities that minimize ``trace(Sigma)`` with risk at most ``tau``.

    Guo, Ying & Wu 2011 problem 1 / result 2: minimize ``prod_i ||P_i^-1||_F^2`` over the
    randomized attributes' ``p_i in (1/d_i, 1]`` subject to ``Pr(S_r | QI_r) <= tau`` for
    every non-empty cell (record type) of ``pi``. Solved with scipy's SLSQP on
    ``sum_i log ||P_i^-1||_F^2``, one inequality per non-empty cell, started from the
    largest feasible point on the line from ``p_i = 1/d_i`` (least risk, property 1) to
    ``p_i = 1`` (no randomization).

    Parameters
    ----------
    pi : numpy.ndarray
        Contingency tensor of the original table, S on the last axis.
    tau : float
        Risk bound; ``1/l`` matches l-diversity.
    scheme : {"rr-both", "rr-s", "rr-qi"}
        Which attributes are randomized.
    n : int, optional
        Number of records, for the reported ``trace`` (default: ``pi.sum()``).

    Raises
    ------
    ConfigError
        If even the most randomizing parameters (``p_i = 1/d_i``) exceed ``tau``.
    """
    if scheme not in SCHEMES:
        raise ConfigError(f"unknown scheme {scheme!r}; choose one of {', '.join(SCHEMES)}")
    if not 0 < tau <= 1:
        raise ConfigError(f"tau must be in (0, 1], not {tau}")
    pi = np.asarray(pi, dtype=np.float64)
    total = float(pi.sum())
    n_records = round(total) if n is None else int(n)
    pi = pi / total
    dims = pi.shape
    qi_on = scheme in ("rr-qi", "rr-both")
    s_on = scheme in ("rr-s", "rr-both")
    # indices (axes) of the free variables; skip one-category attributes
    free = [i for i in range(len(dims) - 1) if qi_on and dims[i] > 1]
    if s_on and dims[-1] > 1:
        free.append(len(dims) - 1)
    lo = np.array([1.0 / dims[i] for i in free])
    span = 1.0 - lo
    lower = lo + 1e-6 * span
    cell_risks = _CellRisks(pi)

    def full_ps(x: np.ndarray) -> list[float | None]:
        ps: list[float | None] = [None] * len(dims)
        if qi_on:
            for i in range(len(dims) - 1):
                ps[i] = 1.0
        for k, i in enumerate(free):
            ps[i] = float(min(max(x[k], lower[k]), 1.0))
        return ps

    def risks(x: np.ndarray) -> np.ndarray:
        ps = full_ps(x)
        p_qi = [1.0 if v is None else v for v in ps[:-1]] if qi_on else None
        # disclosure_risk(pi, ...)[pi > 0], the same numbers in a fraction of the time
        return cell_risks(p_qi, ps[-1] if s_on else None)

    def objective(x: np.ndarray) -> float:
        return float(
            sum(
                math.log(inverse_frobenius_sq(dims[i], max(x[k], lower[k])))
                for k, i in enumerate(free)
            )
        )

    def trace_of(ps: Sequence[float | None]) -> float:
        return trace_covariance(pi, ps, max(n_records, 1))

    if not free:
        r = float(np.nanmax(risks(np.empty(0))))
        ps0 = full_ps(np.empty(0))
        return RRParameters(scheme, tau, tuple(ps0[:-1]), ps0[-1], r, trace_of(ps0), r <= tau)

    best_possible = float(risks(lower).max())
    if best_possible > tau:
        raise ConfigError(
            f"{scheme}: no retention probabilities keep the disclosure risk below "
            f"tau = {tau:.4g}; the least achievable maximum risk is {best_possible:.4g}"
        )
    # Largest feasible t on the segment x(t) = lower + t (1 - lower): bisection.
    if float(risks(np.ones(len(free))).max()) <= tau:
        x0 = np.ones(len(free))
    else:
        a, b = 0.0, 1.0
        for _ in range(30):
            mid = 0.5 * (a + b)
            if float(risks(lower + mid * (1 - lower)).max()) <= tau:
                a = mid
            else:
                b = mid
        x0 = lower + a * (1 - lower)
    # scipy.optimize on first use (not by the commands that never optimize)
    optimize = require("scipy.optimize", "stats", "ppdm.perturb")
    result = optimize.minimize(
        objective,
        x0,
        method="SLSQP",
        bounds=list(zip(lower, np.ones(len(free)), strict=True)),
        constraints=[{"type": "ineq", "fun": lambda x: (tau - risks(x)) / tau}],
        options={"maxiter": 200, "ftol": 1e-10},
    )
    x = np.clip(result.x, lower, 1.0)
    max_risk = float(risks(x).max())
    if max_risk > tau * (1 + 1e-6) or objective(x) > objective(x0):
        # fall back to the feasible starting point if SLSQP wandered off
        log.debug("SLSQP did not improve on the start point: %s", result.message)
        x = x0
        max_risk = float(risks(x).max())
    ps = full_ps(x)
    return RRParameters(
        scheme=scheme,
        tau=tau,
        p_qi=tuple(ps[:-1]),
        p_s=ps[-1],
        max_risk=max_risk,
        trace=trace_of(ps),
        success=bool(max_risk <= tau * (1 + 1e-6)),
        message=str(result.message),
    )


@dataclass
class RRRelease:
    """A randomized table and everything a data analyst needs to use it.

    ``data`` holds the randomized records (labels); ``ps`` the published retention
    probabilities per column (QI first, then S; ``None`` = not randomized).
    """

    data: pd.DataFrame
    qi: tuple[str, ...]
    sensitive: str
    ps: tuple[float | None, ...]
    encoded: Encoded
    parameters: RRParameters | None = None
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def dims(self) -> tuple[int, ...]:
        return self.encoded.dims

    def observed_table(self) -> np.ndarray:
        """Contingency tensor (counts) of the randomized records, ``lambda``."""
        return contingency(self.encoded.codes, self.dims)

    def estimate(self) -> np.ndarray:
        """Unbiased estimate of the original contingency tensor (counts), ``P^-1 lambda``."""
        return estimate_table(self.observed_table(), self.ps)


def randomized_response(
    table: pd.DataFrame,
    *,
    qi: Sequence[str],
    sensitive: str,
    scheme: Scheme = "rr-both",
    l: float | None = None,  # noqa: E741
    ps: Sequence[float | None] | None = None,
    rng: int | RandomSource | None = None,
) -> RRRelease:
    """Randomize QI, S or both of ``table`` (Guo, Ying & Wu 2011), with optimal or given parameters.

    Parameters
    ----------
    table : pandas.DataFrame
        The original records.
    qi, sensitive : column names
        Quasi-identifiers and the sensitive attribute.
    scheme : {"rr-both", "rr-s", "rr-qi"}
        Which attributes to randomize, when ``l`` chooses the parameters.
    l : float, optional
        Privacy level: the parameters minimize the estimate's error subject to
        ``Pr(S_r | QI_r) <= 1/l`` (:func:`optimal_parameters`).
    ps : sequence, optional
        Explicit retention probabilities (QI..., S), instead of ``l``.
    rng : int or RandomSource, optional
        Randomness; ``os.urandom`` by default. An int seeds a reproducible run (tests).
    """
    qi = tuple(qi)
    if sensitive in qi:
        raise ConfigError(f"{sensitive!r} is both a quasi-identifier and the sensitive attribute")
    enc = encode(table, [*qi, sensitive])
    params: RRParameters | None = None
    if (l is None) == (ps is None):
        raise ConfigError("give exactly one of l (optimal parameters) or ps")
    if l is not None:
        if l < 1:
            raise ConfigError(f"l must be at least 1, not {l}")
        pi = contingency(enc.codes, enc.dims)
        params = optimal_parameters(pi, tau=1.0 / l, scheme=scheme, n=len(table))
        chosen = params.ps
    elif ps is not None:
        if len(ps) != len(qi) + 1:
            raise ConfigError(f"need {len(qi) + 1} retention probabilities (QI..., S)")
        chosen = tuple(ps)
    codes = randomize_codes(enc.codes, enc.dims, list(chosen), rng=rng)
    released = Encoded(codes, enc.columns, enc.categories)
    return RRRelease(
        data=released.decode(),
        qi=qi,
        sensitive=sensitive,
        ps=tuple(chosen),
        encoded=released,
        parameters=params,
    )


def warner_randomize(
    member: np.ndarray, p: float, *, rng: int | RandomSource | None = None
) -> np.ndarray:
    """Warner's (1965) randomized response: answer "in A?" with probability ``p``,
    otherwise "in not-A?"; returns the "yes" answers (Guo, Ying & Wu 2011, §II).

    Equivalent to :func:`randomize_codes` with ``d = 2``: the truth is kept with
    probability ``p`` and flipped otherwise.
    """
    member = np.asarray(member, dtype=bool)
    p = _check_p(2, p)
    truthful = make_rng(rng).random(member.size).reshape(member.shape) < p
    return np.where(truthful, member, ~member)


def warner_estimate(yes: np.ndarray, p: float) -> float:
    """Warner's unbiased estimate ``pi^_A = (lambda - (1 - p)) / (2p - 1)``.

    ``lambda`` is the share of "yes" answers; undefined at ``p = 1/2``.

    >>> warner_estimate(np.array([True] * 62 + [False] * 38), 0.8)
    0.7
    """
    p = _check_p(2, p)
    if abs(2 * p - 1) < 1e-12:
        raise ValueError("Warner's estimate is undefined at p = 1/2")
    lam = float(np.mean(np.asarray(yes, dtype=bool)))
    return round((lam - (1 - p)) / (2 * p - 1), 12)


def warner_variance(pi_a: float, p: float, n: int) -> float:
    """Variance of Warner's estimate: ``pi(1 - pi)/n + p(1 - p)/(n (2p - 1)^2)``."""
    p = _check_p(2, p)
    if abs(2 * p - 1) < 1e-12:
        return math.inf
    return pi_a * (1 - pi_a) / n + p * (1 - p) / (n * (2 * p - 1) ** 2)
