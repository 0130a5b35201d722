"""calibrate.gp against scikit-learn's GaussianProcessRegressor with the same kernel, bounds, restarts and seed:
the hyperparameters and posterior means it finds are sklearn's."""
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel

from calibrate import gp
from calibrate.coefficients import GaussianProcess


def sklearn_gp(x, y):
    kernel = ConstantKernel(1.0) * RBF(np.ones(x.shape[1]), (1e-2, 1e3)) + WhiteKernel(1e-2, (1e-5, 1.0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return GaussianProcessRegressor(kernel, random_state=0, n_restarts_optimizer=1).fit(x, y)


@pytest.mark.parametrize("n,d,seed", [(12, 4, 1), (30, 6, 2), (56, 10, 3)])
def test_same_optimum_and_posterior_mean_as_sklearn(n, d, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)) * 2
    y = np.sin(x[:, 0]) + 0.3 * x[:, 1] + 0.05 * rng.normal(size=n)
    y = (y - y.mean()) / y.std()
    ours, theirs = gp.fit_gp(x, y), sklearn_gp(x, y)
    fitted = theirs.kernel_
    assert ours.amplitude == pytest.approx(fitted.k1.k1.constant_value, rel=1e-4)
    assert ours.length_scales == pytest.approx(np.atleast_1d(fitted.k1.k2.length_scale), rel=1e-3)
    assert ours.noise == pytest.approx(fitted.k2.noise_level, rel=1e-3)
    assert ours.log_marginal_likelihood == pytest.approx(theirs.log_marginal_likelihood_value_, rel=1e-6)
    queries = rng.normal(size=(20, d)) * 2
    exported = GaussianProcess(train_x=x.tolist(), alpha=ours.alpha.tolist(), length_scales=ours.length_scales.tolist(),
                               amplitude=ours.amplitude, y_mean=0.0, y_std=1.0)  # as calibrate.compute stores it
    assert [exported.mean_at(q) for q in queries] == pytest.approx(theirs.predict(queries), abs=1e-6)


def test_objective_gradient_matches_finite_differences():
    rng = np.random.default_rng(4)
    x, y = rng.normal(size=(15, 3)), rng.normal(size=15)
    sq = (x[:, None, :] - x[None, :, :]).transpose(2, 0, 1) ** 2
    theta = np.log([2.0, 0.7, 1.5, 3.0, 0.05])
    _, grad = gp._objective(theta, sq, y)
    for k in range(len(theta)):
        step = np.zeros_like(theta)
        step[k] = 1e-6
        numeric = (gp._objective(theta + step, sq, y)[0] - gp._objective(theta - step, sq, y)[0]) / 2e-6
        assert grad[k] == pytest.approx(numeric, rel=1e-4, abs=1e-6)
