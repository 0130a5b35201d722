"""Test data for the drift tests: real CPU timings, 40 samples per point, written as a profile (OUT.yaml).

`profiler calibrate --quick` keeps only ~3 samples for most points, too few to split one point's samples into two
halves; this times a dozen CPU points (GEMM, conv2d, ReLU, STREAM copy/triad) with the project's Timer, 40 samples
each. The committed tests/data/drift_cpu_profile.yaml was taken at a quiet moment (load average 0.15) by the first
version of this script (GEMM points keyed `shape: [M, N, K]`), drift_cpu_profile_loaded.yaml by this version under
load average ~9 on the 2-core VM.

    python -m bench drift-testdata tests/data/drift_cpu_profile.yaml
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.nn.functional as F

from bench import describe
from profiler.metadata import collect_machine
from profiler.outputs import check_output
from profiler.profile import SCHEMA_VERSION, Profile, Provenance, Sample, save_profile, utc_now_iso
from profiler.timing import Timer

SAMPLES_PER_POINT = 40


def _point(benchmark, variant, params, fn, *, flops=None, bytes_moved=None) -> Sample:
    m = Timer(fn, device="cpu", min_samples=SAMPLES_PER_POINT, max_samples=SAMPLES_PER_POINT,
              target_rel_ci=1e-9, budget_s=30.0, min_sample_s=2e-3).measure()
    print(f"{benchmark:7s} {variant:6s} {params}: median {m.median_s:.3e} s, cv {m.cv:.2f}", file=sys.stderr)
    return Sample(benchmark=benchmark, variant=variant, params=params, device="cpu", dtype="float32",
                  threads=m.threads, times_s=m.times_s, flops=flops, bytes_moved=bytes_moved)


def measure() -> list[Sample]:
    torch.manual_seed(0)
    samples = []
    for n in (128, 256, 512):
        a, b = torch.randn(n, n), torch.randn(n, n)
        samples.append(_point("gemm", "fwd", {"M": n, "N": n, "K": n}, lambda a=a, b=b: a @ b, flops=2.0 * n**3))
    for batch, c, f, hw, k in ((8, 16, 32, 32, 3), (4, 64, 64, 16, 3), (8, 32, 32, 28, 1)):
        x, w = torch.randn(batch, c, hw, hw), torch.randn(f, c, k, k)
        params = {"N": batch, "C": c, "F": f, "H": hw, "W": hw, "kernel": k, "stride": 1, "padding": k // 2}
        samples.append(_point("conv2d", "fwd", params, lambda x=x, w=w, k=k: F.conv2d(x, w, padding=k // 2),
                              flops=2.0 * batch * f * hw * hw * c * k * k))
    for n in (1 << 16, 1 << 20):
        x = torch.randn(n)
        samples.append(_point("relu", "fwd", {"N": 1, "C": 1, "H": 1, "W": n}, lambda x=x: torch.relu(x), bytes_moved=8.0 * n))
    for n in (1 << 18, 1 << 22):
        a, b, c = torch.randn(n), torch.randn(n), torch.empty(n)
        samples.append(_point("stream", "copy", {"elements": n}, lambda a=a, c=c: c.copy_(a), bytes_moved=8.0 * n))
        samples.append(_point("stream", "triad", {"elements": n},
                              lambda a=a, b=b, c=c: torch.add(b, a, alpha=3.0, out=c), bytes_moved=12.0 * n))
    return samples


def add_arguments(parser) -> None:
    describe(parser, __doc__)
    parser.add_argument("out", type=Path, metavar="OUT.yaml", help="where to write the profile")
    parser.add_argument("--force", action="store_true", help="overwrite OUT.yaml if it exists")


def run(args) -> int:
    path = check_output(args.out, "OUT.yaml", force=args.force)
    profile = Profile(
        schema_version=SCHEMA_VERSION,
        machine=collect_machine("cpu"),
        provenance=Provenance(kind="calibrated", source=f"bench/drift_testdata.py: {SAMPLES_PER_POINT} samples per point"),
        created=utc_now_iso(),
        settings={"device": "cpu", "samples_per_point": SAMPLES_PER_POINT, "threads": torch.get_num_threads()},
        samples=measure(),
    )
    save_profile(profile, path)
    print(f"wrote {path}", file=sys.stderr)
    return 0
