"""Piecewise alpha-beta (Hockney) fits minimising relative error, with detected break points,
bootstrap confidence intervals and held-out quality.

Model (Hockney's; docs/calibration.md "Fitting"): T(x) = alpha + x * beta on each segment, beta = 1 / bandwidth.
Loss: relative error, i.e. least squares on (alpha + x*beta - t) / t (plain least squares on t lets the largest
messages decide the fit and leaves alpha as noise). Regimes (protocol/algorithm switches, e.g. NCCL's
LL -> LL128 -> Simple in src/graph/tuning.cc; cache vs DRAM) are found by searching every split into 1..3
contiguous segments and keeping the lowest penalised BIC. Confidence: bootstrap over each sample's raw per-call
times (see `resample`); break points stay where the full-data fit put them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from calibrate.coefficients import Estimate, FitQuality, Segment, SegmentedFit, opposite

#: bandwidth stored when a segment shows no measurable per-byte cost (beta fitted as 0)
UNMEASURABLE_BANDWIDTH_BYTES_PER_S = 1e18
MAX_SEGMENTS = 3
MIN_SIZES_PER_SEGMENT = 3
BOOTSTRAP_REPLICATES = 200
#: BIC cost of one break point, in units of log(n): plain BIC ignores that the break's position is chosen from
#: every split (docs/decisions/2026-11-29-break-point-penalty.md)
BREAK_PENALTY = 6.0
CV_FOLDS = 5
#: floor on a sample's time: relative-error weights are 1/t, and a coarse clock can report 0
MIN_TIME_S = 1e-12
MIN_CALLS_FOR_WITHIN = 3


#: how a sample's per-call times become the one time a fit sees
STATISTICS = {"median": np.median, "mean": np.mean}


@dataclass(frozen=True)
class Point:
    """One sample: x (message bytes or bytes moved, scaled by the bus factor) and its raw per-call times.
    statistic: "median" by default; "mean" where the prediction is a sum of many calls, so a heavy tail
    of slow calls is paid in proportion (collectives over gloo: calibrate.collective_fit)."""

    x: float
    times_s: np.ndarray
    statistic: str = "median"

    @property
    def t(self) -> float:
        return max(float(STATISTICS[self.statistic](self.times_s)), MIN_TIME_S)


def fit_line(x: np.ndarray, t: np.ndarray) -> tuple[float, float]:
    """(alpha_s, beta_s_per_x) >= 0 minimising sum(((alpha + beta x - t) / t)^2); exact 2-variable NNLS."""
    w = 1.0 / t
    a = np.column_stack([w, x * w])
    y = np.ones_like(t)
    if len(np.unique(x)) >= 2:
        (alpha, beta), *_ = np.linalg.lstsq(a, y, rcond=None)
        if alpha >= 0 and beta >= 0:
            return float(alpha), float(beta)
    candidates = [(float(np.dot(w, y) / np.dot(w, w)), 0.0)]  # latency only
    xw = x * w
    if np.dot(xw, xw) > 0:
        candidates.append((0.0, float(np.dot(xw, y) / np.dot(xw, xw))))  # bandwidth only
    return min(candidates, key=lambda ab: _rss(ab, x, t))


def _rss(ab: tuple[float, float], x: np.ndarray, t: np.ndarray) -> float:
    return float(np.sum(((ab[0] + ab[1] * x - t) / t) ** 2))


def _segment_bounds(xs_sorted_unique: np.ndarray, splits: Sequence[int]) -> list[tuple[float, Optional[float]]]:
    """Segment i covers [from, to); a boundary sits at the geometric mean of the two sizes around a split."""
    edges = [float(np.sqrt(xs_sorted_unique[s - 1] * xs_sorted_unique[s])) if xs_sorted_unique[s - 1] > 0
             else float(xs_sorted_unique[s]) for s in splits]
    lows = [0.0] + edges
    highs: list[Optional[float]] = edges + [None]
    return list(zip(lows, highs))


def _assign(x: np.ndarray, bounds: list[tuple[float, Optional[float]]]) -> np.ndarray:
    edges = np.array([b[0] for b in bounds[1:]])
    return np.searchsorted(edges, x, side="right")


def detect_segments(x: np.ndarray, t: np.ndarray,
                    break_penalty: float = BREAK_PENALTY) -> list[tuple[float, Optional[float]]]:
    """Best split of the size axis into 1..MAX_SEGMENTS contiguous segments by BIC on relative residuals."""
    ux = np.unique(x)
    n = len(x)
    best = (np.inf, [])
    for m in range(1, MAX_SEGMENTS + 1):
        if len(ux) < m * MIN_SIZES_PER_SEGMENT:
            break
        for splits in _split_choices(len(ux), m):
            bounds = _segment_bounds(ux, splits)
            seg = _assign(x, bounds)
            rss = sum(_rss(fit_line(x[seg == i], t[seg == i]), x[seg == i], t[seg == i]) for i in range(m))
            penalty = (2 * m + break_penalty * (m - 1)) * np.log(n)  # alpha, beta per segment + breaks
            bic = n * np.log(max(rss / n, 1e-300)) + penalty
            if bic < best[0] - 1e-9:
                best = (bic, bounds)
    if not best[1]:
        return [(0.0, None)]
    return best[1]


def _split_choices(n_unique: int, m: int):
    """All increasing split indices s_1 < ... < s_{m-1} leaving >= MIN_SIZES_PER_SEGMENT sizes per segment."""
    k = MIN_SIZES_PER_SEGMENT

    def rec(start: int, left: int):
        if left == 0:
            yield []
            return
        for s in range(start + k, n_unique - left * k + 1):
            for rest in rec(s, left - 1):
                yield [s] + rest

    yield from rec(0, m - 1)


def fit_segments(x: np.ndarray, t: np.ndarray, bounds) -> list[tuple[float, float]]:
    seg = _assign(x, bounds)
    return [fit_line(x[seg == i], t[seg == i]) for i in range(len(bounds))]


def predict(x: np.ndarray, bounds, lines) -> np.ndarray:
    seg = _assign(np.asarray(x, dtype=float), bounds)
    alpha = np.array([lines[i][0] for i in seg])
    beta = np.array([lines[i][1] for i in seg])
    return alpha + beta * np.asarray(x, dtype=float)


def relative_errors(pred: np.ndarray, t: np.ndarray) -> np.ndarray:
    return np.abs(pred - t) / t


def quality(pred: np.ndarray, t: np.ndarray, held_out: str, n_train: int) -> FitQuality:
    """R² on log time (times span decades; raw R² would only see the largest) and relative errors."""
    rel = relative_errors(pred, t)
    lt, lp = np.log(t), np.log(np.maximum(pred, 1e-300))
    ss_tot = float(np.sum((lt - lt.mean()) ** 2))
    r2 = 1.0 - float(np.sum((lt - lp) ** 2)) / ss_tot if ss_tot > 0 and len(t) > 1 else None
    return FitQuality(held_out=held_out, n_train=n_train, n_test=len(t), r2=r2,
                      median_rel_error=float(np.median(rel)), max_rel_error=float(np.max(rel)))


def cross_validate(x: np.ndarray, t: np.ndarray, break_penalty: float = BREAK_PENALTY) -> Optional[FitQuality]:
    """Interleaved K-fold over distinct sizes (the smallest and largest are never held out, so this
    measures interpolation); segments are re-detected on every training fold."""
    ux = np.unique(x)
    interior = ux[1:-1]
    if len(interior) < 1 or len(ux) < 3:
        return None
    folds = min(CV_FOLDS, len(interior))
    preds, truth, n_train = [], [], []
    for f in range(folds):
        test_sizes = interior[f::folds]
        test = np.isin(x, test_sizes)
        bounds = detect_segments(x[~test], t[~test], break_penalty)
        lines = fit_segments(x[~test], t[~test], bounds)
        preds.append(predict(x[test], bounds, lines))
        truth.append(t[test])
        n_train.append(int((~test).sum()))
    return quality(np.concatenate(preds), np.concatenate(truth),
                   f"{folds}-fold over interior sizes", int(np.median(n_train)))


def sampling_noise(points: Sequence, draws: int = BOOTSTRAP_REPLICATES) -> Optional[float]:
    """Median over points of the median |redrawn statistic - statistic| / statistic, each redraw taking the
    point's per-call times with replacement: about the median error a perfect model would show against these
    points from their sampling noise alone (a drift between samples adds to it). None when no point has
    MIN_CALLS_FOR_WITHIN calls. It draws from its own fixed-seed generator, leaving a fit's other bootstrap
    draws as they were."""
    rng = np.random.default_rng(0)
    per_point = []
    for p in points:
        times = np.asarray(p.times_s, dtype=float)
        if len(times) < MIN_CALLS_FOR_WITHIN:
            continue
        drawn = STATISTICS[p.statistic](rng.choice(times, (draws, len(times))), axis=1)
        per_point.append(float(np.median(np.abs(drawn - p.t) / p.t)))
    return float(np.median(per_point)) if per_point else None


def with_noise(q: Optional[FitQuality], points: Sequence) -> Optional[FitQuality]:
    """q with the sampling noise of the points it was measured on."""
    return q.model_copy(update={"sample_noise_rel_error": sampling_noise(points)}) if q is not None else None


def bootstrap_estimate(value: float, replicates) -> Estimate:
    """value with the 95% percentile interval of its bootstrap replicates, widened to contain value
    (exact when there are none)."""
    if len(replicates) == 0:
        return Estimate.exact(value)
    lo, hi = np.percentile(replicates, [2.5, 97.5])
    return Estimate(value=value, low=float(min(lo, value)), high=float(max(hi, value)))


def _bandwidth(beta: float) -> float:
    return UNMEASURABLE_BANDWIDTH_BYTES_PER_S if beta <= 1.0 / UNMEASURABLE_BANDWIDTH_BYTES_PER_S else 1.0 / beta


def resample(points: Sequence, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """One bootstrap draw: (indices of points, their resampled median times).

    With >= MIN_CALLS_FOR_WITHIN raw per-call times in every sample, each sample keeps its place and its
    median is recomputed from its own times drawn with replacement (the measurement noise, as measured).
    With fewer, whole samples are drawn with replacement (pairs bootstrap). Why the within-sample draw:
    docs/calibration.md ("Confidence")."""
    if min(len(p.times_s) for p in points) >= MIN_CALLS_FOR_WITHIN:
        pick = np.arange(len(points))
    else:
        pick = rng.integers(0, len(points), len(points))
    # rng.choice(times, n) draws exactly rng.integers(0, n, n); the statistics are then taken per group of
    # equally long samples in one numpy call (the same values as one call per sample, a tenth of the time)
    draws = [(i, rng.integers(0, len(points[i].times_s), len(points[i].times_s))) for i in pick]
    drawn = np.empty(len(draws))
    groups: dict[tuple, list[int]] = {}
    for k, (i, idx) in enumerate(draws):
        groups.setdefault((len(idx), points[i].statistic), []).append(k)
    for (_, statistic), ks in groups.items():
        rows = np.array([np.asarray(points[draws[k][0]].times_s)[draws[k][1]] for k in ks])
        drawn[ks] = STATISTICS[statistic](rows, axis=1)
    return pick, np.maximum(drawn, MIN_TIME_S)


def bootstrap_lines(points: Sequence[Point], bounds, rng: np.random.Generator,
                    replicates: int = BOOTSTRAP_REPLICATES) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per segment: arrays of bootstrap alpha and beta; break points stay fixed."""
    x = np.array([p.x for p in points])
    seg = _assign(x, bounds)
    out = [([], []) for _ in bounds]
    for _ in range(replicates):
        pick, tb = resample(points, rng)
        xb, sb = x[pick], seg[pick]
        for i in range(len(bounds)):
            sel = sb == i
            if len(np.unique(xb[sel])) < 2:
                continue  # a replicate that lost a segment's size spread says nothing about its slope
            a, b = fit_line(xb[sel], tb[sel])
            out[i][0].append(a)
            out[i][1].append(b)
    return [(np.array(a), np.array(b)) for a, b in out]


