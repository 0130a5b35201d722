"""Published reference profiles (`provenance: published`) built from published measurements and datasheets.

The figures are data (calibrate/data/published/*.yaml, read by calibrate.systems), each with its source; this
module turns them into profiles, with the GPU families' fitted constants it is given (predictor data):

    python -m calibrate.published --constants predictor/data/system_constants.yaml [--out-dir calibrate/profiles]

The profiles have no samples; their coefficients use the calibrated schema (calibrate.coefficients) so the same
cost model serves both. Intervals are degenerate (low = high = value) unless a source gives a range.
docs/calibration.md ("Published reference profiles"); docs/decisions/2026-12-06-published-data.md.
"""
from __future__ import annotations

import argparse
import functools
import itertools
import math
import sys
from pathlib import Path
from typing import Optional

from calibrate.coefficients import (CollectiveFit, Coefficients, ComputeFit, EfficiencyGrid, EfficiencyModel,
                                    Estimate, Execution, Fabric, FrameworkFit, GpuKernels, HostDispatch, LinkModel,
                                    ModelError, Segment, SegmentedFit, Tree)
from calibrate import gpu_kernel_fit, gpu_kernels, xla_matmul
from calibrate.cost_api import COLLECTIVES
from calibrate.fabric import default_background
from calibrate.spread import published_spread
from calibrate.storage_fit import published_storage
from calibrate.backends.gpu import WINOGRAD_FAMILY
from calibrate.gpu_specs import find_spec, hardware
from calibrate.measured_kernels import conv3d_kernels
from calibrate.shapes import FLOP_FEATURES, GROUPED_SUFFIX, MATMUL_OPS
from calibrate.shipped import shipped_profiles_dir
from calibrate.collective_model import bus_factor
from calibrate.systems import DATA_DIR, GPU, GemmGrid, Node, load_figures, load_gpus, load_nodes
from calibrate.system_constants import (StackScales, SystemConstants, for_family, gpu_family, load_constants,
                                        load_model_error, load_stacks)
from profiler import inputs
from profiler.errors import UserError
from profiler.profile import (GPUInfo, Machine, Profile, Provenance, SCHEMA_VERSION, dump_yaml, write_atomic)

_FIGURES = load_figures()
GPUS = load_gpus()
NODES = load_nodes(figures=_FIGURES, gpus=GPUS)
#: the shared figures the builder uses (calibrate/data/published/figures.yaml)
COPY_ALPHA = _FIGURES["copy_alpha"]
KERNEL_LAUNCH = _FIGURES["kernel_launch"]
OVERLAP_EFFICIENCY = _FIGURES["overlap_efficiency"]
WINOGRAD_REDUCTION = _FIGURES["winograd_reduction"]
NO_STREAM_LATENCY = _FIGURES["stream_latency"]
#: a segment's bandwidth where a sweep's time does not rise with size (the line is flat: its time is its intercept)
FLAT_BANDWIDTH = 1e18
HOST_LAYER = (_FIGURES["host_layer_forward"], _FIGURES["host_layer_backward"])  # host time per layer pass
EXPERT_GEMM = (_FIGURES["expert_gemm_dispatch"], _FIGURES["expert_gemm_dispatch_fp8"])  # per expert GEMM, BF16/FP8
NCCL_NET_FILL = _FIGURES["net_fill"]  # predictor.published.nccl reads its curves' spread against it
#: a grouped convolution's memory traffic runs at this share of the triad, per pass (docs/method.md §3)
GROUPED_TRIAD_SHARE = {"fwd": _FIGURES["grouped_conv_forward_triad_share"],
                       "bwd_data": _FIGURES["grouped_conv_backward_triad_share"],
                       "bwd_weight": _FIGURES["grouped_conv_backward_triad_share"]}
