"""Torch layers for a sequential ModelGraph, so the runner trains exactly the net the predictor costs.

The runner distributes chains of conv/batchnorm/relu/pool/flatten/linear layers (2-D and 3-D). Every rank
builds the same serial net from the same seed; the strategy modules then cut their shards out of it, so
the serial and distributed runs start from identical weights (the equivalence tests rely on this).

Transformers (predictor.zoo.gpt, bert) run as nets with branches (serial or data): embeddings, norms, GELU,
softmax, batched products and fused attention as their torch ops, Megatron's fused bias_dropout_add as the
residual add (dropout runs at p = 0 here, as everywhere in the runner); a view layer becomes the permutation, slice
or reshape its shapes imply (a transposed view stays strided, so a `copy` layer copies as in the model); the
loss over a token-level output is cross-entropy over every token (`loss`).
"""
from __future__ import annotations

import itertools
import math

import torch
import torch.nn.functional as F
from torch import nn

from predictor.graph import REDUCE_OPS, UNARY_OPS, Layer, ModelGraph
from predictor.zoo.transformer import ExpertLinear, Router, TokenCombine, TokenDispatch
from profiler.errors import UserError
from profiler.opmath import transposed_output_size

#: a mixture of experts' own layers (its expert linears are `linear` layers with groups = E): run as the zoo's
#: modules, each of the graph's shapes (predictor.zoo.transformer), reading (tokens, router probabilities)
MOE_OPS = ("router", "moe_dispatch", "moe_combine")
RUNNABLE_OPS = ("conv2d", "conv3d", "batchnorm", "relu", "maxpool", "avgpool", "flatten", "linear", "dropout", "softmax_loss")
#: ops of nets with branches (residual sums, concatenations) and transformers: run by GraphNet, serially or
#: data-parallel
BRANCH_OPS = ("add", "concat", "mul", "embedding", "layernorm", "rmsnorm", "gelu", "silu", "softmax", "bmm", "sdpa",
              "copy", "cross_entropy", "bias_dropout_add", "scale", "bcast", "random", "compare", *UNARY_OPS,
              *REDUCE_OPS, *MOE_OPS)
#: the primitive ops (predictor.trace) as the runner runs them: its own number for a scale by one, inputs kept in
#: range where the function needs it
_UNARY = {"tanh": torch.tanh, "pow": lambda x: x * x * x, "rsqrt": lambda x: torch.rsqrt(x.abs() + 1e-6),
          "sqrt": lambda x: torch.sqrt(x.abs()), "exp": lambda x: torch.exp(x.clamp(max=20.0))}
#: layers the runner applies itself (the loss) rather than as a module
LOSS_OPS = ("softmax_loss", "cross_entropy")
WEIGHT_OPS = ("conv2d", "conv3d", "linear")
#: the strategies the runner implements for nets with branches (the model-parallel ones cut plain chains)
BRANCHED_STRATEGIES = ("serial", "data")


def _inputs(layer: Layer, previous: str) -> tuple[str, ...]:
    """The names a layer reads ("" = the model input); no inputs listed = the previous layer."""
    return tuple(layer.inputs) if layer.inputs else (previous,)


def is_chain(graph: ModelGraph) -> bool:
    """Whether every layer reads only the previous one's output."""
    previous = ""
    for layer in graph.layers:
        if _inputs(layer, previous) != (previous,):
            return False
        previous = layer.name
    return True


def check_runnable(graph: ModelGraph) -> None:
    """UserError unless the runner can build every layer (a chain of RUNNABLE_OPS, or with BRANCH_OPS)."""
    known = RUNNABLE_OPS + BRANCH_OPS
    for layer in graph.layers:
        if layer.op not in known:
            raise UserError(f"model {graph.name}: layer {layer.name} ({layer.op}) is not supported by the validation runner "
                            f"(supported: {', '.join(known)})")
        operands = {"bmm": 2, "sdpa": 3}.get(layer.op)
        if operands and len(layer.inputs) != operands:  # nn.MultiheadAttention's packed QKV: no split to run
            raise UserError(f"model {graph.name}: layer {layer.name} ({layer.op}) reads {len(layer.inputs)} tensors, the "
                            f"validation runner runs it on {operands} (separate query, key and value)")


