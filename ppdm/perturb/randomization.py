"""Randomization at collection time: additive noise and distribution reconstruction.

Aggarwal 2015, §20.2: each user adds a perturbation ``y_i`` drawn from a *public*
distribution ``Y`` (uniform or Gaussian) to his value ``x_i`` and sends ``z_i = x_i + y_i``.
The collector never sees ``x_i``; it reconstructs the distribution of ``X`` over ``k``
intervals ``[l_t, u_t]`` from ``z_1 .. z_n`` and the known ``f_Y``.

:func:`bayes_reconstruct` is the iterative Bayes procedure of Aggarwal 2015 equations 20.1-20.5
(Agrawal & Srikant 2000): start from the uniform distribution and repeat::

    f^(a) <- (1/n) sum_i f_Y(z_i - a) f^(a) / integral f_Y(z_i - w) f^(w) dw

at the midpoints ``a = (l_t + u_t) / 2``, until the distribution stops changing (the
average change of the density at the midpoints, or Agrawal & Srikant's chi-square
criterion). :func:`em_reconstruct` is the expectation-maximization algorithm of Agrawal
& Aggarwal (PODS 2001), which the seed cites as the provably convergent variant: the
density is piecewise constant on the intervals and the kernel is integrated exactly over
each interval, ``Pr(z_i | x in I_t) = (F_Y(z_i - l_t) - F_Y(z_i - u_t)) / w_t``; every
iteration increases the likelihood and the fixed point is the maximum-likelihood
histogram.

:class:`RandomizedNaiveBayes` is the classifier of Aggarwal 2015, §20.2.2: the
class-conditional distribution of every attribute is reconstructed from the perturbed
values of that class, and the naive Bayes rule uses the reconstructed histograms.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ppdm.extras import require
from ppdm.progress import Progress, progress_task
from ppdm.randomness import RandomSource, make_rng

special = require("scipy.special", "stats", "ppdm.perturb")

__all__ = [
    "NaiveBayesModel",
    "Noise",
    "RandomizedNaiveBayes",
    "Reconstruction",
    "add_noise",
    "bayes_reconstruct",
    "em_reconstruct",
]

Stopping = Literal["mean-change", "chi2"]


@dataclass(frozen=True)
class Noise:
    """A public perturbing distribution (Aggarwal 2015, §20.2).

    ``kind="uniform"``: ``Y`` uniform on ``[-scale, scale]``;
    ``kind="gaussian"``: ``Y ~ N(0, scale^2)``.

    >>> Noise("uniform", 2.0).pdf(np.array([0.0, 3.0])).tolist()
    [0.25, 0.0]
    """

    kind: Literal["uniform", "gaussian"]
    scale: float

    def __post_init__(self) -> None:
        if self.kind not in ("uniform", "gaussian"):
            raise ValueError(f"noise kind must be 'uniform' or 'gaussian', not {self.kind!r}")
        if not self.scale > 0:
            raise ValueError(f"noise scale must be positive, not {self.scale}")

    @property
    def std(self) -> float:
        """Standard deviation of the noise."""
        return self.scale / math.sqrt(3.0) if self.kind == "uniform" else self.scale

    def pdf(self, y: np.ndarray) -> np.ndarray:
        y = np.asarray(y, dtype=np.float64)
        if self.kind == "uniform":
            return np.where(np.abs(y) <= self.scale, 0.5 / self.scale, 0.0)
        return np.exp(-0.5 * (y / self.scale) ** 2) / (self.scale * math.sqrt(2 * math.pi))

    def cdf(self, y: np.ndarray) -> np.ndarray:
        y = np.asarray(y, dtype=np.float64)
        if self.kind == "uniform":
            return np.clip((y + self.scale) / (2 * self.scale), 0.0, 1.0)
        return 0.5 * (1.0 + special.erf(y / (self.scale * math.sqrt(2.0))))

    def sample(self, size: int, *, rng: int | RandomSource | None = None) -> np.ndarray:
        r = make_rng(rng)
        if self.kind == "uniform":
            return (2.0 * r.random(size) - 1.0) * self.scale
        return r.normal(size, 0.0, self.scale)


def add_noise(x: np.ndarray, noise: Noise, *, rng: int | RandomSource | None = None) -> np.ndarray:
    """The values a user sends: ``z = x + y`` with ``y`` drawn from ``noise``.

    Privacy-relevant: draws from ``os.urandom`` unless ``rng`` is a seed (tests).
    """
    x = np.asarray(x, dtype=np.float64)
    return x + noise.sample(x.size, rng=rng).reshape(x.shape)


@dataclass(frozen=True)
class Reconstruction:
    """A reconstructed distribution: ``probabilities[t]`` is the mass of ``[edges[t],
    edges[t+1])``; the density is uniform inside an interval."""

    edges: np.ndarray
    probabilities: np.ndarray
    iterations: int
    converged: bool
    method: str

    @property
    def midpoints(self) -> np.ndarray:
        return 0.5 * (self.edges[:-1] + self.edges[1:])

    @property
    def widths(self) -> np.ndarray:
        return np.diff(self.edges)

    @property
    def density(self) -> np.ndarray:
        """Density value on every interval."""
        return self.probabilities / self.widths

    def cdf(self, a: np.ndarray | float) -> np.ndarray:
        """Reconstructed ``F_X(a)``, linear inside the intervals."""
        cum = np.concatenate([[0.0], np.cumsum(self.probabilities)])
        return np.interp(np.asarray(a, dtype=np.float64), self.edges, cum)

    def interval_of(self, x: np.ndarray) -> np.ndarray:
        """Index of the interval of every value (values outside go to the end ones)."""
        idx = np.searchsorted(self.edges, np.asarray(x, dtype=np.float64), side="right") - 1
        return np.clip(idx, 0, len(self.probabilities) - 1)


def _edges(
    z: np.ndarray, bins: int | Sequence[float], bounds: tuple[float, float] | None
) -> np.ndarray:
    if isinstance(bins, int | np.integer):
        if bins < 1:
            raise ValueError("need at least one interval")
        lo, hi = bounds if bounds is not None else (float(np.min(z)), float(np.max(z)))
        if not hi > lo:
            raise ValueError(f"empty range [{lo}, {hi}]")
        return np.linspace(lo, hi, int(bins) + 1)
    edges = np.asarray(bins, dtype=np.float64)
    if edges.ndim != 1 or len(edges) < 2 or np.any(np.diff(edges) <= 0):
        raise ValueError("interval edges must be increasing")
    return edges


def _group(z: np.ndarray, z_bins: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Observed values and their weights; large samples are pre-binned finely."""
    if z_bins is None:
        return z, np.ones_like(z)
    counts, e = np.histogram(z, bins=z_bins)
    mids = 0.5 * (e[:-1] + e[1:])
    keep = counts > 0
    return mids[keep], counts[keep].astype(np.float64)


