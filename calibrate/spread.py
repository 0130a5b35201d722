"""Stragglers: the spread of a kind of time and the expected slowest of n draws of it (docs/method.md §25).

A synchronous step waits for its slowest rank and a collective for its slowest member: with r = t / median,
excess(n) = E[max of n draws of r] / E[r] - 1, E[max of n] = integral_0^1 Q(p) d(p^n). No normal is assumed: Q is
the measured distribution's empirical quantiles up to its 90th percentile and a generalized Pareto tail above it,
fitted by probability-weighted moments (Hosking & Wallis 1987); tests/calibrate/test_spread.py checks the
exponential tail's E[max] = sigma * H_n by hand. Measured kinds (`fit_spread`): "step" from the longest compute
samples' per-call times, "collective" from the collective samples; "device" (which one device cannot measure) and
the published profiles' defaults are sourced in DEFAULTS (docs/decisions/2026-12-06-stragglers.md).
"""
from __future__ import annotations

import math
from functools import lru_cache
from typing import Mapping, Optional, Sequence

import numpy as np

from calibrate.coefficients import SPREAD_KINDS, TailDistribution

#: the body's quantile points of a measured spread; the tail starts at the last one
BODY_PROBABILITIES = (0.05, 0.25, 0.5, 0.75, 0.9)
#: excesses over the threshold needed to fit the tail's shape (fewer: an exponential tail, xi = 0)
MIN_EXCESSES_FOR_SHAPE = 30
#: the tail shapes a fit may take: above 0.45 the maximum's mean barely exists (xi < 1) and is all noise
SHAPE_RANGE = (-0.5, 0.45)
#: per-call times a sample needs to say anything about its spread, and calls a measured kind needs in all (fewer:
#: no spread of that kind; a quick CPU calibration's few calls of cold, varying samples gave 20x-wide quantiles)
MIN_CALLS = 5
MIN_RATIOS = 200
#: share of the compute samples, longest median first, whose calls stand for a step ("step" kind)
STEP_SHARE = 0.25


# ----------------------------------------------------------------------------------------------- quantiles
def quantile(dist: TailDistribution, p: np.ndarray) -> np.ndarray:
    """Q(p) of the module docstring, vectorised over p in (0, 1); with an `upper_ratio` the quantile of the draws
    a screening keeps, Q(p F(upper)) (the distribution conditional on r <= upper)."""
    p = np.asarray(p, float)
    if dist.upper_ratio is not None:
        p = p * kept_share(dist)
    return _untruncated(dist, p)


def kept_share(dist: TailDistribution) -> float:
    """F(upper_ratio): the share of draws a screening at `upper_ratio` keeps (1 without one), by bisection on the
    monotone Q."""
    if dist.upper_ratio is None:
        return 1.0
    return _kept_share(_key(dist))


@lru_cache(maxsize=256)
def _kept_share(key: tuple) -> float:
    dist = _from_key(key)
    low, high = 0.0, 1.0 - 1e-15
    if float(_untruncated(dist, np.asarray([high]))[0]) <= dist.upper_ratio:
        return 1.0
    for _ in range(100):
        mid = 0.5 * (low + high)
        if float(_untruncated(dist, np.asarray([mid]))[0]) <= dist.upper_ratio:
            low = mid
        else:
            high = mid
    return low


def _untruncated(dist: TailDistribution, p: np.ndarray) -> np.ndarray:
    p = np.asarray(p, float)
    probs, ratios = np.asarray(dist.probabilities, float), np.asarray(dist.ratios, float)
    out = np.interp(p, probs, ratios)  # flat below the first point, linear between points
    last_p, u = probs[-1], ratios[-1]
    zeta = 1.0 - last_p
    tail = p > last_p
    if np.any(tail):
        s = np.clip((1.0 - p[tail]) / zeta, 1e-300, 1.0)
        xi, sigma = dist.tail_shape, dist.tail_scale
        out[tail] = u + (sigma * np.log(1.0 / s) if abs(xi) < 1e-9 else sigma / xi * (s ** (-xi) - 1.0))
    return out


