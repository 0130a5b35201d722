"""Per-layer compute time at a per-device split shape, through the profile's compute model.

ParaDL spreads one measured per-sample time by FLOP share and divides it by p (its tech report §IV-B and
released oracle; docs/method.md §3, §23). Here every layer is costed at the shape one device actually
runs — local batch, spatial block, filter or channel slice — by `CostModel.compute_time_s`, so the
efficiency lost to small split shapes shows up in the prediction.

A `Split` says how a layer is cut on one device: `n` samples, spatial divisors per dim, filter (output
channel) divisor, channel (input channel) divisor. Times are cached per (layer, split) in `LayerCoster`.
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import NamedTuple

from calibrate import shapes
from calibrate.gpu_specs import TENSOR_MODES
from calibrate.cost_api import CostModel
from predictor.graph import NO_GRADIENT_OPS, UNARY_OPS, Layer, ModelGraph
from predictor.graph_rewrite import ALLOW, cast_elems
from profiler.dtypes import FP8, dtype_bytes
from profiler.opmath import cross_entropy_bytes, element_pass_bytes, embedding_bytes

MIXED_DTYPES = ("fp16", "bf16", "fp8")
# tf32: fp32 storage, GEMMs and convolutions on TF32 tensor cores where the GPU has them (A100 and later).
# fp8 (Transformer Engine's recipe, Micikevicius et al. 2022): the matrix products of linear layers in FP8
# (FP8_MATMUL_OPS, the profile's "float8" families), every other op in bfloat16 (the name here), fp32 master weights
DTYPE_NAMES = {"fp32": "float32", "tf32": "tf32", "fp16": "float16", "bf16": "bfloat16", "fp8": "bfloat16"}
ACT_BYTES = {name: dtype_bytes(full) for name, full in DTYPE_NAMES.items()}  # bytes per activation element
#: a cast between float32 and half reads one and writes the other, per element (TensorFlow's AMP casts)
CAST_BYTES_PER_ELEM = dtype_bytes("float32") + dtype_bytes("float16")
#: under plan dtype fp8, the cost-model ops run as FP8 GEMMs: linear layers (Transformer Engine's te.Linear); batched
#: products, fused attention and convolutions stay bf16 (its default recipe does not cast attention)
FP8_MATMUL_OPS = ("linear",)
#: bytes per element Transformer Engine's fused cast-transpose moves casting an operand of an FP8 GEMM: read bf16
#: (2), write FP8 (1) and its transpose (1), since Hopper's FP8 GEMMs take only the TN layout (the input in the
#: forward, the output gradient in the backward); a weight is read in fp32 (4) and written twice (1 + 1)
FP8_CAST_BYTES_PER_ELEM = 4
FP8_WEIGHT_CAST_BYTES_PER_PARAM = 6
ELEMENTWISE_OPS = ("batchnorm", "relu", "add", "silu", "sigmoid", "mul", "layernorm", "rmsnorm", "gelu", "softmax",
                   "bias_dropout_add")
FREE_OPS = ("flatten", "input")  # views: no kernel
#: memory-bound ops the profile reads with {N, C, H, W[, D]} of their output (calibrate.shapes.MEMORY_OPS)
_ACTIVATION_OPS = ("batchnorm", "relu", "add", "maxpool", "avgpool", "layernorm", "gelu", "softmax")
#: layer ops costed as a profiled op at the same shape (the cost API knows only its COMPUTE_OPS). SiLU and
#: sigmoid move what ReLU moves (fwd x -> y; bwd dy and x or y -> dx); mul is elementwise like add (a, b -> c);
#: a product with a small broadcast operand (bcast: a squeeze-and-excitation gate), a scale by a number and the
#: primitive ops (predictor.trace) move what ReLU moves. Megatron's fused bias_dropout_add reads the branch and the
#: residual and writes their sum forward: an add's traffic.
COSTED_AS = {"silu": "relu", "sigmoid": "relu", "mul": "add", "rmsnorm": "layernorm", "bias_dropout_add": "add",
             "scale": "relu", "bcast": "relu", "random": "relu", "compare": "relu", **{op: "relu" for op in UNARY_OPS}}
#: the profiled pass a layer's backward is costed as, where not bwd_data. add's backward passes dy through,
#: but mul's computes a gradient for each input (dy times the other operand): costed as one more add-like
#: elementwise pass at the output shape, an approximation (two products when both inputs need gradients,
#: and a broadcast operand's gradient is a reduction).
BACKWARD_PASS = {"mul": "fwd", "scale": "fwd"}  # a scale's backward is one: read dy, write dx
#: ops whose backward adds a second pass (ReLU's forward: read dy, write dx): a product with a broadcast operand
#: computes dx = dy * s and, for s, dy * x summed (PyTorch's MulBackward0 and sum_to; op audit)
TWO_PASS_BACKWARD = ("bcast",)
#: ops whose backward is streaming traffic rather than a profiled pass: bias_dropout_add's is a dropout's
#: (read dy, write dx; profiler.opmath.ELEMENT_PASS_TENSORS), which no family measures
STREAMED_BACKWARD = ("bias_dropout_add",)


class Split(NamedTuple):
    """A NamedTuple rather than a dataclass: it is hashed millions of times as a cache key in a search."""

    n: int  # samples on this device
    spatial: tuple[int, ...] = ()  # divisor per spatial dim (D,)H,W; () = not split
    filter_div: int = 1  # output channels divided by
    channel_div: int = 1  # input channels divided by
    expert_div: int = 1  # a grouped (expert) linear: its experts spread over this many ranks (expert parallelism)
    seq_div: int = 1  # context parallelism: the sequence split this many ways (an attention score block: both dims)


def token_dims(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The dimensions of a per-sample shape that context parallelism splits: the tokens of (tokens, ...) tensors, or
    of (heads, tokens, dim) ones; both of a square (heads, tokens, tokens) score block."""
    if len(shape) >= 3:
        return (len(shape) - 2, len(shape) - 1) if shape[-1] == shape[-2] else (len(shape) - 2,)
    return (0,) if shape else ()