GROUPED_REFERENCE_BYTES = _FIGURES["grouped_conv_reference_bytes_per_s"]  # the triad the shares were measured of
GROUPED_REFERENCE_SM_HZ = _FIGURES["grouped_conv_reference_sm_hz"]  # that GPU's SMs x clock
COMPUTE_OPS = ("gemm", "conv2d", "conv3d", "conv2d_grouped")
MEMORY_OPS = {"batchnorm": ("fwd", "bwd_data"), "relu": ("fwd", "bwd_data"), "maxpool": ("fwd", "bwd_data"),
              "avgpool": ("fwd", "bwd_data"), "add": ("fwd",)}


def net_rate(flops: float, rate: float) -> float:
    """A measured product's FLOP/s net of the per-kernel launch floor the profile adds to every call (KERNEL_LAUNCH):
    its time includes that floor, so a profile read at the measured shape predicts the measured time."""
    time_s = flops / rate
    if time_s <= KERNEL_LAUNCH.value:
        raise UserError(f"a measured product of {flops:.3g} FLOPs at {rate:.3g} FLOP/s takes {time_s:.3g} s, within the "
                        f"{KERNEL_LAUNCH.value:g} s launch floor: not a kernel's time")
    return flops / (time_s - KERNEL_LAUNCH.value)


def gemm_efficiency(frac: float, by_size: tuple[tuple[int, float], ...]) -> EfficiencyModel:
    """Matrix-product efficiency by size from measured throughput of n^3 products (GPU.gemm_by_size points): the plateau
    `frac` times each size's share of the largest size's throughput (each net of the launch floor: net_rate), held
    from halfway (in log FLOPs) to the next smaller size up to halfway to the next larger one; the plateau from the
    largest size on. One regression tree on log10 FLOPs (calibrate.shapes.FLOP_FEATURES[0]) in the fitted profiles'
    format."""
    by_size = tuple((n, net_rate(2.0 * n ** 3, rate)) for n, rate in by_size)
    top = by_size[-1][1]
    logs = [math.log10(2.0 * n ** 3) for n, _ in by_size]
    cuts = [(a + b) / 2 for a, b in zip(logs, logs[1:])]
    nodes = []  # (left, right, feature, threshold, value): node 2k splits at cuts[k], its left child is size k's leaf
    for k, cut in enumerate(cuts):
        nodes += [(2 * k + 1, 2 * k + 2, 0, cut, 0.0), (-1, -1, -2, -2.0, math.log(by_size[k][1] / top))]
    nodes.append((-1, -1, -2, -2.0, 0.0))  # the plateau
    left, right, feature, threshold, value = (list(column) for column in zip(*nodes))
    tree = Tree(children_left=left, children_right=right, feature=feature, threshold=threshold, value=value)
    return EfficiencyModel(features=list(FLOP_FEATURES), init=math.log(frac), trees=[tree])


def converted_rates(gpu: GPU, dtype: str, table: GemmGrid) -> dict[tuple[int, int, int], float]:
    """The table's single products in `dtype`'s math: each measured time times the GPU kernel model's time in that math
    over its time in the column's (calibrate.gpu_kernels, fitted to every product of the column). The main loop runs
    at the dtype's peak and at its plateau fraction over the column's (the efficiency scaled so); the call floor,
    the waves' fixed time and the DRAM floor (operands of the dtype's size) do not shorten with the math: a small
    product gains less than the peaks' ratio (docs/method.md §3; held out against DeepGEMM's measured FP8 products,
    docs/gpu-kernels.md)."""
    spec = find_spec(gpu.name)
    if spec is None:
        raise UserError(f"GPU {gpu.name!r}: gemm_grid {dtype} via_kernel_model needs its SMs (calibrate/data/gpus.yaml)")
    source = hardware(spec, table.column)
    target = source._replace(peak_flops_per_s=gpu.peak_flops[dtype].value)
    values = dict(_column_fit(gpu.name, table.table, table.column))
    converted = dict(values, efficiency=values["efficiency"] * gpu.achievable_fraction[dtype].value
                     / gpu.achievable_fraction[table.column].value)
    _, measured = xla_matmul.grid(table.table, table.column)
    out = {}
    for (m, n, k), rate in measured.items():
        params = {"M": m, "N": n, "K": k}
        ratio = (gpu_kernels.kernel_time_s(converted, target, "gemm", "fwd", params, dtype)
                 / gpu_kernels.kernel_time_s(values, source, "gemm", "fwd", params, table.column))
        out[(m, n, k)] = rate / ratio
    return out


