"""The coefficients schema: what `fit_profile` writes into `Profile.coefficients` and the cost model reads.

Every fitted number is an `Estimate` (value + 95% bootstrap interval); every fit carries its held-out
`FitQuality`. Published profiles use the same schema, with `sources` naming where each number comes from.
Models are stored as plain numbers (segments, tree arrays, a GP's training rows), never pickles, so YAML loads
them safely. Layout (keys of `Profile.coefficients`):
  compute:     "op/pass/dtype" -> ComputeFit      (e.g. "conv2d/bwd_weight/float16")
  memory:      "device|host/kernel" -> SegmentedFit  (STREAM copy/scale/add/triad/dot over bytes moved)
  host_device: variant -> SegmentedFit           (h2d_pinned, d2h_pinned, h2d_pageable, d2h_pageable)
  collectives: list[CollectiveFit]                (one per op, group size, node count: measured)
  links:       op -> {"intra"|"inter": LinkModel} (per-step latency + bus bandwidth, for any group size)
"""
from __future__ import annotations

import bisect
import math
from pathlib import Path
from typing import Annotated, Literal, Optional, Sequence

import numpy as np
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from calibrate.gpu_kernels import PARAMS as GPU_KERNEL_PARAMS
from calibrate.trees import Tree  # noqa: F401 - the schema of the efficiency fits' trees, also this module's name
from profiler.errors import UserError

COEFFICIENTS_VERSION = 1


class _Strict(BaseModel):
    """No unknown fields, and no NaN or infinity in any float: a profile may come from anyone."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


#: how far a value may sit outside its own interval, relative to the value: float rounding only
INTERVAL_SLACK = 1e-9


class Estimate(_Strict):
    """A coefficient with its 95% confidence interval (low <= value <= high, same unit as value)."""

    value: float
    low: float
    high: float

    @model_validator(mode="after")
    def _ordered(self):
        slack = INTERVAL_SLACK * abs(self.value)
        if not (self.low <= self.high and self.low - slack <= self.value <= self.high + slack):
            raise ValueError(f"needs low <= value <= high, got low={self.low:g}, value={self.value:g}, high={self.high:g}")
        return self

    @classmethod
    def exact(cls, value: float) -> "Estimate":
        return cls(value=value, low=value, high=value)

    def at(self, bound: Optional[str]) -> float:
        return {None: self.value, "low": self.low, "high": self.high}[bound]


def opposite(bound: Optional[str]) -> Optional[str]:
    """The end of a rate's interval (a bandwidth, an efficiency) that gives a time at `bound`: the fastest plausible
    time ("low") divides by the rate's "high" end, and the reverse; None (the fitted values) stays None."""
    return {None: None, "low": "high", "high": "low"}[bound]


def _bounded_below(minimum: float, strict: bool):
    def check(estimate: Estimate) -> Estimate:
        lowest = min(estimate.value, estimate.low)
        if lowest < minimum or (strict and lowest <= minimum):
            raise ValueError(f"must be {'>' if strict else '>='} {minimum:g} (a time or rate cannot be "
                             f"{'zero or ' if strict else ''}negative), got low={estimate.low:g}, value={estimate.value:g}")
        return estimate
    return check


#: an Estimate of a duration that may be zero (latencies, launch and per-layer times)
TimeEstimate = Annotated[Estimate, AfterValidator(_bounded_below(0.0, strict=False))]
#: an Estimate of a strictly positive quantity (bandwidths, scale factors)
PositiveEstimate = Annotated[Estimate, AfterValidator(_bounded_below(0.0, strict=True))]
PositiveFloat = Annotated[float, Field(gt=0)]


class FitQuality(_Strict):
    """Goodness of fit on samples the fit did not see (`held_out` says which). sample_noise_rel_error: the
    median error a perfect model would still show, because each sample's statistic is itself uncertain
    (calibrate.alphabeta.sampling_noise). It is a lower bound: it sees the spread of a sample's own calls,
    not a drift between samples (repeated passes over the quick compute shapes differ by a median 2-6% on
    the 2-core VM, where this reads 0.1-1.3%). A held-out error near it is limited by the measurements."""

    held_out: str
    n_train: int = Field(ge=0)
    n_test: int = Field(ge=0)
    r2: Optional[float] = None
    median_rel_error: float = Field(ge=0)
    max_rel_error: float = Field(ge=0)
    sample_noise_rel_error: Optional[float] = Field(default=None, ge=0)
    #: for a family with shapes in several kernel regimes its backend tells apart: the held-out median error of
    #: each regime's shapes (calibrate.backends.Backend.errors_by_kernel)
    by_kernel: Optional[dict[str, float]] = None