def _iterate(
    kernel: np.ndarray,
    weights: np.ndarray,
    *,
    n: float,
    widths: np.ndarray,
    tol: float,
    max_iter: int,
    stopping: Stopping,
    progress: Progress | None,
    description: str,
) -> tuple[np.ndarray, int, bool]:
    k = kernel.shape[1]
    theta = widths / widths.sum()  # uniform density on the whole range
    # scipy.stats on first use: importing it costs a second, which no other command of
    # ppdm.perturb needs
    stats = require("scipy.stats", "stats", "ppdm.perturb")
    chi2_threshold = 0.01 * float(stats.chi2.ppf(0.95, max(k - 1, 1)))
    converged = False
    it = 0
    with progress_task(progress, description, max_iter) as bar:
        while it < max_iter:
            it += 1
            denom = kernel @ theta
            ratio = np.zeros_like(denom)
            np.divide(weights, denom, out=ratio, where=denom > 0)
            new = theta * (kernel.T @ ratio) / n
            total = new.sum()
            if total > 0:
                new /= total
            if stopping == "mean-change":
                # Aggarwal 2015: average change of the density at the midpoints
                change = np.mean(np.abs(new - theta) / widths)
                done = change <= tol * np.mean(theta / widths)
            else:
                # Agrawal & Srikant: successive estimates within 1% of the chi^2 threshold
                stat = n * float(np.sum((new - theta) ** 2 / np.maximum(theta, 1e-300)))
                done = stat <= chi2_threshold
            theta = new
            bar.advance()
            if done:
                converged = True
                break
    return theta, it, converged


