"""Compute fits on synthetic sweeps with a known efficiency curve: recovery, held-out bands, export."""
import numpy as np
import pytest
import yaml

from calibrate import backends, shapes
from calibrate.coefficients import ComputeFit
from calibrate.compute import ComputePoint, efficiency, fit_compute, predict_times
from calibrate.fit import fit_profile
from calibrate.synthetic import conv_samples, noisy_times, profile_with

PEAK, LAUNCH = 200e9, 20e-6


def true_eff(flops):
    return 0.85 * flops / (flops + 3e7)


def true_time(flops, nbytes=0.0):
    return LAUNCH + flops / (PEAK * true_eff(flops))


def conv_grid(batches=(1, 2, 4, 8), channels=(8, 16, 32, 64, 128), sizes=(14, 28, 56)):
    return [dict(N=n, C=c, F=64, H=h, W=h, kernel=3, stride=1, padding=1) for n in batches for c in channels for h in sizes]


def points_of(params_list, rng, noise=0.03):
    out = []
    for params in params_list:
        w = shapes.work("conv2d", "fwd", params, "float32")
        out.append(ComputePoint(w["flops"], w["bytes"], tuple(w["features"]),
                                np.array(noisy_times(true_time(w["flops"]), rng, noise, 7)), params))
    return out


def predict(fit, params_list, backend=backends.GpuBackend()):
    """The fit's times with `backend`'s work and features, read as the fit stored them (calibrate.backends)."""
    ws = [backend.work("conv2d", "fwd", p, "float32") for p in params_list]
    rows = [backends.feature_row(backend.feature_names("conv2d"), w["features"], fit.efficiency.features) for w in ws]
    return predict_times(fit, np.array([w["work"] for w in ws]), np.array([w["bytes"] for w in ws]), np.array(rows))


@pytest.mark.slow  # a real fit: seconds on 2 cores (CI runs it)
def test_recovers_a_known_efficiency_curve_on_unseen_shapes():
    rng = np.random.default_rng(0)
    fit = fit_compute(points_of(conv_grid(), rng), shapes.FLOP_FEATURES, "flops", None, rng)
    unseen = conv_grid(batches=(3, 6), channels=(24, 48, 96), sizes=(20, 40))
    truth = np.array([true_time(shapes.work("conv2d", "fwd", p, "float32")["flops"]) for p in unseen])
    rel = np.abs(predict(fit, unseen) - truth) / truth
    print(f"unseen in-range shapes: median rel err {np.median(rel):.1%}, max {rel.max():.1%}")
    assert np.median(rel) < 0.10 and rel.max() < 0.25
    # achieved throughput (work / time) follows the true curve: it rises with work and saturates
    flops = np.array([shapes.work("conv2d", "fwd", p, "float32")["flops"] for p in unseen])
    order = np.argsort(flops)
    achieved = flops[order] / predict(fit, unseen)[order]
    true_achieved = flops[order] / truth[order]
    assert np.corrcoef(np.log(achieved), np.log(true_achieved))[0, 1] > 0.95
    assert fit.quality.median_rel_error < 0.10


@pytest.mark.slow  # a real fit: seconds on 2 cores (CI runs it)
def test_holds_out_a_band_of_small_channel_shapes_and_stores_the_error():
    rng = np.random.default_rng(1)
    pts = points_of(conv_grid(), rng)

    def small_channels(points):
        mask = np.array([p.params["C"] > 32 for p in points])
        return mask, "extrapolation: every conv with C <= 32, trained on C > 32"

    fit = fit_compute(pts, shapes.FLOP_FEATURES, "flops", None, rng, extrapolation_band=small_channels)
    ex = fit.extrapolation
    assert ex.held_out.startswith("extrapolation: every conv with C <= 32")
    assert ex.n_test == sum(p.params["C"] <= 32 for p in pts) and ex.n_train == len(pts) - ex.n_test
    print(f"held-out band C <= 32: median rel err {ex.median_rel_error:.1%}, max {ex.max_rel_error:.1%}")
    assert 0 < ex.median_rel_error < 0.30  # measured, not assumed: it is a real, nonzero number


@pytest.mark.slow  # a real fit: seconds on 2 cores (CI runs it)
def test_default_extrapolation_band_is_the_smallest_work_quarter():
    rng = np.random.default_rng(2)
    fit = fit_compute(points_of(conv_grid(), rng), shapes.FLOP_FEATURES, "flops", None, rng)
    assert fit.extrapolation.n_test == pytest.approx(len(conv_grid()) / 4, abs=2)
    assert fit.extrapolation.held_out.startswith("extrapolation: the")