class Segment(_Strict):
    """Hockney line T = alpha + x / bandwidth on from_x <= x < to_x (x = message bytes or bytes moved).

    For collectives the line is T = alpha + x * bus_factor(op, p) / bandwidth, so `bandwidth` is the bus
    bandwidth of nccl-tests (its doc/PERFORMANCE.md) and lines of different group sizes compare directly."""

    from_x: float = Field(ge=0)
    to_x: Optional[float] = None
    alpha_s: TimeEstimate
    bandwidth_bytes_per_s: PositiveEstimate

    @model_validator(mode="after")
    def _range(self):
        if self.to_x is not None and not self.to_x > self.from_x:
            raise ValueError(f"to_x ({self.to_x:g}) must be larger than from_x ({self.from_x:g})")
        return self


class SegmentedFit(_Strict):
    """A piecewise alpha-beta fit; break points were detected from the samples (BIC), not configured."""

    segments: list[Segment] = Field(min_length=1)
    sizes: list[Annotated[float, Field(ge=0)]] = Field(default_factory=list)
    quality: Optional[FitQuality] = None
    sources: list[str] = Field(default_factory=list)


class CollectiveFit(SegmentedFit):
    op: str
    variant: str = "throughput"
    group_size: int = Field(ge=2)
    nodes: int = Field(ge=1)


class LinkModel(_Strict):
    """Per-link parameters of one collective at one level (intra-node or inter-node), docs/method.md §6:
    alpha(p) = base_latency + intra_steps * step_latency (+ inter_steps * inter_step_latency), and
    T = alpha(p) + S * bus_factor(op, p) / bus_bandwidth (+ min(that bandwidth time, fill_latency) when the
    link has a fill: the start-up of the network's bandwidth regime, predictor.published.nccl)."""

    base_latency_s: TimeEstimate
    step_latency_s: TimeEstimate
    inter_step_latency_s: Optional[TimeEstimate] = None
    fill_latency_s: Optional[TimeEstimate] = None
    bus_bandwidth_bytes_per_s: PositiveEstimate
    #: group size -> bus bandwidth of a group of that many devices inside one node whose devices are not all linked
    #: alike (DGX-1's hybrid cube mesh: a pair may share one NVLink); other sizes take bus_bandwidth_bytes_per_s
    bus_bandwidth_by_group: dict[Annotated[int, Field(ge=2)], PositiveEstimate] = Field(default_factory=dict)
    measured_group_sizes: list[Annotated[int, Field(ge=1)]] = Field(default_factory=list)
    sources: list[str] = Field(default_factory=list)

    def bandwidth_for(self, group_size: int) -> Estimate:
        """The bus bandwidth a group of `group_size` devices gets on this link."""
        return self.bus_bandwidth_by_group.get(group_size, self.bus_bandwidth_bytes_per_s)


class Fabric(_Strict):
    """The network above the nodes (calibrate.fabric): NICs per node that NCCL uses, how many nodes share a
    leaf switch (None: one non-blocking switch, or unknown) and the leaf's downlink:uplink ratio."""

    rails_per_node: int = Field(ge=1)
    nodes_per_leaf: Optional[int] = Field(default=None, ge=1)
    oversubscription: float = Field(default=1.0, ge=1.0, le=64.0)
    #: the share of the uplinks' capacity other jobs take (None: not known; calibrate.fabric, docs/method.md §6)
    background_load: Optional["BackgroundLoad"] = None
    sources: list[str] = Field(default_factory=list)


class BackgroundLoad(_Strict):
    """The share in [0, 1) of the leaf switches' uplink capacity that other jobs on a shared fabric take, as a
    distribution over time: its `quiet`, `typical` and `busy` figures are its 5th, 50th and 95th percentiles
    (calibrate.fabric.load_at reads any percentile between them). `rounds`: repeated inter-leaf collective rounds
    behind the figures (`profiler calibrate --repeat-over`), 0 for a sourced or assumed default."""

    quiet: float = Field(ge=0.0, lt=1.0)
    typical: float = Field(ge=0.0, lt=1.0)
    busy: float = Field(ge=0.0, le=0.95)
    rounds: int = Field(default=0, ge=0)
    sources: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _ordered(self):
        if not self.quiet <= self.typical <= self.busy:
            raise ValueError(f"needs quiet <= typical <= busy, got {self.quiet}, {self.typical}, {self.busy}")
        return self