def fit_alpha_beta(points: Sequence[Point], rng: np.random.Generator, sources: Sequence[str] = (),
                   break_penalty: float = BREAK_PENALTY) -> SegmentedFit:
    """Fit a SegmentedFit to samples (needs >= 2 distinct x; the caller checks and names what is missing)."""
    x = np.array([p.x for p in points], dtype=float)
    t = np.array([p.t for p in points], dtype=float)
    bounds = detect_segments(x, t, break_penalty)
    lines = fit_segments(x, t, bounds)
    boots = bootstrap_lines(points, bounds, rng)
    segments = []
    for (lo, hi), (alpha, beta), (ba, bb) in zip(bounds, lines, boots):
        bw = _bandwidth(beta)
        bw_reps = np.array([_bandwidth(b) for b in bb])
        segments.append(Segment(from_x=lo, to_x=hi, alpha_s=bootstrap_estimate(alpha, ba),
                                bandwidth_bytes_per_s=bootstrap_estimate(bw, bw_reps)))
    return SegmentedFit(segments=segments, sizes=[float(v) for v in np.unique(x)],
                        quality=with_noise(cross_validate(x, t, break_penalty), points), sources=list(sources))


def segment_for(fit: SegmentedFit, x: float) -> Segment:
    for seg in fit.segments:
        if x >= seg.from_x and (seg.to_x is None or x < seg.to_x):
            return seg
    return fit.segments[0] if x < fit.segments[0].from_x else fit.segments[-1]


def segment_time_s(seg: Segment, x: float, bound: Optional[str] = None) -> float:
    """alpha + x / bandwidth; bound "low" = fastest plausible (alpha low, bandwidth high), "high" = slowest."""
    return seg.alpha_s.at(bound) + x / seg.bandwidth_bytes_per_s.at(opposite(bound))
