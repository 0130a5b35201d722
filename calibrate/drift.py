"""Has this machine changed? Compare two profiles' raw samples family by family (pure statistics).

Samples are matched by point and grouped into coefficient families; per point d = log(t_new / t_old) on the
10th percentile of the per-call times; per family the DerSimonian-Laird random-effects mean of d, tested
against Student's t with Bonferroni over the families, so an unchanged machine raises no alarm with
probability >= 1 - alpha; a family has drifted when significant and moved by at least `min_effect` (5%: one
run repeats only to within a few percent). Each change is matched to the metadata differences (clocks, power,
throttling, versions, threads, PCIe) that could explain it. docs/drift.md ("Statistics") derives each step.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
from scipy.stats import t as student_t

from calibrate.cost_api import COLLECTIVES, COMPUTE_OPS
from calibrate.shapes import MEMORY_OPS
from profiler.profile import Profile, Sample

ALPHA_MAX_BYTES = 64 * 1024  # collective messages up to this size measure latency (alpha), larger bandwidth (beta)
DEFAULT_MIN_EFFECT = 0.05
DEFAULT_ALPHA = 0.05
DEFAULT_BOOTSTRAP = 400
# The per-point statistic: this quantile of the per-call times. Interference from other processes adds time
# to some calls (upper tail, often a second mode); the low quantile tracks the machine's unimpeded speed and
# is far more repeatable than the median on a shared machine (figures: README, drift section).
LOCATION_QUANTILE = 0.10
# Floor on each point's variance of d (log scale): run-to-run repeatability is ~1-2% at best
# (stas00/ml-engineering's MAMF repeats), so a point never claims less than 1% noise, even with tied or single samples.
POINT_VARIANCE_FLOOR = 0.01**2
OUTLIER_MIN_POINTS = 5
OUTLIER_MADS = 4.0

CATEGORY_LABELS = {
    "compute": "compute throughput",
    "memory": "memory bandwidth (STREAM)",
    "host_device": "host<->device bandwidth",
    "collective_beta": "collective bandwidth (beta)",
    "collective_alpha": "collective latency (alpha)",
    "other": "other benchmarks",
}


# ----------------------------------------------------------------------------------------------- points


@dataclass(frozen=True)
class PointKey:
    """What identifies one benchmark point across profiles."""

    benchmark: str
    variant: str
    params: str  # canonical JSON of Sample.params
    dtype: str
    device: str


@dataclass
class Point:
    """One benchmark point's samples, with the family it belongs to."""

    key: PointKey
    family: str
    category: str
    kind: str  # "rate" (a throughput/bandwidth: bigger is better) or "latency" (a time: smaller is better)
    times_s: np.ndarray
    threads: int
    work: float | None  # FLOPs (compute) or bytes per call, to turn a time into a rate; None if unknown
    work_unit: str  # "FLOP/s", "B/s" or "s"

    @property
    def unit(self) -> str:
        """Unit of the point's headline value: seconds for a latency, else its rate unit."""
        return "s" if self.kind == "latency" else self.work_unit


def _group_size(params: Mapping[str, Any]) -> tuple[int, int]:
    group = params.get("group")
    if isinstance(group, Mapping):
        return int(group.get("size", 0) or 0), int(group.get("nodes", 1) or 1)
    return int(params.get("group_size", 0) or 0), int(params.get("nodes", 1) or 1)


def classify(sample: Sample) -> tuple[str, str, str]:
    """Sample -> (family id, category, kind). Family ids read as labels, e.g. 'compute gemm float32 cpu'."""
    device_kind = sample.device.split(":")[0]
    bench = sample.benchmark
    if bench in COMPUTE_OPS:
        return f"compute {bench} {sample.dtype} {device_kind}", "compute", "rate"
    if bench == "stream":
        return f"stream {sample.variant} {device_kind}", "memory", "rate"
    if bench == "host_device":
        return f"host_device {sample.variant}", "host_device", "rate"
    if bench in COLLECTIVES:
        size, nodes = _group_size(sample.params)
        where = f"n={size}" + (f" nodes={nodes}" if nodes > 1 else "")
        size_bytes = float(sample.params.get("size_bytes", 0) or 0)
        if size_bytes <= ALPHA_MAX_BYTES:
            return f"{bench} {where} alpha", "collective_alpha", "latency"
        return f"{bench} {where} beta", "collective_beta", "rate"
    return f"{bench} {sample.variant} {device_kind}".strip(), "other", "rate"


MEMORY_BOUND_OPS = MEMORY_OPS