def _grid() -> tuple[np.ndarray, np.ndarray]:
    """Cell edges in p: linear over [0, 0.9], then geometric in 1 - p down to 1e-15 (the tail's mass)."""
    linear = np.linspace(0.0, 0.9, 901)
    tail = 1.0 - np.logspace(-1, -15, 2801)
    edges = np.unique(np.concatenate([linear, tail, [1.0]]))
    return edges[:-1], edges[1:]


_LEFT, _RIGHT = _grid()
_MID = 0.5 * (_LEFT + _RIGHT)


def expected_max(dist: TailDistribution, n: int) -> float:
    """E[max of n i.i.d. draws] = integral Q(p) d(p^n), by the midpoint rule on a grid dense in the tail (the
    last cell, p > 1 - 1e-15, is left out: its share n * 1e-15 is below float precision for any n here)."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    weights = np.power(_RIGHT, n) - np.power(_LEFT, n)
    return float(np.dot(quantile(dist, _MID), weights))


def max_quantile(dist: TailDistribution, n: int, q: float) -> float:
    """The q-quantile of the max of n draws: Q(q^(1/n))."""
    return float(quantile(dist, np.asarray([q ** (1.0 / max(n, 1))]))[0])


def excess(dist: Optional[TailDistribution], n: int, bound: Optional[str] = None) -> float:
    """How much longer n synchronised ranks take than one, relative to one rank's mean (module docstring):
    E[max of n] / E[r] - 1 for bound None; for the interval's ends ("low", "high") the max's 10% and 90%
    quantiles over E[r] - 1 instead (which devices a job gets is a draw: an 80% interval around the mean).
    0 for n <= 1 or no distribution; never below 0. An assumed screening (`upper_ratio_assumed`) holds for the mean
    and the fast end; the slow end takes the distribution without it."""
    if dist is None or n <= 1:
        return 0.0
    if bound == "high" and dist.upper_ratio_assumed:
        dist = dist.model_copy(update={"upper_ratio": None, "upper_ratio_assumed": False})
    return _excess_cached(_key(dist), n, bound)


def _key(dist: TailDistribution) -> tuple:
    return (tuple(dist.probabilities), tuple(dist.ratios), dist.tail_shape, dist.tail_scale, dist.upper_ratio)


def _from_key(key: tuple) -> TailDistribution:
    probabilities, ratios, shape, scale, upper = key
    return TailDistribution(probabilities=list(probabilities), ratios=list(ratios), tail_shape=shape, tail_scale=scale,
                            upper_ratio=upper)


@lru_cache(maxsize=4096)
def _excess_cached(key: tuple, n: int, bound: Optional[str]) -> float:
    dist = _from_key(key)
    mean = expected_max(dist, 1)
    top = expected_max(dist, n) if bound is None else max_quantile(dist, n, {"low": 0.1, "high": 0.9}[bound])
    return max(0.0, top / mean - 1.0)


# ------------------------------------------------------------------------------------------------- fitting
def gpd_pwm(excesses: Sequence[float]) -> tuple[float, float]:
    """(xi, sigma) of a generalized Pareto distribution fitted to `excesses` (>= 0) by probability-weighted
    moments (Hosking & Wallis 1987, with their k = -xi): a0 = mean, a1 = E[X (1 - F)] estimated as
    sum_j x_(j) (m - j) / (m - 1) / m (ascending order), xi = 2 - a0 / (a0 - 2 a1), sigma = 2 a0 a1 / (a0 - 2 a1).
    xi is clamped to SHAPE_RANGE (sigma refitted to keep the mean); all-zero excesses give (0, 0)."""
    x = np.sort(np.asarray(excesses, float))
    m = len(x)
    a0 = float(x.mean()) if m else 0.0
    if m < 2 or a0 <= 0.0:
        return 0.0, max(a0, 0.0)
    a1 = float(np.sum(x * (m - np.arange(1, m + 1)) / (m - 1)) / m)
    denominator = a0 - 2.0 * a1
    if denominator <= 0.0:
        xi = SHAPE_RANGE[1]
    else:
        xi = 2.0 - a0 / denominator
    xi = float(min(max(xi, SHAPE_RANGE[0]), SHAPE_RANGE[1]))
    return xi, a0 * (1.0 - xi)  # a GPD's mean is sigma / (1 - xi)


def fit_ratios(ratios: Sequence[float], source: str) -> TailDistribution:
    """The TailDistribution of pooled ratios t / median (module docstring): empirical quantiles at
    BODY_PROBABILITIES, a GPD on the excesses over the last (exponential below MIN_EXCESSES_FOR_SHAPE)."""
    r = np.asarray(ratios, float)
    body = [float(v) for v in np.quantile(r, BODY_PROBABILITIES)]
    body = list(np.maximum.accumulate(body))
    u = body[-1]
    excesses = r[r > u] - u
    if len(excesses) >= MIN_EXCESSES_FOR_SHAPE:
        xi, sigma = gpd_pwm(excesses)
        how = f"generalized Pareto tail by probability-weighted moments on {len(excesses)} excesses"
    else:
        xi, sigma = 0.0, float(excesses.mean()) if len(excesses) else 0.0
        how = f"exponential tail on {len(excesses)} excesses (too few for a shape)"
    return TailDistribution(probabilities=list(BODY_PROBABILITIES), ratios=body, tail_shape=xi,
                            tail_scale=min(sigma, 100.0), samples=len(r),
                            sources=[f"measured: {source}; t / median of each sample's calls, pooled; {how} over the "
                                     f"{BODY_PROBABILITIES[-1]:.0%} quantile (calibrate.spread)"])


def sample_ratios(times_per_sample: Sequence[Sequence[float]]) -> list[float]:
    """Every call's t / median of its own sample, for the samples with at least MIN_CALLS calls."""
    out: list[float] = []
    for times in times_per_sample:
        t = np.asarray(times, float)
        if len(t) >= MIN_CALLS and np.median(t) > 0:
            out.extend((t / np.median(t)).tolist())
    return out


