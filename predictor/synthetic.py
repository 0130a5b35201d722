"""A closed-form CostModel (FLOPs / peak, bytes / bandwidth, ring alpha-beta collectives).

Used by the predictor's tests, where every term must be computable by hand; nothing here is measured and no CLI
uses it. compute = launch_s + flops / peak_flops_per_s; memory = bytes / memory_bytes_per_s; framework and optimizer
overheads and the rank slowdown only when given; ring collectives over g ranks at link bandwidth B
(intra_bytes_per_s on one node, else inter): all-reduce 2(g-1)·alpha + 2(g-1)/g · S/B; all-gather,
reduce-scatter, all-to-all (g-1)·alpha + (g-1)/g · S/B; broadcast, send/recv and halo alpha + S/B.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Mapping

from calibrate.cost_api import NeutralExtras
from calibrate.shapes import per_dim
from profiler.opmath import bmm_flops, conv_flops, conv_output_volume, gemm_flops, sdpa_flops


def op_flops(op: str, params: Mapping[str, int]) -> float:
    """FLOPs of one call (any pass) of `op` at `params` (cost_api conventions)."""
    if op == "bmm":
        return bmm_flops(params["B"], params["M"], params["N"], params["K"])
    if op == "sdpa":
        return sdpa_flops(params["B"], params["S"], params.get("T", params["S"]), params["D"], "fwd",
                          bool(params.get("causal", 0)))
    n = params.get("N", params.get("M", 1))
    if op in ("conv2d", "conv3d"):
        dims = [params[d] for d in (("D", "H", "W") if op == "conv3d" else ("H", "W"))]
        nd = len(dims)
        kernel = per_dim(params, "kernel", nd, 1)  # a scalar, or one value per dimension (Inception's 1x7)
        out = conv_output_volume(dims, kernel, per_dim(params, "stride", nd, 1), per_dim(params, "padding", nd, 0))
        return conv_flops(n, params["C"] // params.get("groups", 1), params["F"], math.prod(kernel), out)
    if op in ("gemm", "linear"):
        return gemm_flops(params["M"], params["N"], params["K"])
    elems = n * params["C"] * params.get("D", 1) * params.get("H", 1) * params.get("W", 1)
    return float(elems)


@dataclass(frozen=True)
class SyntheticCostModel(NeutralExtras):
    peak_flops_per_s: float = 1e13
    launch_s: float = 1e-5
    framework_fwd_s: float = 0.0  # per layer, on top of its kernels
    framework_bwd_s: float = 0.0
    optimizer_step_s: float = 0.0  # per optimizer step, plus optimizer_per_tensor_s per parameter tensor
    optimizer_per_tensor_s: float = 0.0
    cores_per_node: int = 0  # > 0: ranks beyond it on a node share the cores (rank_slowdown); 0 = a device each
    memory_bytes_per_s: float = 1e11
    alpha_s: float = 1e-5
    intra_bytes_per_s: float = 1e10
    inter_bytes_per_s: float = 1e9
    device_memory_bytes: float = 16e9
    devices_per_node: int = 4
    provenance: str = "synthetic"

    def compute_time_s(self, op, pass_, params, dtype):
        return self.launch_s + op_flops(op, params) / self.peak_flops_per_s

    def framework_overhead_s(self, pass_):
        return self.framework_fwd_s if pass_ == "fwd" else self.framework_bwd_s

    def optimizer_overhead_s(self, tensors):
        return self.optimizer_step_s + tensors * self.optimizer_per_tensor_s if tensors else 0.0

    def rank_slowdown(self, ranks_on_node):
        return max(1.0, ranks_on_node / self.cores_per_node) if self.cores_per_node else 1.0

    def memory_time_s(self, bytes_moved, *, where="device"):
        return bytes_moved / self.memory_bytes_per_s

    def collective_time_s(self, op, size_bytes, group_size, nodes=1):
        g = group_size
        if g <= 1:
            return 0.0
        bw = self.intra_bytes_per_s if nodes <= 1 else self.inter_bytes_per_s
        if op == "allreduce":
            return 2 * (g - 1) * self.alpha_s + 2 * (g - 1) / g * size_bytes / bw
        if op in ("allgather", "reduce_scatter", "alltoall"):
            return (g - 1) * self.alpha_s + (g - 1) / g * size_bytes / bw
        return self.alpha_s + size_bytes / bw

    def host_device_time_s(self, size_bytes, direction="h2d", pinned=True):
        return size_bytes / self.intra_bytes_per_s

    def at_bound(self, bound):
        f = 0.9 if bound == "low" else 1.1
        return replace(self, launch_s=self.launch_s * f, peak_flops_per_s=self.peak_flops_per_s / f,
                       memory_bytes_per_s=self.memory_bytes_per_s / f, alpha_s=self.alpha_s * f,
                       intra_bytes_per_s=self.intra_bytes_per_s / f, inter_bytes_per_s=self.inter_bytes_per_s / f)