@functools.lru_cache(maxsize=None)
def _column_fit(gpu_name: str, key: str, column: str) -> tuple[tuple[str, float], ...]:
    """The GPU kernel model's constants fitted to every product of one column of an OpenXLA table."""
    path = xla_matmul.DATA_FILES[tuple(xla_matmul.GPU_OF_KEY).index(key)]
    samples = xla_matmul.load(path)[1][column]
    return tuple(gpu_kernel_fit.fit(samples, hardware(find_spec(gpu_name), column)).items())


def gemm_grid_efficiency(frac: float, table: GemmGrid, converted: Optional[dict] = None) -> EfficiencyModel:
    """Matrix-product efficiency by M, N and K from a GPU's table of measured products (GPU.gemm_grid): the plateau
    `frac` times each product's share of the table's largest n^3 product (each net of the launch floor: net_rate), as
    gemm_efficiency reads a sweep by size, interpolated between the measured dimensions in log10 (the features
    log_batch, log_out_channels and log_in_channels are a GEMM's M, N and K: calibrate.shapes.work) and held beyond
    them (docs/method.md §3). converted: the products in another math (converted_rates), else the column's own."""
    dims, measured = xla_matmul.grid(table.table, table.column)
    measured = converted or measured
    rates = {shape: net_rate(2.0 * math.prod(shape), rate) for shape, rate in measured.items()}
    top = rates[(dims[-1],) * 3]
    values = [min(0.0, math.log(frac * rates[(m, n, k)] / top)) for m in dims for n in dims for k in dims]
    knots = [math.log10(d) for d in dims]
    return EfficiencyModel(features=list(FLOP_FEATURES), init=0.0, grid=EfficiencyGrid(
        axes=["log_batch", "log_out_channels", "log_in_channels"], knots=[knots] * 3, values=values))


def grouped_bytes_per_s(gpu: GPU, share: float) -> float:
    """The rate a grouped convolution moves its bytes at on `gpu`: `share` of the V100S triad it was measured against,
    times the GPU's SMs x clock over the V100S's. Depthwise kernels are bound by what each SM issues, not by DRAM: the
    fitted scales under a triad share were 1.09 (V100) and 1.78 (A100) in FP16, 1.31 and 1.28 under this one
    (decisions/2026-12-06-depthwise-per-sm.md)."""
    spec = find_spec(gpu.name)
    if spec is None:
        raise UserError(f"GPU {gpu.name!r}: no SM count in calibrate/data/gpus.yaml (needed for grouped convolutions)")
    return share * GROUPED_REFERENCE_BYTES.value * spec.sms * gpu.clock_mhz * 1e6 / GROUPED_REFERENCE_SM_HZ.value