Fabric.model_rebuild()


#: the kinds of time whose spread a profile may describe (calibrate.spread): a device's speed against the other
#: devices of its kind (static), a step's compute time from one step to the next, a collective's latency
SPREAD_KINDS = ("device", "step", "collective")


class TailDistribution(_Strict):
    """The distribution of r = t / median of one kind of time (calibrate.spread, docs/method.md §25): its quantile
    function runs through (probabilities[i], ratios[i]), linear between them and flat below the first; beyond the
    last point a generalized Pareto tail of shape `tail_shape` (xi) and scale `tail_scale` (sigma, in medians).
    `samples`: the measured per-call times behind it, 0 for a sourced or assumed default. `upper_ratio`: draws
    above it never reach a job (a screening test removes them): the distribution is the one conditional on
    r <= upper_ratio; None: no screening. `upper_ratio_assumed`: the screening is not stated, only assumed: the
    prediction and the interval's fast end take the screened distribution, its slow end the unscreened one (an
    unknown is a range, as for storage; docs/method.md §25)."""

    probabilities: list[Annotated[float, Field(gt=0.0, lt=1.0)]] = Field(min_length=1, max_length=64)
    ratios: list[Annotated[float, Field(gt=0.0, le=1e3)]] = Field(min_length=1, max_length=64)
    tail_shape: float = Field(default=0.0, ge=-0.5, le=0.45)
    tail_scale: float = Field(default=0.0, ge=0.0, le=100.0)
    upper_ratio: Optional[float] = Field(default=None, gt=0.0, le=1e3)
    upper_ratio_assumed: bool = False
    samples: int = Field(default=0, ge=0)
    sources: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _monotone(self):
        p, r = self.probabilities, self.ratios
        if len(p) != len(r):
            raise ValueError(f"{len(p)} probabilities for {len(r)} ratios")
        if any(b <= a for a, b in zip(p, p[1:])) or any(b < a for a, b in zip(r, r[1:])):
            raise ValueError("probabilities must increase and ratios must not decrease")
        if self.upper_ratio is not None and self.upper_ratio <= r[0]:
            raise ValueError(f"upper_ratio {self.upper_ratio} must exceed the first ratio {r[0]}")
        if self.upper_ratio_assumed and self.upper_ratio is None:
            raise ValueError("upper_ratio_assumed needs an upper_ratio")
        return self


class StorageFit(_Strict):
    """Where a job reads its training samples from, as every node of it sees it (calibrate.storage_fit,
    docs/method.md §19a). A figure left None is unknown: the predictor then reports the storage term as a range.

    aggregate_read_bytes_per_s and metadata_ops_per_s are shared by every node of a job (a parallel file system's
    servers); node_* are one node's reads of that file system (its client and NIC) with `readers` readers, cold
    (not in the page cache); page_cache_bytes_per_s is a warm re-read; local_* describe node-local staging
    storage (NVMe)."""

    filesystem: str = "unknown"
    shared: Optional[bool] = None
    aggregate_read_bytes_per_s: Optional[PositiveEstimate] = None
    metadata_ops_per_s: Optional[PositiveEstimate] = None
    node_read_bytes_per_s: Optional[PositiveEstimate] = None
    node_files_per_s: Optional[PositiveEstimate] = None
    page_cache_bytes_per_s: Optional[PositiveEstimate] = None
    local_read_bytes_per_s: Optional[PositiveEstimate] = None
    local_capacity_bytes: Optional[float] = Field(default=None, gt=0)
    readers: Optional[int] = Field(default=None, ge=1)
    sources: list[str] = Field(default_factory=list)


class Execution(_Strict):
    """How this machine runs concurrent work: the share of communication overlapped with backward that is
    really hidden (predictor.overlap), in (0, 1]."""

    overlap_efficiency: Estimate
    sources: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _in_unit_interval(self):
        e = self.overlap_efficiency
        if not all(0.0 < v <= 1.0 for v in (e.value, e.low, e.high)):
            raise ValueError("overlap efficiency must lie in (0, 1]")
        return self


