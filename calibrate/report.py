"""Readable lines about a profile's fits, for `profiler show`: one line per fit, and warnings for fits whose
held-out median relative error exceeds WARN_MEDIAN_REL_ERROR (each with the samples' sampling noise, so a reader
can tell a fit limited by its measurements from one limited by its model)."""
from __future__ import annotations

import math
from typing import Optional

from calibrate import backends
from calibrate.coefficients import Coefficients, Estimate, FitQuality, Segment, parse_coefficients
from profiler.profile import Profile

WARN_MEDIAN_REL_ERROR = 0.10


def _si(value: float, unit: str) -> str:
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""), (1e-3, "m"), (1e-6, "u"), (1e-9, "n")):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def _est(e: Estimate, unit: str) -> str:
    if e.low == e.high == e.value:
        return _si(e.value, unit)
    return f"{_si(e.value, unit)} [{_si(e.low, unit)}, {_si(e.high, unit)}]"


def _quality(q: Optional[FitQuality], label: str = "held-out", published: bool = False) -> str:
    if q is None:
        return "published figures, not fitted" if published else f"{label}: too few samples to hold any out"
    r2 = f"R2 {q.r2:.3f}, " if q.r2 is not None else ""
    by_kernel = (" (" + ", ".join(f"{k} shapes {v:.1%}" for k, v in q.by_kernel.items()) + ")") if q.by_kernel else ""
    return (f"{label} ({q.held_out}, {q.n_test} samples): {r2}median err {q.median_rel_error:.1%}{by_kernel}, "
            f"max {q.max_rel_error:.1%}{_noise(q)}")


def _noise(q: FitQuality) -> str:
    """The samples' sampling noise, when known: the least error a perfect model would still show."""
    if q.sample_noise_rel_error is None:
        return ""
    return f" (sampling noise alone: {q.sample_noise_rel_error:.1%})"


def _segments(segments: list[Segment], x_unit: str, regimes: tuple[str, str] = ("", "")) -> str:
    """regimes: names of the first and last segment (e.g. cache-resident, DRAM) when there are several."""
    parts = []
    for i, s in enumerate(segments):
        name = regimes[0] if i == 0 else regimes[1] if i == len(segments) - 1 else ""
        name = f"{name} " if name else ""
        where = f"{name}from {_si(s.from_x, x_unit)}: " if len(segments) > 1 else ""
        parts.append(f"{where}alpha {_est(s.alpha_s, 's')}, bw {_est(s.bandwidth_bytes_per_s, 'B/s')}")
    return "; ".join(parts)


def _coefficients(profile: Profile) -> Coefficients:
    return parse_coefficients(profile.coefficients, "profile")


def _rate(s_per_byte: float) -> str:
    """Bytes per second of a seconds-per-byte figure ('free' at 0)."""
    return _si(1 / s_per_byte, "B/s") if s_per_byte > 0 else "free"