def seq_local(shape: tuple[int, ...], seq_div: int) -> tuple[int, ...]:
    """`shape` on one of seq_div context-parallel ranks (token_dims divided, rounded up)."""
    if seq_div <= 1:
        return shape
    dims = token_dims(shape)
    return tuple(_div(x, seq_div) if i in dims else x for i, x in enumerate(shape))


def attention_block(layer: Layer) -> bool:
    """Context parallelism runs this layer as seq_div blocks of (tokens/seq_div)² (fused attention, or a layer on
    score tensors): each rank's queries against every chunk of keys (LayerCoster.times multiplies by seq_div)."""
    return layer.op == "sdpa" or any(len(x) >= 3 and x[-1] == x[-2] for x in (layer.input_shape, layer.output_shape))


def grouped_gemms(layer: Layer, split: Split) -> int:
    """GEMMs one rank runs for a grouped (expert) linear: its experts / expert_div (1 for any other layer)."""
    if layer.op != "linear" or layer.groups <= 1:
        return 1
    return max(1, layer.groups // max(split.expert_div, 1))


def _div(x: int, d: int) -> int:
    return -(-x // d) if d > 1 else x


def local_dims(dims: tuple[int, ...], spatial: tuple[int, ...]) -> tuple[int, ...]:
    if not spatial:
        return dims
    return tuple(_div(x, s) for x, s in zip(dims, spatial))


def undilated(dims: tuple[int, ...], kernel: tuple[int, ...], padding: tuple[int, ...],
              dilation: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(input dims, padding) of the undilated convolution with a dilated one's output and implicit GEMM (the same
    M, N and K): the dilation widens the window by (d - 1)(k - 1), taken off the padding as far as it goes and
    off the input for the rest. cuDNN runs dilated kernels as implicit GEMMs only: in FP32 with cuDNN's search the
    equivalent may be given a Winograd or FFT time it would not get (docs/method.md §1)."""
    out_dims, out_pad = [], []
    for x, k, p, d in zip(dims, kernel, padding, dilation):
        shrink = (d - 1) * (k - 1)
        q = max(p - shrink // 2, 0)
        out_dims.append(max(x - (shrink - 2 * (p - q)), 1))
        out_pad.append(q)
    return tuple(out_dims), tuple(out_pad)


def _pass_params(layer: Layer, split: Split) -> tuple[str, dict[str, int]] | None:
    """The cost-model op and shape parameters of `layer` on one device (None: no kernel): a grouped linear's one
    expert GEMM (grouped_gemms of them), an attention block's one block under context parallelism."""
    if split.seq_div > 1:
        layer = layer_local(layer, split.seq_div)
    op = COSTED_AS.get(layer.op, layer.op)
    n = split.n
    if layer.op == "router":  # never split over its E logits: a filter_div is sequence parallelism's token share
        return "linear", {"M": n * _div(math.prod(layer.input_shape[:-1]), split.filter_div),
                          "N": layer.output_shape[-1], "K": layer.input_shape[-1]}
    if op in ("conv2d", "conv3d"):
        if layer.transposed:  # the convolution from its output's shape to its input's (LayerCoster.times swaps passes)
            c_in = _div(layer.output_shape[0], split.filter_div)
            f_out = _div(layer.input_shape[0], split.channel_div)
            dims = local_dims(layer.output_shape[1:], split.spatial)
        else:
            c_in = _div(layer.input_shape[0], split.channel_div)
            f_out = _div(layer.output_shape[0], split.filter_div)
            dims = local_dims(layer.input_shape[1:], split.spatial)
        kernel, stride, pad = layer.kernel, layer.stride, layer.padding
        if layer.dilation:
            dims, pad = undilated(dims, kernel, pad, layer.dilation)
        groups = layer.groups
        if groups > 1 and (c_in % groups or f_out % groups):  # a channel/filter split that cuts groups
            groups = math.gcd(math.gcd(c_in, f_out), groups)
        square = len(set(kernel)) == len(set(stride)) == len(set(pad)) == 1
        # a kernel, stride or padding not the same in every dimension (Inception's 1x7) goes per dimension
        if square or (groups == 1 and len(kernel) == len(stride) == len(pad) == len(dims)):
            params = {"N": n, "C": c_in, "F": f_out} | {
                key: value[0] if square else tuple(value)
                for key, value in (("kernel", kernel), ("stride", stride), ("padding", pad))}
            if groups > 1:  # grouped / depthwise: C/groups input channels per output channel
                params["groups"] = groups
            params.update(zip(("D", "H", "W") if op == "conv3d" else ("H", "W"), dims))
            return op, params
        # non-square grouped kernels (or no per-dimension shape): the implicit GEMM the conv lowers to
        out_dims = local_dims(layer.output_shape[1:], split.spatial)
        return "gemm", {"M": n * math.prod(out_dims), "N": f_out, "K": (c_in // layer.groups) * math.prod(kernel)}
    if op == "linear":  # on (tokens, features) per sample every token is a row of the GEMM: M = n tokens
        rows = n * math.prod(layer.input_shape[:-1])
        if layer.groups > 1:  # one expert's share of a rank's routed tokens, at the balanced mean (method.md §3c)
            rows = _div(rows * max(split.expert_div, 1), layer.groups)
        return "linear", {"M": rows, "N": _div(layer.output_shape[-1], split.filter_div),
                          "K": _div(layer.input_shape[-1], split.channel_div)}
    if op == "bmm":  # (..., M, K) x (..., K, N): every leading dim of the output is a batch of products
        return "bmm", {"B": n * _div(math.prod(layer.output_shape[:-2]), split.filter_div),
                       "M": layer.output_shape[-2], "N": layer.output_shape[-1], "K": layer.input_shape[-1]}
    if op == "sdpa":  # q (heads, S, D) -> (heads, S, Dv)
        heads, seq, dim = layer.input_shape[-3:] if len(layer.input_shape) >= 3 else (1, *layer.input_shape)
        return "sdpa", {"B": n * _div(math.prod(layer.input_shape[:-2]), split.filter_div), "S": seq, "D": dim,
                        "causal": int(layer.causal)}
    if op in _ACTIVATION_OPS:
        shape = layer.input_shape if op in ("maxpool", "avgpool") else layer.output_shape
        c = _div(shape[0], max(split.filter_div, split.channel_div))
        dims = local_dims(shape[1:], split.spatial) if len(shape) > 1 else ()
        params = {"N": n, "C": c}
        names = ("D", "H", "W")[3 - len(dims):] if dims else ()
        params.update(dict(zip(names, dims)))
        params.setdefault("H", 1)
        params.setdefault("W", 1)
        if op in ("maxpool", "avgpool"):
            params["kernel"] = layer.kernel[0] if layer.kernel else 1
            params["stride"] = layer.stride[0] if layer.stride else 1
        return op, params
    return None


def fused_expert_partners(graph: ModelGraph) -> frozenset[int]:
    """Grouped expert linears that read the same input as an earlier one (SwiGLU's up projection beside its gate):
    Megatron-Core's grouped MLP runs the pair as one fc1 GEMM per expert, so their launches count once."""
    first: dict[tuple[str, ...], int] = {}
    out = set()
    for i, layer in enumerate(graph.layers):
        if layer.op == "linear" and layer.groups > 1:
            if first.setdefault(tuple(layer.inputs), i) != i:
                out.add(i)
    return frozenset(out)


def layer_local(layer: Layer, seq_div: int) -> Layer:
    """`layer` with its input and output shapes on one of seq_div context-parallel ranks (seq_local), cached."""
    key = (layer, seq_div)
    hit = _LOCAL.get(key)
    if hit is None:
        if len(_LOCAL) > 1 << 14:
            _LOCAL.clear()
        hit = _LOCAL[key] = replace(layer, input_shape=seq_local(layer.input_shape, seq_div),
                                    output_shape=seq_local(layer.output_shape, seq_div))
    return hit


_LOCAL: dict = {}


def _split_div(split: Split) -> int:
    """What a split divides an activation tensor by on one device (filters or channels, spatial parts)."""
    return max(split.filter_div, split.channel_div) * (math.prod(split.spatial) if split.spatial else 1)


def _elementwise_bytes(layer: Layer, split: Split, act_bytes: int) -> float:
    """Bytes a copy-like op (concat, dropout, loss) moves on one device: read input + write output."""
    return split.n * (layer.input_elems + layer.output_elems) * act_bytes / _split_div(split)


def streamed_backward_bytes(layer: Layer, split: Split, act_bytes: int) -> float:
    """Backward bytes of a STREAMED_BACKWARD op on one device (profiler.opmath.element_pass_bytes at its
    output's local size)."""
    return element_pass_bytes(layer.op, "bwd_data", split.n * layer.output_elems, act_bytes) / _split_div(split)


def modelled_bytes(layer: Layer, split: Split, act_bytes: int, cross_entropy: str = "float32") -> tuple[float, float]:
    """(forward, backward) bytes of an op costed as streaming traffic with no family of its own: an embedding
    lookup and its table gradient, cross-entropy over the last dimension (profiler.opmath), and the copy-like
    ops (_elementwise_bytes, each pass; a reduction reads x and writes its result, its backward reads dy and
    writes dx: the same bytes)."""
    div = max(split.filter_div, split.channel_div)
    if layer.op == "embedding":
        tokens, (vocab, hidden) = split.n * layer.input_elems, layer.weight_shape
        return (embedding_bytes(tokens, _div(hidden, div), vocab, "fwd", act_bytes),
                embedding_bytes(tokens, _div(hidden, div), vocab, "bwd_weight", act_bytes))
    if layer.op == "cross_entropy":
        tokens = split.n * math.prod(layer.input_shape[:-1])
        classes = _div(layer.input_shape[-1], div)
        return (cross_entropy_bytes(tokens, classes, "fwd", act_bytes, cross_entropy),
                cross_entropy_bytes(tokens, classes, "bwd_data", act_bytes, cross_entropy))
    copy = _elementwise_bytes(layer, split, act_bytes)
    return copy, copy


def input_needs_no_grad(graph: ModelGraph) -> list[bool]:
    """Per layer, whether autograd computes no gradient for its input: none of the tensors it reads requires one.
    A tensor requires a gradient when a layer with parameters lies upstream of it (the model input does not), so
    a layer fed by the input directly, or through layers without parameters (a flatten or pooling before the
    first linear or convolution), has no input-gradient pass: an MLP's first linear layer after a flatten runs
    its weight gradient only (random net s43-001: 1.1 ms of 3.7 ms per step had been costed for it)."""
    requires_grad = {"": False}  # a name the graph does not define counts as requiring one
    out = []
    for layer in graph.layers:
        no_grad = not any(requires_grad.get(name, True) for name in (layer.inputs or ("",)))
        out.append(no_grad)
        requires_grad[layer.name] = layer.op not in NO_GRADIENT_OPS and (bool(layer.params) or not no_grad)
    return out


def fanout(graph: ModelGraph) -> list[int]:
    """How many layers read each layer's output (a residual's input is read by its block and by the add)."""
    readers: dict[str, int] = {}
    for layer in graph.layers:
        for name in layer.inputs:
            if name:
                readers[name] = readers.get(name, 0) + 1
    return [readers.get(layer.name, 0) for layer in graph.layers]


def gradient_sum_bytes(layer: Layer, split: Split, act_bytes: int, readers: int) -> float:
    """Bytes autograd moves summing the gradients of an output read by `readers` layers: readers - 1 element-wise
    adds over the output, each reading two tensors and writing one (the engine's add between nodes, seen in the
    op audit, predictor.op_audit)."""
    if readers <= 1:
        return 0.0
    return (readers - 1) * 3.0 * split.n * layer.output_elems * act_bytes / _split_div(split)


def layer_signatures(graph: ModelGraph) -> tuple[list[bool], list[int], list[int]]:
    """(input_needs_no_grad, fanout, signature) per layer: what LayerCoster reads of the graph, the same for every
    cost model and dtype (strategies.context.Context computes it once per graph). Layers identical in everything the
    cost depends on share one signature, hence one cache entry (ResNet repeats blocks, a transformer its layers)."""
    first = input_needs_no_grad(graph)
    readers = fanout(graph)
    signatures: dict[tuple, int] = {}
    signature = [signatures.setdefault(
        (l.op, l.input_shape, l.output_shape, l.weight_shape if l.op == "embedding" else (), l.kernel, l.stride,
         l.padding, l.groups, l.dilation, l.transposed, l.causal, bool(l.params), f, r), len(signatures))
        for l, f, r in zip(graph.layers, first, readers)]
    return first, readers, signature


class LayerCoster:
    """Cached per-layer (fwd, bwd) seconds for one graph, cost model and dtype."""

    def __init__(self, graph: ModelGraph, cost_model: CostModel, dtype: str,
                 signatures: tuple[list[bool], list[int], list[int]] | None = None, memory_format: str = "nhwc",
                 cross_entropy: str = "float32", half: tuple[bool, ...] | None = None, host_floor: bool = True):
        self.graph = graph
        self.cm = cost_model
        self.dtype = dtype
        self.cm_dtype = DTYPE_NAMES[dtype]
        # an NCHW run on a GPU's tensor cores: cuDNN transposes every dense convolution's operands (nchw_transpose_s)
        self.transposes = (memory_format == "nchw" and self.cm_dtype in TENSOR_MODES
                           and not getattr(cost_model, "device_is_host", False))
        self.act_bytes = ACT_BYTES[dtype]
        self.cross_entropy = cross_entropy  # how the loss reads half-precision logits (Plan.cross_entropy)
        # layers whose input needs no gradient: autograd skips their input gradient (input_needs_no_grad); readers
        # per output; one signature per set of identical layers (layer_signatures)
        self.first, self.readers, self.signature = signatures or layer_signatures(graph)
        # TensorFlow's AMP (predictor.graph_rewrite): the layers it runs in half precision (the rest in float32) and
        # the elements per sample of each layer's output casts; None: every layer at the plan's precision
        self.half, self.casts = half, cast_elems(graph, half) if half is not None else None
        if half is not None:  # identical layers painted alike share a cache entry
            keys: dict[tuple, int] = {}
            self.signature = [keys.setdefault((sig, h, c), len(keys))
                              for sig, h, c in zip(self.signature, half, self.casts)]
        self._cache: dict[tuple[int, Split], tuple[float, float]] = {}  # (signature, split) -> times
        self.overhead_s = (cost_model.framework_overhead_s("fwd"), cost_model.framework_overhead_s("bwd"))
        # the host time of one layer pass on a GPU: a pass whose kernels take less waits for the host (0: no floor;
        # none when the step replays CUDA graphs, Plan.cuda_graphs)
        dispatch = getattr(cost_model, "host_dispatch_s", None) if host_floor else None
        self.host_floor = (dispatch("fwd"), dispatch("bwd")) if dispatch else (0.0, 0.0)
        # each expert GEMM's launch beyond its kernel (grouped expert linears): none under CUDA graphs, as the floor,
        # unless the router is dropless, whose variable token counts keep the experts out of the graphs (§3c)
        expert = getattr(cost_model, "expert_gemm_dispatch_s", None)
        self.expert_gemm_s = expert(fp8=dtype == "fp8") if expert and (host_floor or any(
            layer.op == "moe_dispatch" and not layer.capacity_factor for layer in graph.layers)) else 0.0
        self.fused_partner = fused_expert_partners(graph) if self.expert_gemm_s else frozenset()
        if self.fused_partner:  # a fused partner costs no launches: it shares no cache entry with its twin
            keys = {}
            self.signature = [keys.setdefault((sig, i in self.fused_partner), len(keys))
                              for i, sig in enumerate(self.signature)]
        self._calls: dict[tuple, float] = {}  # (op, pass, params) -> seconds: layers of equal shape share it

    def _call(self, op: str, pass_: str, params: dict[str, int], cm_dtype: str | None = None) -> float:
        cm_dtype = cm_dtype or self.cm_dtype
        key = (op, pass_, tuple(params.items()), cm_dtype)
        t = self._calls.get(key)
        if t is None:
            dtype = FP8 if self.dtype == "fp8" and op in FP8_MATMUL_OPS else cm_dtype
            t = self.cm.compute_time_s(op, pass_, params, dtype)
            if self.transposes and op in NCHW_TRANSPOSED_OPS and shapes.family_op(op, params) == op:
                t += nchw_transpose_s(self.cm, op, pass_, params, dtype)
            self._calls[key] = t
        return t

    def _fp8_casts(self, params: dict[str, int], weighted: bool) -> tuple[float, float]:
        """(forward, backward) seconds of the casts an FP8 GEMM needs (FP8_CAST_BYTES_PER_ELEM): the input and, for
        a layer with weights, the weight in the forward; the output gradient in the backward. M x K input,
        M x N output, K x N weight."""
        m, n, k = params["M"], params["N"], params["K"]
        fwd = FP8_CAST_BYTES_PER_ELEM * m * k + (FP8_WEIGHT_CAST_BYTES_PER_PARAM * k * n if weighted else 0)
        return self.cm.memory_time_s(fwd), self.cm.memory_time_s(FP8_CAST_BYTES_PER_ELEM * m * n)

    def times(self, index: int, split: Split) -> tuple[float, float]:
        """(forward_s, backward_s) of layer `index` at `split`; backward = bwd_data + bwd_weight, each pass
        plus the profile's framework overhead per layer (CostModel.framework_overhead_s)."""
        key = (self.signature[index], split)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        layer = self.graph.layers[index]
        local = layer_local(layer, split.seq_div) if split.seq_div > 1 else layer  # context parallelism's share
        spec = _pass_params(layer, split)
        in_half = self.half is None or self.half[index]
        cm_dtype, act_bytes = (self.cm_dtype, self.act_bytes) if in_half else ("float32", ACT_BYTES["fp32"])
        if spec is None:
            if layer.op in FREE_OPS:
                fwd = bwd = 0.0
            else:  # concat, dropout, softmax_loss, embedding, cross_entropy, MoE dispatch/combine: streaming traffic
                fwd_bytes, bwd_bytes = modelled_bytes(local, split, act_bytes, self.cross_entropy)
                fwd = self.cm.memory_time_s(fwd_bytes)
                bwd = self.cm.memory_time_s(bwd_bytes)
        else:
            op, params = spec
            # a transposed convolution runs its convolution's backward-data pass forward and its forward backward
            forward, data = ("bwd_data", "fwd") if layer.transposed else ("fwd", BACKWARD_PASS.get(layer.op, "bwd_data"))
            fwd = self._call(op, forward, params, cm_dtype)
            if self.first[index] or layer.op in NO_GRADIENT_OPS:
                bwd = 0.0
            elif layer.op in STREAMED_BACKWARD:
                bwd = self.cm.memory_time_s(streamed_backward_bytes(local, split, act_bytes))
            else:
                bwd = self._call(op, data, params, cm_dtype)
                if layer.op in TWO_PASS_BACKWARD:
                    bwd += self._call(op, "fwd", params, cm_dtype)
            if layer.params or layer.tied:  # a tied head's weight gradient is computed too (Layer.tied)
                bwd += self._call(op, "bwd_weight", params, cm_dtype)
            elif op == "bmm" and len(layer.inputs) > 1 and not self.first[index]:
                # BmmBackward0 of two activations (attention's Q K^T and P V): dA = dC B^T and dB = A^T dC, the
                # second product costed as the batched GEMM's bwd_weight pass (profiler.opmath.bmm_flops)
                bwd += self._call(op, "bwd_weight", params, cm_dtype)
            if self.dtype == "fp8" and op in FP8_MATMUL_OPS:
                cast_fwd, cast_bwd = self._fp8_casts(params, bool(layer.params))
                fwd += cast_fwd
                bwd += cast_bwd
            reps = grouped_gemms(layer, split)  # an expert linear: one GEMM per expert on this rank
            fwd, bwd = fwd * reps, bwd * reps
            if layer.op == "linear" and layer.groups > 1:  # each expert GEMM's launch, forward and backward (§3c)
                launches = 0.0 if index in self.fused_partner else reps * self.expert_gemm_s
                fwd += launches
                bwd += (2.0 if layer.params else 1.0) * launches if bwd > 0 else 0.0
        if split.seq_div > 1 and attention_block(layer):  # every chunk of keys: seq_div blocks
            fwd, bwd = fwd * split.seq_div, bwd * split.seq_div
        if self.readers[index] > 1:  # its output's gradients arrive from several readers and are summed
            bwd += self.cm.memory_time_s(gradient_sum_bytes(local, split, act_bytes, self.readers[index]))
        if self.half is not None:
            cast_f, cast_b = self._rewrite_casts(index, layer, split, in_half)
            fwd += cast_f
            bwd += cast_b
        if layer.op != "input":
            over_f, over_b = self.overhead(index)
            fwd += over_f
            bwd += over_b
            if layer.op not in FREE_OPS:  # a GPU's host issues each pass no faster than host_floor (docs/method.md §3d)
                fwd = max(fwd, self.host_floor[0])
                bwd = max(bwd, self.host_floor[1]) if bwd > 0 else bwd
        result = (fwd, bwd)
        self._cache[key] = result
        return result

    def _rewrite_casts(self, index: int, layer: Layer, split: Split, in_half: bool) -> tuple[float, float]:
        """(forward, backward) seconds of the casts TensorFlow's AMP puts after layer `index` (graph_rewrite.
        cast_elems: read at one precision, write at the other; backward the gradient's cast back, where a gradient
        flows) and, for a half layer with weights, of its float32 weights to half and of their gradient back (every
        step: the variables stay float32)."""
        moved = CAST_BYTES_PER_ELEM * split.n * self.casts[index] / _split_div(split)
        if in_half and layer.params and layer.op in ALLOW:
            moved_w = CAST_BYTES_PER_ELEM * layer.params / max(split.filter_div, split.channel_div)
        else:
            moved_w = 0.0
        fwd = self.cm.memory_time_s(moved + moved_w)
        grad = layer.op not in NO_GRADIENT_OPS and (bool(layer.params) or not self.first[index])  # dY is needed
        return fwd, self.cm.memory_time_s((moved if grad else 0.0) + moved_w)

    def overhead(self, index: int) -> tuple[float, float]:
        """The framework overheads (forward, backward) in `times(index, split)` at every split: every layer is a
        module call, and an autograd node unless nothing needs its gradient (the search's bounds keep these)."""
        layer = self.graph.layers[index]
        if layer.op == "input":
            return 0.0, 0.0
        return self.overhead_s[0], self.overhead_s[1] if (layer.params or not self.first[index]) else 0.0

    def sum_times(self, indices, split_of) -> tuple[float, float, list[float]]:
        """Total forward and backward seconds over `indices` (split_of(i) -> Split), plus the per-layer
        backward list in layer order (for bucket overlap)."""
        fwd = bwd = 0.0
        bwd_list = []
        cache = self._cache
        signature = self.signature
        for i in indices:
            split = split_of(i)
            hit = cache.get((signature[i], split))
            f, b = hit if hit is not None else self.times(i, split)
            fwd += f
            bwd += b
            bwd_list.append(b)
        return fwd, bwd, bwd_list


# Bytes an optimizer step reads + writes per parameter (fp32 master weights and state):
#   sgd: read w, g; write w                -> 3 fp32 words
#   momentum: read w, g, m; write w, m     -> 5
#   adam: read w, g, m, v; write w, m, v   -> 7
# Mixed precision reads a half-precision gradient and also writes the half-precision weight copy.
#: an optimizer written in element-wise ops, one kernel per op and variable: (float32 words its kernels read and write
#: per parameter, kernels per variable). adamw-ops is BERT's TensorFlow AdamWeightDecayOptimizer.apply_gradients
#: (Google's optimization.py, kept by DeepLearningExamples @0845aaa9): next_m = beta1 m + (1 - beta1) g (2 + 2 + 3
#: words), next_v = beta2 v + (1 - beta2) g^2 (2 + 2 + 2 + 3), update = next_m / (sqrt(next_v) + eps) (2 + 2 + 3),
#: update += decay * param (2 + 3; the norms and biases skip it, a rounding error), lr * update (2), param - that
#: (3) and three assigns (2 each): 39 words in 17 kernels, on float32 gradients in every precision
PER_OP_UPDATES = {"adamw-ops": (39, 17)}
_UPDATE_WORDS = {"sgd": 3, "momentum": 5, "adam": 7, **{name: w for name, (w, _) in PER_OP_UPDATES.items()}}
OPTIMIZER_STATE_WORDS = {"sgd": 0, "momentum": 1, "adam": 2}
OPTIMIZER_STATE_WORDS["adamw-ops"] = OPTIMIZER_STATE_WORDS["adam"]  # Adam's m and v, whatever kernels update them


#: convolutions whose NCHW operands cuDNN transposes around its tensor-core kernels (dense ones: grouped kernels run
#: on CUDA cores in either layout), in the dtypes that run there (calibrate.gpu_specs.TENSOR_MODES)
NCHW_TRANSPOSED_OPS = ("conv2d", "conv3d")


def nchw_transpose_s(cost_model: CostModel, op: str, pass_: str, params: dict, dtype: str) -> float:
    """Seconds cuDNN spends converting an NCHW convolution pass to and from the NHWC layout its tensor-core kernels
    take: its operands (input, weight, output or their gradients) each read and written once more, at the device's
    memory bandwidth (docs/method.md §3; decisions/2026-12-06-nchw-transposes.md)."""
    return cost_model.memory_time_s(2.0 * shapes.work(op, pass_, params, dtype)["bytes"])


def check_dtype(cost_model: CostModel, dtype: str, profile: str) -> None:
    """UserError naming --dtype when the profile cannot run the plan dtype: fp8 needs the profile's "float8"
    matrix-product fits (FP8 tensor cores: H100, H200)."""
    from profiler.errors import UserError

    if dtype != "fp8":
        return
    try:
        cost_model.compute_time_s(FP8_MATMUL_OPS[0], "fwd", {"M": 1, "N": 1, "K": 1}, FP8)
    except UserError:
        raise UserError(f"--dtype fp8: profile {profile} has no {FP8} matrix-product fits (FP8 tensor cores: H100, "
                        f"H200, e.g. h100-dgx-8gpu.published); use --dtype bf16 or such a profile") from None


#: bytes per parameter the passes of a half-precision model's optimizer step move around the fp32 update itself
#: (plan.mixed_precision "half": Megatron-LM's Float16OptimizerWithFloat16Params.step, megatron/optimizer/
#: optimizer.py @55ba1f7b): copy the fp16 gradients into fp32 main gradients (read 2, write 4); unscale them and
#: check for inf/nan in place (read 4, write 4); the global gradient norm for clipping (read 4; the rescale when
#: the norm exceeds the clip is left out); after the update, copy the fp32 main weights into the fp16 model weights
#: (read 4, write 2); and zero the fp16 gradient buffer before the next iteration (write 2)
HALF_OPTIMIZER_PASS_BYTES = 6 + 8 + 4 + 6 + 2


def update_bytes(params: float, optimizer: str, dtype: str, mixed_precision: str = "autocast") -> float:
    """Bytes moved by one optimizer step over `params` parameters (a memory-bound streaming kernel). Under autocast
    the update reads a half gradient and writes a half weight copy beside the fp32 words; with half-precision
    weights and gradients (mixed_precision "half") the fp32 update runs on fp32 main gradients and weights, between
    the passes of HALF_OPTIMIZER_PASS_BYTES."""
    words = _UPDATE_WORDS[optimizer]
    if optimizer in PER_OP_UPDATES:
        return params * 4 * words
    if dtype in MIXED_DTYPES and mixed_precision == "half":
        return params * (4 * words + HALF_OPTIMIZER_PASS_BYTES)
    if dtype in MIXED_DTYPES:
        return params * (4 * (words - 1) + 2 + 2)  # half gradient in, half weight copy out
    return params * 4 * words


def update_time_s(cost_model: CostModel, params: float, optimizer: str, dtype: str,
                  mixed_precision: str = "autocast") -> float:
    """Weight update as memory-bound work (ParaDL's released oracle drops WU entirely; docs/method.md §4)."""
    return cost_model.memory_time_s(update_bytes(params, optimizer, dtype, mixed_precision)) if params else 0.0


def update_launch_s(cost_model: CostModel, optimizer: str, tensors: int) -> float:
    """The launches an optimizer written in element-wise ops adds to its bytes (PER_OP_UPDATES): each of its
    kernels, for each variable, at least the profile's shortest memory-bound kernel (ReLU's on one element); 0 for
    a streaming optimizer."""
    if optimizer not in PER_OP_UPDATES or not tensors:
        return 0.0
    shortest = cost_model.compute_time_s("relu", "fwd", {"N": 1, "C": 1, "H": 1, "W": 1}, "float32")
    return PER_OP_UPDATES[optimizer][1] * tensors * shortest