def _work(sample: Sample, category: str) -> tuple[float | None, str]:
    """Work per call that turns a time into the family's rate: bytes for bandwidth-bound benchmarks
    (STREAM, copies, memory-bound layers), FLOPs for the rest."""
    if category == "collective_alpha":
        return None, "s"
    bandwidth_bound = category in ("memory", "host_device") or sample.benchmark in MEMORY_BOUND_OPS
    if bandwidth_bound and sample.bytes_moved:
        return float(sample.bytes_moved), "B/s"
    if sample.flops:
        return float(sample.flops), "FLOP/s"
    if sample.bytes_moved:
        return float(sample.bytes_moved), "B/s"
    size = sample.params.get("size_bytes")
    if isinstance(size, (int, float)) and size > 0:
        return float(size), "B/s"
    return None, "1/s"


def point_key(sample: Sample) -> PointKey:
    params = json.dumps(sample.params, sort_keys=True, default=str)
    return PointKey(sample.benchmark, sample.variant, params, sample.dtype, sample.device)


def points_of(samples: Iterable[Sample]) -> dict[PointKey, Point]:
    """Group samples into points. Repeated samples of one point (e.g. re-runs) are pooled."""
    points: dict[PointKey, Point] = {}
    for sample in samples:
        key = point_key(sample)
        times = np.asarray(sample.times_s, dtype=float)
        if key in points:
            points[key].times_s = np.concatenate([points[key].times_s, times])
            continue
        family, category, kind = classify(sample)
        work, unit = _work(sample, category)
        points[key] = Point(key, family, category, kind, times, sample.threads, work, unit)
    return points


def headline_value(points: Sequence[Point]) -> float:
    """One number for a family: the geometric mean over its points of the rate (work / t), or of t itself
    for latency families, t being the LOCATION_QUANTILE of the per-call times (the same statistic drift
    tests). Units: Point.work_unit (seconds for latency)."""
    logs = []
    for p in points:
        log_t = _log_location(p.times_s)
        if p.kind == "latency":
            logs.append(log_t)
        else:
            logs.append((math.log(p.work) if p.work is not None else 0.0) - log_t)
    return math.exp(sum(logs) / len(logs))


# ------------------------------------------------------------------------------------------ comparison


@dataclass
class FamilyChange:
    """The verdict for one family. `change` is the relative change of the family's coefficient: for a rate
    (throughput, bandwidth) new/old - 1 of the rate, for a latency new/old - 1 of the time."""

    family: str
    category: str
    kind: str
    unit: str
    points: int
    old_value: float  # headline of OLD's points (drift.headline_value)
    new_value: float  # old_value moved by the estimated change (raw headlines weigh noisy points equally)
    time_ratio: float  # weighted geometric mean over points of t_new / t_old
    change: float
    change_ci: tuple[float, float]
    p_value: float  # Bonferroni-adjusted over the families compared
    significant: bool
    drifted: bool
    threads_old: list[int] = field(default_factory=list)
    threads_new: list[int] = field(default_factory=list)
    causes: list[str] = field(default_factory=list)

    @property
    def confidence(self) -> float:
        return 1.0 - self.p_value


@dataclass
class DriftReport:
    families: list[FamilyChange]
    min_effect: float
    alpha: float
    only_old: int  # points present in one profile only (not compared)
    only_new: int

    @property
    def drifted(self) -> list[FamilyChange]:
        return [f for f in self.families if f.drifted]


def _coefficient_change(time_ratio: float, kind: str) -> float:
    return time_ratio - 1.0 if kind == "latency" else 1.0 / time_ratio - 1.0


def _log_location(times_s: np.ndarray) -> float:
    return math.log(float(np.quantile(times_s, LOCATION_QUANTILE)))


