"""Framework overhead per layer: what an eager training step pays per layer on top of its kernels.

A chain of K `nn.ReLU` modules on a tiny tensor (so every kernel is almost free) is timed three ways:
`kernel` (K bare `torch.relu` calls, no autograd), `forward` (the K modules with autograd recording) and
`step` (forward + backward). The slope over K of each is a per-layer cost; calibrate.framework turns them
into a forward overhead (module call and graph recording: forward - kernel) and a backward overhead (one
autograd node: step - forward - kernel, the backward kernel being as cheap as the forward one). On the
2-core development VM at one thread they are about 1.9 and 1.5 us per layer, paid by every layer however
small its batch. `optimizer` times one SGD step and `zero_grad(set_to_none=True)` over K tiny parameter
tensors (gradients assigned first, as backward leaves them), each call with the caches evicted first, as a
training step's forward and backward leave them: its line over K is the optimizer's fixed and per-tensor
cost, which the streaming update model (bytes / bandwidth) does not see. In the CPU validation steps the
update took 0.16-0.42 ms of 3-21 ms; VGG16's 32-tensor step took 0.09 ms cache-hot and 0.22-0.39 ms after
a forward or a 64 MiB write.
"""
from __future__ import annotations

import torch

from profiler.cases import BenchCase

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


def plan_framework(device: str) -> list[BenchCase]:
    return [framework_case(variant, layers, device) for variant in VARIANTS for layers in CHAIN_LENGTHS]
