"""TensorFlow's automatic mixed precision on a layer graph: which layers run in half precision, and where casts go.

TensorFlow's AMP (Plan.mixed_precision "graph-rewrite") is the grappler pass auto_mixed_precision, not per-op casts:
it paints the graph from four op lists, then puts a Cast on every edge between a half and a float32 op. Matrix
products and convolutions are allowed; Pow, Exp, Mean, Sum and the loss denied, and a denied op turns the inferring
ops after it float32 too: in BERT's TensorFlow code (a Pow in the GELU, Means in the layer norm) the residual stream
stays float32 and every dense layer reads a cast input. Source: NVIDIA/tensorflow @7cbba04a (NGC's TensorFlow 1),
grappler/optimizers/auto_mixed_precision_lists.h and auto_mixed_precision.cc. docs/method.md §3a.
"""
from __future__ import annotations

from predictor.graph import ModelGraph

#: the layer ops by TensorFlow's list of the op they run as. allow: MatMul, BatchMatMul, Conv2D, Conv3D (and their
#: gradients). deny: Pow, Exp, Mean, Sum, SoftmaxCrossEntropyWithLogits; the zoo's one-op GELU and layer norm stand for
#: BERT's TensorFlow code, which computes them with a Pow and with Means (predictor.zoo.tf_ops). infer (the gray
#: list): Add, Sub, Mul, RealDiv, BiasAdd, Tanh, Sqrt, Softmax, Sigmoid, FusedBatchNorm, AvgPool; a dropout is a
#: Mul. clear: Relu, MaxPool, Reshape, Transpose, ConcatV2, GreaterEqual, GatherV2. Anything else (Rsqrt,
#: RandomUniform) is on no list and stays float32.
ALLOW = ("linear", "bmm", "conv2d", "conv3d", "sdpa", "router")
DENY = ("pow", "exp", "mean", "sum", "cross_entropy", "softmax_loss", "gelu", "layernorm", "rmsnorm")
INFER = ("add", "mul", "scale", "bcast", "tanh", "sqrt", "softmax", "sigmoid", "silu", "batchnorm", "avgpool",
         "dropout", "bias_dropout_add")
CLEAR = ("relu", "maxpool", "flatten", "copy", "concat", "compare", "embedding")


def _walk(roots, step, enter) -> set[int]:
    """Indices reached from `roots` along `step` (consumers or producers), entering a node when enter(node) holds;
    the roots themselves always (DfsTypeTraversal with an Enter predicate, pre-order)."""
    seen: set[int] = set()
    for root in roots:
        stack = [root]
        while stack:
            i = stack.pop()
            if i in seen or (i != root and not enter(i)):
                continue
            seen.add(i)
            stack.extend(step[i])
    return seen


def half_layers(graph: ModelGraph) -> tuple[bool, ...]:
    """Per layer, whether TensorFlow's AMP runs it in half precision (the painting of auto_mixed_precision.cc)."""
    layers = graph.layers
    index = {l.name: i for i, l in enumerate(layers)}
    producers = [[index[name] for name in l.inputs if name in index] for l in layers]
    consumers: list[list[int]] = [[] for _ in layers]
    for i, ps in enumerate(producers):
        for p in ps:
            consumers[p].append(i)
    kind = ["allow" if l.op in ALLOW else "deny" if l.op in DENY else "infer" if l.op in INFER
            else "clear" if l.op in CLEAR else "other" for l in layers]
    n = len(layers)

    # deny spreads forward through infer and clear ops that lead to a deny or infer op (and into those)
    upstream: set[int] = set()
    for r in (i for i in range(n) if kind[i] in ("deny", "infer")):
        upstream |= _walk([r], producers, lambda i: i not in upstream and kind[i] == "clear")
    black: set[int] = set()
    for r in (i for i in range(n) if kind[i] == "deny"):
        if r not in black:
            black |= _walk([r], consumers, lambda i: i not in black and i in upstream)

    # infer and clear ops both downstream and upstream of allowed ops (through neither deny nor allow) join them
    white = {i for i in range(n) if kind[i] == "allow"}
    downstream: set[int] = set()
    for r in sorted(white):
        downstream |= _walk([r], consumers, lambda i: i not in downstream and kind[i] in ("infer", "clear")
                            and i not in black)
    between: set[int] = set()
    for r in sorted(white):
        if r not in between:
            between |= _walk([r], producers, lambda i: i not in between and i in downstream)
    white |= between

    # then half spreads from every half op through clear ops, both ways
    neighbours = [producers[i] + consumers[i] for i in range(n)]
    done: set[int] = set()
    for r in range(n):
        if r in white and r not in done:
            reached = _walk([r], neighbours, lambda i: i not in white and i not in black and kind[i] == "clear")
            done |= reached
            white |= reached
    return tuple(i in white for i in range(n))


def cast_elems(graph: ModelGraph, half: tuple[bool, ...]) -> tuple[int, ...]:
    """Per layer, elements per sample of the casts of its output: one Cast for each precision its consumers read it
    in other than its own (the pass shares a cast among the consumers that need the same type)."""
    index = {l.name: i for i, l in enumerate(graph.layers)}
    wanted: list[set[bool]] = [set() for _ in graph.layers]
    for i, layer in enumerate(graph.layers):
        for name in layer.inputs:
            p = index.get(name)
            if p is not None and half[p] != half[i]:
                wanted[p].add(half[i])
    return tuple(len(w) * l.output_elems for w, l in zip(wanted, graph.layers))
