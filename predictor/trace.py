"""Trace a torch.nn.Module into a ModelGraph without allocating real tensors.

torch.fx records the module's operations symbolically; the graph is then run on the meta device (shapes only, no
memory). Each recorded operation becomes a `Layer` with per-sample shapes, parameter count, kernel/stride/padding
(for halos) and FLOPs (docs/method.md §1; transformer ops from profiler.opmath, §3a), which are reported, not used
for time. Transformers (HuggingFace-style and Megatron-LM's fused modules, nn.MultiheadAttention) are traced as the
layers they run, views as free layers aliasing their producer, masks and position ids as constants (§3a,
"Tracing"); a model whose output keeps a token dimension gets its cross-entropy appended as a layer. Operations the
cost models do not know are collected in ModelGraph.unsupported by name, never dropped.
"""
from __future__ import annotations

import math
import operator
from typing import Any, NamedTuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.fx import GraphModule, Interpreter, Node, Tracer

from predictor.graph import UNARY_OPS, Layer, ModelGraph
from profiler.errors import UserError
from profiler.opmath import (ELEMENT_FLOPS, bmm_flops, conv_flops, cross_entropy_flops, dilated_extent, gemm_flops,
                             sdpa_flops, window_output_dims)

_MODULE_OPS = {
    nn.Conv2d: "conv2d", nn.Conv3d: "conv3d", nn.Linear: "linear",
    nn.ConvTranspose2d: "conv2d", nn.ConvTranspose3d: "conv3d",  # Layer.transposed
    nn.BatchNorm2d: "batchnorm", nn.BatchNorm3d: "batchnorm", nn.BatchNorm1d: "batchnorm",
    nn.ReLU: "relu", nn.SiLU: "silu", nn.Sigmoid: "sigmoid", nn.MaxPool2d: "maxpool", nn.MaxPool3d: "maxpool",
    nn.AvgPool2d: "avgpool", nn.AvgPool3d: "avgpool", nn.AdaptiveAvgPool2d: "avgpool", nn.AdaptiveAvgPool3d: "avgpool",
    nn.Dropout: "dropout", nn.Dropout3d: "dropout", nn.Flatten: "flatten", nn.Identity: "flatten",
    nn.Embedding: "embedding", nn.LayerNorm: "layernorm", nn.RMSNorm: "rmsnorm", nn.GELU: "gelu",
    nn.Softmax: "softmax",
    nn.ConstantPad2d: "copy", nn.ConstantPad3d: "copy",  # a padded copy of the input (read x, write the larger y)
}
#: modules traced as one layer, by class name: a fused kernel whose Python reference would otherwise be traced as
#: the ops it fuses. FusedScaleMaskSoftmax (Megatron-LM's megatron/model/fused_softmax.py, and the zoo's module
#: of that name, predictor.zoo.transformer): scale, mask and softmax in one kernel, one `softmax` layer over the
#: scores (read x, write y; backward read dy and y, write dx). BiasDropoutAdd (Megatron-LM's
#: bias_dropout_add_fused_train, megatron/model/transformer.py, and the zoo's module of that name): residual +
#: dropout(x) in one kernel, one `bias_dropout_add` layer reading x and the residual (profiler.opmath)
_FUSED_MODULES = {"FusedScaleMaskSoftmax": "softmax", "BiasDropoutAdd": "bias_dropout_add",
                  # a mixture of experts (the zoo's predictor.zoo.transformer.MoE, docs/method.md §3c): each module
                  # one layer; ExpertLinear a linear whose `groups` is its expert count
                  "Router": "router", "TokenDispatch": "moe_dispatch", "TokenCombine": "moe_combine",
                  "ExpertLinear": "linear"}
