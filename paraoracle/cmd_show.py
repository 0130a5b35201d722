"""`profiler show PATH`: a readable summary of a profile — machine, provenance, what was measured, headline
figures, and the fitted coefficients with their warnings.

Headline figures use each sample's median per-call time: throughput = flops (or bytes moved) / median.
STREAM "cache" is the best rate over sizes whose arrays fit in the last-level cache together, "DRAM" the
rate at the largest size (>= 4x LLC per array). Collective bus bandwidth is nccl-tests' busbw
(profiler/comm/factors.py; nccl-tests doc/PERFORMANCE.md).
"""
from __future__ import annotations

import argparse
import statistics
import sys
from collections import Counter, defaultdict
from typing import Optional

from rich.console import Console
from rich.table import Table

from calibrate.profile_arguments import add_profile_argument, profile_of
from profiler.profile import Profile, Sample, load_profile

COMPUTE_HEADLINES = (("gemm", "fwd"), ("linear", "fwd"), ("linear", "bwd_data"), ("linear", "bwd_weight"),
                     ("conv2d", "fwd"), ("conv2d", "bwd_data"), ("conv2d", "bwd_weight"),
                     ("conv3d", "fwd"), ("conv3d", "bwd_data"), ("conv3d", "bwd_weight"))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_profile_argument(parser, "profile to summarise", positional="PROFILE")
    parser.add_argument("--detail", action="store_true",
                        help="every headline figure with its shape, every fit with its interval and held-out error, "
                             "every warning (default: one screen of at most 40 lines)")


def rate_per_s(sample: Sample, amount: Optional[float]) -> Optional[float]:
    """amount / median per-call time (None without an amount or a positive time)."""
    median = statistics.median(sample.times_s)
    return amount / median if amount and median > 0 else None


def best_compute(profile: Profile) -> list[tuple[str, str, str, float, dict]]:
    """(benchmark, variant, dtype, best FLOP/s, params of the best shape) for each headline op."""
    best: dict[tuple[str, str, str], tuple[float, dict]] = {}
    for s in profile.samples:
        if (s.benchmark, s.variant) not in COMPUTE_HEADLINES:
            continue
        rate = rate_per_s(s, s.flops)
        key = (s.benchmark, s.variant, s.dtype)
        if rate is not None and (key not in best or rate > best[key][0]):
            best[key] = (rate, s.params)
    order = {h: i for i, h in enumerate(COMPUTE_HEADLINES)}
    return [(b, v, d, rate, params) for (b, v, d), (rate, params) in
            sorted(best.items(), key=lambda item: (order[item[0][:2]], item[0][2]))]


def stream_figures(profile: Profile) -> list[tuple[str, str, Optional[float], Optional[float]]]:
    """(side, kernel, cache bytes/s, DRAM bytes/s) per STREAM kernel and side (host/device)."""
    llc = profile.settings.get("last_level_cache_bytes")
    by_key: dict[tuple[str, str], list[Sample]] = defaultdict(list)
    for s in profile.samples:
        if s.benchmark == "stream":
            by_key[("host" if s.device.startswith("cpu") else "device", s.variant)].append(s)
    out = []
    for (side, kernel), samples in sorted(by_key.items()):
        samples.sort(key=lambda s: s.params.get("n", 0))
        in_cache = [s for s in samples if llc and 3 * s.params.get("array_bytes", 0) <= llc]
        cache = max((rate_per_s(s, s.bytes_moved) or 0 for s in in_cache), default=None)
        dram = rate_per_s(samples[-1], samples[-1].bytes_moved) if len(samples) > 1 else None
        out.append((side, kernel, cache, dram))
    return out


def host_device_figures(profile: Profile) -> list[tuple[str, float, float]]:
    """(variant, best bytes/s, size at best) per host<->device copy variant."""
    best: dict[str, tuple[float, float]] = {}
    for s in profile.samples:
        if s.benchmark == "host_device":
            rate = rate_per_s(s, s.bytes_moved)
            if rate is not None and (s.variant not in best or rate > best[s.variant][0]):
                best[s.variant] = (rate, s.params.get("size_bytes", s.bytes_moved))
    return [(v, rate, size) for v, (rate, size) in sorted(best.items())]