def fit_spread(compute_times: Sequence[Sequence[float]], collective_times: Sequence[Sequence[float]],
               on_gpu: bool) -> Optional[dict[str, TailDistribution]]:
    """The profile's spread per kind from its samples' per-call times (module docstring); on a GPU profile the
    sourced device-to-device spread is added ("device": one device cannot measure it). None when nothing fits."""
    out: dict[str, TailDistribution] = {}
    usable = [t for t in compute_times if len(t) >= MIN_CALLS]
    if usable:
        longest = sorted(usable, key=lambda t: float(np.median(t)), reverse=True)
        chosen = longest[:max(1, int(math.ceil(STEP_SHARE * len(longest))))]
        ratios = sample_ratios(chosen)
        if len(ratios) >= MIN_RATIOS:
            out["step"] = fit_ratios(ratios, f"{len(ratios)} calls of the {len(chosen)} longest compute samples")
    ratios = sample_ratios(collective_times)
    if len(ratios) >= MIN_RATIOS:
        out["collective"] = fit_ratios(ratios, f"{len(ratios)} collective calls")
    if on_gpu:
        out["device"] = DEFAULTS["device"]
    return out or None


# ------------------------------------------------------------------------------------------------ defaults
def _device_default() -> TailDistribution:
    """GPU-to-GPU speed spread, Sinha et al., "Not All GPUs Are Created Equal: Characterizing Variability in
    Large-Scale, Accelerator-Rich Systems", SC22 (arXiv 2208.11035): over >90% of the V100s of Summit, Vortex,
    Longhorn, Frontera and Corona, identical GPUs differ by 8% on average (max 22%), "with outliers up to 1.5X
    slower than the median GPU". Read here as: the body spans +-4% around the median (an 8% range, taken as the
    box plots' whiskers, p 0.35% .. 99.65% of a normal: sigma = 1.48%), and the slowest of Summit's 27,648 GPUs is
    expected at 1.5 medians, which an exponential tail above the 99.65% point (u = 1.04) meets with
    sigma = 0.46 / (ln(27,648 * 0.0035) + 0.5772) = 0.089."""
    sigma_body = 0.04 / 2.7
    probabilities = [0.0035, 0.02, 0.1, 0.25, 0.5, 0.75, 0.9, 0.98, 0.9965]
    from statistics import NormalDist
    ratios = [1.0 + sigma_body * NormalDist().inv_cdf(p) for p in probabilities]
    zeta = 1.0 - probabilities[-1]
    tail = (1.5 - ratios[-1]) / (math.log(27648 * zeta) + 0.5772156649)
    return TailDistribution(probabilities=probabilities, ratios=ratios, tail_shape=0.0, tail_scale=tail,
                            sources=["Sinha et al., SC22 (arXiv 2208.11035): 8% average (max 22%) performance "
                                     "variation among identical V100s, outliers up to 1.5x slower than the median "
                                     "GPU; body +-4% (normal, sigma 1.48%), exponential tail above p 99.65% fitted so "
                                     "the expected slowest of Summit's 27,648 GPUs is 1.5 medians (derived; "
                                     "calibrate.spread._device_default)"])


