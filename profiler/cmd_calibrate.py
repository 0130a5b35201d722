"""`profiler calibrate`: run the microbenchmark sections on this machine and write a profile.

Sections run in order: compute, memory (STREAM), input, host_device (GPU only), collectives (needs >= 2 ranks);
every check a user can fail happens before the first benchmark. The samples are collected into a Profile
(provenance `calibrated`), fitted by the `fit` run() is given, and written atomically; Ctrl-C, or a UserError
inside a section, writes the samples so far to `<out>.partial` and exits 130 / 2. The profiler measures and does
not fit: the `profiler` command (paraoracle.calibrate_model) passes calibrate.fit.fit_profile, while
`python -m profiler calibrate`, the profiler stage alone, writes the samples unfitted (`profiler fit` fits them).
docs/calibration.md.
"""
from __future__ import annotations

import argparse
import dataclasses
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import torch
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from profiler import store
from profiler.allocator import keep_freed_memory
from profiler.bench_compute import GPU_SECONDS_PER_POINT, choose_grid, plan_compute
from profiler.bench_framework import measure_cold, plan_framework
from profiler.bench_input import input_cases
from profiler.bench_memory import first_touch_cases, host_device_cases, last_level_cache_bytes, stream_cases
from profiler.cases import (MAX_OPERAND_COPIES, ROTATION_L2_MULTIPLE, ROTATION_LLC_MULTIPLE, BenchCase, compute_passes,
                            measure_case, timer_settings)
from profiler.cliutil import thread_count
from profiler import at_scale_sections
from profiler.comm import section as collectives
from profiler.errors import UserError
from profiler.metadata import collect_machine
from profiler.profile import SCHEMA_VERSION, Machine, Profile, Provenance, Sample, save_profile, utc_now_iso
from profiler.shape_file import load_shape_cases
from profiler.threads import rank_share_threads

SECTIONS = ("compute", "memory", "input", "host_device", "collectives", "storage")
#: the compute section's shapes (--grid): the device's own grid, or DeepBench's list (profiler.bench_deepbench)
GRIDS = ("default", "deepbench")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                        help="where to run the benchmarks (default auto: cuda when a GPU is visible, else cpu)")
    parser.add_argument("--quick", action="store_true",
                        help="a smaller grid (CPU: compute + memory in well under 90 s on 2 cores)")
    parser.add_argument("--grid", choices=GRIDS, default="default",
                        help="the compute section's shapes: default (the device's grid; --quick a smaller one) or "
                             "deepbench (--device cuda: DeepBench's GEMM and convolution list in float32 and float16, "
                             "to set beside DeepBench's published times)")
    parser.add_argument("--only", default=None,
                        help=f"comma-separated sections to run (default: all the device has: {', '.join(SECTIONS)}; "
                             "host_device only on cuda; collectives only with >= 2 ranks; storage only when named, "
                             "with --path)")
    parser.add_argument("--shapes", metavar="FILE",
                        help="also measure these compute shapes (YAML, e.g. from `predictor shapes`: a model's "
                             "per-device layers); the profile then costs exactly these shapes by their measured times")
    parser.add_argument("--threads", type=thread_count, default=None,
                        help="CPU threads of the compute and memory benchmarks (default: torch's, or with --ranks R on "
                             "cpu each rank's share of the cores, cores // R, as those ranks will train)")
    parser.add_argument("--force", action="store_true", help="overwrite --out if it is an existing file")
    parser.add_argument("--out", required=True,
                        help="profile file to write, or an existing folder (then <hostname>-<UTC time>.yaml in it)")
    collectives.add_arguments(parser)
    at_scale_sections.add_arguments(parser)


def resolve_device(requested: str) -> str:
    if requested == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda: no CUDA GPU is visible to torch (torch.cuda.is_available() is False); "
                        "use --device cpu")
    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return requested


def benchmark_threads(args, device: str) -> tuple[int, str]:
    """The intra-op threads the single-process benchmarks run with, and why (--threads; profiler.threads)."""
    if args.threads is not None:
        return args.threads, "--threads"
    if device == "cpu" and args.ranks > 1:
        return rank_share_threads(args.ranks), f"cores // --ranks {args.ranks}"
    return torch.get_num_threads(), "torch default"