def _bootstrap_log_location(times_s: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    idx = rng.integers(0, len(times_s), size=(n_boot, len(times_s)))
    return np.log(np.quantile(times_s[idx], LOCATION_QUANTILE, axis=1))


def _quantile_variance(times_s: np.ndarray) -> float:
    """Large-sample variance of the LOCATION_QUANTILE of log times if they were normal:
    q(1-q) / phi(Phi^-1(q))^2 * var(log t) / n (Cramer, asymptotic variance of a sample quantile).
    A floor under the bootstrap, which underestimates badly with few samples or heavy tails."""
    if len(times_s) < 2:
        return 0.0
    q = LOCATION_QUANTILE
    normal = NormalDist()
    factor = q * (1 - q) / normal.pdf(normal.inv_cdf(q)) ** 2
    return factor * float(np.var(np.log(times_s), ddof=1)) / len(times_s)


def _not_outliers(d: np.ndarray) -> np.ndarray:
    """Mask of the points kept for the family estimate: with >= OUTLIER_MIN_POINTS points, a point whose
    effect lies more than OUTLIER_MADS robust standard deviations (1.4826 MAD) from the median effect is
    dropped — one point hit by a burst of interference in one run; a real change moves every point."""
    if len(d) < OUTLIER_MIN_POINTS:
        return np.ones(len(d), dtype=bool)
    center = np.median(d)
    spread = 1.4826 * float(np.median(np.abs(d - center)))
    return np.abs(d - center) <= max(OUTLIER_MADS * spread, math.sqrt(POINT_VARIANCE_FLOOR))


def random_effects_mean(d: np.ndarray, var: np.ndarray) -> tuple[float, float]:
    """DerSimonian-Laird random-effects mean of per-point effects `d` with within-point variances `var`.

    Returns (mean, standard error). Between-point heterogeneity tau^2 is estimated from Cochran's Q,
    tau^2 = max(0, (Q - (k - 1)) / (sum w - sum w^2 / sum w)), w = 1/var; the mean weights each point by
    1 / (var + tau^2) and its variance is 1 / sum of those weights (DerSimonian & Laird 1986)."""
    w = 1.0 / var
    fixed = float((w * d).sum() / w.sum())
    tau2 = 0.0
    if len(d) > 1:
        q = float((w * (d - fixed) ** 2).sum())
        tau2 = max(0.0, (q - (len(d) - 1)) / float(w.sum() - (w**2).sum() / w.sum()))
    w_random = 1.0 / (var + tau2)
    return float((w_random * d).sum() / w_random.sum()), math.sqrt(1.0 / float(w_random.sum()))


def compare_points(
    old: Mapping[PointKey, Point],
    new: Mapping[PointKey, Point],
    *,
    min_effect: float = DEFAULT_MIN_EFFECT,
    alpha: float = DEFAULT_ALPHA,
    n_boot: int = DEFAULT_BOOTSTRAP,
    rng: np.random.Generator | None = None,
) -> DriftReport:
    """Decide, family by family, whether the points common to both profiles moved (see module docstring)."""
    if not 0 < alpha < 1:
        raise ValueError("alpha must be in (0, 1)")
    if min_effect < 0:
        raise ValueError("min_effect must be >= 0")
    rng = rng if rng is not None else np.random.default_rng(0)
    common = [k for k in old if k in new]
    by_family: dict[str, list[PointKey]] = {}
    for key in common:
        by_family.setdefault(old[key].family, []).append(key)

    n_families = max(1, len(by_family))
    families = []
    for family, keys in sorted(by_family.items()):
        d = np.array([_log_location(new[k].times_s) - _log_location(old[k].times_s) for k in keys])
        var = np.array([
            max(
                np.var(_bootstrap_log_location(new[k].times_s, n_boot, rng) - _bootstrap_log_location(old[k].times_s, n_boot, rng), ddof=1),
                _quantile_variance(new[k].times_s) + _quantile_variance(old[k].times_s),
            )
            for k in keys
        ])
        kept = _not_outliers(d)
        mean_d, se = random_effects_mean(d[kept], np.maximum(var[kept], POINT_VARIANCE_FLOOR))
        # Student t with the within-point degrees of freedom: the variances come from few samples
        dof = max(1, sum(len(old[k].times_s) + len(new[k].times_s) - 2 for k, keep in zip(keys, kept) if keep))
        p_value = min(1.0, 2 * float(student_t.sf(abs(mean_d) / se, dof)) * n_families)
        z_crit = float(student_t.ppf(1 - alpha / (2 * n_families), dof))
        first = old[keys[0]]
        ratio = math.exp(mean_d)
        lo_ratio, hi_ratio = math.exp(mean_d - z_crit * se), math.exp(mean_d + z_crit * se)
        bounds = sorted((_coefficient_change(lo_ratio, first.kind), _coefficient_change(hi_ratio, first.kind)))
        change = _coefficient_change(ratio, first.kind)
        significant = p_value < alpha
        families.append(
            FamilyChange(
                family=family,
                category=first.category,
                kind=first.kind,
                unit=first.unit,
                points=len(keys),
                old_value=headline_value([old[k] for k in keys]),
                new_value=headline_value([old[k] for k in keys]) * (1 + change),
                time_ratio=ratio,
                change=change,
                change_ci=(bounds[0], bounds[1]),
                p_value=p_value,
                significant=significant,
                drifted=significant and abs(change) >= min_effect,
                threads_old=sorted({old[k].threads for k in keys}),
                threads_new=sorted({new[k].threads for k in keys}),
            )
        )
    return DriftReport(
        families=families,
        min_effect=min_effect,
        alpha=alpha,
        only_old=sum(1 for k in old if k not in new),
        only_new=sum(1 for k in new if k not in old),
    )


def compare_samples(old: Iterable[Sample], new: Iterable[Sample], **options) -> DriftReport:
    return compare_points(points_of(old), points_of(new), **options)


# ---------------------------------------------------------------------------------- machine identity


def identity(profile: Profile) -> dict[str, Any]:
    """What makes two profiles 'the same machine': hostname, CPU model, GPU models (and their count)."""
    m = profile.machine
    return {"hostname": m.hostname, "cpu_model": m.cpu_model, "gpus": sorted(g.name for g in m.gpus)}


#: benchmarks whose per-call time depends on the CPU threads they ran with
_THREADED = COMPUTE_OPS + ("stream", "framework")
#: software whose version changes what a benchmark measures
_VERSIONED = ("torch", "cuda", "cudnn", "nccl")


def setup_mismatch(old: Profile, new: Profile) -> list[str]:
    """Differences in how the two profiles measured, which make their times unlike (empty when comparable):
    the device, the threads the compute and memory benchmarks ran with, whether CPU compute points rotated their
    operands (settings.operands, profiler.cases.measure_case: a cache-hot and a rotating calibration time the
    same shapes 0-50% apart), and the torch/CUDA/cuDNN/NCCL versions. A drift between such profiles is a change of
    set-up, not of the machine."""
    out = []
    if old.settings.get("device") != new.settings.get("device"):
        out.append(f"device {old.settings.get('device')!r} vs {new.settings.get('device')!r}")
    rotating = [str(p.settings.get("operands", "")).startswith("rotating") for p in (old, new)]
    if rotating[0] != rotating[1]:
        names = ["rotating operand copies" if r else "one operand set per point" for r in rotating]
        out.append(f"compute operands: {names[0]} vs {names[1]}")
    threads = [sorted({s.threads for s in p.samples if s.benchmark in _THREADED}) for p in (old, new)]
    if threads[0] and threads[1] and threads[0] != threads[1]:
        out.append(f"benchmark threads {threads[0]} vs {threads[1]}")
    va, vb = old.machine.versions or {}, new.machine.versions or {}
    out += [f"{name} {va.get(name)!r} vs {vb.get(name)!r}" for name in _VERSIONED if va.get(name) != vb.get(name)]
    return out


def identity_mismatch(old: Profile, new: Profile) -> list[str]:
    """Human-readable differences in machine identity; empty when the profiles are of the same machine."""
    a, b = identity(old), identity(new)
    return [f"{name} {a[name]!r} vs {b[name]!r}" for name in a if a[name] != b[name]]


# --------------------------------------------------------------------------------------- causes


@dataclass(frozen=True)
class MetadataDiff:
    field: str
    old: Any
    new: Any

    def __str__(self) -> str:
        return f"{self.field} {self.old} -> {self.new}"


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    if isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
        out = {}
        for i, v in enumerate(value):
            out.update(_flatten(v, f"{prefix}[{i}]"))
        return out
    return {prefix: value}


IDENTITY_FIELDS = {"hostname", "cpu_model"}
# settings that differ between any two runs and say nothing about the machine
RUN_SETTINGS = {"command", "duration_s", "sections_started", "points", "out", "created"}


def metadata_diffs(old: Profile, new: Profile) -> list[MetadataDiff]:
    """Every machine-metadata and settings field whose value differs (identity fields excluded)."""
    diffs = []
    for section, a, b in (
        ("machine", old.machine.model_dump(mode="json"), new.machine.model_dump(mode="json")),
        ("settings", old.settings, new.settings),
    ):
        fa, fb = _flatten(a), _flatten(b)
        for name in sorted(set(fa) | set(fb)):
            if section == "machine" and (name in IDENTITY_FIELDS or name.endswith(".name")):
                continue
            if section == "settings" and name.split(".")[0] in RUN_SETTINGS:
                continue
            if fa.get(name) != fb.get(name):
                diffs.append(MetadataDiff(name if section == "machine" else f"settings.{name}", fa.get(name), fb.get(name)))
    return diffs


# (substring of a metadata field, what it means, categories it plausibly affects)
_ALL = ("compute", "memory", "host_device", "collective_alpha", "collective_beta", "other")
_CAUSE_RULES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("throttle_reasons", "throttling", _ALL),
    ("sm_clock_mhz", "SM clock change", ("compute", "memory", "other")),
    ("mem_clock_mhz", "memory clock change", ("memory", "compute", "other")),
    ("power_limit_w", "power-limit change", ("compute", "memory", "other")),
    ("temperature_c", "temperature change", ("compute", "memory", "other")),
    ("pcie_generation", "PCIe link change", ("host_device", "collective_alpha", "collective_beta")),
    ("pcie_width", "PCIe link change", ("host_device", "collective_alpha", "collective_beta")),
    ("nvlink", "NVLink change", ("collective_alpha", "collective_beta")),
    ("driver_version", "driver version change", _ALL),
    ("versions.nccl", "NCCL version change", ("collective_alpha", "collective_beta")),
    ("versions.cuda", "CUDA version change", _ALL),
    ("versions.cudnn", "cuDNN version change", ("compute",)),
    ("versions.torch", "torch version change", _ALL),
    ("cpu_cores", "CPU core count change", _ALL),
    ("memory_bytes", "memory size change", ("memory", "host_device")),
    ("settings.", "calibration settings differ", _ALL),
)


