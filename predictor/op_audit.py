"""The op audit: every aten op a training step runs, and the cost of the predictor that accounts for it.

`audit_step` runs training steps of a module on the CPU under torch.profiler (optionally inside a one-rank DDP
group) and lists each *top-level* op it records (no aten op above it: the ops below are its implementation).
Each op is keyed by where it ran (WHERE) and looked up in AUDIT: `family` (a calibrated compute family through the
tracer's layer op), `modelled` (an explicit model: memory-bound copies, the optimizer update, collectives), `free`
(a view) or `ignored` (a real kernel not costed, and why). An op with no AUDIT entry is a cost nobody has decided
on; tests/predictor/test_op_audit.py fails on it. `python -m predictor.op_audit [--run]` prints the table
(docs/op-audit.md).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

#: where a top-level op ran. "forward 0-d": an in-place forward op on a 0-dimensional tensor (a counter,
#: told apart by the profiler's recorded shapes, in which a tensor list also reads []); "backward": inside
#: an autograd node's function (e.g. AddmmBackward0); "engine": in autograd's engine between nodes (the
#: seed gradient, sum_to of a broadcast operand's gradient, summing the gradients of a tensor used twice);
#: "ddp reducer": DDP's gradient bucketing; "collective": a c10d collective, in any phase.
WHERE = ("forward", "forward 0-d", "loss", "backward", "engine", "ddp reducer", "collective", "step", "zero_grad")
PHASES = ("forward", "loss", "backward", "step", "zero_grad")
MARK = "op_audit:"  # record_function label prefix of each phase
COSTS = ("family", "modelled", "free", "ignored")


@dataclass(frozen=True)
class OpCost:
    """How the predictor costs one (where, op): `cost` one of COSTS, `layer_ops` the tracer's layer ops that
    carry it (checked against the traced model for family and modelled entries that name some), `how` the
    cost-model call, `reason` in a sentence."""

    cost: str
    how: str
    reason: str
    layer_ops: tuple[str, ...] = ()


def _family(layer_ops: tuple[str, ...], how: str, reason: str) -> OpCost:
    return OpCost("family", how, reason, layer_ops)


_FREE_VIEW = OpCost("free", "-", "a view of its input (shape or strides only)")
_LOSS = OpCost("modelled", "memory_time_s(opmath.cross_entropy_bytes) of the tracer's cross_entropy layer",
               "over token-level logits (a language model's vocabulary per token) the tracer appends a cross_entropy "
               "layer, costed as float32 streaming traffic; on (batch, classes) logits it is left out: a few passes "
               "over 10-1000 elements per sample, less than any conv layer of the zoo moves")
_UPDATE = OpCost("modelled", "layercost.update_time_s + CostModel.optimizer_overhead_s",
                 "the SGD update as memory-bound streaming over the parameters (momentum: read w, g, m; write "
                 "w, m) plus a per-tensor dispatch cost")
_DDP_BUFFERS = OpCost("ignored", "-", "DDP's buffer broadcast packs and unpacks the batch-norm running "
                      "statistics (2 C floats per BN layer): a few KB; the broadcast itself is modelled")

AUDIT: dict[tuple[str, str], OpCost] = {
    # forward: one module call each
    ("forward", "aten::conv2d"): _family(("conv2d",), "conv2d/fwd",
                                         "grouped: conv2d_grouped/fwd if measured; non-square kernels: gemm/fwd"),
    ("forward", "aten::conv3d"): _family(("conv3d",), "conv3d/fwd", "3-D convolution"),
    ("forward", "aten::conv_transpose2d"): _family(("conv2d",), "conv2d/bwd_data of its convolution (Layer.transposed)",
                                                   "a transposed convolution runs its convolution's backward data"),
    ("forward", "aten::conv_transpose3d"): _family(("conv3d",), "conv3d/bwd_data of its convolution (Layer.transposed)",
                                                   "a transposed convolution runs its convolution's backward data"),
    ("forward", "aten::linear"): _family(("linear",), "linear/fwd",
                                         "addmm over W's transposed view; gemm/fwd in profiles without linear families"),
    ("forward", "aten::batch_norm"): _family(("batchnorm",), "batchnorm/fwd", "training-mode batch norm"),
    ("forward", "aten::relu"): _family(("relu",), "relu/fwd", "read x, write y"),
    ("forward", "aten::relu_"): _family(("relu",), "relu/fwd", "in-place ReLU: read and write x"),
    ("forward", "aten::silu"): _family(("silu",), "relu/fwd", "moves what ReLU moves: read x, write y"),
    ("forward", "aten::sigmoid"): _family(("sigmoid",), "relu/fwd", "moves what ReLU moves: read x, write y"),
    ("forward", "aten::add"): _family(("add", "bias_dropout_add"), "add/fwd",
                                      "residual add: read a, b, write c (also inside a BiasDropoutAdd, "
                                      "predictor.zoo.transformer: one kernel with the dropout on the GPU, its layer "
                                      "costed as add/fwd)"),
    ("forward", "aten::mul"): _family(("mul", "softmax"), "add/fwd, or softmax/fwd",
                                      "elementwise product (an SE gate, attention's scale): read a, b, write c; or "
                                      "the scale inside a FusedScaleMaskSoftmax (predictor.zoo.transformer), one "
                                      "kernel with the mask and softmax on the GPU, costed as its softmax layer"),
    ("forward", "aten::max_pool2d"): _family(("maxpool",), "maxpool/fwd", "window maxima and their indices"),
    ("forward", "aten::max_pool3d"): _family(("maxpool",), "maxpool/fwd", "window maxima and their indices"),
    ("forward", "aten::avg_pool2d"): _family(("avgpool",), "avgpool/fwd, else maxpool/fwd", "window means"),
    ("forward", "aten::avg_pool3d"): _family(("avgpool",), "avgpool/fwd, else maxpool/fwd", "window means"),
    ("forward", "aten::adaptive_avg_pool2d"): _family(("avgpool",), "avgpool/fwd, else maxpool/fwd",
                                                      "global average pool (to 1x1 it runs as a mean)"),
    ("forward", "aten::adaptive_avg_pool3d"): _family(("avgpool",), "avgpool/fwd, else maxpool/fwd",
                                                      "global average pool (to 1x1 it runs as a mean)"),
    ("forward", "aten::cat"): OpCost("modelled", "memory_time_s(input + output bytes)",
                                     "concatenation copies every input once", ("concat",)),
    ("forward", "aten::dropout"): OpCost("modelled", "memory_time_s(input + output bytes), or add/fwd",
                                         "mask and scale: read x, write y (and the mask); or the dropout inside a "
                                         "BiasDropoutAdd, part of its one kernel, costed as its layer's add/fwd",
                                         ("dropout", "bias_dropout_add")),
    ("forward", "aten::flatten"): _FREE_VIEW,
    ("forward", "aten::view"): _FREE_VIEW,
    ("forward", "aten::reshape"): OpCost("modelled", "none for a view; memory_time_s(input + output bytes) for a copy",
                                         "a view of its input, or a copy when its input is transposed (attention's "
                                         "heads merged back: the tracer's copy layer)"),
    ("forward", "aten::transpose"): _FREE_VIEW,
    ("forward", "aten::expand"): _FREE_VIEW,
    ("forward", "aten::split"): _FREE_VIEW,
    # transformer ops (predictor.zoo.gpt, predictor.zoo.bert)
    ("forward", "aten::embedding"): OpCost("modelled", "memory_time_s(opmath.embedding_bytes fwd)",
                                           "a row gather: read ids and rows, write the output", ("embedding",)),
    ("forward", "aten::layer_norm"): _family(("layernorm",), "layernorm/fwd, else triad bytes",
                                             "read x, write y and the per-row mean and rstd"),
    ("forward", "aten::rms_norm"): _family(("rmsnorm",), "layernorm/fwd, else triad bytes",
                                           "read x, write y (composite on the CPU: pow, mean, rsqrt, mul inside)"),
    ("forward", "aten::gelu"): _family(("gelu",), "gelu/fwd, else triad bytes", "read x, write y"),
    ("forward", "aten::softmax"): _family(("softmax",), "softmax/fwd, else triad bytes",
                                          "attention probabilities over the last dimension"),
    ("forward", "aten::matmul"): _family(("bmm",), "bmm/fwd, else gemm of the same FLOPs",
                                         "attention's score and context products (expand + reshape + bmm inside)"),
    ("forward", "aten::masked_fill"): _family(("add", "softmax"), "add/fwd, or softmax/fwd",
                                              "the causal mask on the scores: read x and the mask, write y; or the "
                                              "mask inside a FusedScaleMaskSoftmax, costed as its softmax layer"),
    ("forward", "aten::scaled_dot_product_attention"): _family(
        ("sdpa",), "sdpa/fwd, else gemm scaled to its FLOPs",
        "fused attention (flash or memory-efficient kernels; with dropout on the CPU PyTorch's unfused fallback)"),
    ("forward 0-d", "aten::copy_"): _DDP_BUFFERS,
    ("forward 0-d", "aten::add_"): OpCost("ignored", "-", "BatchNorm's num_batches_tracked += 1: a 0-d tensor, "
                                          "no traffic; one dispatch per BN layer"),
    # DDP's forward hook: the buffer broadcast (predictor.strategies.data.ddp_buffer_sync_s)
    ("forward", "aten::flatten_dense_tensors"): _DDP_BUFFERS,
    ("forward", "aten::unflatten_dense_tensors"): _DDP_BUFFERS,
    ("forward", "aten::copy_"): _DDP_BUFFERS,
    ("forward", "aten::empty"): _DDP_BUFFERS,
    ("forward", "aten::as_strided"): _FREE_VIEW,
    # loss
    ("loss", "aten::cross_entropy_loss"): _LOSS,
    ("loss", "aten::flatten"): _FREE_VIEW,
    # backward: inside an autograd node
    ("backward", "aten::convolution_backward"): _family(("conv2d", "conv3d"), "conv2d|conv3d bwd_data + bwd_weight",
                                                        "one call with an output mask; the bias gradient inside"),
    ("backward", "aten::mm"): _family(("linear",), "linear/bwd_data and linear/bwd_weight",
                                      "AddmmBackward0: dX = dY W and dW = dY^T X on dY's transposed view"),
    ("backward", "aten::t"): _FREE_VIEW,
    ("backward", "aten::sum"): OpCost("ignored", "-", "ExpandBackward0: the gradient of a broadcast view summed over "
                                      "the positions it was broadcast to (DeepCAM's pooled ASPP branch: one read of "
                                      "256 x 48 x 72 elements per sample, under 0.1% of its step's traffic)"),
    ("backward", "aten::native_batch_norm_backward"): _family(("batchnorm",), "batchnorm/bwd (as bwd_data)",
                                                              "one call for the input and affine gradients"),
    ("backward", "aten::threshold_backward"): _family(("relu",), "relu/bwd", "read dy and y, write dx"),
    ("backward", "aten::silu_backward"): _family(("silu",), "relu/bwd", "read dy and x, write dx"),
    ("backward", "aten::sigmoid_backward"): _family(("sigmoid",), "relu/bwd", "read dy and y, write dx"),
    ("backward", "aten::max_pool2d_with_indices_backward"): _family(("maxpool",), "maxpool/bwd",
                                                                    "scatter dy through the saved indices"),
    ("backward", "aten::max_pool3d_with_indices_backward"): _family(("maxpool",), "maxpool/bwd",
                                                                    "scatter dy through the saved indices"),
    ("backward", "aten::avg_pool2d_backward"): _family(("avgpool",), "avgpool/bwd, else maxpool/bwd", "spread dy"),
    ("backward", "aten::avg_pool3d_backward"): _family(("avgpool",), "avgpool/bwd, else maxpool/bwd", "spread dy"),
    ("backward", "aten::_adaptive_avg_pool2d_backward"): _family(("avgpool",), "avgpool/bwd, else maxpool/bwd",
                                                                 "spread dy"),
    ("backward", "aten::_adaptive_avg_pool3d_backward"): _family(("avgpool",), "avgpool/bwd, else maxpool/bwd",
                                                                 "spread dy"),
    ("backward", "aten::div"): _family(("avgpool", "rmsnorm"), "avgpool/bwd, else maxpool/bwd; or layernorm/bwd",
                                       "MeanBackward1: a global average pool's dy / (H W), expanded, or the mean of "
                                       "squares inside RMSNorm's composite backward"),
    ("backward", "aten::pow"): _family(("rmsnorm",), "layernorm/bwd (as bwd_data), else triad bytes",
                                       "RMSNorm's composite backward (PowBackward0, RsqrtBackward0 on the CPU), costed "
                                       "as one layer-norm backward"),
    ("backward", "aten::expand"): _FREE_VIEW,
    ("backward", "aten::mul"): _family(("mul", "dropout", "softmax", "bias_dropout_add"),
                                       "add/fwd (mul), memory_time_s (dropout, bias_dropout_add), or softmax/bwd",
                                       "MulBackward0: a product's input gradients, dropout's dy * mask (also inside a "
                                       "BiasDropoutAdd: its one backward kernel, dy -> dx), or the scale's inside a "
                                       "FusedScaleMaskSoftmax (one backward kernel on the GPU)"),
    ("backward", "aten::narrow"): OpCost("free", "-", "CatBackward0 takes views of dy; the predictor still "
                                         "charges concat's backward as a copy (pessimistic)", ("concat",)),
    ("backward", "aten::reshape"): _FREE_VIEW,
    ("backward", "aten::view"): _FREE_VIEW,
    ("backward", "aten::detach"): OpCost("free", "-", "AccumulateGrad keeps a fresh gradient as the .grad "
                                         "(zero_grad set it to None): no copy"),
    ("backward", "aten::add_"): OpCost("ignored", "-", "AccumulateGrad adds into an existing .grad: only when "
                                       "gradients are accumulated over micro-batches or kept by "
                                       "zero_grad(set_to_none=False); one pass over the weights"),
    ("backward", "aten::_log_softmax_backward_data"): _LOSS,
    ("backward", "aten::transpose"): _FREE_VIEW,
    ("backward", "aten::native_layer_norm_backward"): _family(("layernorm",), "layernorm/bwd (as bwd_data)",
                                                              "one call for the input and affine gradients"),
    ("backward", "aten::gelu_backward"): _family(("gelu",), "gelu/bwd", "read dy and x, write dx"),
    ("backward", "aten::bmm"): _family(("bmm", "sdpa"), "bmm/bwd_data and bmm/bwd_weight, or sdpa/bwd",
                                       "BmmBackward0: dA = dC B^T, dB = A^T dC (also inside the CPU's unfused "
                                       "attention with dropout, costed as the fused backward)"),
    ("backward", "aten::_softmax_backward_data"): _family(("softmax", "sdpa"), "softmax/bwd, or sdpa/bwd",
                                                          "read dy and y, write dx"),
    ("backward", "aten::masked_fill"): OpCost("ignored", "-", "MaskedFillBackward0 zeroes dy where masked: one "
                                              "pass over the scores; masked_fill is costed as an add, whose backward "
                                              "passes dy through (inside a FusedScaleMaskSoftmax: part of its one "
                                              "backward kernel, costed as softmax/bwd)"),
    ("backward", "aten::cat"): OpCost("ignored", "-", "SplitBackward0 joins dQ, dK and dV into the QKV gradient: one "
                                      "copy of it per layer, not costed (the split itself is a free view)"),
    ("backward", "aten::embedding_backward"): OpCost("modelled", "memory_time_s(opmath.embedding_bytes bwd_weight)",
                                                     "zero the table's gradient, add each token's row of dY into it",
                                                     ("embedding",)),
    ("backward", "aten::nll_loss_backward"): _LOSS,
    # backward: autograd's engine between nodes
    ("engine", "aten::ones_like"): OpCost("ignored", "-", "the seed gradient dL/dL = 1: one element"),
    ("engine", "aten::sum"): _family(("linear", "mul"), "linear/bwd_weight (bias) or add/fwd (mul)",
                                     "sum_to of a broadcast operand's gradient: the linear bias (timed with "
                                     "linear/bwd_weight) or an SE gate's per-channel scale (part of mul's backward)"),
    ("engine", "aten::view"): _FREE_VIEW,
    ("engine", "aten::as_strided"): _FREE_VIEW,
    ("engine", "aten::add_"): OpCost("modelled", "memory_time_s(layercost.gradient_sum_bytes)",
                                     "the gradients of a tensor read by two layers are summed (a residual block's "
                                     "input, an SE block's input): one add of that tensor per extra reader"),
    ("engine", "aten::add"): OpCost("modelled", "memory_time_s(layercost.gradient_sum_bytes)",
                                    "as engine aten::add_, out of place"),
    # DDP's reducer hooks and the collectives
    ("ddp reducer", "aten::mul"): OpCost("modelled", "memory_time_s in Context.gradient_sync",
                                         "DDP copies each gradient into its bucket scaled by 1 / world size: one "
                                         "read and one write of the gradients"),
    ("ddp reducer", "aten::copy_"): OpCost("modelled", "memory_time_s in Context.gradient_sync",
                                           "DDP copies the reduced bucket back into the gradients: one read and "
                                           "one write of the gradients"),
    ("collective", "c10d::allreduce_"): OpCost("modelled", "CostModel.collective_time_s (allreduce per bucket)",
                                               "DDP's gradient allreduce, overlapped with backward (predictor.overlap)"),
    ("collective", "c10d::broadcast_"): OpCost("modelled", "strategies.data.ddp_buffer_sync_s",
                                               "DDP's buffer broadcast before each forward"),
    # optimizer step (a for-loop over tensors on CPU, foreach kernels on GPU) and zero_grad
    ("step", "aten::add_"): _UPDATE,
    ("step", "aten::mul_"): _UPDATE,
    ("step", "aten::_foreach_add_"): _UPDATE,
    ("step", "aten::_foreach_mul_"): _UPDATE,
    ("step", "aten::detach"): _FREE_VIEW,
    ("step", "aten::clone"): OpCost("ignored", "-", "the first step only: the momentum buffer starts as a "
                                    "copy of the gradient"),
    ("zero_grad", "aten::zero_"): OpCost("ignored", "-", "only with zero_grad(set_to_none=False); the default "
                                         "sets the gradients to None without a kernel"),
}

#: knobs of a small version of every zoo model (predictor.zoo.ZOO), seconds per step on one core
SMALL_KNOBS: dict[str, dict] = {
    "resnet50": dict(width=8, image=32, num_classes=10),
    "resnet101": dict(width=8, image=32, num_classes=10),
    "resnet152": dict(width=8, image=32, num_classes=10),
    "resnext101_32x4d": dict(width=16, groups=4, image=32, num_classes=10),
    "se_resnext101_32x4d": dict(width=16, groups=4, image=32, num_classes=10),
    "efficientnet_b0": dict(width=0.25, depth=0.5, image=32, num_classes=10),
    "efficientnet_b4": dict(width=0.25, depth=0.5, image=32, num_classes=10),
    "resnet": dict(width=8, image=32),
    "vgg16": dict(width=4, image=32, num_classes=10),
    "alexnet": dict(width=4, image=64, fc=64, num_classes=10),
    "inception_v3": dict(width=0.125, image=75, num_classes=10),
    "cosmoflow": dict(width=4, blocks=3, image=32, fc=32),
    "deepcam": dict(width=2, image=32, in_channels=4),
    "ssd300": dict(width=4, image=300, num_classes=5),  # six maps need 300 x 300 (38 .. 1)
    "small_cnn2d": dict(width=4, image=16),
    "small_cnn3d": dict(width=2, image=8),
    "gpt": dict(layers=2, hidden=32, heads=2, seq=16, vocab=64),
    "bert": dict(layers=2, hidden=32, heads=2, seq=16, vocab=64),
}


@dataclass
class AuditRow:
    """One (where, op) a step ran: how many calls, and the autograd nodes or modules it ran under."""

    where: str
    op: str
    calls: int = 0
    contexts: set[str] = field(default_factory=set)

    @property
    def key(self) -> tuple[str, str]:
        return self.where, self.op

    @property
    def cost(self) -> Optional[OpCost]:
        return AUDIT.get(self.key)


def _where(op: str, chain: list[str], input_shapes) -> tuple[str, str]:
    """(where, context) of a top-level op from its non-aten ancestors, nearest first (WHERE)."""
    phase = next((name[len(MARK):] for name in chain if name.startswith(MARK)), "")
    nearest = chain[0] if chain else ""
    if op.startswith("c10d::"):
        return "collective", phase
    if phase == "backward":
        reducer = next((n for n in chain if "reducer" in n), None)
        if reducer is not None:
            return "ddp reducer", reducer
        if nearest.startswith("autograd::engine::evaluate_function: ") or nearest.startswith(MARK):
            return "engine", nearest.removeprefix("autograd::engine::evaluate_function: ")
        return "backward", nearest
    if phase == "forward" and op.endswith("_") and input_shapes and list(input_shapes[0]) == []:
        return "forward 0-d", ""
    return phase, ""


def audit_step(module, input_shape: tuple[int, ...], *, batch: int = 2, steps: int = 2,
               ddp: bool = False) -> list[AuditRow]:
    """The top-level ops of `steps` training steps of `module` on a random batch (CPU, float32), in first-seen
    order. The first step also creates the momentum buffers. ddp: wrap the module in DistributedDataParallel
    over a one-rank gloo group (its hooks run as with more ranks); needs no process group initialised."""
    import torch
    import torch.nn.functional as F
    from torch.profiler import ProfilerActivity, profile, record_function

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the ops are the same at any thread count; one thread is not slowed by others' jobs
    from predictor.trace import example_input

    torch.manual_seed(0)
    x = example_input(module, input_shape, batch)
    with torch.no_grad():
        out_shape = module(x).shape
    # a (batch, classes) output gets one target per sample; a (batch, tokens..., classes) output one per token,
    # the loss over the flattened tokens (the tracer's cross_entropy layer)
    y = torch.randint(0, out_shape[-1], (batch, *out_shape[1:-1]))
    group_dir = None
    if ddp:
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel

        if dist.is_initialized():
            raise RuntimeError("audit_step(ddp=True) needs no process group initialised")
        group_dir = tempfile.TemporaryDirectory()
        dist.init_process_group("gloo", init_method=f"file://{Path(group_dir.name) / 'store'}", rank=0, world_size=1)
        module = DistributedDataParallel(module)
    optimizer = torch.optim.SGD(module.parameters(), lr=1e-3, momentum=0.9)
    try:
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            for _ in range(steps):
                with record_function(MARK + "forward"):
                    out = module(x)
                with record_function(MARK + "loss"):
                    loss = F.cross_entropy(out.flatten(0, -2), y.flatten()) if out.dim() > 2 else F.cross_entropy(out, y)
                with record_function(MARK + "backward"):
                    loss.backward()
                with record_function(MARK + "step"):
                    optimizer.step()
                with record_function(MARK + "zero_grad"):
                    optimizer.zero_grad(set_to_none=True)
    finally:
        torch.set_num_threads(threads)
        if group_dir is not None:
            import torch.distributed as dist

            dist.destroy_process_group()
            group_dir.cleanup()
    rows: dict[tuple[str, str], AuditRow] = {}
    for event in prof.events():
        if not event.name.startswith(("aten::", "c10d::")):
            continue
        chain, parent = [], event.cpu_parent
        while parent is not None and not parent.name.startswith("aten::"):
            chain.append(parent.name)
            parent = parent.cpu_parent
        if parent is not None or not any(name.startswith(MARK) for name in chain):
            continue  # inside another aten op (its implementation), or outside the step
        where, context = _where(event.name, chain, event.input_shapes)
        row = rows.setdefault((where, event.name), AuditRow(where, event.name))
        row.calls += 1
        if context:
            row.contexts.add(context)
    return list(rows.values())


def unmapped(rows: list[AuditRow]) -> list[AuditRow]:
    """The rows AUDIT has no entry for."""
    return [row for row in rows if row.cost is None]


def missing_layers(rows: list[AuditRow], layer_ops: set[str]) -> list[AuditRow]:
    """Rows whose AUDIT entry names layer ops of which the traced model has none: the op would go uncosted."""
    return [row for row in rows if row.cost is not None and row.cost.layer_ops
            and not set(row.cost.layer_ops) & layer_ops]


def audit_zoo_model(name: str, *, ddp: bool = False, **extra):
    """(audit rows, traced ModelGraph) of the small version of a zoo model (SMALL_KNOBS, updated by `extra`)."""
    from predictor.trace import trace_module
    from predictor.zoo import build

    knobs = {**SMALL_KNOBS[name], **extra}
    module, shape = build(name, **knobs)
    rows = audit_step(module, shape, ddp=ddp)
    traced, _ = build(name, **knobs)  # the tracer moves its module to the meta device
    return rows, trace_module(traced, shape, name)


def table(seen: Optional[dict[tuple[str, str], set[str]]] = None) -> str:
    """AUDIT as a plain-text table, by where then op; `seen` adds the models each op ran in."""
    header = ["where", "op", "cost", "costed as", "reason"] + (["seen in"] if seen is not None else [])
    lines = [header]
    order = {w: i for i, w in enumerate(WHERE)}
    for (where, op), entry in sorted(AUDIT.items(), key=lambda item: (order[item[0][0]], item[0][1])):
        line = [where, op, entry.cost, entry.how, entry.reason]
        if seen is not None:
            line.append(", ".join(sorted(seen.get((where, op), ()))) or "-")
        lines.append(line)
    widths = [max(len(line[i]) for line in lines[:]) for i in range(len(header) - 1)]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)) + "  " + line[-1] for line in lines)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m predictor.op_audit", description=__doc__.splitlines()[0])
    parser.add_argument("--run", action="store_true",
                        help="also audit a training step of every small zoo model (and one under DDP)")
    args = parser.parse_args(argv)
    seen = None
    if args.run:
        seen = defaultdict(set)
        unknown = []
        for name in SMALL_KNOBS:
            for ddp in (False, True) if name == "small_cnn2d" else (False,):
                rows, _ = audit_zoo_model(name, ddp=ddp)
                for row in rows:
                    seen[row.key].add(name + (" (ddp)" if ddp else ""))
                unknown += [f"{name}: {row.where} {row.op}" for row in unmapped(rows)]
        if unknown:
            print("unmapped: " + "; ".join(unknown), file=sys.stderr)
    print(table(seen))
    return 1 if seen is not None and unknown else 0


if __name__ == "__main__":
    sys.exit(main())