class InputPipelineFit(_Strict):
    """Host time to load one training sample (JPEG decode + augmentation, profiler.bench_input), in
    core-seconds: a node of C cores feeds its devices S samples in S * per_sample_core_s / C seconds."""

    per_sample_core_s: Estimate
    sources: list[str] = Field(default_factory=list)


class ModelError(_Strict):
    """How far the whole model's predictions fall from measured times on runs it did not see: per key
    ("strategy/*" or "*"; "strategy/framework" is read when a profile has it) the (low, high) bounds of
    log(measured / predicted) that hold the `coverage` share of held-out rows (predictor.model_error: -q, q). predictor.api.predict widens a prediction's interval
    to [t * exp(low), t * exp(high)] at least."""

    coverage: float = Field(gt=0.0, lt=1.0)
    quantiles: dict[str, tuple[float, float]]
    rows: int = Field(ge=1)
    sources: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _ordered(self):
        for key, (low, high) in self.quantiles.items():
            if not (-10.0 < low <= high < 10.0):
                raise ValueError(f"quantiles[{key}] must be finite with low <= high, got ({low}, {high})")
        return self

    def ratio_bounds(self, strategy: str, framework: str) -> Optional[tuple[float, float]]:
        """(exp(low), exp(high)) for the most specific key present, else None."""
        for key in (f"{strategy}/{framework}", f"{strategy}/*", "*"):
            if key in self.quantiles:
                low, high = self.quantiles[key]
                return float(np.exp(low)), float(np.exp(high))
        return None


class GaussianProcess(_Strict):
    """The posterior mean of a Gaussian process regression with an anisotropic RBF kernel, as plain numbers:
    gp(x) = y_mean + y_std * sum_i alpha_i * amplitude * exp(-|(x - train_x_i) / length_scales|^2 / 2)
    (sklearn's GaussianProcessRegressor with normalize_y; its white-noise term only enters alpha)."""

    train_x: list[list[float]] = Field(min_length=1)
    alpha: list[float]
    length_scales: list[PositiveFloat] = Field(min_length=1)
    amplitude: float = Field(gt=0)
    y_mean: float
    y_std: float = Field(gt=0)
    _scaled: Optional[tuple] = PrivateAttr(default=None)  # numpy views, built on first use

    def mean_at(self, row) -> float:
        """gp(row): one shape at a time, as the predictor costs them."""
        if self._scaled is None:
            scales = np.asarray(self.length_scales, float)
            self._scaled = (np.asarray(self.train_x, float) / scales, np.asarray(self.alpha, float), scales)
        train, alpha, scales = self._scaled
        d = train - np.asarray(row, float) / scales
        return self.y_mean + self.y_std * float(alpha @ (self.amplitude * np.exp(-0.5 * np.einsum("ij,ij->i", d, d))))

    @model_validator(mode="after")
    def _consistent(self):
        if len(self.alpha) != len(self.train_x):
            raise ValueError(f"alpha has {len(self.alpha)} values for {len(self.train_x)} training rows")
        if any(len(row) != len(self.length_scales) for row in self.train_x):
            raise ValueError(f"every training row needs {len(self.length_scales)} values (one per length scale)")
        return self


class EfficiencyGrid(_Strict):
    """A measured log(efficiency) table over some of a fit's features (log10 of a GEMM's M, N, K in a published
    profile built from OpenXLA's measured products: calibrate.xla_matmul), read by multilinear interpolation between
    its knots and held at its edges beyond them (docs/method.md §3). `values` run over the last axis fastest."""

    axes: list[str] = Field(min_length=1)
    knots: list[list[float]] = Field(min_length=1)
    values: list[float] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self):
        if len(self.knots) != len(self.axes):
            raise ValueError(f"{len(self.knots)} knot lists for {len(self.axes)} axes")
        if len(set(self.axes)) != len(self.axes):
            raise ValueError("axes must be distinct features")
        for axis, knots in zip(self.axes, self.knots):
            if len(knots) < 2 or any(not math.isfinite(k) for k in knots) or knots != sorted(set(knots)):
                raise ValueError(f"axis {axis}: knots must be at least 2 finite values, strictly rising")
        cells = math.prod(len(k) for k in self.knots)
        if len(self.values) != cells:
            raise ValueError(f"{len(self.values)} values for {cells} knot combinations")
        if any(not math.isfinite(v) or v > 0 for v in self.values):
            raise ValueError("values are log(efficiency): finite and at most 0")
        return self

    def value_at(self, point: Sequence[float]) -> float:
        """The interpolated log(efficiency) at `point` (one value per axis)."""
        corners = [(0, 1.0)]  # (flat index, weight) over the cells around the point
        for knots, x in zip(self.knots, point):
            x = min(max(x, knots[0]), knots[-1])
            i = min(bisect.bisect_right(knots, x) - 1, len(knots) - 2)
            t = (x - knots[i]) / (knots[i + 1] - knots[i])
            corners = [(flat * len(knots) + i + step, w * share) for flat, w in corners
                       for step, share in ((0, 1.0 - t), (1, t)) if share]
        return sum(w * self.values[flat] for flat, w in corners)