@pytest.mark.slow  # a real fit: seconds on 2 cores (CI runs it)
def test_fit_is_stored_as_plain_yaml_and_reloads_to_the_same_predictions():
    rng = np.random.default_rng(3)
    samples = conv_samples(conv_grid(), lambda fl, b: true_time(fl), rng)
    profile = fit_profile(profile_with(samples))
    text = yaml.safe_dump(profile.coefficients)  # safe_dump refuses python objects: plain numbers only
    reloaded = ComputeFit.model_validate(yaml.safe_load(text)["compute"]["conv2d/fwd/float32"])
    original = ComputeFit.model_validate(profile.coefficients["compute"]["conv2d/fwd/float32"])
    grid = conv_grid(batches=(5,), channels=(40,), sizes=(30,))
    host = backends.for_profile(None, samples).for_sample(samples[0])  # the CPU samples' backend
    assert predict(reloaded, grid, host) == pytest.approx(predict(original, grid, host), rel=1e-12)
    assert reloaded.efficiency.trees or reloaded.efficiency.gp  # a learned shape model, not the trend alone


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # the reference fit's own
def test_exported_gp_mean_is_sklearns_prediction():
    """calibrate.compute.fit_gp stores the posterior mean as plain numbers; GaussianProcess.mean_at must give
    what sklearn's predict gives, at training rows and away from them."""
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel

    from calibrate.compute import fit_gp

    rng = np.random.default_rng(7)
    x = rng.uniform(0, 3, size=(40, 4))
    y = np.sin(x[:, 0]) + 0.3 * x[:, 1] ** 2 + rng.normal(0, 0.05, 40)
    exported = fit_gp(x, y)
    kernel = ConstantKernel(1.0) * RBF(np.ones(4), (1e-2, 1e3)) + WhiteKernel(1e-2, (1e-5, 1.0))
    reference = GaussianProcessRegressor(kernel, normalize_y=True, n_restarts_optimizer=1, random_state=0).fit(x, y)
    queries = np.vstack([x[:5], rng.uniform(-1, 4, size=(10, 4))])
    assert [exported.mean_at(q) for q in queries] == pytest.approx(reference.predict(queries).tolist(), rel=1e-9, abs=1e-12)
    assert np.median(np.abs([exported.mean_at(q) for q in x] - y)) < 0.1  # it fits


@pytest.mark.parametrize("break_it, needle", [
    (lambda gp: gp["alpha"].pop(), "alpha has"),
    (lambda gp: gp["length_scales"].append(1.0), "values (one per length scale)"),
    (lambda gp: gp.update(y_std=0.0), "y_std"),
])
def test_a_malformed_gp_in_a_profile_is_a_one_line_error_naming_the_field(break_it, needle):
    from calibrate.coefficients import parse_coefficients
    from calibrate.compute import fit_gp
    from profiler.errors import UserError

    x = np.random.default_rng(9).uniform(0, 1, size=(8, len(shapes.FLOP_FEATURES)))
    gp = fit_gp(x, x[:, 0]).model_dump()
    break_it(gp)
    fit = fit_compute(points_of(conv_grid(), np.random.default_rng(9)), shapes.FLOP_FEATURES, "flops", None,
                      np.random.default_rng(9)).model_dump()
    fit["efficiency"].update(trees=[], gp=gp)
    with pytest.raises(UserError) as err:
        parse_coefficients({"compute": {"conv2d/fwd/float32": fit}}, "p.yaml")
    message = str(err.value)
    assert "\n" not in message and "coefficients.compute.conv2d/fwd/float32.efficiency.gp" in message
    assert needle in message


@pytest.mark.slow  # two real fits
def test_a_family_keeps_the_learner_that_cross_validates_better():
    """A smooth efficiency surface that is not monotone in channels (efficiency peaks at 32 channels) is what
    the monotone trees cannot follow and the GP can: the fit chooses the GP, says so in its sources, and its
    stored held-out error is the better one."""
    from calibrate.fit import fit_compute_families

    rng = np.random.default_rng(8)
    grid = conv_grid(batches=(1, 2, 4, 8), channels=(4, 8, 16, 32, 64, 128), sizes=(8, 16, 32))

    def time_s(params):
        w = shapes.work("conv2d", "fwd", params, "float32")
        eff = 0.8 * np.exp(-0.5 * (np.log2(params["C"] / 32) / 1.2) ** 2)
        return 2e-6 + w["flops"] / (1e11 * eff)

    samples = [s.model_copy(update={"times_s": [time_s(s.params) * (1 + 0.02 * rng.standard_normal()) for _ in range(7)]})
               for s in conv_samples(grid, lambda fl, b: 1.0, rng)]
    fit = fit_compute_families(samples, None, 0)["conv2d/fwd/float32"]
    assert fit.efficiency.gp is not None and not fit.efficiency.trees
    assert "efficiency: Gaussian process (chosen by cross-validation)" in fit.sources
    trees = fit_compute_families(samples, None, 0, learners=("trees",))["conv2d/fwd/float32"]
    assert trees.efficiency.trees and trees.efficiency.gp is None
    assert fit.quality.median_rel_error < trees.quality.median_rel_error


