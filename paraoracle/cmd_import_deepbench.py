"""`profiler import-deepbench FILE... (--out PATH | --into PROFILE [--out PATH]) [--force]`: read Baidu DeepBench
results, its published .xlsx workbooks or the text its benchmark binaries print, into a profile's samples
(parsing: profiler/deepbench.py), so a GPU DeepBench measured can be predicted without measuring it again.

--out alone writes a new profile whose machine is the one the Specs sheet names (GPU, CPU, CUDA, cuDNN and
driver versions); --into merges into an existing profile (written back to it, or to --out), replacing samples
imported earlier from a file with the same content. One GPU per profile: files naming different GPUs are
refused. A shape the files do not name an application for takes the one DeepBench's carried workbooks name (the
kernel model's held-out figures need them). Writes are atomic; the result is refitted (a fit that fails keeps the
samples and says why).
"""
from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path
from typing import Optional

from calibrate.deepbench_kernels import labelled
from calibrate.profile_arguments import add_profile_argument
from paraoracle.imports import base_profile, import_target, merged, refit
from profiler.deepbench import DeepBenchRun, read_deepbench
from profiler.errors import UserError
from profiler.profile import SCHEMA_VERSION, GPUInfo, Machine, Profile, Provenance, save_profile, utc_now_iso


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE",
                        help="DeepBench results: a workbook (.xlsx) or the text gemm_bench, conv_bench, "
                             "nccl_*_all_reduce, ring_all_reduce_mpi or osu_allreduce printed")
    parser.add_argument("--out", default=None, help="profile to write (new, or the merged result with --into)")
    add_profile_argument(parser, "existing profile to merge the samples into (written back unless --out)", flag="--into")
    parser.add_argument("--gpu", default=None, metavar="NAME",
                        help="the GPU text output was measured on (a workbook names it in its Specs sheet)")
    parser.add_argument("--force", action="store_true", help="overwrite --out if it exists (without --into)")


def _gpu(runs: list[DeepBenchRun], override: str | None, fallback: str | None = None) -> str:
    """The one GPU the files describe (else --gpu, else `fallback`: the GPU of the profile merged into);
    UserError when two files name different ones, or --gpu differs from the one they name."""
    named = {}
    for run in runs:
        if run.gpu is not None:
            named.setdefault(run.gpu, Path(run.path).name)
    if len(named) > 1:
        listed = ", ".join(f"{gpu!r} ({name})" for gpu, name in named.items())
        raise UserError(f"the files name different GPUs: {listed}; import each GPU into its own profile")
    if override is not None and named and override not in named:
        gpu, name = next(iter(named.items()))
        raise UserError(f"--gpu {override!r}: {name} names the GPU {gpu!r}")
    return next(iter(named), override or fallback or "unknown")


def _machine(runs: list[DeepBenchRun], gpu: Optional[str]) -> Machine:
    """The machine the files describe: its GPUs, or none where they timed a CPU (gpu None: one rank per node)."""
    described = next((run for run in runs if run.format == "xlsx"), runs[0])
    per_node = max((run.gpus_per_node or 1 for run in runs), default=1) if gpu is not None else 1
    versions = {key: next((run.versions[key] for run in runs if run.versions.get(key)), None)
                for key in ("cuda", "cudnn", "driver")}
    return Machine(hostname=f"deepbench:{Path(described.path).stem}", cpu_model=described.cpu_model,
                   gpus=[GPUInfo(name=gpu) for _ in range(per_node)] if gpu is not None else [], gpus_per_node=per_node,
                   nodes=max(run.nodes for run in runs), driver_version=versions["driver"], versions=versions,
                   imported_from="deepbench")


def run(args) -> int:
    target = import_target(args)
    samples, runs = [], []
    for name in args.files:
        file_samples, deepbench_run = read_deepbench(name)
        samples.extend(file_samples)
        runs.append(deepbench_run)
    samples = labelled([samples], carried=True)[0]  # the carried workbooks name DeepBench's shapes
    base = base_profile(args)
    devices = {run.device for run in runs}
    if len(devices) > 1 or (devices == {"cpu"} and args.gpu is not None):
        named = next(Path(run.path).name for run in runs if run.device == "cpu")
        raise UserError(f"{named} timed a CPU (its Specs sheet names no GPU): import it into a profile of its own, "
                        "without --gpu")
    cpu = devices == {"cpu"}
    gpu = None if cpu else _gpu(runs, args.gpu, base.machine.gpus[0].name if base is not None and base.machine.gpus
                                else None)
    if cpu and base is not None and base.machine.gpus:
        raise UserError(f"--into: a GPU profile; {Path(runs[0].path).name} timed a CPU (import it into a profile of its own)")
    for sample in samples:
        if gpu is not None:
            sample.extra.setdefault("gpu", gpu)
    sources = ", ".join(Path(f).name for f in args.files)
    profile, replaced = merged(base, samples, {run.sha256 for run in runs}, lambda: Profile(
        schema_version=SCHEMA_VERSION, machine=_machine(runs, gpu), created=utc_now_iso(),
        provenance=Provenance(kind="calibrated", source=f"DeepBench results: {sources}"),
        settings={"imported": "deepbench", "files": [str(f) for f in args.files],
                  "sheets": {Path(r.path).name: r.sheets for r in runs},
                  "specs": {Path(r.path).name: r.specs for r in runs if r.specs}},
        samples=samples))
    profile, fitted = refit(profile)
    save_profile(profile, target)
    skipped = sum((run.skipped for run in runs), Counter())
    skipped_text = ", ".join(f"{n} {reason}" for reason, n in skipped.most_common()) or "none"
    again = f", replacing {replaced} imported before from the same files" if replaced else ""
    machine = gpu if gpu is not None else f"CPU: {runs[0].cpu_model}"
    print(f"wrote {target}: {len(samples)} samples from {len(args.files)} DeepBench file(s) ({machine}){again}; "
          f"skipped: {skipped_text} ({fitted})")
    return 0