#: the lowest log(efficiency) an efficiency model may reach (e^-100 = 4e-44 of peak is no kernel; the fitted
#: models reach -27 at worst), over log work 0..LOG_WORK_MAX (ln 2.5e30: more FLOPs or bytes than any call)
MIN_LOG_EFFICIENCY = -100.0
LOG_WORK_MAX = 70.0


class EfficiencyModel(_Strict):
    """log(efficiency) = init + slope * features[0] + learning_rate * sum(tree(features)) + gp(features)
    + grid(features), clipped to <= 0.

    The linear term in log work carries the trend beyond the sweep (trees and a GP alone extrapolate flat:
    smaller split shapes would keep the efficiency of the smallest shape measured); boosted trees or a
    Gaussian process (calibrate.compute.LEARNERS, whichever cross-validates better) fit the rest.
    A published profile has none of them, efficiency = exp(init) for every shape, except its matrix products where a
    GEMM sweep by size is published (one tree on log FLOPs: calibrate.published.gemm_efficiency) or a table of
    measured products by M, N and K (a grid: calibrate.published.gemm_grid_efficiency)."""

    features: list[str]
    init: float
    slope: float = 0.0
    learning_rate: float = Field(default=1.0, gt=0)
    trees: list[Tree] = Field(default_factory=list)
    gp: Optional[GaussianProcess] = None
    grid: Optional[EfficiencyGrid] = None
    _grid_axes: Optional[tuple[int, ...]] = PrivateAttr(default=None)  # the grid's axes as indices into features

    @model_validator(mode="after")
    def _reachable_efficiency(self):
        """init, slope, trees and grid must not be able to take log(efficiency) below MIN_LOG_EFFICIENCY anywhere on
        log work 0..LOG_WORK_MAX: a profile whose efficiency can underflow to 0 divides by zero."""
        trees = self.learning_rate * sum(max(map(abs, t.value)) for t in self.trees)
        grid = min(self.grid.values) if self.grid else 0.0
        lowest = self.init + min(0.0, self.slope * LOG_WORK_MAX) - trees + grid
        if lowest < MIN_LOG_EFFICIENCY:
            raise ValueError(f"init {self.init:g}, slope {self.slope:g}, trees and grid reach log(efficiency) "
                             f"{lowest:.4g}; at least {MIN_LOG_EFFICIENCY:g} (e^{MIN_LOG_EFFICIENCY:g} of peak) is accepted")
        return self

    @model_validator(mode="after")
    def _gp_matches_features(self):
        if self.gp is not None and len(self.gp.length_scales) != len(self.features):
            raise ValueError(f"gp has {len(self.gp.length_scales)} length scales for {len(self.features)} features")
        if (self.trees or self.gp is not None or self.slope) and not self.features:
            raise ValueError("trees, a gp or a slope need a non-empty features list")
        for k, tree in enumerate(self.trees):
            outside = sorted(f for f in tree.split_features() if not 0 <= f < len(self.features))
            if outside:
                raise ValueError(f"trees[{k}] splits on feature {outside[0]}, outside the {len(self.features)} features")
        if self.grid is not None:
            unknown = [axis for axis in self.grid.axes if axis not in self.features]
            if unknown:
                raise ValueError(f"grid axis {unknown[0]} is not one of the features ({', '.join(self.features)})")
            self._grid_axes = tuple(self.features.index(axis) for axis in self.grid.axes)
        return self

    def grid_at(self, row: Sequence[float]) -> float:
        """The grid's log(efficiency) at a feature row (0 without a grid)."""
        if self.grid is None:
            return 0.0
        return self.grid.value_at([row[i] for i in self._grid_axes])