def _collective_default() -> TailDistribution:
    """Assumed: a collective's latency from one call to the next, exponential tail of 2% of the median above it
    (no published per-call distribution of NCCL collectives on a quiet cluster was found; nccl issue #361 shows
    rare 50-300x spikes on one misconfigured system, which we do not take as typical)."""
    return TailDistribution(probabilities=[0.5], ratios=[1.0], tail_shape=0.0, tail_scale=0.02,
                            sources=["assumed: exponential tail of 2% of the median above the median (no published "
                                     "per-call latency distribution of NCCL collectives found; NVIDIA/nccl#361 "
                                     "reports rare 50-300x spikes on one system, not taken as typical)"])


#: a GPU passes NVIDIA DCGM's targeted-stress diagnostic (levels 3 and 4) only if its sustained GEMM throughput
#: reaches target_perf_min_ratio = 0.95 of its SKU's target (DCGM source, TargetedStress plugin defaults)
SCREEN_MIN_RATIO = 0.95


def screened_device(device: TailDistribution, source: str) -> TailDistribution:
    """`device` as a screened system's jobs meet it: GPUs slower than 1 / SCREEN_MIN_RATIO of the median (the
    SKU's target taken as the median GPU) fail the operator's stress test and never reach a job."""
    return device.model_copy(update={
        "upper_ratio": 1.0 / SCREEN_MIN_RATIO,
        "sources": list(device.sources) + [
            f"screened: {source}; a GPU below {SCREEN_MIN_RATIO:.0%} of its SKU's GEMM target fails DCGM's targeted "
            f"stress test (target_perf_min_ratio {SCREEN_MIN_RATIO}), so the job's GPUs are the draws with r <= "
            f"{1.0 / SCREEN_MIN_RATIO:.4f} (calibrate.spread.screened_device)"]})


DEFAULTS: Mapping[str, TailDistribution] = {"device": _device_default(), "collective": _collective_default()}


def published_spread(screening: str = "unscreened", source: str = "") -> dict[str, TailDistribution]:
    """The spread the published reference profiles carry (no samples: DEFAULTS, every one with its source); on a
    "screened" system (its node record says so, with `source`) the device spread is screened_device's; where the
    screening is "unknown" (not stated) the screened one for the prediction and the unscreened one for the
    interval's slow end (`TailDistribution.upper_ratio_assumed`)."""
    out = {kind: DEFAULTS[kind] for kind in SPREAD_KINDS if kind in DEFAULTS}
    if screening == "screened" and "device" in out:
        out["device"] = screened_device(out["device"], source)
    elif screening == "unknown" and "device" in out:
        device = out["device"]
        out["device"] = screened_device(device, source).model_copy(update={
            "upper_ratio_assumed": True,
            "sources": list(device.sources) + [
                f"screening not stated: {source}; the prediction and the interval's fast end take a screened "
                f"system's draws (r <= {1.0 / SCREEN_MIN_RATIO:.4f}, DCGM's targeted stress), its slow end all draws"]})
    elif "device" in out and source:
        out["device"] = out["device"].model_copy(update={
            "sources": list(out["device"].sources) + [f"not screened: {source}"]})
    return out