def _compute(gpu: GPU) -> dict[str, ComputeFit]:
    out = {}
    triad = gpu.triad_bytes_per_s
    for dtype, peak in gpu.peak_flops.items():
        frac = gpu.achievable_fraction[dtype]
        scale = Estimate(value=1.0, low=frac.value / (frac.high or frac.value), high=frac.value / (frac.low or frac.value))
        winograd = (WINOGRAD_FAMILY,) if dtype == "float32" else ()
        for op in COMPUTE_OPS + winograd:
            reduction = WINOGRAD_REDUCTION.value if op == WINOGRAD_FAMILY else 1.0
            by_size = gpu.gemm_by_size.get(dtype) if op == "gemm" else None
            grid = gpu.gemm_grid.get(dtype) if op == "gemm" else None
            # one efficiency for the op's three passes (a measured grid or sweep, else the plateau)
            converted = converted_rates(gpu, dtype, grid) if grid and grid.via_kernel_model else None
            efficiency = (gemm_grid_efficiency(frac.value, grid, converted) if grid else
                          gemm_efficiency(frac.value, by_size.points) if by_size else
                          EfficiencyModel(features=[], init=math.log(frac.value)))
            for pass_ in ("fwd", "bwd_data", "bwd_weight"):
                share = GROUPED_TRIAD_SHARE[pass_] if op.endswith(GROUPED_SUFFIX) else None
                out[f"{op}/{pass_}/{dtype}"] = ComputeFit(
                    kind="flops", launch_s=KERNEL_LAUNCH.estimate(), peak_per_s=peak.value * reduction,
                    memory_bandwidth_bytes_per_s=grouped_bytes_per_s(gpu, share.value) if share else triad.value,
                    efficiency=efficiency, time_scale=scale,
                    sources=[peak.source, frac.source, f"memory bound: {triad.source}", KERNEL_LAUNCH.source,
                             "convolutions assumed to reach the GEMM fraction (implicit-GEMM cuDNN kernels)"] + (
                        [f"direct-convolution FLOPs over {reduction:.2f}: {WINOGRAD_REDUCTION.source}"]
                        if reduction != 1.0 else []) + (
                        [f"efficiency by M, N and K, share of the largest measured n^3: {grid.source}"] if grid else
                        [f"efficiency by size, share of the largest measured: {by_size.source}"] if by_size else []) + (
                        [f"memory traffic at {share.value:g} of the V100S triad, scaled by SMs x clock: {share.source}; "
                         f"{GROUPED_REFERENCE_BYTES.source}; {GROUPED_REFERENCE_SM_HZ.source}"] if share else []))
        for op, passes in MEMORY_OPS.items():
            for pass_ in passes:
                out[f"{op}/{pass_}/{dtype}"] = ComputeFit(
                    kind="bytes", launch_s=KERNEL_LAUNCH.estimate(), peak_per_s=triad.value,
                    efficiency=EfficiencyModel(features=[], init=0.0),
                    time_scale=Estimate(value=1.0, low=triad.value / (triad.high or triad.value),
                                        high=triad.value / (triad.low or triad.value)),
                    sources=[f"memory-bound at STREAM triad: {triad.source}", KERNEL_LAUNCH.source])
    return out


def _line(alpha: Fig, bandwidth: Fig) -> SegmentedFit:
    return SegmentedFit(segments=[Segment(from_x=0.0, alpha_s=alpha.estimate(), bandwidth_bytes_per_s=bandwidth.estimate())],
                        sources=[alpha.source, bandwidth.source])


def _links(node: Node) -> dict[str, dict[str, LinkModel]]:
    links = {}
    for op in COLLECTIVES:
        intra_bw = {"allreduce": node.allreduce_bus_bytes_per_s, "sendrecv": node.p2p_bytes_per_s,
                    "halo": node.p2p_bytes_per_s}.get(op, node.other_collective_bus_bytes_per_s)
        p2p = op in ("sendrecv", "halo")
        inter_bw = node.inter_p2p_bytes_per_s if p2p else node.inter_bus_bytes_per_s
        common = dict(base_latency_s=node.base_latency_s.estimate(), step_latency_s=node.step_latency_s.estimate())
        inter_sources = [node.inter_step_latency_s.source, inter_bw.source]
        if not p2p:  # rings: the fill of the all-reduce curves (point-to-point has none)
            if op != "allreduce":
                inter_sources.append("assumed: the node's inter-node all-reduce bus bandwidth")
            inter_sources.append(f"fill: {NCCL_NET_FILL.source}")
            if op != "allreduce":
                inter_sources.append("fill assumed: the all-reduce's")
        # sub-groups of a node not linked alike (rings, not point-to-point; the other collectives' assumed alike)
        by_group = {} if p2p else node.allreduce_bus_bytes_per_s_by_group
        group_sources = [f"a group of {g}: {fig.source}" for g, fig in sorted(by_group.items())]
        if group_sources and op != "allreduce":
            group_sources.append("groups assumed: the all-reduce's")
        links[op] = {
            "intra": LinkModel(**common, bus_bandwidth_bytes_per_s=intra_bw.estimate(),
                               bus_bandwidth_by_group={g: fig.estimate() for g, fig in by_group.items()},
                               sources=[node.base_latency_s.source, node.step_latency_s.source, intra_bw.source]
                               + group_sources),
            "inter": LinkModel(**common, inter_step_latency_s=node.inter_step_latency_s.estimate(),
                               bus_bandwidth_bytes_per_s=inter_bw.estimate(),
                               fill_latency_s=None if p2p else NCCL_NET_FILL.estimate(), sources=inter_sources),
        }
    return links