class FitDomain(_Strict):
    """Where a compute fit was measured (calibrate.domain): per feature the lowest and highest value of its
    samples, and each sample's point in those features (log10 units), so that a call far from every measured
    shape can be told apart from one between two of them."""

    features: list[str]
    low: list[float]
    high: list[float]
    points: list[list[float]] = Field(default_factory=list)

    @model_validator(mode="after")
    def _lengths_agree(self):
        n = len(self.features)
        if len(self.low) != n or len(self.high) != n or any(len(p) != n for p in self.points):
            raise ValueError(f"low, high and every point must have one value per feature ({n})")
        return self


class ComputeFit(_Strict):
    """time(shape) = time_scale * (launch + max(work / (peak * efficiency(shape)), bytes / memory_bw)).

    work is FLOPs (kind "flops": gemm, conv; as its backend's kernels execute them, calibrate.backends)
    or bytes moved (kind "bytes": memory-bound ops).
    time_scale is 1 with a bootstrap interval of the fit's overall level (for at_bound)."""

    kind: Literal["flops", "bytes"]
    launch_s: TimeEstimate
    peak_per_s: float = Field(gt=0)
    memory_bandwidth_bytes_per_s: Optional[float] = Field(default=None, gt=0)
    efficiency: EfficiencyModel
    time_scale: PositiveEstimate
    quality: Optional[FitQuality] = None
    extrapolation: Optional[FitQuality] = None
    domain: Optional[FitDomain] = None  # None: not measured on this machine (a published profile)
    #: the largest tensor one of the family's benchmark calls allocated (calibrate.shapes.benchmark_allocations);
    #: None: not recorded (a published profile, or one fitted before it was)
    largest_allocation_bytes: Optional[float] = Field(default=None, ge=0)
    n_samples: int = Field(default=0, ge=0)
    sources: list[str] = Field(default_factory=list)


class FrameworkFit(_Strict):
    """Eager framework time per layer on top of its kernels (calibrate.framework): the forward module
    call with autograd recording, and one backward autograd node, warm; and what a layer pays on top when the
    layer before it ran another kernel, as in a training step."""

    forward_per_layer_s: TimeEstimate
    backward_per_layer_s: TimeEstimate
    optimizer_step_s: Optional[TimeEstimate] = None  # optimizer step + zero_grad: fixed per step
    optimizer_per_tensor_s: Optional[TimeEstimate] = None  # ... and per parameter tensor
    # a layer's extra time when the layer before it ran another kernel (its code is cold), per pass
    cold_forward_per_layer_s: Optional[TimeEstimate] = None
    cold_backward_per_layer_s: Optional[TimeEstimate] = None
    sources: list[str] = Field(default_factory=list)


class HostDispatch(_Strict):
    """Host time to issue one layer's forward and one layer's backward on a GPU: the module call, autograd and the
    dispatch and launch of its kernels, timed where the kernels are too small to hide it (the framework benchmark's
    chains of tiny layers). The host queues kernels ahead of the GPU, so a layer pass takes its kernels' time or this,
    whichever is longer (predictor.layercost; docs/method.md §3d)."""

    forward_per_layer_s: TimeEstimate
    backward_per_layer_s: TimeEstimate
    # a grouped expert linear's per-expert GEMM launch on top of its kernels (the framework runs one library GEMM per
    # expert; dropless MoE is not graph-captured): per GEMM, forward and each backward pass (docs/method.md §3c)
    per_expert_gemm_s: Optional[TimeEstimate] = None
    per_expert_gemm_fp8_s: Optional[TimeEstimate] = None  # the same for an FP8 plan's expert GEMMs
    sources: list[str] = Field(default_factory=list)


class FirstTouchFit(_Strict):
    """What a fresh host tensor of at least `threshold_bytes` costs a training step on top of its kernel
    (calibrate.backends.host): glibc maps it afresh and the kernel faults its pages in on first write."""

    s_per_byte: Annotated[float, Field(ge=0)]
    threshold_bytes: Annotated[float, Field(gt=0)]
    sources: list[str] = Field(default_factory=list)


class ColumnFloor(_Strict):
    """Seconds per column-buffer element of a CPU 3-D weight gradient the host runs as a GEMM over a column buffer
    (calibrate.backends.host.column_floor_s): floor = N * C * prod(kernel) * output positions * s_per_column,
    from `samples` calibration samples in that regime."""

    s_per_column: Annotated[float, Field(ge=0)]
    samples: Annotated[int, Field(ge=1)]
    sources: list[str] = Field(default_factory=list)


