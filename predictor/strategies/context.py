"""Shared state of strategy evaluation for one (graph, cost model): caches and the common pieces every
strategy composes — local compute sums, the data-parallel gradient exchange, parameter memory.

Caching is what makes the search fast: per-layer compute at a split shape, sums over layer ranges,
collective times and DDP bucket layouts are computed once per distinct key and reused by every plan.
"""
from __future__ import annotations

import math
import weakref
from typing import Callable

from calibrate.cost_api import CostModel
from predictor.graph import ModelGraph
from predictor.graph_rewrite import half_layers
from predictor.layercost import (ACT_BYTES, MIXED_DTYPES, LayerCoster, Split, layer_signatures, update_launch_s,
                                 update_time_s)
from predictor.plan import Plan, Prediction
from predictor.shared_cores import SharedCores
from predictor.stacks import stack_scaled
from predictor.overlap import bucket_layout, launches, ready_times, regime, schedule
from predictor.memory import (SavedTensor, backward_peak_extra, gradient_bytes_per_param, parameter_bytes,
                              saved_tensors)


class Infeasible(Exception):
    """A plan that cannot run (a limit on p, divisibility); the message is the reason."""


def param_tensor_count(layer) -> int:
    """Parameter tensors of one layer: a weight (+ a bias when its parameters outnumber the weight's), or
    batch norm's scale and shift."""
    if not layer.params:
        return 0
    if not layer.weight_shape:
        return 2
    return 1 + (layer.params > math.prod(layer.weight_shape))