def read_sweep(name: str) -> dict[int, list[tuple[float, float]]]:
    """A measured all-reduce sweep of calibrate/data/published (Node.allreduce_sweep: `#` comment lines, then the
    columns group_size, size_bytes, time_s): group size -> [(bytes, seconds)] in rising size (profiler.inputs reads
    it; a malformed line is a one-line error naming the file and line)."""
    path = DATA_DIR / name
    text = inputs.read_text(path, label=f"all-reduce sweep {path}")
    lines = [(i, line) for i, line in enumerate(text.splitlines(), 1) if line.strip() and not line.startswith("#")]
    if not lines or lines[0][1].strip() != "group_size,size_bytes,time_s":
        raise UserError(f"{path}: header must be group_size,size_bytes,time_s")
    sweep: dict[int, list[tuple[float, float]]] = {}
    for number, line in lines[1:]:
        cells = line.split(",")
        try:
            group, size, time_s = int(cells[0]), float(cells[1]), float(cells[2])
        except (ValueError, IndexError):
            raise UserError(f"{path}: line {number}: expected group_size,size_bytes,time_s, got {line!r}") from None
        if group < 2 or not (0 < size < math.inf and 0 < time_s < math.inf):
            raise UserError(f"{path}: line {number}: needs a group size >= 2 and positive finite bytes and seconds, "
                            f"got {line!r}")
        sweep.setdefault(group, []).append((size, time_s))
    return {g: sorted(points) for g, points in sweep.items()}


def sweep_fits(node: Node) -> list[CollectiveFit]:
    """One measured intra-node all-reduce fit per group size of the node's sweep (read_sweep): the line through each
    pair of neighbouring sizes (x = bytes x bus_factor, as every collective fit; times made non-decreasing in size, an
    intercept below 0 clipped), the last extended past the largest; below the smallest size, the line from the
    node's ring latency at no bytes (base + 2(g - 1) steps: its link model's) to the smallest measured time;
    docs/method.md §6."""
    fits = []
    for group, points in sorted(read_sweep(node.allreduce_sweep).items()):
        factor = bus_factor("allreduce", group)
        xs = [size * factor for size, _ in points]
        ts = list(itertools.accumulate((t for _, t in points), max))
        latency = min(node.base_latency_s.value + 2 * (group - 1) * node.step_latency_s.value, ts[0])
        first = xs[0] / (ts[0] - latency) if ts[0] > latency else FLAT_BANDWIDTH
        segments = [Segment(from_x=0.0, to_x=xs[0], alpha_s=Estimate.exact(latency),
                            bandwidth_bytes_per_s=Estimate.exact(first))]
        for k in range(len(xs) - 1):
            rate = (xs[k + 1] - xs[k]) / (ts[k + 1] - ts[k]) if ts[k + 1] > ts[k] else FLAT_BANDWIDTH
            segments.append(Segment(from_x=xs[k], to_x=xs[k + 1] if k + 2 < len(xs) else None,
                                    alpha_s=Estimate.exact(max(ts[k] - xs[k] / rate, 0.0)),
                                    bandwidth_bytes_per_s=Estimate.exact(rate)))
        fits.append(CollectiveFit(op="allreduce", group_size=group, nodes=1, segments=segments,
                                  sources=[f"measured sweep {node.allreduce_sweep}: {node.allreduce_sweep_source}"]))
    return fits