@pytest.mark.slow  # a real fit: seconds on 2 cores (CI runs it)
def test_efficiency_never_exceeds_one():
    rng = np.random.default_rng(4)
    fit = fit_compute(points_of(conv_grid(), rng), shapes.FLOP_FEATURES, "flops", None, rng)
    huge = shapes.work("conv2d", "fwd", dict(N=512, C=512, F=512, H=56, W=56, kernel=3, stride=1, padding=1), "float32")
    assert 0 < efficiency(fit.efficiency, np.array([huge["features"]]))[0] <= 1.0


@pytest.mark.slow  # a real fit: seconds on 2 cores (CI runs it)
def test_memory_term_bounds_low_intensity_shapes():
    rng = np.random.default_rng(5)
    points = points_of(conv_grid(), rng)
    fit = fit_compute(points, shapes.FLOP_FEATURES, "flops", 1e9, rng)
    bw = fit.memory_bandwidth_bytes_per_s
    # raised above the STREAM figure just enough that no measured shape beats the floor
    implied = max(p.bytes / (p.t - fit.launch_s.value) for p in points)
    assert bw == pytest.approx(max(1e9, implied))
    w = shapes.work("conv2d", "fwd", dict(N=64, C=1, F=1, H=512, W=512, kernel=1, stride=1, padding=0), "float32")
    t = predict_times(fit, np.array([w["flops"]]), np.array([w["bytes"]]), np.array([w["features"]]))[0]
    assert t >= w["bytes"] / bw


def test_tree_efficiency_is_monotone_in_every_size_feature():
    """The guarantee the trees give (the GP, chosen only where it cross-validates better, does not)."""
    rng = np.random.default_rng(6)
    fit = fit_compute(points_of(conv_grid(), rng, noise=0.15), shapes.FLOP_FEATURES, "flops", None, rng,
                      learners=("trees",))
    names = fit.efficiency.features
    base = np.array([p.features for p in points_of(conv_grid(), rng)])
    for j, name in enumerate(names):
        if not shapes.MONOTONE[name]:
            continue
        bigger = base.copy()
        bigger[:, j] += 0.3
        assert np.all(efficiency(fit.efficiency, bigger) >= efficiency(fit.efficiency, base) - 1e-12), name


def test_boosted_trees_are_the_plainly_fitted_sklearn_trees():
    """calibrate.compute.boost skips sklearn's per-tree input checks; the trees must be exactly those of plain
    DecisionTreeRegressor(random_state=0).fit/predict boosting."""
    from sklearn.tree import DecisionTreeRegressor

    from calibrate.compute import LEARNING_RATE, N_TREES, TREE_DEPTH, boost, export_tree

    rng = np.random.default_rng(11)
    x = rng.normal(size=(40, 6))
    y = x[:, 0] - 0.5 * x[:, 1] ** 2 + 0.1 * rng.normal(size=40)
    monotone = [1, 0, -1, 0, 0, 1]
    trees, base = boost(x, y, monotone)
    fitted, expected = np.full(len(y), float(np.mean(y))), []
    for _ in range(N_TREES):
        tree = DecisionTreeRegressor(max_depth=TREE_DEPTH, min_samples_leaf=2, monotonic_cst=monotone, random_state=0)
        tree.fit(x, y - fitted)
        fitted += LEARNING_RATE * tree.predict(x)
        expected.append(export_tree(tree))
    assert base == float(np.mean(y)) and trees == expected


def test_families_fitted_in_worker_processes_equal_those_fitted_in_turn():
    """Each family draws from a generator seeded by the seed and its name, so fitting families side by side in
    forked workers gives exactly the fits of one process fitting them one after another."""
    from calibrate.fit import fit_compute_families

    rng = np.random.default_rng(3)
    grid = conv_grid(batches=(1, 4), channels=(4, 16, 64), sizes=(8, 16))
    samples = conv_samples(grid, lambda fl, b: 1.0, rng)
    samples += [s.model_copy(update={"variant": "bwd_data"}) for s in samples]
    one = fit_compute_families(samples, None, 0, learners=("trees",), workers=1)
    two = fit_compute_families(samples, None, 0, learners=("trees",), workers=2)
    assert len(one) == 2 and one == two
    other_seed = fit_compute_families(samples, None, 1, learners=("trees",), workers=1)
    assert other_seed != one  # the seed reaches every family's draws
