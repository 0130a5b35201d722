"""Compute fits: time(shape) = launch + max(work / (peak * efficiency(shape)), bytes / memory bandwidth).

The roofline form is the standard max(compute, memory) bound (Williams et al., CACM 2009); the efficiency
term is learned from the sweep over shape features (calibrate.shapes), because achieved throughput depends
on shape in ways no closed form captures (stas00/ml-engineering's MAMF GEMM sweeps: tens of % between
shapes). Two learners fit it, and each family keeps the one that cross-validates better (LEARNERS):
gradient-boosted shallow trees, monotone in every size feature (calibrate.shapes.MONOTONE: sklearn's
`monotonic_cst`; arithmetic intensity, kernel size and a backend's own features are free), so a smaller batch, channel count or
spatial size never raises the predicted efficiency by itself; and a Gaussian process with one length
scale per feature (sklearn's GaussianProcessRegressor), smooth but not monotone, which fitted the CPU
convolutions' many small regimes better. Both are exported as plain numbers (no pickle).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import numpy as np

from calibrate.alphabeta import (MIN_TIME_S, STATISTICS, bootstrap_estimate, fit_line, quality, resample,
                                 with_noise)
from calibrate.gp import fit_gp as gp_regression
from calibrate.coefficients import (MIN_LOG_EFFICIENCY, ComputeFit, EfficiencyModel, Estimate, FitQuality,
                                   GaussianProcess, Tree)
from calibrate.shapes import MONOTONE
from calibrate.trees import float32_row, tree_arrays, value_at

N_TREES = 100
#: depth 4 lets one tree use interactions of up to four features (kernel regime x filters x channels x size;
#: docs/decisions/2026-11-30-efficiency-learners.md)
TREE_DEPTH = 4
LEARNING_RATE = 0.15
MIN_SAMPLES_FOR_TREES = 6
CV_FOLDS = 5
BOOTSTRAP_REPLICATES = 200
#: the efficiency learners a family chooses between by cross-validated median error: neither wins every family
#: (docs/decisions/2026-11-30-efficiency-learners.md)
LEARNERS = ("trees", "gp")


@dataclass(frozen=True)
class ComputePoint:
    """One compute sample reduced to what the fit needs."""

    work: float  # FLOPs (kind "flops") or bytes (kind "bytes")
    bytes: float
    features: tuple[float, ...]
    times_s: np.ndarray
    params: dict
    statistic: str = "median"  # see calibrate.alphabeta.Point

    @property
    def t(self) -> float:
        return max(float(STATISTICS[self.statistic](self.times_s)), MIN_TIME_S)


def export_tree(tree) -> Tree:
    return Tree(**tree_arrays(tree))


def efficiency_at(model: EfficiencyModel, row: Sequence[float]) -> float:
    """Fraction of peak at one shape: exp(trend in log work + boosted trees or GP + a measured grid), capped at 1 and
    floored at e^MIN_LOG_EFFICIENCY (the schema bounds init, slope, trees and grid; a GP's mean is bounded only here)."""
    log_eff = model.init + (model.slope * row[0] if model.slope else 0.0)
    row32 = float32_row(row) if model.trees else row
    for t in model.trees:
        log_eff += model.learning_rate * value_at(t.children_left, t.children_right, t.feature, t.threshold, t.value,
                                                  row32)
    if model.gp is not None:
        log_eff += model.gp.mean_at(row)
    if model.grid is not None:
        log_eff += model.grid_at(row)
    return math.exp(min(max(log_eff, MIN_LOG_EFFICIENCY), 0.0))


def predict_time(fit: ComputeFit, work: float, nbytes: float, row: Sequence[float], bound: Optional[str] = None) -> float:
    """Per-call seconds of one shape (module docstring formula); bound "low"/"high" moves launch and level to
    their CI ends. Scalar, because the predictor costs one shape at a time (numpy's per-call overhead on
    one-element arrays was a fifth of a search's time)."""
    compute_s = work / (fit.peak_per_s * efficiency_at(fit.efficiency, row))
    if fit.memory_bandwidth_bytes_per_s:
        compute_s = max(compute_s, nbytes / fit.memory_bandwidth_bytes_per_s)
    return fit.time_scale.at(bound) * (fit.launch_s.at(bound) + compute_s)


def efficiency(model: EfficiencyModel, x: np.ndarray) -> np.ndarray:
    return np.array([efficiency_at(model, row) for row in np.asarray(x).tolist()])


def predict_times(fit: ComputeFit, work: np.ndarray, nbytes: np.ndarray, x: np.ndarray,
                  bound: Optional[str] = None) -> np.ndarray:
    """predict_time over rows."""
    return np.array([predict_time(fit, w, b, row, bound)
                     for w, b, row in zip(np.asarray(work).tolist(), np.asarray(nbytes).tolist(), np.asarray(x).tolist())])


def intercept_launch(work: np.ndarray, t: np.ndarray) -> float:
    """Launch overhead as the intercept of a relative-error line through (work, time), at most half the
    fastest call: identifiable only as far as efficiency does not itself fall with work."""
    return min(fit_line(work, t)[0], 0.5 * float(t.min()))


LAUNCH_RULES = {"intercept": intercept_launch, "none": lambda work, t: 0.0}


def boost(x: np.ndarray, y: np.ndarray, monotone: list[int]) -> tuple[list[Tree], float]:
    """Least-squares gradient boosting of monotone depth-limited trees: (exported trees, constant).
    sklearn's input and parameter checks run once here, not per tree (they were four fifths of a fit's time):
    the trees are fitted and evaluated on the float32 copy of x that sklearn itself would make."""
    from sklearn import config_context  # fitting only: predicting reads the exported arrays
    from sklearn.tree import DecisionTreeRegressor

    x32 = np.ascontiguousarray(x, dtype=np.float32)
    if not np.isfinite(x32).all() or not np.isfinite(y).all():
        raise ValueError("boost: features and targets must be finite")
    base = float(np.mean(y))
    fitted = np.full(len(y), base)
    trees = []
    seeded = np.random.RandomState(0)  # each tree starts from this state, as random_state=0 would seed it
    state = seeded.get_state()
    with config_context(skip_parameter_validation=True, assume_finite=True):
        for _ in range(N_TREES):
            seeded.set_state(state)
            tree = DecisionTreeRegressor(max_depth=TREE_DEPTH, min_samples_leaf=2, monotonic_cst=monotone,
                                         random_state=seeded)
            tree.fit(x32, np.ascontiguousarray(y - fitted), check_input=False)
            fitted += LEARNING_RATE * tree.predict(x32, check_input=False)
            trees.append(export_tree(tree))
    return trees, base


def fit_gp(x: np.ndarray, y: np.ndarray) -> GaussianProcess:
    """GP regression of y on x (constant * anisotropic RBF + white noise, hyperparameters by marginal
    likelihood with one restart, seeded: calibrate.gp), exported as its posterior mean."""
    y_mean, y_std = float(np.mean(y)), float(np.std(y)) or 1.0  # standardised as sklearn's normalize_y does
    fitted = gp_regression(x, (y - y_mean) / y_std)
    return GaussianProcess(train_x=np.asarray(x, float).tolist(), alpha=fitted.alpha.tolist(),
                           length_scales=fitted.length_scales.astype(float).tolist(),
                           amplitude=fitted.amplitude, y_mean=y_mean, y_std=y_std)


def _train(points: Sequence[ComputePoint], feature_names: list[str], kind: str,
           memory_bw: Optional[float], launch_rule: str = "intercept", learner: str = "trees") -> ComputeFit:
    work = np.array([p.work for p in points])
    t = np.array([p.t for p in points])
    launch = LAUNCH_RULES[launch_rule](work, t)
    rate = work / (t - launch)
    peak = float(rate.max())
    if kind == "flops" and memory_bw:
        # the memory floor must not contradict a measurement (a cache-resident shape beats DRAM bandwidth)
        memory_bw = max(memory_bw, float(np.max(np.array([p.bytes for p in points]) / (t - launch))))
    log_eff = np.log(rate / peak)
    trees: list[Tree] = []
    x = np.array([p.features for p in points])
    init, slope = float(np.mean(log_eff)), 0.0
    if len(np.unique(x[:, 0])) >= 3:
        slope, init = (float(v) for v in np.polyfit(x[:, 0], log_eff, 1))
        slope = max(slope, 0.0)  # efficiency never improves as work shrinks
        init = float(np.mean(log_eff - slope * x[:, 0]))
    gp = None
    if len(points) >= MIN_SAMPLES_FOR_TREES:
        residual = log_eff - init - slope * x[:, 0]
        if learner == "gp":
            gp = fit_gp(x, residual)
        else:
            trees, base = boost(x, residual, [MONOTONE.get(f, 0) for f in feature_names])
            init += base
    return ComputeFit(kind=kind, launch_s=Estimate.exact(launch), peak_per_s=peak,
                      memory_bandwidth_bytes_per_s=memory_bw if kind == "flops" else None,
                      efficiency=EfficiencyModel(features=feature_names, init=init, slope=slope,
                                                 learning_rate=LEARNING_RATE, trees=trees, gp=gp),
                      time_scale=Estimate.exact(1.0), n_samples=len(points))


def _predict_points(fit: ComputeFit, points: Sequence[ComputePoint]) -> np.ndarray:
    return predict_times(fit, np.array([p.work for p in points]), np.array([p.bytes for p in points]),
                         np.array([p.features for p in points]))


def held_out_quality(points: Sequence[ComputePoint], train_mask: np.ndarray, label: str, feature_names, kind,
                     memory_bw, launch_rule: str = "intercept", learner: str = "trees") -> Optional[FitQuality]:
    """Train on points[train_mask], report errors on the rest."""
    train = [p for p, m in zip(points, train_mask) if m]
    test = [p for p, m in zip(points, train_mask) if not m]
    if len(train) < 2 or not test:
        return None
    fit = _train(train, feature_names, kind, memory_bw, launch_rule, learner)
    return quality(_predict_points(fit, test), np.array([p.t for p in test]), label, len(train))


def cross_validate(points, feature_names, kind, memory_bw, order: np.ndarray,
                   launch_rule: str = "intercept", learner: str = "trees",
                   by_kernel: Optional[Callable] = None) -> Optional[FitQuality]:
    """K-fold over a given permutation of the points (the same folds for every rule and learner compared);
    by_kernel(feature_names, points, predictions, truth): the errors per kernel regime a backend tells apart
    (calibrate.backends.Backend.errors_by_kernel)."""
    n = len(points)
    if n < 4:
        return None
    folds = min(CV_FOLDS, n)
    preds, truth = np.empty(n), np.array([p.t for p in points])
    for f in range(folds):
        test_idx = order[f::folds]
        mask = np.ones(n, bool)
        mask[test_idx] = False
        fit = _train([points[i] for i in np.flatnonzero(mask)], feature_names, kind, memory_bw, launch_rule, learner)
        preds[test_idx] = _predict_points(fit, [points[i] for i in test_idx])
    result = quality(preds, truth, f"{folds}-fold random", int(n * (folds - 1) / folds))
    return result.model_copy(update={"by_kernel": by_kernel(feature_names, points, preds, truth) if by_kernel else None})


def smallest_work_band(points: Sequence[ComputePoint]) -> tuple[np.ndarray, str]:
    """Train mask that holds out the quarter of shapes with the least work: the small per-device shapes a
    split creates, predicted from larger ones (an extrapolation, not an interpolation)."""
    work = np.array([p.work for p in points])
    held = np.argsort(work, kind="stable")[: len(points) // 4]
    mask = np.ones(len(points), bool)
    mask[held] = False
    return mask, f"extrapolation: the {len(held)} smallest-work shapes (<= {work[held].max():.3g})"


def _bootstrap_level(points, fit: ComputeFit, rng, launch_rule: str) -> tuple[Estimate, Estimate]:
    """CIs of the launch overhead and of the overall time level (bootstrap of calibrate.alphabeta.resample)."""
    work = np.array([p.work for p in points])
    pred = _predict_points(fit, points)
    t = np.array([p.t for p in points])
    launches, scales = [], []
    for _ in range(BOOTSTRAP_REPLICATES):
        pick, tb = resample(points, rng)
        scales.append(np.median(tb / pred[pick]) / np.median(t[pick] / pred[pick]))
        if len(np.unique(work[pick])) >= 2:
            launches.append(LAUNCH_RULES[launch_rule](work[pick], tb))
    return bootstrap_estimate(fit.launch_s.value, launches), bootstrap_estimate(1.0, scales)


def fit_compute(points: Sequence[ComputePoint], feature_names: list[str], kind: str, memory_bw: Optional[float],
                rng: np.random.Generator,
                extrapolation_band: Optional[Callable[[Sequence[ComputePoint]], tuple[np.ndarray, str]]] = smallest_work_band,
                learners: Sequence[str] = LEARNERS, by_kernel: Optional[Callable] = None) -> ComputeFit:
    """Fit one family (op, pass, dtype) with held-out quality, an extrapolation check and bootstrap CIs
    (by_kernel: cross_validate's).

    The launch rule (intercept or none) and the learner (one of `learners`, default LEARNERS) are the pair with the lowest
    cross-validated median error over the same folds, so the stored CV figure is the best of four and
    slightly optimistic; the extrapolation figure is not used for any choice."""
    order = rng.permutation(len(points))
    learners = tuple(learners) if len(points) > MIN_SAMPLES_FOR_TREES else ("trees",)
    scored = [(cross_validate(points, feature_names, kind, memory_bw, order, rule, learner, by_kernel), rule, learner)
              for rule in LAUNCH_RULES for learner in learners]
    quality_, rule, learner = min(scored, key=lambda qrl: qrl[0].median_rel_error if qrl[0] else 0.0)
    fit = _train(points, feature_names, kind, memory_bw, rule, learner)
    launch, scale = _bootstrap_level(points, fit, rng, rule)
    extrapolation = None
    if extrapolation_band is not None and len(points) >= 8:
        mask, label = extrapolation_band(points)
        extrapolation = held_out_quality(points, mask, label, feature_names, kind, memory_bw, rule, learner)
    return fit.model_copy(update={"launch_s": launch, "time_scale": scale, "quality": with_noise(quality_, points),
                                  "extrapolation": extrapolation})