def _apply_constants(compute: dict[str, ComputeFit], constants: SystemConstants) -> dict[str, ComputeFit]:
    """The compute fits with the family's fitted time scales (calibrate.system_constants) on their intervals."""
    out = {}
    for key, fit in compute.items():
        dtype = key.rsplit("/", 1)[1]
        if key.split("/", 1)[0] in MATMUL_OPS:  # matrix products stay at the measured GEMM fraction
            out[key] = fit
            continue
        grouped = fit.kind != "bytes" and "_grouped/" in key
        table = constants.bytes_time_scale if fit.kind == "bytes" else (
            constants.grouped_time_scale if grouped else constants.flops_time_scale)
        factor = table.get(dtype)
        if factor is None:
            out[key] = fit
            continue
        ts = fit.time_scale
        out[key] = fit.model_copy(update={
            "time_scale": Estimate(value=ts.value * factor, low=ts.low * factor, high=ts.high * factor),
            "sources": fit.sources + [f"time scale {factor:.3f} {constants.describe(dtype, grouped)}"]})
    return out


def _framework(constants: Optional[SystemConstants]) -> Optional[FrameworkFit]:
    if constants is None or constants.per_layer_s <= 0:
        return None
    per_layer = Estimate.exact(constants.per_layer_s)
    return FrameworkFit(forward_per_layer_s=per_layer, backward_per_layer_s=per_layer,
                        sources=[f"framework time per layer and pass {constants.describe()}"])


def _host_dispatch(node: Node) -> HostDispatch:
    """The node's host time per layer pass: its own fitted figures where nodes.yaml gives them, else the shared
    ones (HOST_LAYER: our H200 node's PyTorch 2.x chains)."""
    fwd, bwd = ((node.host_layer_forward, node.host_layer_backward) if node.host_layer_forward is not None
                else HOST_LAYER)
    return HostDispatch(forward_per_layer_s=fwd.estimate(), backward_per_layer_s=bwd.estimate(),
                        per_expert_gemm_s=EXPERT_GEMM[0].estimate(), per_expert_gemm_fp8_s=EXPERT_GEMM[1].estimate(),
                        sources=[fwd.source, bwd.source, EXPERT_GEMM[0].source, EXPERT_GEMM[1].source])