class Im2colFloor(_Strict):
    """The floor of a CPU convolution pass the host runs as a column buffer + one GEMM per sample and output depth
    slice, each reading the whole weight (calibrate.backends.host.weight_floor_s): floor = W * s_per_byte[pass](W)
    + N * S * W * per_sample_s_per_byte[pass](W) for a weight of W bytes, N samples and S GEMMs per sample;
    measured at `weight_bytes` and interpolated in log W between them (held beyond the ends)."""

    weight_bytes: list[Annotated[float, Field(gt=0)]] = Field(min_length=1)
    s_per_byte: dict[Literal["fwd", "bwd_data"], list[Annotated[float, Field(ge=0)]]]
    per_sample_s_per_byte: dict[Literal["fwd", "bwd_data"], list[Annotated[float, Field(ge=0)]]]

    @model_validator(mode="after")
    def _aligned(self):
        n = len(self.weight_bytes)
        if list(self.weight_bytes) != sorted(self.weight_bytes):
            raise ValueError("weight_bytes must be ascending")
        if any(len(v) != n for table in (self.s_per_byte, self.per_sample_s_per_byte) for v in table.values()):
            raise ValueError("every per-byte list needs one value per weight_bytes entry")
        return self


class ConvWeightFit(_Strict):
    """A CPU convolution's time floor from its weight (calibrate.backends.host.weight_floor_s): the host's
    library reorders the weight on every call and accumulates its gradient sample by sample, so a wide
    convolution on a small map takes floor = W * s_per_byte[pass](W) + (weight gradient) N * W *
    per_sample_s_per_byte(W) seconds for a weight of W bytes and N samples, whatever its arithmetic; per-byte
    figures are measured at `weight_bytes` and interpolated in log W between them (held beyond the ends)."""

    weight_bytes: list[Annotated[float, Field(gt=0)]] = Field(min_length=1)
    s_per_byte: dict[Literal["fwd", "bwd_data", "bwd_weight"], list[Annotated[float, Field(ge=0)]]]
    per_sample_s_per_byte: list[Annotated[float, Field(ge=0)]]
    #: the passes run as a column buffer + GEMM (a kernel wider than its map); None: not measured
    im2col: Optional[Im2colFloor] = None
    sources: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _aligned(self):
        n = len(self.weight_bytes)
        if list(self.weight_bytes) != sorted(self.weight_bytes):
            raise ValueError("weight_bytes must be ascending")
        if any(len(v) != n for v in self.s_per_byte.values()) or len(self.per_sample_s_per_byte) != n:
            raise ValueError("every per-byte list needs one value per weight_bytes entry")
        return self


class MeasuredShape(_Strict):
    """One compute call measured as it is: the median per-call time of a sample, used as the cost of exactly
    that (family, params) instead of the fitted model (calibrate.fit.measured_shapes)."""

    family: str  # "op/pass/dtype", as the compute fits are keyed
    params: dict[str, Annotated[int, Field(ge=0)]]
    time_s: float = Field(gt=0)


class GpuKernelMode(_Strict):
    """The GPU kernel model's constants for one dtype (calibrate.gpu_kernels.PARAMS: exactly those names) and the
    math mode they were fitted in (calibrate.gpu_specs.math_mode), with the held-out median accuracy per family
    (calibrate.gpu_kernel_fit.leave_one_group_out; None where the samples name one application only)."""

    math: str
    tensor_cores: bool
    peak_flops_per_s: PositiveFloat
    fallback_flops_per_s: PositiveFloat
    values: dict[str, PositiveFloat]
    #: the GEMMs' and the convolutions' peaks over peak_flops_per_s (calibrate.gpu_specs.split_math: FP16 calls in
    #: FP32 arithmetic beside true-half ones)
    gemm_peak_scale: PositiveFloat = 1.0
    conv_peak_scale: PositiveFloat = 1.0
    samples: int = Field(ge=1)
    held_out_median_accuracy: Optional[dict[str, float]] = None

    @model_validator(mode="after")
    def _known(self):
        if set(self.values) != set(GPU_KERNEL_PARAMS):
            missing = sorted(set(GPU_KERNEL_PARAMS) - set(self.values))
            unknown = sorted(set(self.values) - set(GPU_KERNEL_PARAMS))
            raise ValueError(f"values must name exactly the model's constants (missing {missing}, unknown {unknown})")
        return self