def parse_sections(only: str | None, device: str) -> list[str]:
    """The sections to run, in SECTIONS order; UserError names an unknown or impossible item."""
    if only is None:
        return [s for s in SECTIONS if (s != "host_device" or device == "cuda") and s != "storage"]
    items = [item.strip() for item in only.split(",") if item.strip()]
    if not items:
        raise UserError(f"--only {only!r}: give at least one of {', '.join(SECTIONS)}")
    for item in items:
        if item not in SECTIONS:
            raise UserError(f"--only: unknown section '{item}'; known: {', '.join(SECTIONS)}")
    if "host_device" in items and device != "cuda":
        raise UserError("--only host_device: host<->device copies need --device cuda")
    return [s for s in SECTIONS if s in items]


def check_grid(args, device: str) -> str:
    """The --grid asked for; UserError for a combination that cannot run (before any benchmark)."""
    grid = getattr(args, "grid", "default")
    if grid == "deepbench":
        if device != "cuda":
            raise UserError("--grid deepbench: DeepBench's shapes are GPU kernels; use --device cuda")
        if args.quick:
            raise UserError("--grid deepbench runs DeepBench's whole list; drop --quick")
    return grid


@dataclass
class Calibration:
    """The samples and settings gathered so far, and how to turn them into a Profile."""

    machine: Machine
    created: str
    settings: dict
    samples: list[Sample] = field(default_factory=list)

    def profile(self) -> Profile:
        return Profile(schema_version=SCHEMA_VERSION, machine=self.machine,
                       provenance=Provenance(kind="calibrated", source=f"profiler calibrate on {self.machine.hostname}"),
                       created=self.created, settings=self.settings, samples=list(self.samples))