class GraphStructure:
    """What a graph alone decides (no cost model): layer indices, parameters, saved tensors, each producer's
    consumers and the tensors crossing every boundary. Built once per graph and shared by every Context of that
    graph (the interval's low and high cost models, a node's shared-core and software-stack variants), with a
    cache of other cost-model-free values (`Context.graph_cached`)."""

    def __init__(self, graph: ModelGraph):
        self.layers = graph.layers
        self.input_elems = math.prod(graph.input_shape)
        self.index = {l.name: i for i, l in enumerate(graph.layers)}
        self.params = [l.params for l in graph.layers]
        self.total_params = sum(self.params)
        self.largest_output = max((l.output_elems for l in graph.layers), default=0)
        self.param_tensors = [param_tensor_count(l) for l in graph.layers]
        self.saved: tuple[SavedTensor, ...] = saved_tensors(graph)
        self.consumers = self._consumers()
        self.values: dict = {}
        self._crossing: list[list[int]] | None = None
        self._widths: list[int] | None = None

    def producer(self, name: str) -> int:
        while name:
            i = self.index[name]
            if self.layers[i].op != "flatten":
                return i
            name = self.layers[i].inputs[0] if self.layers[i].inputs else ""
        return -1

    def _consumers(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for i, layer in enumerate(self.layers):
            for name in (layer.inputs or ("",)):
                out.setdefault(self.producer(name), []).append(i)
        return out

    def _sweep(self) -> None:
        """Every boundary's crossing tensors and their total elements in one pass over the layers: a producer p
        crosses boundary b when p < b <= its last consumer, so it joins the live set after layer p and leaves it
        after its last consumer. Each boundary's list keeps the consumer table's order (first use)."""
        n = len(self.layers)
        rank = {p: r for r, p in enumerate(self.consumers)}
        ending: list[list[int]] = [[] for _ in range(n + 1)]  # producers whose last consumer is layer i
        for p, users in self.consumers.items():
            ending[max(users)].append(p)
        live: dict[int, None] = {}
        elems = {p: (self.input_elems if p < 0 else self.layers[p].output_elems) for p in self.consumers}
        crossing, widths = [], []
        width = 0
        if -1 in self.consumers:
            live[-1] = None
            width = elems[-1]
        for b in range(n + 1):  # boundary b: layers < b produce, layers >= b consume
            if b > 0:
                for p in ending[b - 1]:  # last used by layer b - 1: no longer crosses
                    if p in live:
                        del live[p]
                        width -= elems[p]
                p = b - 1
                if p in self.consumers and max(self.consumers[p]) >= b:
                    live[p] = None
                    width += elems[p]
            crossing.append(sorted(live, key=rank.__getitem__) if b < n else [])
            widths.append(width if b < n else 0)
        self._crossing, self._widths = crossing, widths

    def crossing(self, boundary: int) -> list[int]:
        if self._crossing is None:
            self._sweep()
        return self._crossing[boundary] if 0 <= boundary < len(self._crossing) else []

    def crossing_elems(self, boundary: int) -> int:
        if self._widths is None:
            self._sweep()
        return self._widths[boundary] if 0 <= boundary < len(self._widths) else 0


#: one GraphStructure per live graph (id -> (weak reference, structure)): Contexts of the same graph share it
_STRUCTURES: dict[int, tuple[weakref.ref, GraphStructure]] = {}


def graph_structure(graph: ModelGraph) -> GraphStructure:
    held = _STRUCTURES.get(id(graph))
    if held is not None and held[0]() is graph:
        return held[1]
    structure = GraphStructure(graph)
    key = id(graph)
    _STRUCTURES[key] = (weakref.ref(graph, lambda _ref, key=key: _STRUCTURES.pop(key, None)), structure)
    return structure


class Context:
    def __init__(self, graph: ModelGraph, cost_model: CostModel, memory_format: str = "nhwc",
                 cross_entropy: str = "float32", graph_rewrite: bool = False, cuda_graphs: bool = False):
        self.graph = graph
        self.cm = cost_model
        self.graph_rewrite = graph_rewrite  # TensorFlow's AMP paints the layers (Plan.mixed_precision)
        self.memory_format = memory_format  # the convolutions' layout (Plan.memory_format)
        self.cross_entropy = cross_entropy  # how the loss reads half-precision logits (Plan.cross_entropy)
        self.cuda_graphs = cuda_graphs  # the step replays CUDA graphs: no host floor per layer (Plan.cuda_graphs)
        self.layers = graph.layers
        self.n_layers = len(graph.layers)
        self.structure = graph_structure(graph)
        self.index = self.structure.index
        self.params = self.structure.params
        self.total_params = self.structure.total_params
        self.param_tensors = self.structure.param_tensors
        self.saved: tuple[SavedTensor, ...] = self.structure.saved
        self.spatial_ndim = len(graph.input_shape) - 1
        self._costers: dict[str, LayerCoster] = {}
        self._sums: dict = {}
        self._coll: dict = {}
        self._buckets: dict = {}
        self._ready: dict = {}  # id(bwd list) -> (the list, its ready times); the list is kept alive here
        self.consumers = self.structure.consumers
        self.largest_output = self.structure.largest_output
        self._shared: dict[tuple, "Context"] = {}
        self._stack_scaled: dict[str, CostModel] = {}

    def for_plan(self, plan: Plan) -> "Context":
        """This context, or one whose cost model is slowed down for the ranks that share a node's cores
        (predictor.shared_cores) and scaled to the plan's software stack (predictor.stacks); cached per pair. A
        model held in half precision (plan.mixed_precision "half": Megatron's Float16Module, DeepSpeed's fp16
        engine) runs no autocast: the stacks' mixed factors, fitted to autocast CNN runs, do not apply (stack
        "other", as the transformer corpus maps Megatron's rows; docs/decisions/2026-12-06-megatron-gemms.md)."""
        factor = self.cm.rank_slowdown(min(plan.devices, plan.devices_per_node))
        stack = "other" if plan.mixed_precision == "half" else plan.stack
        scaled = self._stack_scaled.get(stack)
        if scaled is None:
            scaled = self._stack_scaled[stack] = stack_scaled(self.cm, stack)
        rewrite = plan.mixed_precision == "graph-rewrite"
        if (factor <= 1.0 and scaled is self.cm and plan.memory_format == self.memory_format
                and plan.cross_entropy == self.cross_entropy and rewrite == self.graph_rewrite
                and plan.cuda_graphs == self.cuda_graphs):
            return self
        key = (factor, stack if scaled is not self.cm else None, plan.memory_format, plan.cross_entropy, rewrite,
               plan.cuda_graphs)
        if key not in self._shared:
            self._shared[key] = Context(self.graph, SharedCores(scaled, factor) if factor > 1.0 else scaled,
                                        plan.memory_format, plan.cross_entropy, rewrite, plan.cuda_graphs)
        return self._shared[key]

    @staticmethod
    def act_size(dtype: str) -> int:
        """Bytes per activation element (half precision under mixed precision)."""
        return ACT_BYTES[dtype]

    # ---- graph structure -------------------------------------------------------------------------
    def producer(self, name: str) -> int:
        """Index of the layer whose storage `name` refers to (-1 = model input); flatten is a view."""
        return self.structure.producer(name)

    def tensor_elems(self, producer: int) -> int:
        return math.prod(self.graph.input_shape) if producer < 0 else self.layers[producer].output_elems

    def crossing(self, boundary: int) -> list[int]:
        """Tensors (producer indices, -1 = input) produced before layer `boundary` and used at or after it
        (every boundary's list is made in one sweep, GraphStructure._sweep)."""
        return self.structure.crossing(boundary)

    def crossing_elems(self, boundary: int) -> int:
        """Elements per sample of the tensors crossing `boundary` (sum of tensor_elems over crossing(boundary))."""
        return self.structure.crossing_elems(boundary)

    def graph_cached(self, key, compute: Callable[[], object]):
        """A value that depends on the graph alone, computed once per key for every Context of this graph."""
        values = self.structure.values
        hit = values.get(key)
        if hit is None:
            hit = values[key] = compute()
        return hit

    # ---- cached costs ----------------------------------------------------------------------------
    def coster(self, dtype: str) -> LayerCoster:
        c = self._costers.get(dtype)
        if c is None:
            c = self._costers[dtype] = LayerCoster(self.graph, self.cm, dtype, self.graph_cached(
                ("layer-signatures",), lambda: layer_signatures(self.graph)), memory_format=self.memory_format,
                cross_entropy=self.cross_entropy, half=self.painted(dtype), host_floor=not self.cuda_graphs)
        return c

    def painted(self, dtype: str) -> tuple[bool, ...] | None:
        """Per layer, whether TensorFlow's AMP runs it in half precision (graph_rewrite.half_layers), when this
        context's plans run it and `dtype` is a mixed precision; else None (every layer at the plan's precision)."""
        if not (self.graph_rewrite and dtype in MIXED_DTYPES):
            return None
        return self.graph_cached(("graph-rewrite",), lambda: half_layers(self.graph))

    def compute(self, dtype: str, key, indices, split_of: Callable[[int], Split]) -> tuple[float, float, list[float]]:
        """(fwd_s, bwd_s, per-layer bwd list) over `indices`, cached under `key` (must identify the splits)."""
        full_key = (dtype, key)
        hit = self._sums.get(full_key)
        if hit is None:
            hit = self._sums[full_key] = self.coster(dtype).sum_times(indices, split_of)
        return hit

    def cached(self, key, compute: Callable[[], object]):
        """A value computed once per key (keys must identify everything the value depends on)."""
        hit = self._sums.get(key)
        if hit is None:
            hit = self._sums[key] = compute()
        return hit

    def collective(self, op: str, size_bytes: float, group: int, nodes: int, share: float = 1.0) -> float:
        """One collective over `group` ranks on `nodes` nodes. share < 1: the group gets that share of each node's
        network (layout.data_network_share), so its bytes cost what size_bytes / share cost on the whole network
        (same latency terms, the bandwidth term over share); inside one node the share does not apply."""
        if group <= 1 or size_bytes <= 0:
            return 0.0
        if nodes > 1 and share < 1.0:
            size_bytes = size_bytes / share
        key = (op, size_bytes, group, nodes)
        t = self._coll.get(key)
        if t is None:
            t = self._coll[key] = self.cm.collective_time_s(op, size_bytes, group, nodes)
        return t

    def update_s(self, params: float, optimizer: str, dtype: str, tensors: int | None = None,
                 mixed_precision: str = "autocast") -> float:
        """Optimizer step over `params` parameters in `tensors` tensors (default: every layer's): the streaming
        update (layercost.update_bytes: plan.mixed_precision "half" adds the fp16 optimizer's passes) plus the
        optimizer's per-tensor framework cost."""
        tensors = sum(self.param_tensors) if tensors is None else tensors
        key = ("update", params, optimizer, dtype, tensors, mixed_precision)
        t = self._sums.get(key)
        if t is None:
            t = self._sums[key] = update_time_s(self.cm, params, optimizer, dtype, mixed_precision) + (
                self.cm.optimizer_overhead_s(tensors) + update_launch_s(self.cm, optimizer, tensors) if params else 0.0)
        return t

    # ---- common pieces ---------------------------------------------------------------------------
    def gradient_sync(self, indices, bwd_list: list[float], param_div, group: int, nodes: int, plan: Plan,
                      op: str = "allreduce", share: float = 1.0) -> tuple[float, float]:
        """(exposed_s, hidden_s) of the gradient allreduce of layers `indices` over `group` ranks on
        `nodes` nodes, scheduled by the plan's framework regime and bucket size behind backward (overlap.py),
        plan.dtype and plan.mixed_precision setting the bytes per gradient (memory.gradient_bytes_per_param: 2
        when the framework keeps half gradients). param_div: one divisor of every layer's parameters, or a tuple
        with one divisor per index. share: of each node's network, for data-parallel groups that synchronise
        beside others (layout.data_network_share).

        Exposed also holds the two gradient copies every regime makes on the compute stream: into the
        bucket / fusion buffer and back (DDP's default gradient_as_bucket_view=False; Horovod's fusion buffer;
        the one packed buffer after backward), each reading and writing the gradients (op audit:
        the DDP reducer's mul and copy_). op: "reduce_scatter" for sharded data parallelism (ZeRO stages 1-2)."""
        if group <= 1:
            return 0.0, 0.0
        reg = regime(plan.framework, plan.bucket_bytes)
        held = self._ready.get(id(bwd_list))
        if held is None or held[0] is not bwd_list:
            held = self._ready[id(bwd_list)] = (bwd_list, ready_times(bwd_list))
        gkey, grads = self._gradient_bytes(indices, param_div, plan)
        layout = self._bucket_layout(gkey, grads, reg)
        issued = launches(grads[0], held[1], reg, layout)
        total_bwd = held[1][-1] if held[1] else 0.0
        exposed, hidden = schedule(issued, total_bwd, lambda size: self.collective(op, size, group, nodes, share),
                                   self.cm.overlap_efficiency() if reg.overlaps else 1.0)
        return exposed + self.cm.memory_time_s(2 * 2 * grads[1]), hidden

    def _gradient_bytes(self, indices, param_div, plan: Plan) -> tuple[tuple, tuple[list[float], float]]:
        """(cache key, (per-layer gradient bytes, their total)) of `gradient_sync`'s layers: they depend on neither
        the backward times nor the regime."""
        grad_bytes = gradient_bytes_per_param(plan.dtype, plan.mixed_precision)
        gkey = (indices if isinstance(indices, range) else tuple(indices), param_div, grad_bytes)
        grads = self._buckets.get(gkey)
        if grads is None:
            divs = param_div if isinstance(param_div, tuple) else (param_div,) * len(indices)
            per_layer = [self.params[i] * grad_bytes / d for i, d in zip(indices, divs)]
            grads = self._buckets[gkey] = (per_layer, sum(per_layer))
        return gkey, grads

    def _bucket_layout(self, gkey, grads, reg):
        """DDP's buckets of those gradients (fixed by the gradients alone), None for the other regimes."""
        if not (reg.overlaps and reg.cycle_s <= 0):
            return None
        layout = self._buckets.get((gkey, reg.fusion_bytes))
        if layout is None:
            layout = self._buckets[(gkey, reg.fusion_bytes)] = bucket_layout(grads[0], reg.fusion_bytes)
        return layout

    def gradient_floor(self, indices, param_div, group: int, nodes: int, plan: Plan, op: str = "allreduce",
                       share: float = 1.0) -> tuple[float, float]:
        """For the search's lower bounds (strategies.bounds): (the least time backward and the exposed exchange of
        `gradient_sync` with the same arguments end at together, the two gradient copies it adds), without the
        backward times. The collectives run one after another, so the last ends no earlier than their sum: the
        collectives launched independently of the backward times, ddp's buckets or no-overlap's one all-reduce
        (horovod's cycle fusion depends on them: 0). Not cached: the callers keep what they need."""
        if group <= 1:
            return 0.0, 0.0
        reg = regime(plan.framework, plan.bucket_bytes)
        gkey, grads = self._gradient_bytes(indices, param_div, plan)
        layout = self._bucket_layout(gkey, grads, reg)
        sizes = [size for _, size in layout] if layout is not None else (
            [grads[1]] if not reg.overlaps and grads[1] > 0 else [])
        return (sum(self.collective(op, size, group, nodes, share) for size in sizes),
                self.cm.memory_time_s(2 * 2 * grads[1]))

    def parameter_memory(self, params: float, plan: Plan, sync_group: int) -> float:
        """The bytes `set_parameters` puts on one device, summed."""
        weights, grads, optimizer = parameter_bytes(params, plan.dtype, plan.optimizer, plan.mixed_precision)
        return weights + grads + optimizer + (grads if sync_group > 1 else 0.0)

    def saved_bytes_per_sample(self, dtype: str, key, share: Callable[[SavedTensor], float]) -> float:
        """Bytes of saved-for-backward tensors per sample, each weighted by share(tensor) (the fraction
        of it one device holds; 0 = not held), cached under `key`; under TensorFlow's AMP a float32 layer's output
        at 4 bytes."""
        full_key = ("saved", dtype, key)
        hit = self._sums.get(full_key)
        if hit is None:
            half = self.painted(dtype)
            hit = self._sums[full_key] = sum(
                (t.size_bytes("fp32") if half is not None and t.producer >= 0 and t.bytes_per_elem is None
                 and not half[t.producer] else t.size_bytes(dtype)) * share(t) for t in self.saved)
        return hit

    def workspace_per_sample(self, dtype: str, key, share: Callable[[SavedTensor], float],
                             grad_share: Callable[[int], float]) -> float:
        """Per-sample bytes the backward peak adds over all saved tensors (memory.backward_peak_extra)."""
        return self.cached(("workspace", dtype, key),
                           lambda: backward_peak_extra(self.graph, self.saved, dtype, share, grad_share))

    def set_parameters(self, pred: Prediction, params: float, plan: Plan, sync_group: int) -> None:
        """Weights, gradients and optimizer state of `params` parameters on one device, plus DDP's bucket
        copy of the gradients when they are allreduced over a group of more than one rank."""
        pred.weights_bytes, pred.grads_bytes, pred.optimizer_bytes = parameter_bytes(
            params, plan.dtype, plan.optimizer, plan.mixed_precision)
        if sync_group > 1:
            pred.comm_buffers_bytes += pred.grads_bytes
        pred.details["params_per_device"] = params

