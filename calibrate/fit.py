"""`fit_profile`: a profile's raw samples -> its coefficients (calibrate.coefficients schema).

Families: compute (op/pass/dtype), STREAM memory bandwidth (host|device/kernel, cache and DRAM regimes as
detected segments), host<->device copies (variant), collectives (op, group size, nodes) + per-link models.
Deterministic: every bootstrap and fold draws from a generator seeded by `seed` (each compute family from its
own, seeded by `seed` and its name, so families can be fitted side by side in worker processes).
"""
from __future__ import annotations

import multiprocessing
import os
import zlib
from collections import Counter, defaultdict
from typing import Optional, Sequence

import numpy as np

from calibrate import backends, shapes
from calibrate.alphabeta import MIN_TIME_S, STATISTICS, Point, fit_alpha_beta
from calibrate.coefficients import Coefficients, ComputeFit, MeasuredShape, SegmentedFit
from calibrate.collective_fit import COLLECTIVE_BENCHMARKS, derive_links, fit_collectives
from calibrate.fabric_fit import as_fabric, fit_fabric, uncontended_links
from calibrate.input_fit import fit_input
from calibrate.at_scale_fit import at_scale_fields, quietest_rounds, set_background_load
from calibrate.compute import LEARNERS, ComputePoint, fit_compute
from calibrate.domain import fit_domain
from calibrate.framework import fit_framework
from profiler.errors import UserError
from profiler.profile import Profile, Sample

COMPUTE_BENCHMARKS = shapes.FLOP_OPS + shapes.MEMORY_OPS


def memory_side(sample: Sample) -> str:
    return "host" if sample.device.startswith("cpu") else "device"


def _sizes_or_fail(what: str, points: list[Point]) -> None:
    sizes = {p.x for p in points}
    if len(sizes) < 2:
        raise UserError(f"{what} has samples for only one size ({next(iter(sizes)):.0f} bytes); need >= 2")


#: break-point cost for STREAM sweeps, whose medians repeat far closer than collectives' (calibrate.alphabeta.
#: BREAK_PENALTY): at 6 the L3-to-DRAM drop of triad was fitted as one line
#: (docs/decisions/2026-11-29-break-point-penalty.md)
STREAM_BREAK_PENALTY = 2.0


def fit_memory(samples: list[Sample], rng) -> dict[str, SegmentedFit]:
    """STREAM per kernel and side; x = bytes moved per call, so segment bandwidths are STREAM bandwidths."""
    groups: dict[str, list[Point]] = defaultdict(list)
    for s in samples:
        moved = s.bytes_moved if s.bytes_moved is not None else s.params.get("size_bytes")
        if moved is None:
            raise UserError(f"stream {s.variant} sample has neither bytes_moved nor params.size_bytes")
        groups[f"{memory_side(s)}/{s.variant}"].append(Point(float(moved), np.asarray(s.times_s, float)))
    out = {}
    for key, points in sorted(groups.items()):
        _sizes_or_fail(f"stream {key}", points)
        out[key] = fit_alpha_beta(points, rng, sources=[f"measured: {len(points)} samples"],
                                  break_penalty=STREAM_BREAK_PENALTY)
    return out


def fit_host_device(samples: list[Sample], rng) -> dict[str, SegmentedFit]:
    groups: dict[str, list[Point]] = defaultdict(list)
    for s in samples:
        size = s.params.get("size_bytes", s.bytes_moved)
        if size is None:
            raise UserError(f"host_device {s.variant} sample has no params.size_bytes")
        groups[s.variant].append(Point(float(size), np.asarray(s.times_s, float)))
    out = {}
    for key, points in sorted(groups.items()):
        _sizes_or_fail(f"host_device {key}", points)
        out[key] = fit_alpha_beta(points, rng, sources=[f"measured: {len(points)} samples"])
    return out


def dram_bandwidth(memory: dict[str, SegmentedFit], side: str) -> Optional[float]:
    """The large-size (DRAM) triad bandwidth of one side: the last detected segment."""
    fit = memory.get(f"{side}/triad")
    return fit.segments[-1].bandwidth_bytes_per_s.value if fit else None


def calibration_threads(samples: Sequence[Sample]) -> Optional[int]:
    """The thread count most of the compute samples were measured with (None without compute samples)."""
    counts = Counter(s.threads for s in samples if s.benchmark in COMPUTE_BENCHMARKS)
    return counts.most_common(1)[0][0] if counts else None


def compute_family(sample: Sample) -> str:
    """"op/pass/dtype" of a compute sample; a grouped convolution's op is conv2d_grouped (shapes.family_op)."""
    pass_ = shapes.VARIANT_PASS.get(sample.variant, sample.variant)
    return f"{shapes.family_op(sample.benchmark, sample.params)}/{pass_}/{shapes.canonical_dtype(sample.dtype)}"