def check_sequential(graph: ModelGraph) -> None:
    """UserError unless every layer is runnable and feeds only from the previous one."""
    check_runnable(graph)
    previous = ""
    for layer in graph.layers:
        if layer.inputs and tuple(layer.inputs) != (previous,):
            raise UserError(f"model {graph.name}: layer {layer.name} is not a plain chain (inputs {layer.inputs}); "
                            f"the validation runner runs nets with branches as {' or '.join(BRANCHED_STRATEGIES)} only")
        previous = layer.name


def _has_bias(layer: Layer) -> bool:
    if layer.tied:
        return layer.params > 0
    return layer.params > math.prod(layer.weight_shape)


def build_layer(layer: Layer) -> nn.Module | None:
    """The torch module of one graph layer (None for layers with no computation in training: dropout at
    p=0 for determinism, and the loss, which the runner applies itself)."""
    spatial_dims = len(layer.input_shape) - 1
    if layer.op in ("conv2d", "conv3d") and layer.transposed:
        conv = nn.ConvTranspose2d if layer.op == "conv2d" else nn.ConvTranspose3d
        extra = tuple(y - transposed_output_size(x, k, s, p) for x, y, k, s, p in  # output_padding
                      zip(layer.input_shape[1:], layer.output_shape[1:], layer.kernel, layer.stride, layer.padding))
        return conv(layer.channels_in, layer.channels_out, layer.kernel, layer.stride, layer.padding, extra,
                    groups=layer.groups, bias=_has_bias(layer))
    if layer.op in ("conv2d", "conv3d"):
        conv = nn.Conv2d if layer.op == "conv2d" else nn.Conv3d
        return conv(layer.channels_in, layer.channels_out, layer.kernel, layer.stride, layer.padding,
                    dilation=layer.dilation or 1, groups=layer.groups, bias=_has_bias(layer))
    if layer.op == "batchnorm":
        return (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)[max(spatial_dims, 1) - 1](layer.channels_in)
    if layer.op == "relu":
        return nn.ReLU()
    if layer.op in ("maxpool", "avgpool"):
        table = {("maxpool", 2): nn.MaxPool2d, ("maxpool", 3): nn.MaxPool3d, ("avgpool", 2): nn.AvgPool2d, ("avgpool", 3): nn.AvgPool3d}
        return table[(layer.op, spatial_dims)](layer.kernel, layer.stride, layer.padding or 0)
    if layer.op == "flatten":
        return nn.Flatten()
    if layer.op == "linear" and layer.groups > 1:  # E experts' linears over their dispatched tokens
        return ExpertLinear(layer.groups, layer.input_shape[-1], layer.output_shape[-1], _has_bias(layer))
    if layer.op == "linear":
        return nn.Linear(layer.input_shape[-1], layer.output_shape[-1], bias=_has_bias(layer))
    if layer.op == "router":
        return Router(layer.input_shape[-1], layer.groups)
    if layer.op == "moe_dispatch":  # s tokens to s k slots
        return TokenDispatch(layer.groups, layer.output_shape[0] // layer.input_shape[0], layer.capacity_factor,
                             layer.dispatcher or "alltoall")
    if layer.op == "moe_combine":  # s k slots back to s tokens
        return TokenCombine(layer.groups, layer.input_shape[0] // layer.output_shape[0])
    if layer.op == "embedding":
        return nn.Embedding(*layer.weight_shape)
    if layer.op in ("layernorm", "rmsnorm"):
        norm = nn.LayerNorm if layer.op == "layernorm" else nn.RMSNorm
        return norm(layer.output_shape[-1], elementwise_affine=bool(layer.params))
    if layer.op == "gelu":
        return nn.GELU()
    if layer.op == "silu":
        return nn.SiLU()
    if layer.op == "softmax":
        return nn.Softmax(dim=-1)
    return None


def loss(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Cross-entropy per sample of (batch, classes) logits, or over every token of (batch, tokens..., classes)."""
    if x.dim() > 2:
        return F.cross_entropy(x.flatten(0, -2), y.flatten())
    return F.cross_entropy(x, y)


def view_like(x: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """x (batch, *per-sample) as a (batch, *shape) tensor the way a traced view made it: a permutation of its
    dimensions when the sizes match (a transpose stays strided), a slice from the start when every size fits (a
    part of a split), else a reshape."""
    have = tuple(x.shape[1:])
    if have == shape:
        return x
    if len(have) == len(shape) and sorted(have) == sorted(shape):
        for perm in itertools.permutations(range(len(have))):
            if tuple(have[i] for i in perm) == shape:
                return x.permute(0, *(i + 1 for i in perm))
    if len(have) == len(shape) and all(o <= i for o, i in zip(shape, have)):
        return x[(slice(None),) + tuple(slice(0, o) for o in shape)]
    if len(have) == len(shape) and all(i in (1, o) for o, i in zip(shape, have)):
        return x.expand(x.shape[0], *shape)  # a broadcast view (DeepCAM's pooled branch)
    return x.reshape(x.shape[0], *shape)


def build_serial(graph: ModelGraph, seed: int = 0) -> tuple[list[Layer], list[nn.Module]]:
    """The graph's layers that compute, and their torch modules, initialised from `seed`."""
    check_sequential(graph)
    torch.manual_seed(seed)
    layers, modules = [], []
    for layer in graph.layers:
        module = build_layer(layer)
        if module is not None:
            layers.append(layer)
            modules.append(module)
    return layers, modules


def _reduce(layer: Layer, x: torch.Tensor) -> torch.Tensor:
    """A mean or sum over the per-sample dimensions its output drops or keeps at size 1 (the batch dimension kept)."""
    shape_in, shape_out = layer.input_shape, layer.output_shape
    fn = torch.mean if layer.op == "mean" else torch.sum
    if len(shape_out) == len(shape_in):
        dims = [d + 1 for d, (a, b) in enumerate(zip(shape_in, shape_out)) if b == 1 and a != 1]
        return fn(x, dim=dims, keepdim=True) if dims else x * 1.0
    return fn(x, dim=list(range(len(shape_out) + 1, len(shape_in) + 1)))


class GraphNet(nn.Module):
    """A net with branches, run layer by layer in graph order: each layer reads its inputs by name, `add` sums
    them, `concat` joins them along channels. With `segments` ([start, stop) ranges of graph layer indices,
    predictor.recompute.chain_segments, so that the runner checkpoints what the predictor costs) each range
    runs under torch.utils.checkpoint, taking the tensors it reads from before it and giving back those read
    after it."""

    def __init__(self, graph_layers: list[Layer], segments=()):
        super().__init__()
        self.layers = [l for l in graph_layers if l.op not in LOSS_OPS]
        index = {l.name: i for i, l in enumerate(self.layers)}
        self.names = []
        previous = ""
        for layer in self.layers:
            constant = layer.op == "embedding" and not layer.inputs  # position ids: one (1, seq) constant
            self.names.append(() if constant else _inputs(layer, previous))
            previous = layer.name
        self.mods = nn.ModuleList((build_layer(l) or nn.Identity()) for l in self.layers)
        tables = {tuple(l.weight_shape): m.weight for l, m in zip(self.layers, self.mods) if l.op == "embedding"}
        for layer, mod in zip(self.layers, self.mods):  # a head tied to its embedding (predictor.zoo.gpt, bert)
            if layer.op == "linear" and layer.tied and tuple(layer.weight_shape) in tables:
                mod.weight = tables[tuple(layer.weight_shape)]
        self.segments = []
        for start, stop in segments:  # graph layer indices -> indices of self.layers
            inside = [index[l.name] for l in graph_layers[start:stop] if l.name in index]
            if inside:
                self.segments.append((inside[0], inside[-1] + 1))

    def _step(self, i: int, env: dict) -> None:
        layer, xs = self.layers[i], [env[n] for n in self.names[i]]
        if layer.op in ("add", "bias_dropout_add"):
            out = xs[0]
            for x in xs[1:]:
                out = out + x
        elif layer.op in ("mul", "bcast"):
            out = xs[0] * xs[1] if len(xs) > 1 else xs[0] * 1.0
        elif layer.op == "scale":
            out = xs[0] * 0.5
        elif layer.op in _UNARY:
            out = _UNARY[layer.op](xs[0])
        elif layer.op == "random":
            out = torch.rand_like(xs[0])
        elif layer.op == "compare":
            out = (xs[0] >= 0.5).to(xs[0].dtype)
        elif layer.op in REDUCE_OPS:
            out = _reduce(layer, xs[0])
        elif layer.op == "concat":
            out = torch.cat(xs, dim=1)
        elif layer.op == "flatten" and len(layer.output_shape) != 1:
            out = view_like(xs[0], layer.output_shape)
        elif layer.op == "copy":
            out = xs[0].reshape(xs[0].shape[0], *layer.output_shape)
        elif layer.op == "bmm":
            out = torch.matmul(xs[0], xs[1])
        elif layer.op == "sdpa":  # fewer key/value heads than query heads: grouped-query attention
            out = F.scaled_dot_product_attention(*xs[:3], is_causal=layer.causal,
                                                 enable_gqa=xs[1].shape[-3] != xs[0].shape[-3])
        elif layer.op in ("moe_dispatch", "moe_combine"):  # (tokens or slots, router probabilities)
            out = self.mods[i](xs[0], xs[1])
        elif not self.names[i]:
            ids = torch.arange(layer.input_shape[0], device=env[""].device) % layer.weight_shape[0]
            out = self.mods[i](ids[None])  # position (or token-type) ids, one row for the batch
        else:
            out = self.mods[i](xs[0])
        env[layer.name] = out

    def _boundary(self, start: int, stop: int) -> tuple[list[str], list[str]]:
        """(names read in [start, stop) and made before it, names made in it and read at or after stop)."""
        made = {self.layers[i].name for i in range(start, stop)}
        reads = [n for i in range(start, stop) for n in self.names[i] if n not in made]
        later = {n for i in range(stop, len(self.layers)) for n in self.names[i]}
        if stop == len(self.layers):
            later.add(self.layers[-1].name)
        return list(dict.fromkeys(reads)), [self.layers[i].name for i in range(start, stop)
                                              if self.layers[i].name in later]

    def forward(self, x):
        from torch.utils.checkpoint import checkpoint

        env = {"": x}
        i = 0
        for start, stop in self.segments + [(len(self.layers), len(self.layers))]:
            while i < start:
                self._step(i, env)
                i += 1
            if start == stop:
                continue
            ins, outs = self._boundary(start, stop)

            def run(*tensors, start=start, stop=stop, ins=ins, outs=outs):
                local = dict(zip(ins, tensors))
                for j in range(start, stop):
                    self._step(j, local)
                return tuple(local[n] for n in outs)

            env.update(zip(outs, checkpoint(run, *(env[n] for n in ins), use_reentrant=False)))
            i = stop
        return env[self.layers[-1].name]


def build_graph_net(graph: ModelGraph, seed: int = 0, segments=()) -> GraphNet:
    """A net with branches as one module, initialised from `seed` (the same draws as build_serial's layers)."""
    check_runnable(graph)
    torch.manual_seed(seed)
    return GraphNet(list(graph.layers), segments)


def _output_layer(graph: ModelGraph) -> Layer:
    return [l for l in graph.layers if l.op not in LOSS_OPS][-1]


def num_classes(graph: ModelGraph) -> int:
    last = _output_layer(graph)
    if len(last.output_shape) != 1 and not any(l.op == "cross_entropy" for l in graph.layers):
        raise UserError(f"model {graph.name}: the last layer {last.name} must be linear (classes), got shape {last.output_shape}")
    return last.output_shape[-1]


def input_vocabulary(graph: ModelGraph) -> int | None:
    """The rows of the embedding that reads the model input (its input is token ids), else None."""
    for layer in graph.layers:
        if layer.op == "embedding" and "" in layer.inputs:
            return layer.weight_shape[0]
    return None


def synthetic_batch(graph: ModelGraph, batch: int, seed: int, dtype=torch.float32, device="cpu"):
    """Random inputs and labels of the global batch; every rank draws the same ones from `seed`. Token ids
    for a model whose input feeds an embedding, a label per token for a token-level output."""
    gen = torch.Generator().manual_seed(seed)
    vocab = input_vocabulary(graph)
    if vocab is not None:
        x = torch.randint(0, vocab, (batch, *graph.input_shape), generator=gen).to(device)
    else:
        x = torch.randn((batch, *graph.input_shape), generator=gen, dtype=torch.float32).to(device=device, dtype=dtype)
    tokens = _output_layer(graph).output_shape[:-1]
    y = torch.randint(0, num_classes(graph), (batch, *tokens), generator=gen).to(device)
    return x, y