def likely_causes(change: FamilyChange, diffs: Sequence[MetadataDiff]) -> list[str]:
    """Metadata differences that plausibly explain a family's change, most specific first."""
    causes = []
    if change.threads_old != change.threads_new:
        causes.append(f"thread count change ({change.threads_old} -> {change.threads_new} threads)")
    unexplained = []
    for diff in diffs:
        rule = next((r for r in _CAUSE_RULES if r[0] in diff.field), None)
        if rule is None:
            unexplained.append(diff)
        elif change.category in rule[2]:
            causes.append(f"{rule[1]} ({diff})")
    causes.extend(f"metadata change ({d})" for d in unexplained)
    return causes


def attribute_causes(report: DriftReport, old: Profile, new: Profile) -> list[MetadataDiff]:
    """Fill `causes` of every significant family; returns the metadata differences found."""
    diffs = metadata_diffs(old, new)
    for change in report.families:
        if change.significant:
            change.causes = likely_causes(change, diffs)
    return diffs


# --------------------------------------------------------------------------------- coefficients


@dataclass(frozen=True)
class CoefficientChange:
    name: str
    old: float
    new: float
    old_interval: tuple[float, float] | None
    new_interval: tuple[float, float] | None

    @property
    def change(self) -> float:
        return self.new / self.old - 1.0 if self.old else math.inf

    @property
    def intervals_overlap(self) -> bool | None:
        if self.old_interval is None or self.new_interval is None:
            return None
        return self.old_interval[0] <= self.new_interval[1] and self.new_interval[0] <= self.old_interval[1]