def bayes_reconstruct(
    z: np.ndarray,
    noise: Noise,
    *,
    bins: int | Sequence[float] = 20,
    bounds: tuple[float, float] | None = None,
    tol: float = 1e-4,
    max_iter: int = 1000,
    stopping: Stopping = "chi2",
    z_bins: int | None = None,
    progress: Progress | None = None,
) -> Reconstruction:
    """Iterative Bayes reconstruction of ``f_X`` over ``k`` intervals (Aggarwal 2015, eq. 20.5).

    Parameters
    ----------
    z : numpy.ndarray
        Perturbed values ``z_i = x_i + y_i``.
    noise : Noise
        The public distribution of ``Y``.
    bins : int or sequence of float
        Number ``k`` of equal intervals over ``bounds``, or the interval edges.
    bounds : (float, float), optional
        Range of ``X`` (default: the range of ``z``).
    tol : float
        ``stopping="mean-change"``: stop when the mean absolute change of the density at
        the midpoints is at most ``tol`` times the mean density.
    stopping : {"chi2", "mean-change"}
        The convergence test. The default ``"chi2"`` (Agrawal & Srikant 2000) stops when
        ``n sum (f_new - f)^2 / f`` is below 1% of the 95% chi-square threshold with
        ``k - 1`` degrees of freedom: it stops early, before the iteration starts fitting
        the noise (on Adult ages with uniform noise of half-width 20 and 20 bins it ends
        after about 14 iterations at total-variation distance about 0.06 from the true
        histogram, against about 0.17 for the noisy data). ``"mean-change"`` iterates until
        the density stops changing, which overfits (hundreds of iterations, distance
        0.07-0.13 on the same data).
    z_bins : int, optional
        Group the ``z`` values into this many equal-width bins first (for very large
        ``n``; the default uses every value).

    Examples
    --------
    Half the users hold 0.5, half 2.5; each adds noise uniform on [-1, 1]. The
    perturbed values spread over [-0.5, 3.5], the reconstruction puts the mass back:

    >>> x = np.repeat([0.5, 2.5], 5000)
    >>> z = add_noise(x, Noise("uniform", 1.0), rng=7)
    >>> r = bayes_reconstruct(z, Noise("uniform", 1.0), bins=4, bounds=(0, 4))
    >>> r.probabilities.round(1).tolist(), r.converged
    ([0.5, 0.0, 0.5, 0.0], True)
    """
    z = np.asarray(z, dtype=np.float64).ravel()
    edges = _edges(z, bins, bounds)
    mids = 0.5 * (edges[:-1] + edges[1:])
    zs, w = _group(z, z_bins)
    kernel = noise.pdf(zs[:, None] - mids[None, :])
    theta, it, ok = _iterate(
        kernel,
        w,
        n=float(len(z)),
        widths=np.diff(edges),
        tol=tol,
        max_iter=max_iter,
        stopping=stopping,
        progress=progress,
        description="Bayes reconstruction",
    )
    return Reconstruction(edges, theta, it, ok, "bayes")


def em_reconstruct(
    z: np.ndarray,
    noise: Noise,
    *,
    bins: int | Sequence[float] = 20,
    bounds: tuple[float, float] | None = None,
    tol: float = 1e-4,
    max_iter: int = 1000,
    stopping: Stopping = "chi2",
    z_bins: int | None = None,
    progress: Progress | None = None,
) -> Reconstruction:
    """EM reconstruction of Agrawal & Aggarwal (PODS 2001), a histogram MLE.

    The model: ``f_X`` is constant on every interval ``I_t`` with mass ``theta_t``; the
    likelihood of ``z_i`` is ``sum_t theta_t Pr(z_i | x in I_t)`` with
    ``Pr(z_i | x in I_t) = (F_Y(z_i - l_t) - F_Y(z_i - u_t)) / w_t``. The E and M steps
    combine into ``theta_t <- (1/n) sum_i theta_t Pr(z_i | I_t) / sum_s theta_s Pr(z_i |
    I_s)``, which never decreases the likelihood. Parameters as in
    :func:`bayes_reconstruct`.
    """
    z = np.asarray(z, dtype=np.float64).ravel()
    edges = _edges(z, bins, bounds)
    zs, w = _group(z, z_bins)
    widths = np.diff(edges)
    upper = noise.cdf(zs[:, None] - edges[None, :-1])
    lower = noise.cdf(zs[:, None] - edges[None, 1:])
    kernel = (upper - lower) / widths[None, :]
    theta, it, ok = _iterate(
        kernel,
        w,
        n=float(len(z)),
        widths=widths,
        tol=tol,
        max_iter=max_iter,
        stopping=stopping,
        progress=progress,
        description="EM reconstruction",
    )
    return Reconstruction(edges, theta, it, ok, "em")