class GpuKernels(_Strict):
    """A GPU's kernel model (calibrate.gpu_kernels): its SMs and DRAM bandwidth, whether the samples ran with
    the convolution library's algorithm search, the fitted constants per dtype and the ops it costs."""

    gpu: str
    sms: int = Field(ge=1)
    memory_bytes_per_s: PositiveFloat
    search: bool = True
    modes: dict[str, GpuKernelMode] = Field(min_length=1)
    #: the ops it costs (None: every one it covers); a published profile's borrowed model costs its 3-D
    #: convolutions only (calibrate.measured_kernels.conv3d_kernels)
    ops: Optional[list[Literal["gemm", "linear", "conv2d", "conv3d"]]] = None
    sources: list[str] = Field(default_factory=list)


class Coefficients(_Strict):
    version: Literal[1] = COEFFICIENTS_VERSION
    compute: dict[str, ComputeFit] = Field(default_factory=dict)
    memory: dict[str, SegmentedFit] = Field(default_factory=dict)
    host_device: dict[str, SegmentedFit] = Field(default_factory=dict)
    collectives: list[CollectiveFit] = Field(default_factory=list)
    links: dict[str, dict[Literal["intra", "inter"], LinkModel]] = Field(default_factory=dict)
    framework: Optional[FrameworkFit] = None
    #: a GPU profile's host time per layer pass (None: not known, no floor)
    host_dispatch: Optional[HostDispatch] = None
    fabric: Optional[Fabric] = None
    execution: Optional[Execution] = None
    model_error: Optional[ModelError] = None
    #: published profiles: time of each software stack's kernels over the reference, per precision class
    #: (calibrate.system_constants.StackScales); a calibrated profile measured its own stack and has none
    software_stacks: Optional[dict[str, dict[str, Annotated[float, Field(gt=0)]]]] = None
    input_pipeline: Optional[InputPipelineFit] = None
    #: True on a CPU-only profile: "device" memory is host memory and there is no host<->device copy
    device_is_host: bool = False
    #: CPU threads most compute samples ran with, on a CPU-only profile: PyTorch picks its CPU
    #: convolution kernels by it (calibrate.backends.host)
    host_threads: Optional[int] = Field(default=None, ge=1)
    #: the host backend's fields (calibrate.backends.host; None on a GPU profile). The float32 vector lanes of
    #: that host, which its convolutions' work is padded to:
    host_simd_lanes: Optional[int] = Field(default=None, ge=1)
    #: every measured compute shape (grid, and model layers from `profiler calibrate --shapes`): the cost
    #: model uses these times for exactly these shapes, the fits for all others
    measured_shapes: list[MeasuredShape] = Field(default_factory=list)
    #: a CPU profile's convolution time floor from the weight (None: not measured, or a GPU profile)
    conv_weight: Optional[ConvWeightFit] = None
    #: a CPU profile's cost of first-touching a fresh tensor above the mmap threshold (None: not measured)
    first_touch: Optional[FirstTouchFit] = None
    #: a CPU profile's time floor on 3-D weight gradients run as a column buffer + GEMM (None: not measured)
    conv_columns: Optional[ColumnFloor] = None
    #: a GPU profile's kernel model of GEMMs and 2-D convolutions (None: a CPU profile, or no GPU samples)
    gpu_kernels: Optional[GpuKernels] = None
    #: per kind of time (SPREAD_KINDS) its spread, for the expected slowest of the ranks that synchronise
    #: (calibrate.spread; None: not measured, no straggler term)
    spread: Optional[dict[Literal["device", "step", "collective"], TailDistribution]] = None
    #: the shared and node-local storage the training samples are read from (None: not described)
    storage: Optional[StorageFit] = None
    notes: list[str] = Field(default_factory=list)


def parse_coefficients(data: dict, where: Path | str = "<profile>") -> Coefficients:
    """Validate `Profile.coefficients`; one-line UserError naming the field on failure."""
    if not data:
        raise UserError(f"{where}: profile has no coefficients; run `profiler fit {where}` first")
    try:
        return Coefficients.model_validate(data)
    except ValidationError as err:
        e = err.errors()[0]
        field = ".".join(str(p) for p in e["loc"] if not str(p).startswith("function-after"))
        more = f" (and {err.error_count() - 1} more problems)" if err.error_count() > 1 else ""
        raise UserError(f"{where}: field 'coefficients.{field}': {e['msg'].removeprefix('Value error, ')}{more}") from None