def busbw_per_s(sample: Sample) -> Optional[float]:
    """nccl-tests bus bandwidth of one collective sample: S / median time * factor(op, group size)."""
    group = sample.params.get("group") or {}
    size = sample.params.get("size_bytes", sample.bytes_moved)
    try:
        from profiler.comm.factors import busbw_factor

        factor = busbw_factor(sample.benchmark, int(group.get("size", 0)))
    except (ImportError, KeyError, ValueError):
        return sample.extra.get("busbw_bytes_per_s")
    return rate_per_s(sample, size * factor) if size else None


def collective_figures(profile: Profile) -> list[tuple[str, int, int, float, float]]:
    """(op, group size, nodes, max busbw, size at max) over the throughput samples of each op and group."""
    best: dict[tuple[str, int, int], tuple[float, float]] = {}
    for s in profile.samples:
        group = s.params.get("group")
        if not isinstance(group, dict) or s.variant == "latency":
            continue
        bw = busbw_per_s(s)
        key = (s.benchmark, int(group.get("size", 0)), int(group.get("nodes", 1)))
        if bw is not None and (key not in best or bw > best[key][0]):
            best[key] = (bw, s.params.get("size_bytes", 0))
    return [(op, n, nodes, bw, size) for (op, n, nodes), (bw, size) in sorted(best.items())]


def _si(value: Optional[float], unit: str, scale: float = 1e9, prefix: str = "G") -> str:
    return "-" if value is None else f"{value / scale:,.1f} {prefix}{unit}"


def _bytes(n: float) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.4g} {unit}"
    return f"{n:g} B"


def _shape(params: dict) -> str:
    """Compact shape: `N=4 C=64 F=64 H=56 W=56 k3/s1/p1`."""
    dims = " ".join(f"{k}={v}" for k, v in params.items() if k not in ("kernel", "stride", "padding"))
    if "kernel" in params:
        dims += f" k{params['kernel']}/s{params.get('stride', 1)}/p{params.get('padding', 0)}"
    return dims


def machine_lines(profile: Profile) -> list[str]:
    m = profile.machine
    lines = [f"host {m.hostname}: {m.cpu_model or 'unknown CPU'}, {m.cpu_cores or '?'} cores, "
             f"{_bytes(m.memory_bytes) if m.memory_bytes else '? memory'}; nodes {m.nodes}, "
             f"devices per node {m.gpus_per_node}"]
    for i, g in enumerate(m.gpus):
        throttled = f", THROTTLED: {', '.join(g.throttle_reasons)}" if g.throttle_reasons else ""
        lines.append(f"gpu {i}: {g.name}, {_bytes(g.memory_bytes) if g.memory_bytes else '? memory'}, "
                     f"SM {g.sm_clock_mhz or '?'} MHz, mem {g.mem_clock_mhz or '?'} MHz, power limit "
                     f"{g.power_limit_w or '?'} W, {g.temperature_c or '?'} C, PCIe gen {g.pcie_generation or '?'} "
                     f"x{g.pcie_width or '?'}, NVLink links {g.nvlink_links if g.nvlink_links is not None else '?'}"
                     f"{throttled}")
    versions = ", ".join(f"{k} {v}" for k, v in m.versions.items() if v)
    if m.driver_version:
        versions = f"driver {m.driver_version}, {versions}"
    if versions:
        lines.append(f"software: {versions}")
    return lines


def measured_lines(profile: Profile) -> list[str]:
    counts = Counter(s.benchmark for s in profile.samples)
    dtypes = sorted({s.dtype for s in profile.samples})
    st = profile.settings
    how = ", ".join(f"{k} {st[k]}" for k in ("device", "grid", "threads", "duration_s") if k in st)
    lines = [f"created {profile.created}; {len(profile.samples)} samples"
             + (f": {', '.join(f'{b} {n}' for b, n in sorted(counts.items()))}" if counts else "")]
    if dtypes:
        lines.append(f"dtypes: {', '.join(dtypes)}" + (f"; {how}" if how else ""))
    if st.get("interrupted"):
        lines.append("INTERRUPTED: this is a partial profile (the run was stopped with Ctrl-C)")
    if st.get("failed"):
        lines.append(f"FAILED: partial profile; the run stopped on: {st['failed']}")
    if st.get("failed_points"):
        lines.append(f"{len(st['failed_points'])} points could not run (see settings.failed_points), e.g. "
                     f"{next(iter(st['failed_points'].items()))}")
    if isinstance(st.get("collectives"), dict) and "skipped" in st["collectives"]:
        lines.append(f"collectives skipped: {st['collectives']['skipped']}")
    return lines