_FUNCTION_OPS = {
    F.relu: "relu", torch.relu: "relu", operator.add: "add", operator.iadd: "add", torch.add: "add",
    torch.cat: "concat", torch.flatten: "flatten", F.dropout: "dropout",
    F.silu: "silu", torch.sigmoid: "sigmoid", F.sigmoid: "sigmoid",
    operator.mul: "mul", operator.imul: "mul", torch.mul: "mul",
    F.gelu: "gelu", F.layer_norm: "layernorm", F.rms_norm: "rmsnorm", F.softmax: "softmax", torch.softmax: "softmax",
    torch.matmul: "bmm", torch.bmm: "bmm", operator.matmul: "bmm", F.scaled_dot_product_attention: "sdpa",
    F.cross_entropy: "cross_entropy", operator.getitem: "flatten", torch.transpose: "flatten",
    torch.permute: "flatten", torch.split: "flatten", torch.chunk: "flatten", torch.reshape: "flatten",
    torch.masked_fill: "add", torch.where: "add", operator.truediv: "mul", torch.div: "mul",
    operator.sub: "add", torch.sub: "add", torch.tanh: "tanh", torch.pow: "pow", operator.pow: "pow",
    torch.rsqrt: "rsqrt", torch.sqrt: "sqrt", torch.exp: "exp", torch.rand_like: "random", operator.ge: "compare",
    torch.mean: "mean", torch.sum: "sum",
}
#: ops of a model written in primitives (as TensorFlow's BERT writes its GELU and layer norm; predictor.zoo.tf_ops),
#: each its own kernel: the UNARY_OPS (read x, write y; backward read dy and x, write dx, as ReLU); "random" (a
#: tensor of x's shape) and "compare" (x against a number), through which no gradient flows; the REDUCE_OPS mean and
#: sum over some dimensions (read x, write the smaller result; backward read dy, write dx). An add, masked_fill or
#: product whose other operands are numbers or constants (a mask, a broadcast buffer) is a "scale" of its one tensor
#: (read x, write y; backward read dy, write dx), and so is an add of a small broadcast operand (BROADCAST_SHARE);
#: a product with one is a "bcast" (read x, write y; backward dx = dy * s and the small operand's gradient, a sum of
#: dy * x: two passes). docs/method.md §3a
#: masked_fill and where (a causal mask on attention scores) move what an add moves: read x and the mask, write
#: y; a division moves what a product moves; dtype casts are taken as views (no copy at the model's own dtype)
_METHOD_OPS = {"relu": "relu", "add": "add", "add_": "add", "view": "flatten", "reshape": "flatten",
               "flatten": "flatten", "contiguous": "flatten", "sigmoid": "sigmoid", "mul": "mul", "mul_": "mul",
               "transpose": "flatten", "permute": "flatten", "split": "flatten", "chunk": "flatten",
               "unflatten": "flatten", "unsqueeze": "flatten", "squeeze": "flatten", "expand": "flatten",
               "softmax": "softmax", "masked_fill": "add", "masked_fill_": "add", "matmul": "bmm",
               "div": "mul", "type": "flatten", "to": "flatten", "type_as": "flatten", "float": "flatten",
               "sub": "add", "tanh": "tanh", "pow": "pow", "rsqrt": "rsqrt", "sqrt": "sqrt", "exp": "exp",
               "mean": "mean", "sum": "sum"}
_SHAPE_ONLY = {"size", "dim"}
#: views returning a tuple of tensors: a part of one reads the tensor that was cut
_TUPLE_VIEWS = {"split", "chunk", "unbind", torch.split, torch.chunk, torch.unbind}
#: ops whose FLOPs per element are profiler.opmath.ELEMENT_FLOPS
_ELEMENT_FLOP_OPS = ("layernorm", "rmsnorm", "gelu", "softmax", "bias_dropout_add")


class _FusedLeafTracer(Tracer):
    """torch.fx's tracer with the _FUSED_MODULES kept as leaves (one call_module node each)."""

    def is_leaf_module(self, m: nn.Module, module_qualified_name: str) -> bool:
        return type(m).__name__ in _FUSED_MODULES or super().is_leaf_module(m, module_qualified_name)


def _symbolic_trace(module: nn.Module) -> GraphModule:
    """torch.fx.symbolic_trace with the fused modules as leaves. A lazy GraphModule where torch has one: only the
    Interpreter walks it, so generating and compiling its Python code (a seventh of tracing a deep model) is skipped."""
    tracer = _FusedLeafTracer()
    graph = tracer.trace(module)
    try:
        from torch.fx._lazy_graph_module import _LazyGraphModule
    except ImportError:  # a torch without it: the eager GraphModule, the same graph
        _LazyGraphModule = GraphModule
    return _LazyGraphModule(tracer.root, graph, module.__class__.__name__)


def _module_op(module: nn.Module) -> str | None:
    """The layer op of a module call (None: not a module the cost models know)."""
    return _MODULE_OPS.get(type(module)) or _FUSED_MODULES.get(type(module).__name__)


def _tuple(value, ndim: int) -> tuple[int, ...]:
    if isinstance(value, int):
        return (value,) * ndim
    return tuple(int(v) for v in value)