def fit_lines(profile: Profile) -> list[str]:
    """One line per fit: coefficient values with 95% CI, held-out R² and median/max relative error."""
    c = _coefficients(profile)
    published = profile.provenance.kind == "published"
    lines = []
    if published:
        lines.append(f"PUBLISHED profile (datasheet/literature figures, not measured here): {profile.provenance.source}")
    for key, f in sorted(c.compute.items()):
        unit = "FLOP/s" if f.kind == "flops" else "B/s"
        shape_model = (f"{len(f.efficiency.trees)} trees" if f.efficiency.trees
                       else f"efficiency {math.exp(min(f.efficiency.init, 0.0)):.1%} for every shape")
        line = (f"compute {key}: launch {_est(f.launch_s, 's')}, peak {_si(f.peak_per_s, unit)}, "
                f"level x{f.time_scale.value:.2f} [{f.time_scale.low:.3f}, {f.time_scale.high:.3f}], "
                f"{shape_model}; {_quality(f.quality, published=published)}")
        if f.extrapolation is not None:
            line += f"; {_quality(f.extrapolation, 'extrapolation')}"
        lines.append(line)
    for key, f in sorted(c.memory.items()):
        regimes = _segments(f.segments, "B", ("cache-resident", "DRAM"))
        lines.append(f"memory {key}: {regimes}; {_quality(f.quality, published=published)}")
    for key, f in sorted(c.host_device.items()):
        lines.append(f"host_device {key}: {_segments(f.segments, 'B')}; {_quality(f.quality, published=published)}")
    if c.framework:
        optimizer = c.framework.optimizer_per_tensor_s
        lines.append(f"framework per layer: forward {_est(c.framework.forward_per_layer_s, 's')}, "
                     f"backward {_est(c.framework.backward_per_layer_s, 's')}"
                     + (f"; optimizer step {_est(c.framework.optimizer_step_s, 's')} + "
                        f"{_est(optimizer, 's')} per parameter tensor" if optimizer else "")
                     + (f"; cold code (the layer before ran another kernel) + forward "
                        f"{_est(c.framework.cold_forward_per_layer_s, 's')}, backward "
                        f"{_est(c.framework.cold_backward_per_layer_s, 's')}"
                        if c.framework.cold_forward_per_layer_s is not None else ""))
    if c.host_dispatch and not c.device_is_host:
        lines.append(f"host dispatch per layer (a GPU pass takes at least this, unless replayed as CUDA graphs): "
                     f"forward {_est(c.host_dispatch.forward_per_layer_s, 's')}, backward "
                     f"{_est(c.host_dispatch.backward_per_layer_s, 's')}"
                     + (f"; each expert GEMM of a grouped expert linear adds {_est(c.host_dispatch.per_expert_gemm_s, 's')}"
                        if c.host_dispatch.per_expert_gemm_s is not None else ""))
    if c.measured_shapes:
        lines.append(f"measured shapes: {len(c.measured_shapes)} compute calls costed by their own measured times")
    lines += backends.for_coefficients(c).report_lines(c, _rate)
    for f in c.collectives:
        lines.append(f"collective {f.op} p={f.group_size} nodes={f.nodes} ({f.variant}, measured): "
                     f"{_segments(f.segments, 'B')}; {_quality(f.quality)}")
    for op, levels in sorted(c.links.items()):
        for level, link in levels.items():
            inter = f", inter-node step {_est(link.inter_step_latency_s, 's')}" if link.inter_step_latency_s else ""
            if link.fill_latency_s:
                inter += f", bandwidth-regime fill {_est(link.fill_latency_s, 's')}"
            measured = ",".join(map(str, link.measured_group_sizes)) or "none"
            lines.append(f"link {op} {level}: base {_est(link.base_latency_s, 's')}, step {_est(link.step_latency_s, 's')}"
                         f"{inter}, bus bw {_est(link.bus_bandwidth_bytes_per_s, 'B/s')}; measured group sizes "
                         f"{measured}, others extrapolated by ring/tree formulas")
    if published:
        lines.append("sources: every coefficient lists its own `sources` in the profile file")
    lines += [f"note: {n}" for n in c.notes]
    return lines


def fit_qualities(profile: Profile) -> list[tuple[str, Optional[FitQuality]]]:
    """(name, held-out quality or None when none could be held out) of every compute, memory, host<->device
    and collective fit, in the order `profiler show` lists them."""
    c = _coefficients(profile)
    named = [(f"compute {k}", f.quality) for k, f in sorted(c.compute.items())]
    named += [(f"memory {k}", f.quality) for k, f in sorted(c.memory.items())]
    named += [(f"host_device {k}", f.quality) for k, f in sorted(c.host_device.items())]
    named += [(f"collective {f.op} p={f.group_size} nodes={f.nodes}", f.quality) for f in c.collectives]
    return named


def fit_warnings(profile: Profile) -> list[str]:
    """Every fit whose held-out median relative error exceeds 10%."""
    return [f"{name}: held-out median error {q.median_rel_error:.1%} > {WARN_MEDIAN_REL_ERROR:.0%}{_noise(q)}"
            for name, q in fit_qualities(profile) if q is not None and q.median_rel_error > WARN_MEDIAN_REL_ERROR]