def render(profile: Profile, path: str, console: Console) -> None:
    console.rule(f"[bold]{path}")
    if profile.provenance.kind == "published":
        console.print(f"[bold red]PUBLISHED profile: figures come from datasheets/literature, NOT from measurements "
                      f"on this machine[/] (source: {profile.provenance.source})")
    else:
        console.print(f"provenance: calibrated ({profile.provenance.source})")
    for line in machine_lines(profile) + measured_lines(profile):
        console.print(line)

    compute = best_compute(profile)
    if compute:
        table = Table(title="compute: best throughput (flops / median time)", title_justify="left")
        for col in ("op", "pass", "dtype", "GFLOP/s"):
            table.add_column(col)
        table.add_column("at shape", overflow="fold")
        for b, v, d, rate, params in compute:
            table.add_row(b, v, d, f"{rate / 1e9:,.1f}", _shape(params))
        console.print(table)
    stream = stream_figures(profile)
    if stream:
        table = Table(title="memory: STREAM bandwidth (bytes moved / median time)", title_justify="left")
        for col in ("side", "kernel", "cache GB/s", "DRAM GB/s (largest size)"):
            table.add_column(col)
        for side, kernel, cache, dram in stream:
            table.add_row(side, kernel, _si(cache, "B/s").replace(" GB/s", ""), _si(dram, "B/s").replace(" GB/s", ""))
        console.print(table)
    copies = host_device_figures(profile)
    if copies:
        table = Table(title="host<->device copies: best bandwidth", title_justify="left")
        for col in ("variant", "GB/s", "at size"):
            table.add_column(col)
        for variant, rate, size in copies:
            table.add_row(variant, f"{rate / 1e9:,.1f}", _bytes(size))
        console.print(table)
    colls = collective_figures(profile)
    if colls:
        table = Table(title="collectives: max bus bandwidth (nccl-tests busbw)", title_justify="left")
        for col in ("op", "ranks", "nodes", "busbw GB/s", "at size"):
            table.add_column(col)
        for op, n, nodes, bw, size in colls:
            table.add_row(op, str(n), str(nodes), f"{bw / 1e9:,.2f}", _bytes(size))
        console.print(table)

    if profile.coefficients:
        from calibrate.report import fit_lines, fit_warnings

        console.rule("coefficients")
        for line in fit_lines(profile):
            console.print(line)
        warnings = fit_warnings(profile)
        for line in warnings:
            console.print(f"[bold yellow]warning:[/] {line}")
    else:
        console.print("coefficients: none (run `profiler fit PATH` to fit them from the samples)")


# ---- the first screen (issue 39): at most SUMMARY_LINES lines ------------------------------------------------
SUMMARY_LINES = 40
HEADLINE_OPS = ("gemm", "linear", "conv2d", "conv3d")
WORST_FITS = 3


def gpu_lines(profile: Profile) -> list[str]:
    """The devices in one line per distinct model (count x description), throttled devices named."""
    groups: dict[str, int] = {}
    throttled = []
    for i, g in enumerate(profile.machine.gpus):
        text = (f"{g.name}, {_bytes(g.memory_bytes) if g.memory_bytes else '? memory'}, SM {g.sm_clock_mhz or '?'} "
                f"MHz, PCIe gen {g.pcie_generation or '?'} x{g.pcie_width or '?'}, NVLink links "
                f"{g.nvlink_links if g.nvlink_links is not None else '?'}")
        groups[text] = groups.get(text, 0) + 1
        if g.throttle_reasons:
            throttled.append(f"gpu {i} ({', '.join(g.throttle_reasons)})")
    lines = [f"gpus: {n} x {text}" for text, n in groups.items()]
    if throttled:
        lines.append(f"THROTTLED: {'; '.join(throttled)}")
    return lines