def _shape(node: Node) -> tuple[int, ...] | None:
    meta = node.meta.get("tensor_meta")
    if meta is None or not hasattr(meta, "shape"):
        return None
    return tuple(int(d) for d in meta.shape[1:])


def _tensor_inputs(node: Node, constants: frozenset = frozenset()) -> list[Node]:
    """The tensor-valued nodes `node` reads, constants left out; a tuple-valued input (the parts of a split)
    stands for the tensors it was made from."""
    out: list[Node] = []

    def visit(arg):
        if isinstance(arg, Node):
            if arg in constants:
                return
            if _shape(arg) is not None or arg.op == "placeholder":
                out.append(arg)
            elif arg.target in _TUPLE_VIEWS:
                visit(arg.args)
        elif isinstance(arg, (list, tuple)):
            for a in arg:
                visit(a)

    visit(node.args)
    return list(dict.fromkeys(out))


def _constants(gm) -> frozenset:
    """Nodes computed from buffers, parameters read as attributes and literals alone (a causal mask, position
    ids, a scale built from a size): no layer of the model, and nothing a sample's data flows through. Sizes and
    other values that are not tensors count as constants as inputs (run after shape propagation)."""
    constant: set[Node] = set()
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            constant.add(node)
        elif node.op in ("call_function", "call_method"):
            if all(a in constant or _is_size(a) for a in node.all_input_nodes):
                constant.add(node)
    return frozenset(constant)


def _is_size(node: Node) -> bool:
    """Whether a node's value holds no tensor (a size, a shape, a number), after shape propagation."""
    return node.op != "placeholder" and "tensor_meta" not in node.meta and "tensor_parts" not in node.meta


def _input_vocabulary(gm, modules) -> int | None:
    """The rows of the embedding the model input feeds (its input is token ids), else None."""
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        for user in node.users:
            if user.op == "call_module" and isinstance(modules.get(user.target), nn.Embedding):
                return modules[user.target].num_embeddings
    return None


def _input_dtype(gm, modules) -> torch.dtype:
    """int64 when the model input feeds an embedding (token ids), else float32."""
    return torch.long if _input_vocabulary(gm, modules) is not None else torch.float32


def example_input(module: nn.Module, input_shape: tuple[int, ...], batch: int, generator=None) -> torch.Tensor:
    """A random batch for `module`: token ids below its embedding's vocabulary when its input feeds one,
    else standard normal floats (the audit's and tests' training steps)."""
    gm = _symbolic_trace(module)
    vocab = _input_vocabulary(gm, dict(gm.named_modules()))
    if vocab is not None:
        return torch.randint(0, vocab, (batch, *input_shape), generator=generator)
    return torch.randn(batch, *input_shape, generator=generator)


