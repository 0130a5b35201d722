"""Synthetic samples drawn from known coefficients with multiplicative noise, for testing the fits
(and for anyone who needs a fitted profile without running benchmarks)."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from calibrate import shapes
from calibrate.collective_model import bus_factor
from profiler.profile import Machine, Profile, Provenance, Sample, SCHEMA_VERSION, utc_now_iso


def noisy_times(t: float, rng: np.random.Generator, noise: float, calls: int) -> list[float]:
    return [float(v) for v in t * (1.0 + noise * rng.standard_normal(calls)).clip(0.5, None)]


def collective_samples(op: str, group_size: int, sizes: Sequence[float], time_s: Callable[[float], float],
                       rng: np.random.Generator, noise: float = 0.03, calls: int = 9, nodes: int = 1,
                       variant: str = "throughput") -> list[Sample]:
    """time_s(size_bytes) -> seconds; samples as profiler/comm writes them."""
    return [Sample(benchmark=op, variant=variant, device="cpu", threads=1,
                   params={"size_bytes": int(s), "group": {"size": group_size, "nodes": nodes,
                                                            "ranks": list(range(group_size))}},
                   times_s=noisy_times(time_s(s), rng, noise, calls), bytes_moved=float(s))
            for s in sizes]


def hockney(alpha_s: float, bus_bandwidth_bytes_per_s: float, op: str = "allreduce", p: int = 2):
    return lambda s: alpha_s + s * bus_factor(op, p) / bus_bandwidth_bytes_per_s


def stream_samples(sizes: Sequence[float], time_s: Callable[[float], float], rng, noise=0.03, calls=9,
                   variant="triad", device="cpu") -> list[Sample]:
    return [Sample(benchmark="stream", variant=variant, device=device, threads=1, params={"size_bytes": int(s / 3)},
                   times_s=noisy_times(time_s(s), rng, noise, calls), bytes_moved=float(s)) for s in sizes]


def conv_samples(shapes_params: Sequence[dict], time_s: Callable[[float, float], float], rng, noise=0.03, calls=7,
                 op="conv2d", pass_="fwd", dtype="float32") -> list[Sample]:
    """time_s(flops, bytes) -> seconds."""
    out = []
    for params in shapes_params:
        w = shapes.work(op, pass_, params, dtype)
        out.append(Sample(benchmark=op, variant=pass_, device="cpu", dtype=dtype, threads=1, params=dict(params),
                          times_s=noisy_times(time_s(w["flops"], w["bytes"]), rng, noise, calls),
                          flops=w["flops"], bytes_moved=w["bytes"]))
    return out


def profile_with(samples: list[Sample], hostname: str = "synthetic") -> Profile:
    return Profile(schema_version=SCHEMA_VERSION, machine=Machine(hostname=hostname, memory_bytes=64e9, cpu_cores=2),
                   provenance=Provenance(kind="calibrated", source="synthetic samples from known coefficients"),
                   created=utc_now_iso(), samples=samples)