#: the statistic a compute point's calls are summarised by: the mean, as a validation run's measured step time is
#: the mean of its steps (docs/decisions/2026-11-29-measured-time-mean.md), so that the machine's slow windows
#: weigh in the calibration as they weigh in the run (docs/decisions/2026-12-02-compute-points-mean.md)
COMPUTE_STATISTIC = "mean"


def pooled_per_shape(samples: Sequence[Sample]) -> list[Sample]:
    """One compute sample per (family, shape) holding the calls of every sample of that shape, in first-measured
    order. The compute section sweeps its shapes in several passes (profiler.cases.compute_passes); a `--shapes`
    shape that is also a grid shape is measured twice as well. One point per shape (two would put the same
    point on both sides of a cross-validation split), summarised over all its calls by COMPUTE_STATISTIC."""
    first: dict[tuple, Sample] = {}
    calls: dict[tuple, list[float]] = defaultdict(list)
    for s in samples:
        key = (compute_family(s), shapes.shape_key(s.params))
        first.setdefault(key, s)
        calls[key].extend(s.times_s)
    return [s if len(calls[key]) == len(s.times_s) else s.model_copy(update={"times_s": calls[key]})
            for key, s in first.items()]


def compute_points(samples: Sequence[Sample], backend: Optional[backends.Backend] = None) -> dict[str, list[ComputePoint]]:
    """The compute samples among `samples` as fit points, per family "op/pass/dtype" (one per shape:
    pooled_per_shape, summarised by COMPUTE_STATISTIC), with the work and features of `backend` (default: the one
    the samples ran on, calibrate.backends.for_profile)."""
    compute = [s for s in samples if s.benchmark in COMPUTE_BENCHMARKS]
    backend = backend or backends.for_profile(None, compute)
    groups: dict[str, list[ComputePoint]] = defaultdict(list)
    for s in pooled_per_shape(compute):
        key = compute_family(s)
        op, pass_, dtype = key.split("/")
        op = shapes.base_op(op)
        if (op, pass_) in shapes.ZERO_COST:
            continue  # costed as 0 (calibrate.shapes.ZERO_COST); nothing to fit
        if not backend.curve_point(s, op, pass_, dtype):
            continue  # a point of one of the backend's floors, not of the efficiency curve
        w = backend.for_sample(s).work(op, pass_, s.params, dtype)
        if w["work"] <= 0:
            raise UserError(f"{s.benchmark} {s.variant} sample with params {s.params} does no work (0 FLOPs/bytes)")
        groups[key].append(ComputePoint(w["work"], w["bytes"], tuple(w["features"]), np.asarray(s.times_s, float),
                                        dict(s.params), statistic=COMPUTE_STATISTIC))
    return groups


def _fit_family(key: str, points: list[ComputePoint], memory_bw: Optional[float], seed: int,
                learners: Sequence[str], backend: backends.Backend) -> ComputeFit:
    """One compute family with `backend`'s features, drawing its folds and bootstrap from a generator of its own:
    seeded by `seed` and the family's name, so a family's fit does not depend on which other families a profile
    has, nor on the order the families are fitted in."""
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng([seed, zlib.crc32(key.encode())])
    family, pass_, dtype = key.split("/")
    op = shapes.base_op(family)
    with threadpool_limits(limits=1, user_api="blas"):  # also in a worker process (see fit_profile)
        fit = fit_compute(points, backend.feature_names(op), shapes.op_kind(op), memory_bw, rng, learners=learners,
                          by_kernel=backend.errors_by_kernel)
    learner = "Gaussian process" if fit.efficiency.gp else "boosted trees"
    largest = max((b for p in points for b in shapes.benchmark_allocations(op, pass_, p.params, dtype)), default=0.0)
    return fit.model_copy(update={"sources": [f"measured: {len(points)} shapes",
                                              f"efficiency: {learner} (chosen by cross-validation)"],
                                  "domain": fit_domain(backend.feature_names(op), [p.features for p in points]),
                                  "largest_allocation_bytes": float(largest)})


def fit_compute_families(samples: list[Sample], memory_bw: Optional[float], seed: int = 0,
                         backend: Optional[backends.Backend] = None, learners: Sequence[str] = LEARNERS,
                         workers: Optional[int] = None) -> dict[str, ComputeFit]:
    """backend: whose work and features the fits take (default: the one the samples ran on); learners: the
    efficiency learners each family chooses from (calibrate.compute.LEARNERS); workers: processes fitting
    families side by side (default: one per core, at most one per family; 1 fits in this process). The result
    does not depend on `workers`."""
    backend = backend or backends.for_profile(None, [s for s in samples if s.benchmark in COMPUTE_BENCHMARKS])
    groups = sorted(compute_points(samples, backend).items())
    workers = min(workers or os.cpu_count() or 1, len(groups))
    if workers <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        return {key: _fit_family(key, points, memory_bw, seed, learners, backend) for key, points in groups}
    from concurrent.futures import ProcessPoolExecutor

    # forked workers inherit the loaded modules (a spawned one would import them again for seconds); the
    # largest families go first so that no worker is left with one at the end
    order = sorted(groups, key=lambda kv: -len(kv[1]))
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        futures = {key: pool.submit(_fit_family, key, points, memory_bw, seed, tuple(learners), backend)
                   for key, points in order}
        fits = {key: future.result() for key, future in futures.items()}
    return {key: fits[key] for key, _ in groups}


