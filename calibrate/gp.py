"""Gaussian-process regression with one kernel: amplitude * anisotropic RBF + white noise, hyperparameters by
maximum marginal likelihood (Rasmussen & Williams 2006: Algorithm 2.1 for the posterior, eq. 5.8-5.9 for the log
marginal likelihood and its gradient).

It is scikit-learn's `GaussianProcessRegressor(ConstantKernel(1) * RBF(ones, (1e-2, 1e3)) + WhiteKernel(1e-2,
(1e-5, 1)), n_restarts_optimizer=1, random_state=0)` written out for this one kernel with the same
parameterisation, bounds, L-BFGS-B starts and jitter, so it finds the same optimum (tests/calibrate/test_gp.py
compares the two), at a fraction of sklearn's per-call overhead: the compute fits train dozens of GPs per
calibration (docs/decisions/2026-11-30-efficiency-learners.md).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: log-space bounds of (amplitude, each length scale, noise): sklearn's ConstantKernel default and the ones
#: calibrate.compute has always used
AMPLITUDE_BOUNDS = (1e-5, 1e5)
LENGTH_SCALE_BOUNDS = (1e-2, 1e3)
NOISE_BOUNDS = (1e-5, 1.0)
INITIAL = (1.0, 1.0, 1e-2)  # amplitude, every length scale, noise
JITTER = 1e-10  # sklearn's default `alpha` added to the diagonal
RESTARTS = 1
SEED = 0


@dataclass(frozen=True)
class GPFit:
    """The fitted hyperparameters and the posterior weights alpha = K^-1 y of the training targets."""

    amplitude: float
    length_scales: np.ndarray
    noise: float
    alpha: np.ndarray
    log_marginal_likelihood: float


def _kernel(theta: np.ndarray, sq: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(K, its amplitude * RBF part, the squared distances over the length scales) at log hyperparameters theta;
    sq[d] = (x_id - x_jd)^2."""
    c, scales, s = np.exp(theta[0]), np.exp(theta[1:-1]), np.exp(theta[-1])
    weighted = sq / (scales ** 2)[:, None, None]
    rbf = c * np.exp(-0.5 * weighted.sum(axis=0))
    return rbf + (s + JITTER) * np.eye(sq.shape[1]), rbf, weighted


def _objective(theta: np.ndarray, sq: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    """Negative log marginal likelihood and its gradient in log hyperparameters; sq[d] = (x_id - x_jd)^2."""
    n, s = len(y), np.exp(theta[-1])
    K, rbf, weighted = _kernel(theta, sq)
    try:
        L = np.linalg.cholesky(K)
    except np.linalg.LinAlgError:
        return np.inf, np.zeros_like(theta)
    L_inv = np.linalg.inv(L)  # n is at most a few hundred shapes
    K_inv = L_inv.T @ L_inv
    a = K_inv @ y
    lml = -0.5 * y @ a - np.log(np.diag(L)).sum() - n / 2 * np.log(2 * np.pi)
    inner = np.outer(a, a) - K_inv
    grad = np.empty_like(theta)
    grad[0] = 0.5 * np.sum(inner * rbf)
    grad[1:-1] = 0.5 * np.einsum("ij,dij->d", inner * rbf, weighted)
    grad[-1] = 0.5 * s * np.trace(inner)
    return -float(lml), -grad


def fit_gp(x: np.ndarray, y: np.ndarray) -> GPFit:
    """Maximum-marginal-likelihood hyperparameters (module docstring) and the posterior weights."""
    from scipy.optimize import minimize

    x, y = np.asarray(x, float), np.asarray(y, float)
    dims = x.shape[1]
    sq = (x[:, None, :] - x[None, :, :]).transpose(2, 0, 1) ** 2
    bounds = np.log([AMPLITUDE_BOUNDS] + [LENGTH_SCALE_BOUNDS] * dims + [NOISE_BOUNDS])
    starts = [np.log([INITIAL[0]] + [INITIAL[1]] * dims + [INITIAL[2]])]
    rng = np.random.RandomState(SEED)
    starts += [rng.uniform(bounds[:, 0], bounds[:, 1]) for _ in range(RESTARTS)]
    optima = [minimize(_objective, start, args=(sq, y), method="L-BFGS-B", jac=True, bounds=bounds) for start in starts]
    best = min(optima, key=lambda r: r.fun)
    theta = best.x
    L = np.linalg.cholesky(_kernel(theta, sq)[0])
    alpha = np.linalg.solve(L.T, np.linalg.solve(L, y))
    return GPFit(amplitude=float(np.exp(theta[0])), length_scales=np.exp(theta[1:-1]), noise=float(np.exp(theta[-1])),
                 alpha=alpha, log_marginal_likelihood=-float(best.fun))