def save_uninterrupted(profile: Profile, path: Path) -> None:
    """Write atomically with Ctrl-C held off, so a second Ctrl-C cannot lose the file being written."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        save_profile(profile, path)
    finally:
        signal.signal(signal.SIGINT, previous)


def plan_section(name: str, device: str, quick: bool, grid: str = "default") -> list[BenchCase]:
    if name == "compute" and grid == "deepbench":
        from profiler.bench_deepbench import plan_deepbench
        return plan_deepbench(device)
    if name == "compute":
        return plan_compute(device, quick) + plan_framework(device)
    if name == "memory":
        return stream_cases(device, quick) + first_touch_cases(device)
    if name == "input":
        return input_cases(quick)
    return host_device_cases(device, quick)


def _progress(console: Console) -> Progress:
    return Progress(TextColumn("[bold]{task.description:<12}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), TextColumn("{task.fields[point]}"),
                    console=console)


def run_sections(cal: Calibration, plans: dict[str, list[BenchCase]], sections: list[str], args, device: str,
                 console: Console) -> None:
    """Measure every section in order, appending to cal.samples as each point completes."""
    timer_kwargs = timer_settings(device, args.quick)
    with _progress(console) as progress:
        sweeps = {name: section_sweep(name, cases, device) for name, cases in plans.items()}
        tasks = {name: progress.add_task(name, total=len(sweep), point="") for name, sweep in sweeps.items()}
        if "collectives" in sections:
            tasks["collectives"] = progress.add_task("collectives", total=None, point="")
        if "storage" in sections:
            tasks["storage"] = progress.add_task("storage", total=4, point="")
        for name in sections:
            cal.settings["sections_started"].append(name)
            started = time.perf_counter()
            if name == "collectives":
                def sink(sample: Sample) -> None:
                    cal.samples.append(sample)
                    point = f"{sample.benchmark} {sample.params.get('size_bytes', '')}"
                    progress.update(tasks[name], advance=1, point=point)

                result = at_scale_sections.measure_collectives(args, device, sink)
                cal.settings["collectives"] = result
                progress.update(tasks[name], total=progress.tasks[tasks[name]].completed,
                                point="skipped" if "skipped" in result else "done")
                cal.settings.setdefault("section_s", {})[name] = round(time.perf_counter() - started, 3)
                continue
            if name == "storage":  # profiler/bench_storage.py: files of its own under --path, removed afterwards
                progress.update(tasks[name], point=f"{args.readers} readers under {args.path}"[:60])
                cal.settings["storage"] = at_scale_sections.measure_storage(
                    args, device, lambda sample: (cal.samples.append(sample), progress.advance(tasks[name])))
                progress.update(tasks[name], point="done")
                cal.settings.setdefault("section_s", {})[name] = round(time.perf_counter() - started, 3)
                continue
            for case in sweeps[name]:
                progress.update(tasks[name], point=case.label[:60])
                if case.label in cal.settings.get("failed_points", {}):  # failed in an earlier pass
                    progress.advance(tasks[name])
                    continue
                try:
                    cal.samples.append(measure_case(case, device, case_timer_kwargs(timer_kwargs, case, device),
                                                    llc_bytes=cal.settings.get("last_level_cache_bytes", 0)))
                except RuntimeError as err:  # a backend that cannot run this point (no kernel, out of memory)
                    reason = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
                    cal.settings.setdefault("failed_points", {})[case.label] = reason
                    console.print(f"profiler calibrate: warning: {case.label}: skipped ({reason})")
                    if device.startswith("cuda"):
                        torch.cuda.empty_cache()  # an out-of-memory point must not starve the next ones
                progress.advance(tasks[name])
            if name == "compute" and not device.startswith("cuda") and any(
                    case.benchmark == "framework" for case in plans[name]):  # the warm chains' cold counterpart
                progress.update(tasks[name], point="framework cold-code chains (round-robin)")
                cal.samples.extend(measure_cold(device, args.quick))
            progress.update(tasks[name], point="done")
            cal.settings.setdefault("section_s", {})[name] = round(time.perf_counter() - started, 3)


def section_sweep(name: str, cases: list[BenchCase], device: str) -> list[BenchCase]:
    """The cases in run order: the compute section's ops in profiler.cases.compute_passes sweeps, each over
    every shape in the same order (a shape's passes are a whole sweep apart), tagged `pass` 1, 2, ...;
    the framework-overhead cases, and every other section, once."""
    passes = compute_passes(device) if name == "compute" else 1
    if passes == 1:
        return list(cases)
    ops = [case for case in cases if case.benchmark != "framework"]
    return ([dataclasses.replace(case, tags={**case.tags, "pass": p}) for p in range(1, passes + 1) for case in ops]
            + [case for case in cases if case.benchmark == "framework"])


def case_timer_kwargs(timer_kwargs: dict, case: BenchCase, device: str) -> dict:
    """A case swept in several passes gets an equal share of the per-point warm-up and time budget in each."""
    if "pass" not in case.tags:
        return timer_kwargs
    passes = compute_passes(device)
    return {**timer_kwargs, "warmup_s": timer_kwargs["warmup_s"] / passes, "budget_s": timer_kwargs["budget_s"] / passes}


#: turns a profile's samples into its coefficients (calibrate.fit.fit_profile, given by the `profiler` command)
Fit = Callable[[Profile], Profile]


def fit_or_warn(profile: Profile, path: Path, console: Console, fit: Fit) -> Profile:
    """fit(profile); a UserError only warns (the samples are still written). Any other failure
    is a bug: the unfitted profile is written first so the measurements survive it."""
    try:
        return fit(profile)
    except UserError as err:
        console.print(f"profiler calibrate: warning: fit skipped: {err}")
        return profile
    except Exception:
        save_uninterrupted(profile, path)
        raise


def run(args, fit: Optional[Fit] = None) -> int:
    """Measure and write the profile, fitted by `fit` (None: written unfitted)."""
    if collectives.is_worker_rank():
        return at_scale_sections.run_worker_repeated(args)
    device = resolve_device(args.device)
    sections = parse_sections(args.only, device)
    grid_asked = check_grid(args, device)
    if "collectives" in sections:
        collectives.preflight(args, device, args.quick)  # bad collectives flags fail before any benchmark runs
    at_scale_sections.preflight(args, sections)  # --path, --readers, --repeat-over (profiler/at_scale_sections.py)
    threads, threads_source = benchmark_threads(args, device)
    torch.set_num_threads(threads)
    machine = collect_machine(device)
    out = store.resolve_out(args.out, machine.hostname, args.force)
    allocator = keep_freed_memory()  # the malloc regime the validation runs use too (profiler/allocator.py)
    grid = choose_grid(device, args.quick)
    if grid_asked == "deepbench":
        from profiler.bench_deepbench import DEEPBENCH_DTYPES
        grid = dataclasses.replace(grid, name="deepbench", dtypes=DEEPBENCH_DTYPES)
    settings = {
        "command": "profiler calibrate " + " ".join(sys.argv[2:]),
        "device": device, "quick": bool(args.quick), "grid": grid.name, "sections": sections,
        "sections_started": [], "dtypes": list(grid.dtypes), "threads": torch.get_num_threads(),
        "threads_source": threads_source,
        "timer": timer_settings(device, args.quick), "conv_layout": "NCHW (contiguous)",
        "last_level_cache_bytes": last_level_cache_bytes(device), "allocator": allocator,
        "operands": (f"rotating: copies adding up to {ROTATION_L2_MULTIPLE} x the L2, at most {MAX_OPERAND_COPIES}; "
                     "L2 flushed before each sample; results from the caching allocator" if device.startswith("cuda")
                     else f"rotating: copies adding up to {ROTATION_LLC_MULTIPLE} x the last-level cache, "
                          f"at most {MAX_OPERAND_COPIES}"),
    }
    plans = {name: plan_section(name, device, args.quick, grid.name) for name in sections
             if name not in ("collectives", "storage")}
    if args.shapes:
        if "compute" not in plans:
            raise UserError("--shapes: the shapes are measured in the compute section; add compute to --only")
        shape_cases = load_shape_cases(args.shapes, device, grid.dtypes)
        plans["compute"] += shape_cases
        settings["shapes_file"] = {"path": str(args.shapes), "points": len(shape_cases)}
        request = getattr(args, "shapes_request", None)  # `profiler calibrate --model` (paraoracle/calibrate_model.py)
        if request:  # its shapes file was temporary: record what it was written for instead
            settings["shapes_file"] = {"model": request, "points": len(shape_cases)}
    settings["points"] = {name: len(section_sweep(name, cases, device)) for name, cases in plans.items()}
    settings["compute_passes"] = compute_passes(device)
    fallback = next((c.tags["cuda_c_unavailable"] for c in plans.get("memory", []) if "cuda_c_unavailable" in c.tags),
                    None)
    if fallback:
        settings["stream_cuda_c_unavailable"] = fallback
    cal = Calibration(machine=machine, created=utc_now_iso(), settings=settings)
    console = Console(stderr=True, highlight=False, soft_wrap=True)
    planned = ", ".join(f"{name} {settings['points'][name]} points" for name in plans)
    estimate = (f" (about {sum(settings['points'].values()) * GPU_SECONDS_PER_POINT:.0f} s on an H100-class GPU)"
                if device.startswith("cuda") and plans else "")
    console.print(f"profiler calibrate: {device}, {grid.name} grid: {planned or 'no single-process points'}"
                  f"{estimate}{', collectives' if 'collectives' in sections else ''} -> {out}")
    if fallback:
        console.print(f"profiler calibrate: warning: STREAM runs as torch ops, not kernels/stream.cu ({fallback})")
    started = time.perf_counter()
    partial = store.partial_path(out)
    try:
        run_sections(cal, plans, sections, args, device, console)
    except KeyboardInterrupt:
        cal.settings.update(interrupted=True, duration_s=round(time.perf_counter() - started, 3))
        save_uninterrupted(cal.profile(), partial)
        print(f"profiler calibrate: interrupted; {len(cal.samples)} samples so far written to {partial}", file=sys.stderr)
        return 130
    except UserError as err:
        cal.settings.update(failed=str(err), duration_s=round(time.perf_counter() - started, 3))
        save_uninterrupted(cal.profile(), partial)
        raise UserError(f"{cal.settings['sections_started'][-1]} section: {err} "
                        f"({len(cal.samples)} samples so far written to {partial})") from None
    except Exception as err:  # a bug: keep the measurements, then show the traceback
        cal.settings.update(failed=repr(err), duration_s=round(time.perf_counter() - started, 3))
        save_uninterrupted(cal.profile(), partial)
        raise
    cal.settings["duration_s"] = round(time.perf_counter() - started, 3)
    try:
        profile = fit_or_warn(cal.profile(), out, console, fit) if fit is not None else cal.profile()
    except KeyboardInterrupt:  # every benchmark ran: keep them all, unfitted, in the real output
        save_uninterrupted(cal.profile(), out)
        print(f"profiler calibrate: interrupted while fitting; wrote {out} with all {len(cal.samples)} samples, "
              f"not fitted (run `profiler fit {out}`)", file=sys.stderr)
        return 130
    save_uninterrupted(profile, out)
    fitted = ("fitted" if profile.coefficients else "not fitted" if fit is not None
              else f"not fitted: `profiler fit {out}`")
    print(f"wrote {out}: {len(profile.samples)} samples ({fitted}) in {cal.settings['duration_s']:.1f} s")
    return 0