def measured_shapes(samples: list[Sample]) -> list[MeasuredShape]:
    """The time of every measured compute shape (COMPUTE_STATISTIC over all its calls: pooled_per_shape). ParaDL
    and most peers (Proteus, Echo, SimAI) cost a model from its own profiled layers; this keeps those measurements
    exact where the fitted efficiency model would smooth them (a 4-channel conv backward at
    64x64 runs at 2-5 GFLOP/s, a tenth of its neighbours', and was predicted 3x too fast)."""
    out = []
    for s in pooled_per_shape(samples):
        family = compute_family(s)
        op, pass_, _ = family.split("/")
        if (shapes.base_op(op), pass_) in shapes.ZERO_COST:
            continue
        params = {k: int(v) for k, v in s.params.items() if isinstance(v, (int, float)) and float(v).is_integer()}
        out.append(MeasuredShape(family=family, params=params,
                                 time_s=max(float(STATISTICS[COMPUTE_STATISTIC](s.times_s)), MIN_TIME_S)))
    return out


def fit_coefficients(profile: Profile, seed: int = 0) -> Coefficients:
    if not profile.samples:
        raise UserError("profile has no samples; nothing to fit (run `profiler calibrate` to measure, "
                        "or use a published profile as it is)")
    rng = np.random.default_rng(seed)
    by_kind: dict[str, list[Sample]] = defaultdict(list)
    ignored: dict[str, int] = defaultdict(int)
    for s in profile.samples:
        if s.benchmark in COMPUTE_BENCHMARKS:
            by_kind["compute"].append(s)
        elif s.benchmark in ("stream", "host_device", "framework", "input", "alloc", "storage"):
            by_kind[s.benchmark].append(s)
        elif s.benchmark in COLLECTIVE_BENCHMARKS:
            by_kind["collectives"].append(s)
        else:
            ignored[s.benchmark] += 1
    backend = backends.for_profile(profile.machine, profile.samples)
    device_is_host = backend.device_is_host
    memory = fit_memory(by_kind["stream"], rng)
    side = "host" if device_is_host else "device"
    compute = fit_compute_families(by_kind["compute"], dram_bandwidth(memory, side), seed, backend)
    collectives = fit_collectives(quietest_rounds(by_kind["collectives"]), rng)
    links, notes = derive_links(collectives)
    fabric = fit_fabric(collectives, rng)
    if fabric is not None:
        links = uncontended_links(links, collectives, fabric)
        notes.append(fabric.note)
    notes += [f"ignored {n} samples of unknown benchmark {name!r}" for name, n in sorted(ignored.items())]
    coefficients = Coefficients(compute=compute, memory=memory, host_device=fit_host_device(by_kind["host_device"], rng),
                                collectives=collectives, links=links, notes=notes, device_is_host=device_is_host,
                                fabric=as_fabric(fabric, rails_per_node=1) if fabric else None,
                                input_pipeline=fit_input(by_kind["input"], rng) if by_kind["input"] else None,
                                framework=fit_framework(by_kind["framework"], rng) if by_kind["framework"] else None,
                                host_threads=calibration_threads(by_kind["compute"]) if device_is_host else None,
                                measured_shapes=measured_shapes(by_kind["compute"]),
                                **backend.fit_fields(by_kind, profile.machine),
                                **at_scale_fields(by_kind, device_is_host))
    set_background_load(coefficients, by_kind["collectives"])
    if not (compute or memory or coefficients.host_device or collectives or coefficients.framework
            or coefficients.input_pipeline or coefficients.storage):
        raise UserError(f"profile has {len(profile.samples)} samples but none of a benchmark calibrate fits "
                        f"({', '.join(sorted(ignored))})")
    return coefficients


def fit_profile(profile: Profile, seed: int = 0) -> Profile:
    """A copy of `profile` with `coefficients` fitted from its samples (UserError names what is missing)."""
    import scipy.optimize  # noqa: F401 - loaded first: a BLAS library loaded later escapes the limit below
    import sklearn.tree  # noqa: F401
    from threadpoolctl import threadpool_limits  # installed with scikit-learn

    # the fits multiply matrices of at most a few hundred rows: a second BLAS thread only spins, and on a
    # machine whose cores are busy it made every L-BFGS step of the GP fits 3-4x slower
    with threadpool_limits(limits=1, user_api="blas"):
        coefficients = fit_coefficients(profile, seed)
    return profile.model_copy(update={"coefficients": coefficients.model_dump(mode="json", exclude_none=True)})