def build_profile(node: Node, constants: Optional[SystemConstants] = None,
                  model_error: Optional[dict] = None, stacks: Optional[StackScales] = None,
                  kernels: Optional[GpuKernels] = None) -> Profile:
    """The published profile of a node; `constants`: its GPU family's constants fitted to published runs
    (None: datasheet figures only); `model_error`: the held-out error of the published validation; `stacks`:
    the software stacks' factors fitted with the constants (kept only with them: they are relative to the
    fitted family scales, not to the datasheet); `kernels`: a GPU kernel model (calibrate.deepbench_kernels)
    that costs the GEMMs and convolutions instead of the datasheet fractions; without one, the GPU's
    `conv3d_kernels` model costs its 3-D convolutions (calibrate.measured_kernels)."""
    gpu = node.gpu
    compute = _compute(gpu)
    if constants is not None:
        compute = _apply_constants(compute, constants)
    if kernels is None:  # the 3-D convolutions: a measured kernel model (no published figure times them)
        kernels = conv3d_kernels(gpu.conv3d_kernels, gpu.name, gpu.peak_flops["float32"].value)
    coefficients = Coefficients(
        compute=compute, framework=_framework(constants), gpu_kernels=kernels,
        host_dispatch=_host_dispatch(node),
        execution=Execution(overlap_efficiency=OVERLAP_EFFICIENCY.estimate(), sources=[OVERLAP_EFFICIENCY.source]),
        model_error=ModelError(**model_error) if model_error else None,
        software_stacks=stacks.scales if constants is not None and stacks is not None and stacks.scales else None,
        memory={"device/triad": _line(NO_STREAM_LATENCY, gpu.triad_bytes_per_s),
                "host/triad": _line(NO_STREAM_LATENCY, node.host_memory_bytes_per_s)},
        host_device={"h2d_pinned": _line(COPY_ALPHA, gpu.h2d_bytes_per_s),
                     "d2h_pinned": _line(COPY_ALPHA, gpu.d2h_bytes_per_s)},
        links=_links(node),
        collectives=sweep_fits(node) if node.allreduce_sweep else [],
        fabric=Fabric(rails_per_node=node.rails_per_node, nodes_per_leaf=node.nodes_per_leaf,
                      oversubscription=node.oversubscription, sources=[node.fabric_source],
                      background_load=default_background()),
        spread=published_spread(node.gpu_screening, node.screening_source), storage=published_storage(node.file),
        notes=[f"published reference profile: {node.title}", node.node_source, gpu.memory_bytes.source,
               "no pageable-copy figures: pageable host<->device copies are not available from this profile",
               "host memory bandwidth is the theoretical channel peak (no published host STREAM figure)"] + node.notes)
    gpus = [GPUInfo(name=gpu.name, memory_bytes=gpu.memory_bytes.value, sm_clock_mhz=gpu.clock_mhz,
                    nvlink_links=gpu.nvlink_links, pcie_generation=gpu.pcie_generation, pcie_width=16)
            for _ in range(node.gpus_per_node)]
    machine = Machine(hostname=f"published:{node.file.split('.')[0]}", cpu_model=node.cpu_model, cpu_cores=node.cpu_cores,
                      memory_bytes=node.host_memory_bytes, gpus=gpus, gpus_per_node=node.gpus_per_node,
                      device_memory_bytes=gpu.memory_bytes.value)
    return Profile(schema_version=SCHEMA_VERSION, machine=machine,
                   provenance=Provenance(kind="published", source=f"{node.title}; figures from "
                                                                   "published measurements and datasheets (see sources)"),
                   created="2026-11-29T00:00:00+00:00", coefficients=coefficients.model_dump(mode="json", exclude_none=True))


def read_fitted(path: Path | str) -> dict:
    """The render() arguments held by a fitted-constants file (`python -m predictor.published.fit` writes it):
    the GPU families' constants, the held-out model error and the software stacks' factors."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: no such file (the fitted constants: run `python -m predictor.published.fit`)")
    return {"constants": load_constants(path), "model_error": load_model_error(path), "stacks": load_stacks(path)}


def render(node: Node, constants: Optional[dict[str, SystemConstants]] = None, model_error: Optional[dict] = None,
           stacks: Optional[StackScales] = None) -> str:
    """The profile file of a node, with its GPU family's fitted constants, the software stacks' factors and the
    held-out model error (read_fitted); without them, the datasheet profile."""
    header = (f"# PUBLISHED reference profile: {node.title}\n"
              "# Not measured: built from published figures by `python -m calibrate.published`; do not edit by hand.\n"
              "# Every coefficient lists its sources: verified / third-party / derived / unverified / assumed.\n")
    profile = build_profile(node, for_family(constants or {}, gpu_family(node.gpu.name)), model_error, stacks)
    return header + dump_yaml(profile.model_dump(mode="json", exclude_none=True))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="write the published reference profiles")
    given = parser.add_mutually_exclusive_group(required=True)
    given.add_argument("--constants", metavar="PATH",
                       help="the GPU families' fitted constants, stack factors and model error, as `python -m "
                            "predictor.published.fit` writes them (shipped: predictor/data/system_constants.yaml)")
    given.add_argument("--datasheet-only", action="store_true", help="published figures only, no fitted constants")
    parser.add_argument("--out-dir", default=str(shipped_profiles_dir()),
                        help="folder to write into (default: the shipped profiles, calibrate/profiles)")
    args = parser.parse_args(argv)
    try:
        fitted = {} if args.datasheet_only else read_fitted(args.constants)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for node in NODES:
        path = Path(args.out_dir) / node.file
        try:
            write_atomic(path, render(node, **fitted))
        except UserError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