def compute_headline(profile: Profile, coefficients) -> tuple[str, list[str], list[tuple[str, dict]]]:
    """(what the figures are, dtypes, rows of (op pass, {dtype: FLOP/s})): the best measured throughput of the
    headline ops, or for a profile without compute samples its fitted or published peaks."""
    rows: dict[str, dict] = {}
    for b, v, d, rate, _ in best_compute(profile):
        if b in HEADLINE_OPS:
            rows.setdefault(f"{b} {v}", {})[d] = rate
    what = "best measured GFLOP/s"
    if not rows and coefficients is not None:
        what = "peak GFLOP/s (" + ("published" if profile.provenance.kind == "published" else "fitted") + ")"
        for key, fit in sorted(coefficients.compute.items()):
            op, variant, dtype = key.split("/")
            if (op, variant) in COMPUTE_HEADLINES and fit.kind == "flops":
                rows.setdefault(f"{op} {variant}", {})[dtype] = fit.peak_per_s
    order = {f"{b} {v}": i for i, (b, v) in enumerate(COMPUTE_HEADLINES)}
    dtypes = sorted({d for r in rows.values() for d in r})
    ranked = sorted(rows.items(), key=lambda item: order.get(item[0], 99))
    if len(ranked) > 1 and all(r == ranked[0][1] for _, r in ranked):  # one peak per dtype (a datasheet's)
        ranked = [("every headline op", ranked[0][1])]
    return what, dtypes, ranked


def bandwidth_lines(profile: Profile, coefficients) -> list[str]:
    """Memory, host<->device and collective bandwidths in one line each: measured (STREAM triad, best copy,
    nccl-tests busbw), else from the fits (published profiles)."""
    lines = []
    stream = {(side, kernel): (cache, dram) for side, kernel, cache, dram in stream_figures(profile)}
    parts = [f"{side} cache {_si(cache, 'B/s')}, DRAM {_si(dram, 'B/s')}" for (side, kernel), (cache, dram)
             in sorted(stream.items()) if kernel == "triad"]
    if not parts and coefficients is not None:
        parts = [f"{key.split('/')[0]} {_si(fit.segments[-1].bandwidth_bytes_per_s.value, 'B/s')}"
                 for key, fit in sorted(coefficients.memory.items()) if key.endswith("/triad")]
    if parts:
        lines.append("memory (STREAM triad): " + "; ".join(parts))
    copies = [f"{variant} {_si(rate, 'B/s')}" for variant, rate, _ in host_device_figures(profile)]
    if not copies and coefficients is not None:
        copies = [f"{key} {_si(fit.segments[-1].bandwidth_bytes_per_s.value, 'B/s')}"
                  for key, fit in sorted(coefficients.host_device.items())]
    if copies:
        lines.append("host<->device copies: " + ", ".join(copies))
    best: dict[str, tuple] = {}
    for op, n, nodes, bw, _ in collective_figures(profile):
        if op not in best or bw > best[op][0]:
            best[op] = (bw, n, nodes)
    colls = [f"{op} {_si(bw, 'B/s')} ({n} ranks, {nodes} node{'s' if nodes > 1 else ''})"
             for op, (bw, n, nodes) in sorted(best.items())]
    if colls:
        lines.append("collectives (max busbw): " + "; ".join(colls))
    elif coefficients is not None and coefficients.links:
        links = [f"{op} " + "/".join(_si(link.bus_bandwidth_bytes_per_s.value, "B/s") for link in levels.values())
                 for op, levels in sorted(coefficients.links.items()) if op in ("allreduce", "allgather", "sendrecv")]
        lines.append("links, bus bandwidth intra/inter-node: " + "; ".join(links))
        groups = coefficients.links.get("allreduce", {}).get("intra")
        if groups is not None and groups.bus_bandwidth_by_group:
            lines.append("all-reduce inside a node by group size: " + ", ".join(
                f"{g} GPUs {_si(bw.value, 'B/s')}" for g, bw in sorted(groups.bus_bandwidth_by_group.items())))
    dispatch = getattr(coefficients, "host_dispatch", None)
    if dispatch is not None and not coefficients.device_is_host:
        lines.append(f"host dispatch per layer pass (its least time unless replayed as CUDA graphs): forward "
                     f"{dispatch.forward_per_layer_s.value * 1e6:.1f} us, backward {dispatch.backward_per_layer_s.value * 1e6:.1f} us"
                     + (f"; each expert GEMM {dispatch.per_expert_gemm_s.value * 1e6:.2f} us"
                        if dispatch.per_expert_gemm_s is not None else ""))
    return lines