def _flops(op: str, x: tuple[int, ...], y: tuple[int, ...], module, n_inputs: int,
           operands: tuple = (), causal: bool = False) -> tuple[float, float, float]:
    """(fwd, bwd_data, bwd_weight) FLOPs per sample; operands: the shapes of the tensor inputs (bmm, sdpa)."""
    ye = math.prod(y)
    if op in ("conv2d", "conv3d"):
        # per sample; a transposed one's are those of the convolution from its output's shape to its input's
        if _transposed(module):
            f = conv_flops(1, y[0] // module.groups, x[0], math.prod(module.kernel_size), math.prod(x[1:]))
        else:
            f = conv_flops(1, x[0] // module.groups, y[0], math.prod(module.kernel_size), math.prod(y[1:]))
        return f, f, f
    if op == "linear":
        f = gemm_flops(math.prod(x[:-1]), module.out_features, module.in_features)  # per sample
        return f, f, f
    if op == "router":  # its GEMM to one logit per expert (the softmax over E values is left out)
        f = gemm_flops(math.prod(x[:-1]), y[-1], x[-1])
        return f, f, f
    if op == "bmm" and len(x) >= 2 and len(y) >= 2:
        f = bmm_flops(math.prod(y[:-2]), y[-2], y[-1], x[-1])
        return f, f, f
    if op == "sdpa" and len(x) >= 2:
        seq_kv = operands[1][-2] if len(operands) > 1 and len(operands[1]) >= 2 else x[-2]
        args = (math.prod(x[:-2]), x[-2], seq_kv, x[-1])
        return sdpa_flops(*args, "fwd", causal), sdpa_flops(*args, "bwd_data", causal), 0.0
    if op in _ELEMENT_FLOP_OPS:
        fwd, bwd = ELEMENT_FLOPS[op]
        return float(fwd * ye), float(bwd * ye), 0.0
    if op == "cross_entropy":
        tokens = math.prod(x[:-1])
        return cross_entropy_flops(tokens, x[-1], "fwd"), cross_entropy_flops(tokens, x[-1], "bwd_data"), 0.0
    if op == "batchnorm":
        return 4.0 * ye, 4.0 * ye, 2.0 * ye
    if op in ("relu", "silu", "sigmoid", "dropout", "scale", "random", "compare") or op in UNARY_OPS:
        return float(ye), float(ye), 0.0
    if op == "add":
        return float(ye * (n_inputs - 1)), 0.0, 0.0
    if op in ("mul", "bcast"):
        return float(ye), float(ye * n_inputs), 0.0
    if op in ("maxpool", "avgpool"):
        k = math.prod(x[1:]) / max(math.prod(y[1:]), 1) if module is None or isinstance(
            module, (nn.AdaptiveAvgPool2d, nn.AdaptiveAvgPool3d)) else math.prod(_tuple(module.kernel_size, len(y) - 1))
        return k * ye, float(ye), 0.0
    return 0.0, 0.0, 0.0


def _transposed(module) -> bool:
    return isinstance(module, nn.modules.conv._ConvTransposeNd)


def _dilation(op: str, module) -> tuple[int, ...]:
    """A convolution's dilation per spatial dim, () when it is 1 everywhere (Layer.dilation)."""
    if op not in ("conv2d", "conv3d") or module is None or set(module.dilation) == {1}:
        return ()
    return tuple(int(d) for d in module.dilation)


def _geometry(op: str, module, x: tuple[int, ...], y: tuple[int, ...]):
    """kernel, stride, padding per spatial dim."""
    nd = len(x) - 1
    if op in ("conv2d", "conv3d"):
        return module.kernel_size, module.stride, _tuple(module.padding, nd)
    if isinstance(module, (nn.AdaptiveAvgPool2d, nn.AdaptiveAvgPool3d)):
        k = tuple(i // max(o, 1) for i, o in zip(x[1:], y[1:]))
        return k, k, (0,) * nd
    if op in ("maxpool", "avgpool"):
        k = _tuple(module.kernel_size, nd)
        return k, _tuple(module.stride or module.kernel_size, nd), _tuple(module.padding, nd)
    return (), (), ()


#: modules whose output has their input's shape and dtype: shape propagation passes the input through instead of
#: running them (batch norm on meta tensors goes through torch's decompositions, whose first use imports
#: modules for about 1.5 s)
_SHAPE_PRESERVING = (nn.modules.batchnorm._BatchNorm, nn.ReLU, nn.ReLU6, nn.SiLU, nn.Sigmoid, nn.Dropout,
                     nn.Identity, nn.LayerNorm, nn.RMSNorm, nn.GELU, nn.Softmax)


class _Meta(NamedTuple):
    shape: tuple[int, ...]


def _known_output(module: nn.Module, x: torch.Tensor) -> torch.Tensor | None:
    """The output of `module` on meta tensor x when its shape follows from the module alone, else None."""
    if type(module).__name__ in _FUSED_MODULES and hasattr(module, "output_size"):  # a router, expert linears
        return x.new_empty(module.output_size(tuple(x.shape)))
    if isinstance(module, _SHAPE_PRESERVING) or type(module).__name__ in _FUSED_MODULES:
        return x.new_empty(x.shape)
    if isinstance(module, nn.Embedding):
        return torch.empty((*x.shape, module.embedding_dim), device=x.device, dtype=module.weight.dtype)
    if isinstance(module, nn.Linear) and x.dim() >= 1 and x.shape[-1] == module.in_features:
        return x.new_empty((*x.shape[:-1], module.out_features))
    if isinstance(module, nn.Flatten):
        start, end = module.start_dim % x.dim(), module.end_dim % x.dim()
        return x.new_empty((*x.shape[:start], math.prod(x.shape[start:end + 1]), *x.shape[end + 1:]))
    if isinstance(module, (nn.Conv2d, nn.Conv3d)) and not isinstance(module.padding, str) \
            and x.dim() == 2 + len(module.kernel_size):
        dims = window_output_dims(x.shape[2:], dilated_extent(module.kernel_size, module.dilation), module.stride,
                                  module.padding)
        return x.new_empty((x.shape[0], module.out_channels, *dims))
    if isinstance(module, (nn.MaxPool2d, nn.MaxPool3d, nn.AvgPool2d, nn.AvgPool3d)) and not module.ceil_mode \
            and not getattr(module, "return_indices", False) and getattr(module, "dilation", 1) in (1, (1, 1), (1, 1, 1)):
        nd = 3 if isinstance(module, (nn.MaxPool3d, nn.AvgPool3d)) else 2
        if x.dim() == 2 + nd:
            k = _tuple(module.kernel_size, nd)
            dims = window_output_dims(x.shape[2:], k, _tuple(module.stride or module.kernel_size, nd),
                                      _tuple(module.padding, nd))
            return x.new_empty((*x.shape[:2], *dims))
    if isinstance(module, (nn.AdaptiveAvgPool2d, nn.AdaptiveMaxPool2d, nn.AdaptiveAvgPool3d, nn.AdaptiveMaxPool3d)) \
            and not getattr(module, "return_indices", False):
        nd = 3 if isinstance(module, (nn.AdaptiveAvgPool3d, nn.AdaptiveMaxPool3d)) else 2
        size = module.output_size if isinstance(module.output_size, tuple) else (module.output_size,) * nd
        if x.dim() == 2 + nd:
            return x.new_empty((*x.shape[:2], *(d if s is None else s for d, s in zip(x.shape[2:], size))))
    return None


_BROADCASTING = {operator.add, operator.iadd, operator.mul, operator.imul, operator.sub, torch.add, torch.mul,
                 torch.sub}
_SAME_SHAPE_FUNCTIONS = {F.relu, torch.relu, F.silu, torch.sigmoid, F.dropout, F.gelu, torch.tanh, F.softmax,
                         torch.softmax}


def _broadcast(*shapes: tuple[int, ...]) -> tuple[int, ...] | None:
    """NumPy broadcasting of `shapes` (None when they do not broadcast)."""
    out = []
    for dims in zip(*(((1,) * (max(map(len, shapes)) - len(s)) + tuple(s)) for s in shapes)):
        sizes = {d for d in dims if d != 1}
        if len(sizes) > 1:
            return None
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def _known_function_output(target, args, kwargs) -> torch.Tensor | None:
    """The output of a shape-only function call on meta tensors (element-wise arithmetic, activations,
    concatenation, fused attention), else None: on meta tensors these go through torch's reference implementations,
    whose first use imports torch's compiler stack (seconds), and fused attention's decomposes at every call."""
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    if target in _BROADCASTING and tensors and len(args) == 2 and not kwargs:
        shape = _broadcast(*(tuple(a.shape) for a in tensors))
        return tensors[0].new_empty(shape) if shape is not None else None
    if target in _SAME_SHAPE_FUNCTIONS and args and isinstance(args[0], torch.Tensor):
        return args[0].new_empty(args[0].shape)
    if target is F.scaled_dot_product_attention and len(args) >= 3 \
            and all(isinstance(a, torch.Tensor) and a.dim() >= 2 for a in args[:3]):
        q, v = args[0], args[2]  # (..., L, E) queries, (..., S, Ev) values: (..., L, Ev), grouped heads or not
        return q.new_empty(tuple(q.shape[:-1]) + (v.shape[-1],))
    if target is torch.cat and args and isinstance(args[0], (list, tuple)) and args[0] \
            and all(isinstance(t, torch.Tensor) for t in args[0]):
        parts = args[0]
        dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
        dim = dim % parts[0].dim()
        shape = list(parts[0].shape)
        if any(t.dim() != len(shape) or any(a != b for i, (a, b) in enumerate(zip(t.shape, shape)) if i != dim)
               for t in parts):
            return None
        shape[dim] = sum(t.shape[dim] for t in parts)
        return parts[0].new_empty(shape)
    return None


class _ShapeRecorder(Interpreter):
    """Runs the traced module on meta tensors and records each tensor-valued node's shape in
    node.meta["tensor_meta"] (as torch.fx's ShapeProp does, whose run_node imports sympy on every call), without
    executing modules whose output shape follows from the module alone (_known_output): running convolutions
    and adaptive pooling on meta tensors imports torch's decompositions the first time. Together about a second
    of a cold `predictor run`."""

    def run_node(self, n: Node) -> Any:
        result = super().run_node(n)
        if isinstance(result, torch.Tensor):
            n.meta["tensor_meta"] = _Meta(tuple(result.shape))
        elif isinstance(result, (tuple, list)) and any(isinstance(r, torch.Tensor) for r in result):
            n.meta["tensor_parts"] = True  # the parts of a split: tensors, not sizes
        return result

    def call_function(self, target, args, kwargs):
        out = _known_function_output(target, args, kwargs)
        return out if out is not None else super().call_function(target, args, kwargs)

    def call_module(self, target, args, kwargs):
        if len(args) == 1 and not kwargs and isinstance(args[0], torch.Tensor):
            out = _known_output(self.fetch_attr(target), args[0])
            if out is not None:
                return out
        return super().call_module(target, args, kwargs)


#: views that transpose (their result is strided, not contiguous), and reshapes that copy a strided input
_TRANSPOSING = {"transpose", "permute", "t", torch.transpose, torch.permute, torch.t}
_COPY_IF_STRIDED = {"reshape", "contiguous", "flatten", torch.reshape, torch.flatten}


def _view_or_copy(node: Node, inputs: list[Node], strided: set) -> str:
    """"flatten" (a free view) or "copy": PyTorch's reshape, contiguous and flatten copy a transposed tensor
    into a new contiguous one (attention's heads merged back after a transpose), which then is a tensor of
    its own in memory. Records in `strided` which views are transposed."""
    source_strided = bool(inputs) and inputs[0] in strided
    if node.target in _TRANSPOSING:
        strided.add(node)
    elif source_strided and node.target in _COPY_IF_STRIDED:
        return "copy"
    elif source_strided:
        strided.add(node)
    return "flatten"


def _own_params(module: nn.Module) -> dict[str, int]:
    """Parameters per submodule name, each parameter counted once (at its first owner: a language model's head
    tied to its embedding holds no parameters of its own)."""
    seen: set[int] = set()
    out: dict[str, int] = {}
    for name, sub in module.named_modules():
        count = 0
        for p in sub.parameters(recurse=False):
            if id(p) not in seen:
                seen.add(id(p))
                count += p.numel()
        out[name] = count
    return out


def _loose_params(module: nn.Module) -> dict[str, int]:
    """Parameters no traced module call owns, by attribute path -> elements: those of modules whose forward the tracer
    walks into (TensorFlow BERT's layer norm, predictor.zoo.tf_ops; a HuggingFace RMSNorm's weight), read as get_attr
    nodes by the ops that use them. Tied parameters are counted once."""
    leaf = {name for name, sub in module.named_modules() if _module_op(sub) is not None}
    out: dict[str, int] = {}
    for name, p in module.named_parameters():
        owner = name.rpartition(".")[0]
        if owner not in leaf:
            out[name] = p.numel()
    return out


def _claim(node: Node, loose: dict[str, int]) -> int:
    """Elements of the loose parameters `node` reads directly, each given to the first op that reads it."""
    total = 0
    for arg in node.all_input_nodes:
        if arg.op == "get_attr" and arg.target in loose:
            total += loose.pop(arg.target)
    return total


def _attention_layers(node: Node, module: nn.MultiheadAttention, x: tuple[int, ...], source: str,
                      own_params: dict[str, int]) -> list[Layer] | None:
    """The layers nn.MultiheadAttention runs in training on a batch-first self-attention call (query, key and
    value one tensor): its packed QKV projection, the fused attention (need_weights=False) or PyTorch's unfused
    path (scores, softmax, attention dropout, context; the default need_weights=True returns the scores), the
    heads merged back, the output projection. None for any other call (reported unsupported)."""
    args = list(node.args) + [node.kwargs.get(k) for k in ("query", "key", "value") if k in node.kwargs]
    if not module.batch_first or len(args) < 3 or not (args[0] is args[1] is args[2]) or len(x) != 2 \
            or not module._qkv_same_embed_dim:
        return None
    seq, hidden = x
    heads, head_dim = module.num_heads, hidden // module.num_heads
    fused = node.kwargs.get("need_weights", True) is False
    causal = bool(node.kwargs.get("is_causal", False))
    t = str(node.target)
    qkv_params, out_params = own_params.get(t, 0), own_params.get(f"{t}.out_proj", 0)

    def layer(name, op, x_, y_, inputs, **kw):
        fwd, bwd_d, bwd_w = _flops(op, x_, y_, kw.pop("module", None), len(inputs), kw.pop("operands", ()),
                                   kw.get("causal", False))
        return Layer(name=f"{t}.{name}", op=op, input_shape=x_, output_shape=y_, flops_fwd=fwd, flops_bwd_data=bwd_d,
                     flops_bwd_weight=bwd_w, inputs=inputs, **kw)

    class _Proj:  # the linear FLOP count's in/out features
        def __init__(self, n_in, n_out):
            self.in_features, self.out_features = n_in, n_out

    per_head, scores = (heads, seq, head_dim), (heads, seq, seq)
    out = [layer("in_proj", "linear", x, (seq, 3 * hidden), (source,), module=_Proj(hidden, 3 * hidden),
                 params=qkv_params, weight_shape=(3 * hidden, hidden))]
    qkv = f"{t}.in_proj"
    if fused:
        out.append(layer("attention", "sdpa", per_head, per_head, (qkv,), operands=(per_head, per_head), causal=causal))
        context = f"{t}.attention"
    else:
        out.append(layer("scores", "bmm", per_head, scores, (qkv,)))
        out.append(layer("softmax", "softmax", scores, scores, (f"{t}.scores",)))
        probs = f"{t}.softmax"
        if module.dropout > 0:
            out.append(layer("attn_drop", "dropout", scores, scores, (probs,)))
            probs = f"{t}.attn_drop"
        out.append(layer("context", "bmm", scores, per_head, (probs, qkv)))
        context = f"{t}.context"
    out.append(layer("merge", "copy", per_head, (seq, hidden), (context,)))
    out.append(layer("out_proj", "linear", (seq, hidden), (seq, hidden), (f"{t}.merge",),
                     module=_Proj(hidden, hidden), params=out_params, weight_shape=(hidden, hidden)))
    return out


#: an operand of an add or product at most this share of the output's elements is a broadcast one (a per-token
#: statistic, a per-channel gate): the op streams its other operand once ("bcast")
BROADCAST_SHARE = 1 / 8


def _broadcast_operand(inputs: list[Node], y: tuple[int, ...]) -> bool:
    """Whether one of two operands is broadcast over the output (at most BROADCAST_SHARE of its elements)."""
    shapes = [_shape(i) for i in inputs]
    return None not in shapes and min(map(math.prod, shapes)) <= BROADCAST_SHARE * math.prod(y)


def _is_causal(node: Node) -> bool:
    """F.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal, ...)'s is_causal."""
    if "is_causal" in node.kwargs:
        return bool(node.kwargs["is_causal"])
    return len(node.args) > 5 and bool(node.args[5])


def trace_module(module: nn.Module, input_shape: tuple[int, ...], name: str = "model") -> ModelGraph:
    """Trace `module` (parameters may live anywhere; it is moved to the meta device) for one sample of
    `input_shape` (without the batch dimension). Raises UserError when the module cannot be traced."""
    if any(d <= 0 for d in input_shape):
        raise UserError(f"input shape {input_shape} of {name} must be positive")
    try:
        own_params = _own_params(module)
        loose = _loose_params(module)
        module = module.to("meta")
        gm = _symbolic_trace(module)
        modules = dict(gm.named_modules())
        dtype = _input_dtype(gm, modules)
        _ShapeRecorder(gm).run(torch.zeros((2, *input_shape), device="meta", dtype=dtype))
    except UserError:
        raise
    except Exception as err:  # noqa: BLE001 - any tracing failure is the user's module
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UserError(f"cannot trace model {name} (torch.fx on the meta device): {first}") from None
    constants = _constants(gm)
    strided: set[Node] = set()  # views whose elements are not contiguous (transposed)
    expanded: dict[Node, str] = {}  # a module traced as several layers (nn.MultiheadAttention) -> its last
    layers: list[Layer] = []
    unsupported: list[str] = []
    names: dict[Node, str] = {}
    output_node = None
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            names[node] = ""
            continue
        if node.op == "output":
            output_node = node
            continue
        if node.op == "get_attr" or node in constants:
            continue
        if node.op == "call_function" and node.target is getattr:
            continue  # x.shape and the like
        if node.op == "call_function" and node.target is operator.getitem and node.args[0] in expanded:
            if node.args[1] == 0:  # an expanded module's output; its other parts (attention weights) are not costed
                names[node] = expanded[node.args[0]]
            continue
        if node.op == "call_module" and isinstance(modules[node.target], nn.MultiheadAttention):
            inputs = _tensor_inputs(node, constants)
            source = inputs[0] if inputs else None
            parts = _attention_layers(node, modules[node.target], _shape(source) if source is not None else (),
                                      names.get(source, ""), own_params)
            if parts is not None:
                layers.extend(parts)
                expanded[node] = parts[-1].name
                continue
        y = _shape(node)
        inputs = _tensor_inputs(node, constants)
        module = None
        if node.op == "call_module":
            module = modules[node.target]
            op = _module_op(module)
            if op == "dropout" and module.p == 0:
                op = "flatten"  # dropout at p = 0 returns its input itself: no kernel, no mask
            elif op == "bias_dropout_add" and module.p == 0:
                op = "add"  # no mask: the residual add alone
            label = f"{node.target} ({type(module).__name__})"
            layer_name = str(node.target)
        elif node.op == "call_function":
            op = _FUNCTION_OPS.get(node.target)
            label = f"{node.name} ({getattr(node.target, '__name__', node.target)})"
            layer_name = node.name
        else:  # call_method
            if node.target in _SHAPE_ONLY:
                continue
            op = _METHOD_OPS.get(node.target)
            label = f"{node.name} (.{node.target})"
            layer_name = node.name
        if y is None:
            if op is None and (inputs or node.op == "call_module"):
                unsupported.append(label)
            continue
        if op is None:
            unsupported.append(label)
            op = "unsupported"
        if op == "flatten":
            op = _view_or_copy(node, inputs, strided)
        elif op in ("add", "mul") and len(inputs) == 1 and node.op != "call_module":
            op = "scale"  # the other operand a number or a constant (a mask, a broadcast buffer): read x, write y
        elif op in ("add", "mul") and len(inputs) == 2 and _broadcast_operand(inputs, y):
            op = "bcast" if op == "mul" else "scale"  # an add's small operand: its gradient a sum of dy
        operands = tuple(_shape(i) or tuple(input_shape) for i in inputs)
        if not operands:  # reads constants only (position ids): their shape
            operands = tuple(_shape(a) for a in node.all_input_nodes if _shape(a) is not None)[:1]
        x = operands[0] if operands else tuple(input_shape)
        params = own_params.get(str(node.target), 0) if module is not None else _claim(node, loose)
        weight = tuple(module.weight.shape) if module is not None and getattr(module, "weight", None) is not None else ()
        kernel, stride, padding = _geometry(op, module, x, y) if op in ("conv2d", "conv3d", "maxpool", "avgpool") else ((), (), ())
        causal = op == "sdpa" and _is_causal(node)
        fwd, bwd_d, bwd_w = _flops(op, x, y, module, len(inputs), operands, causal)
        layers.append(Layer(
            name=layer_name, op=op, input_shape=x, output_shape=y, weight_shape=weight, params=params,
            kernel=tuple(kernel), stride=tuple(stride), padding=tuple(padding),
            groups=getattr(module, "groups", 1) if op in ("conv2d", "conv3d") else getattr(module, "experts", 1),
            dilation=_dilation(op, module), transposed=op in ("conv2d", "conv3d") and _transposed(module),
            capacity_factor=float(getattr(module, "capacity_factor", 0.0)) if op == "moe_dispatch" else 0.0,
            dispatcher=str(getattr(module, "dispatcher", "alltoall")) if op == "moe_dispatch" else "",
            flops_fwd=fwd, flops_bwd_data=bwd_d, flops_bwd_weight=bwd_w,
            inputs=tuple(names.get(i, "") for i in inputs), causal=causal))
        names[node] = layer_name
    if not layers:
        raise UserError(f"model {name} has no layers to predict")
    loss = _token_loss(output_node, names, layers)
    return ModelGraph(name=name, input_shape=tuple(input_shape), layers=tuple(layers) + loss,
                      unsupported=tuple(unsupported))


def _token_loss(output_node: Node | None, names: dict[Node, str], layers: list[Layer]) -> tuple[Layer, ...]:
    """The cross-entropy layer of a model whose output keeps a token dimension (module docstring), else ()."""
    if output_node is None or not output_node.args or not isinstance(output_node.args[0], Node):
        return ()
    out = output_node.args[0]
    shape = _shape(out)
    if shape is None or len(shape) < 2 or out not in names:
        return ()
    fwd, bwd, _ = _flops("cross_entropy", shape, (1,), None, 1)
    name = "loss" if all(l.name != "loss" for l in layers) else f"loss_{len(layers)}"
    return (Layer(name=name, op="cross_entropy", input_shape=shape, output_shape=(1,), flops_fwd=fwd,
                  flops_bwd_data=bwd, inputs=(names[out],)),)
