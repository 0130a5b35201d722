"""Framework overhead per layer: what an eager training step pays per layer on top of its kernels.

Chains of K tiny modules (every kernel almost free) timed as bare kernels, as forward with autograd recording and as
forward + backward: their slopes over K give the warm forward and backward overhead per layer (calibrate.framework).
`optimizer` times one SGD step and zero_grad over K tiny parameter tensors with the caches evicted first, as a
training step leaves them: the optimizer's fixed and per-tensor cost, which the streaming update model does not see.
`cold_forward` and `cold_step` time the same tiny layers in a `cycled` and a `grouped` order, round-robin: what a
layer pays for finding its code cold in a step, where almost every layer follows another kernel (CPU only: a GPU's
host dispatches ahead). docs/calibration.md ("Framework overhead and optimizer cost");
docs/decisions/2026-11-29-cold-optimizer-cost.md, 2026-12-02-cold-code-per-layer.md.
"""
from __future__ import annotations

import os
import time

import torch

from profiler.cases import GRID_ENV, BenchCase
from profiler.cold_chains import (COLD_BATCH, COLD_LAYERS, COLD_MAP, COLD_ORDERS, COLD_REPEATS, COLD_VARIANTS,
                                  cold_order, cold_transitions)
from profiler.profile import Sample

CHAIN_LENGTHS = (4, 16, 64)
TINY_SHAPE = (8, 8)
VARIANTS = ("kernel", "forward", "step", "optimizer")


def optimizer_case(tensors: int, device: str) -> BenchCase:
    def build():
        params = [torch.nn.Parameter(torch.randn(*TINY_SHAPE, device=device)) for _ in range(tensors)]
        grads = [torch.ones_like(p) for p in params]
        optimizer = torch.optim.SGD(params, lr=1e-3)

        def run():
            for p, g in zip(params, grads):
                p.grad = g
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        return run

    return BenchCase("framework", "optimizer", {"layers": tensors, "shape": list(TINY_SHAPE)}, "float32", None, None,
                     build, cold=True)


def framework_case(variant: str, layers: int, device: str) -> BenchCase:
    if variant == "optimizer":
        return optimizer_case(layers, device)

    def build():
        x = torch.randn(*TINY_SHAPE, device=device, requires_grad=variant != "kernel")
        if variant == "kernel":
            def run():
                with torch.no_grad():
                    y = x
                    for _ in range(layers):
                        y = torch.relu(y)
            return run
        chain = torch.nn.Sequential(*[torch.nn.ReLU() for _ in range(layers)]).to(device)
        grad = torch.ones(*TINY_SHAPE, device=device)
        if variant == "forward":
            return lambda: chain(x)
        return lambda: chain(x).backward(grad)

    return BenchCase("framework", variant, {"layers": layers, "shape": list(TINY_SHAPE)}, "float32", None, None, build)


def cold_module(kind: str) -> torch.nn.Module:
    channels = COLD_MAP[0]
    return {"conv": lambda: torch.nn.Conv2d(channels, channels, 3, padding=1),
            "batchnorm": lambda: torch.nn.BatchNorm2d(channels),
            "relu": torch.nn.ReLU,
            "maxpool": lambda: torch.nn.MaxPool2d(3, stride=1, padding=1),
            "avgpool": lambda: torch.nn.AvgPool2d(3, stride=1, padding=1)}[kind]()


def cold_chain(variant: str, order: str, device: str):
    """One call of the `variant` chain in `order` (forward, or forward + backward)."""
    torch.manual_seed(0)
    chain = torch.nn.Sequential(*[cold_module(kind) for kind in cold_order(order)]).to(device)
    x = torch.randn(COLD_BATCH, *COLD_MAP, device=device, requires_grad=True)
    grad = torch.ones(COLD_BATCH, *COLD_MAP, device=device)
    if variant == "cold_forward":
        return lambda: chain(x)
    return lambda: chain(x).backward(grad)


def cold_rounds(quick: bool) -> tuple[int, int]:
    """(warm-up rounds, timed rounds) of measure_cold per mode; a round takes about 10 ms on the 2-core VM."""
    if os.environ.get(GRID_ENV) == "tiny":
        return 1, 3
    return (5, 60) if quick else (10, 200)


def measure_cold(device: str, quick: bool) -> list[Sample]:
    """The cold-code chains timed round-robin on the host (CPU calibrations only): each round calls every (variant, order) chain once, the two orders
    in alternating sequence, so that a slow window of the machine falls on both orders of a round alike. One
    Sample per chain, their times aligned by round (calibrate.framework differences them round by round)."""
    chains = {(v, o): cold_chain(v, o, device) for v in COLD_VARIANTS for o in COLD_ORDERS}
    warmup, rounds = cold_rounds(quick)
    times = {key: [] for key in chains}
    for r in range(warmup + rounds):
        for variant in COLD_VARIANTS:
            for order in (COLD_ORDERS if r % 2 == 0 else COLD_ORDERS[::-1]):
                start = time.perf_counter()
                chains[(variant, order)]()
                if r >= warmup:
                    times[(variant, order)].append(time.perf_counter() - start)
    threads = torch.get_num_threads()
    return [Sample(benchmark="framework", variant=v, device=device, threads=threads, dtype="float32",
                   params={"layers": len(COLD_LAYERS) * COLD_REPEATS, "order": o, "transitions": cold_transitions(o),
                           "shape": [COLD_BATCH, *COLD_MAP]},
                   times_s=[max(t, 1e-9) for t in times[(v, o)]], extra={"rounds": rounds, "round_robin": True})
            for (v, o) in chains]


def plan_framework(device: str) -> list[BenchCase]:
    """The warm chains as timer cases (the cold-code chains are measured round-robin: measure_cold)."""
    return [framework_case(variant, layers, device) for variant in VARIANTS for layers in CHAIN_LENGTHS]