def log_likelihood(z: np.ndarray, noise: Noise, rec: Reconstruction) -> float:
    """Log-likelihood of ``z`` under the histogram ``rec`` convolved with ``noise``."""
    z = np.asarray(z, dtype=np.float64).ravel()
    e = rec.edges
    kernel = (noise.cdf(z[:, None] - e[None, :-1]) - noise.cdf(z[:, None] - e[None, 1:])) / np.diff(
        e
    )
    like = kernel @ rec.probabilities
    return float(np.sum(np.log(np.maximum(like, 1e-300))))


@dataclass(frozen=True)
class NaiveBayesModel:
    """Reconstructed class priors and per-class, per-attribute histograms."""

    classes: np.ndarray
    priors: np.ndarray
    distributions: tuple[tuple[Reconstruction, ...], ...]  # [class][attribute]


class RandomizedNaiveBayes:
    """Naive Bayes trained on reconstructed class-conditional distributions.

    Aggarwal 2015, §20.2.2: the class label is collected in the clear, every numeric
    attribute with additive public noise; for each class ``c`` and attribute ``j`` the
    distribution of ``X_j | c`` is reconstructed from the perturbed values of class
    ``c`` (:func:`bayes_reconstruct` or :func:`em_reconstruct`), and a record ``x`` is
    assigned to ``argmax_c log Pr(c) + sum_j log f^_{c,j}(x_j)``.

    Parameters
    ----------
    noises : sequence of Noise
        The public noise of every attribute.
    bins : int
        Intervals per attribute (over ``bounds[j]`` or the range of the perturbed column).
    method : {"em", "bayes"}
        Reconstruction algorithm.
    bounds : sequence of (float, float), optional
        Range of every attribute.
    """

    def __init__(
        self,
        noises: Sequence[Noise],
        *,
        bins: int = 20,
        method: Literal["em", "bayes"] = "em",
        bounds: Sequence[tuple[float, float]] | None = None,
        tol: float = 1e-4,
        max_iter: int = 500,
    ) -> None:
        if method not in ("em", "bayes"):
            raise ValueError(f"method must be 'em' or 'bayes', not {method!r}")
        self.noises = tuple(noises)
        self.bins = bins
        self.method = method
        self.bounds = None if bounds is None else tuple(bounds)
        self.tol = tol
        self.max_iter = max_iter
        self.model_: NaiveBayesModel | None = None

    def fit(self, z: np.ndarray, y: np.ndarray) -> RandomizedNaiveBayes:
        """Reconstruct every class-conditional distribution from perturbed ``z``."""
        z = np.asarray(z, dtype=np.float64)
        if z.ndim == 1:
            z = z[:, None]
        y = np.asarray(y)
        if len(z) != len(y):
            raise ValueError("z and y have different lengths")
        if z.shape[1] != len(self.noises):
            raise ValueError(f"{z.shape[1]} attributes but {len(self.noises)} noise models")
        classes, inv = np.unique(y, return_inverse=True)
        priors = np.bincount(inv).astype(np.float64) / len(y)
        bounds = self.bounds or tuple(
            (float(z[:, j].min()), float(z[:, j].max())) for j in range(z.shape[1])
        )
        recon = em_reconstruct if self.method == "em" else bayes_reconstruct
        dists = tuple(
            tuple(
                recon(
                    z[inv == c, j],
                    self.noises[j],
                    bins=self.bins,
                    bounds=bounds[j],
                    tol=self.tol,
                    max_iter=self.max_iter,
                )
                for j in range(z.shape[1])
            )
            for c in range(len(classes))
        )
        self.model_ = NaiveBayesModel(classes, priors, dists)
        return self

    def predict_log_proba(self, x: np.ndarray) -> np.ndarray:
        """Unnormalized log posterior of every class for original (unperturbed) ``x``."""
        if self.model_ is None:
            raise ValueError("fit the classifier first")
        m = self.model_
        x = np.asarray(x, dtype=np.float64)
        if x.ndim == 1:
            x = x[:, None]
        out = np.tile(np.log(m.priors), (len(x), 1))
        for c, dists in enumerate(m.distributions):
            for j, rec in enumerate(dists):
                dens = rec.density[rec.interval_of(x[:, j])]
                out[:, c] += np.log(np.maximum(dens, 1e-12 / rec.widths.mean()))
        return out

    def predict(self, x: np.ndarray) -> np.ndarray:
        if self.model_ is None:
            raise ValueError("fit the classifier first")
        return self.model_.classes[np.argmax(self.predict_log_proba(x), axis=1)]
