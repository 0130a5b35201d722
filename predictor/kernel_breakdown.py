"""A training step's device time by kind of kernel, measured from a profiler trace and predicted by the cost model.

Issue 40 asks a GPU check that falls short to name the terms missing, measured from the profiler trace. The kinds:
`matmul` (GEMM, convolution and fused-attention kernels), `memory` (element-wise, normalisation, softmax, copy and
reduction kernels), `optimizer` (the update's kernels), `communication` (collectives) and, measured only, `idle`
(the step's wall time the device spent in no kernel: the host's dispatch, synchronisation, the input). A run's
trace is one extra profiled step after its timed ones (predictor.runner.worker, single-rank GPU runs); the
prediction sums the serial plan's per-layer costs by the same kinds. docs/gpu.md ("Where a run's time goes").
"""
from __future__ import annotations

import re
from typing import Iterable, Mapping

from calibrate import shapes

KINDS = ("matmul", "memory", "optimizer", "communication")
#: kernel (GPU) or aten op (CPU) names of each kind, tried in this order; anything else is `memory`
_PATTERNS = (
    ("communication", re.compile(r"nccl|c10d|gloo|all_?reduce|all_?gather|reduce_?scatter", re.I)),
    ("optimizer", re.compile(r"multi_tensor|_foreach|fused_adam|adam_|sgd|lamb", re.I)),
    ("matmul", re.compile(r"gemm|xmma|cutlass|cublas|hmma|s884|s1688|s16816|wgmma|implicit_convolve|convolution|"
                          r"conv2d|conv3d|winograd|fft|flash|fmha|scaled_dot_product|attention|\bmm\b|aten::mm|"
                          r"addmm|bmm|matmul|linear|dgrad|wgrad", re.I)),
)
#: the traced layer ops whose cost is a matrix product or a convolution (the cost model's flop families)
MATMUL_OPS = frozenset(shapes.FLOP_OPS)


def kind_of(name: str) -> str:
    """The KINDS entry of a kernel or op name."""
    for kind, pattern in _PATTERNS:
        if pattern.search(name):
            return kind
    return "memory"


def measured_breakdown(events: Iterable[tuple[str, float]], step_s: float) -> dict[str, float]:
    """Seconds per kind from (name, device seconds) pairs of one step's kernels, and `idle`: the step's wall
    seconds not covered by any kernel (kernels on one stream; overlapping streams make it a lower bound)."""
    out = {kind: 0.0 for kind in KINDS}
    for name, seconds in events:
        out[kind_of(name)] += max(0.0, seconds)
    out["idle"] = max(0.0, step_s - sum(out.values()))
    return out


#: kernels (or ops) a traced run lists by time, beside its sums by kind
TOP_KERNELS = 12


def top_kernels(events: Iterable[tuple[str, float]], count: int = TOP_KERNELS) -> list[dict]:
    """The `count` names with the most device seconds in one step, summed per name, with their kind: which kernels
    a kind's time is (a name cut to 120 characters)."""
    totals: dict[str, float] = {}
    for name, seconds in events:
        totals[name] = totals.get(name, 0.0) + max(0.0, seconds)
    ranked = sorted(totals.items(), key=lambda kv: -kv[1])[:count]
    return [{"name": name[:120], "kind": kind_of(name), "seconds": seconds} for name, seconds in ranked]


def predicted_breakdown(layer_times: Iterable[tuple[str, float]], update_s: float,
                        communication_s: float = 0.0) -> dict[str, float]:
    """Seconds per kind from (layer op, forward + backward seconds) of a plan's layers, its update and its exposed
    communication: the cost model's view of the same step."""
    out = {kind: 0.0 for kind in KINDS}
    for op, seconds in layer_times:
        out["matmul" if op in MATMUL_OPS else "memory"] += seconds
    out["optimizer"] += update_s
    out["communication"] += communication_s
    return out


def compare(rows: Iterable[Mapping]) -> dict[str, tuple[float, float]]:
    """Kind -> (predicted, measured) seconds summed over the rows that carry both breakdowns."""
    total = {kind: [0.0, 0.0] for kind in (*KINDS, "idle")}
    for row in rows:
        measured, predicted = row.get("kernel_breakdown_s"), row.get("predicted_breakdown_s")
        if not measured or not predicted:
            continue
        for kind in total:
            total[kind][0] += predicted.get(kind, 0.0)
            total[kind][1] += measured.get(kind, 0.0)
    return {kind: (p, m) for kind, (p, m) in total.items()}


def render(rows: Iterable[Mapping]) -> list[str]:
    """Report lines: per kind, predicted and measured seconds over the traced runs (none without a trace)."""
    rows = [r for r in rows if r.get("kernel_breakdown_s") and r.get("predicted_breakdown_s")]
    if not rows:
        return []
    lines = ["", f"device time by kind of kernel, {len(rows)} traced runs (predicted / measured s):"]
    for kind, (p, m) in compare(rows).items():
        ratio = f" ({p / m:.2f}x)" if m > 0 and kind != "idle" else ""
        lines.append(f"  {kind:<14} {p:9.4f} / {m:9.4f}{ratio}")
    return lines


def predicted_kinds(graph, plan, prediction, cost_model) -> dict[str, float] | None:
    """predicted_breakdown of a plain serial plan (its layers at the plan's batch, its update); None for any other
    plan (recomputation, offload and parallel plans spread their time over terms the layers do not hold)."""
    if plan.strategy != "serial" or prediction is None or not prediction.feasible:
        return None
    from predictor.layercost import Split
    from predictor.strategies.context import Context

    coster = Context(graph, cost_model).for_plan(plan).coster(plan.dtype)
    times = ((layer.op, sum(coster.times(i, Split(n=plan.batch)))) for i, layer in enumerate(graph.layers))
    return predicted_breakdown(times, prediction.update_s)