def kernel_model_lines(coefficients) -> list[str]:
    """The GPU kernel model a profile carries (calibrate.gpu_kernels): the GPU it runs on, which calls it costs, and
    its held-out median accuracy per family and dtype where the fit had two applications or more."""
    model = getattr(coefficients, "gpu_kernels", None)
    if model is None:
        return []
    ops = ", ".join(model.ops) if model.ops else "GEMMs, linear layers and convolutions"
    out = [f"GPU kernel model ({model.gpu}, {model.sms} SMs) costs {ops}; dtypes {', '.join(sorted(model.modes))}"]
    for dtype, mode in sorted(model.modes.items()):
        held = mode.held_out_median_accuracy or {}
        wanted = [f for f in held if model.ops is None or f.split("/")[0] in model.ops]
        if wanted:
            scores = ", ".join(f"{f} {100 * held[f]:.0f}%" for f in sorted(wanted))
            out.append(f"  {dtype} held out where its constants were measured: {scores}")
    return out


def fit_summary(profile: Profile) -> list[str]:
    """How many fits miss their target (held-out median error above calibrate.report's threshold), the worst."""
    from calibrate.report import WARN_MEDIAN_REL_ERROR, fit_qualities

    named = fit_qualities(profile)
    held = [(name, q) for name, q in named if q is not None]
    if not held:
        kind = "published figures, not fitted" if profile.provenance.kind == "published" else "too few samples"
        return [f"fits: {len(named)}, none with a held-out error ({kind})"]
    outside = sorted(((q.median_rel_error, name) for name, q in held if q.median_rel_error > WARN_MEDIAN_REL_ERROR),
                     reverse=True)
    line = (f"fits: {len(named)}, {len(held)} with a held-out error; {len(outside)} outside the "
            f"{WARN_MEDIAN_REL_ERROR:.0%} target (held-out median error)")
    if outside:
        line += "; worst: " + ", ".join(f"{name} {err:.1%}" for err, name in outside[:WORST_FITS])
    return [line]


def render_summary(profile: Profile, path: str, console: Console) -> None:
    """One screen: provenance, machine, what was measured, the headline throughputs and bandwidths, and how the
    fits did (`render` with --detail prints everything)."""
    from rich import box

    from calibrate.coefficients import parse_coefficients
    from profiler.errors import UserError

    try:
        coefficients = parse_coefficients(profile.coefficients, path) if profile.coefficients else None
    except UserError:
        coefficients = None
    console.rule(f"[bold]{path}")
    if profile.provenance.kind == "published":
        console.print(f"[bold red]PUBLISHED profile: figures come from datasheets/literature, NOT from measurements "
                      f"on this machine[/] (source: {profile.provenance.source})")
    else:
        console.print(f"provenance: calibrated ({profile.provenance.source})")
    machine = machine_lines(profile)
    for line in [machine[0]] + gpu_lines(profile) + machine[1 + len(profile.machine.gpus):] + measured_lines(profile):
        console.print(line)
    what, dtypes, rows = compute_headline(profile, coefficients)
    if rows:
        table = Table(title=f"compute: {what}", title_justify="left", box=box.SIMPLE_HEAD, show_edge=False,
                      pad_edge=False)
        table.add_column("op")
        for d in dtypes:
            table.add_column(d, justify="right")
        for name, by_dtype in rows:
            table.add_row(name, *[f"{by_dtype[d] / 1e9:,.1f}" if d in by_dtype else "-" for d in dtypes])
        console.print(table)
    for line in bandwidth_lines(profile, coefficients) + kernel_model_lines(coefficients):
        console.print(line)
    if profile.coefficients:
        for line in fit_summary(profile):
            console.print(line)
    else:
        console.print("coefficients: none (run `profiler fit PATH` to fit them from the samples)")
    console.print("every figure with its shape, every fit and warning: profiler show --detail")


def run(args) -> int:
    args.path = profile_of(args)
    profile = load_profile(args.path)
    width = None if sys.stdout.isatty() else 140  # logs and pipes: wide enough for every table unwrapped
    console = Console(highlight=False, soft_wrap=True, width=width)
    if args.detail:
        render(profile, args.path, console)
    else:
        render_summary(profile, args.path, console)
    return 0