def _interval(node: Mapping[str, Any]) -> tuple[float, float] | None:
    low, high = node.get("low"), node.get("high")
    if isinstance(low, (int, float)) and isinstance(high, (int, float)):
        return float(low), float(high)
    for name in ("interval", "ci", "ci95"):
        value = node.get(name)
        if isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, (int, float)) for v in value):
            return float(value[0]), float(value[1])
    return None


def _coefficient_leaves(node: Any, prefix: str = "") -> dict[str, tuple[float, tuple[float, float] | None]]:
    """Every mapping with a numeric `value` in a coefficients tree, by dotted path (format-agnostic)."""
    out: dict[str, tuple[float, tuple[float, float] | None]] = {}
    if isinstance(node, Mapping):
        value = node.get("value")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[prefix or "value"] = (float(value), _interval(node))
        for k, v in node.items():
            if k != "value":
                out.update(_coefficient_leaves(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out.update(_coefficient_leaves(v, f"{prefix}[{i}]"))
    return out


def coefficient_changes(old: Mapping[str, Any], new: Mapping[str, Any], min_effect: float = DEFAULT_MIN_EFFECT) -> list[CoefficientChange]:
    """Fitted coefficients that moved by >= min_effect with disjoint confidence intervals, largest first.

    Any leaf `{value, low, high}` (or `{value, interval: [lo, hi]}`) present in both trees counts, so this
    does not depend on the fit's layout; zero-valued coefficients (e.g. a launch overhead fitted to 0) and
    coefficients without an interval are skipped — their relative change means nothing."""
    a, b = _coefficient_leaves(old), _coefficient_leaves(new)
    out = []
    for name in sorted(set(a) & set(b)):
        change = CoefficientChange(name, a[name][0], b[name][0], a[name][1], b[name][1])
        if change.old and change.new and change.intervals_overlap is False and abs(change.change) >= min_effect:
            out.append(change)
    return sorted(out, key=lambda c: -abs(math.log(c.new / c.old)) if c.new / c.old > 0 else 0.0)
