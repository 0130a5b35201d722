"""Every stage boundary in one sweep (strategies.context.GraphStructure, issue 41 item 5): the same crossing tensors
and widths as the definition, per-rank saved bytes of data+tensor+pipeline equal to the per-rank scan they replace,
and one structure shared by every Context of a graph."""
from __future__ import annotations

from dataclasses import replace

import pytest

from predictor.api import load_cost_model, load_model, predict
from predictor.plan import Plan
from predictor.strategies.context import Context, GraphStructure
from predictor.strategies.hybrid3d import rank_saved_bytes


def _definition(structure: GraphStructure, boundary: int) -> list[int]:
    """The tensors produced before `boundary` and used at or after it, by a scan over every producer."""
    return [p for p, users in structure.consumers.items() if p < boundary and any(u >= boundary for u in users)]


@pytest.mark.parametrize("name", ["resnet50", "gpt", "bert", "small_cnn2d"])
def test_crossing_equals_the_definition(name):
    graph = load_model(name)
    structure = GraphStructure(graph)
    for boundary in range(-1, len(graph.layers) + 2):
        crossing = _definition(structure, boundary)
        assert structure.crossing(boundary) == crossing, boundary
        width = sum(structure.input_elems if p < 0 else graph.layers[p].output_elems for p in crossing)
        assert structure.crossing_elems(boundary) == width, boundary


def test_residual_stream_by_hand():
    """In a pre-norm GPT block the residual stream crosses every boundary inside the block (the attention and MLP
    branches read it and the add consumes it), so a boundary inside the attention branch carries two tensors."""
    graph = load_model("gpt", layers=1, hidden=16, heads=2, seq=8, vocab=32)
    structure = GraphStructure(graph)
    first_norm = next(i for i, layer in enumerate(graph.layers) if layer.op == "layernorm")
    residual = structure.producer(graph.layers[first_norm].inputs[0])
    assert residual in structure.crossing(first_norm + 1)
    assert structure.crossing_elems(first_norm + 1) == sum(
        graph.layers[p].output_elems for p in structure.crossing(first_norm + 1))
    assert len(structure.crossing(first_norm + 1)) == 2  # the stream and the norm's output


def test_one_structure_per_graph():
    graph = load_model("gpt")
    cm, _ = load_cost_model("a100-40gb-4hdr-8gpu.published")
    a, b = Context(graph, cm), Context(graph, cm.at_bound("low"))
    assert a.structure is b.structure
    assert a.graph_cached(("k",), lambda: [1]) is b.graph_cached(("k",), lambda: [2])


def test_rank_saved_bytes_equals_the_per_rank_scan():
    graph = load_model("gpt", layers=4, hidden=64, heads=4, seq=32, vocab=512)
    cm, _ = load_cost_model("a100-40gb-4hdr-8gpu.published")
    ctx = Context(graph, cm)
    starts = [0, 9, 30, 44]
    K, t = 2, 2
    region = frozenset(range(10, 40, 3))
    core = frozenset(range(12, 20))
    bounds = list(zip(starts, starts[1:] + [ctx.n_layers]))
    totals = rank_saved_bytes(ctx, "fp16", starts, K, region, core, t)
    for k in range(K):
        held = {i for j in range(k, len(bounds), K) for i in range(*bounds[j])}
        expected = sum(x.size_bytes("fp16") * (
            (1.0 / t if x.producer in region else 1.0) * (0.0 if x.producer in core and all(s in core for s in x.savers)
                                                          else 1.0) if any(s in held for s in x.savers) else 0.0)
            for x in ctx.saved)
        assert totals[k] == expected


@pytest.mark.parametrize("schedule,v,recompute,granularity", [
    ("1f1b", 1, False, "full"), ("1f1b", 1, True, "full"), ("interleaved", 2, True, "selective")])
def test_3d_predictions_equal_the_scan(monkeypatch, schedule, v, recompute, granularity):
    """data+tensor+pipeline predicted with the sweep and with the scan it replaced: every figure equal."""
    graph = load_model("gpt", layers=8, hidden=256, heads=8, seq=128, vocab=1024)
    cm, _ = load_cost_model("a100-40gb-4hdr-8gpu.published")
    plan = Plan("data+tensor+pipeline", batch=64, devices=32, devices_per_node=8, p_data=2, p_tensor=4, stages=4,
                micro_batches=8, dtype="fp16", optimizer="adam", schedule=schedule, virtual_stages=v,
                recompute=recompute, recompute_granularity=granularity)
    fast = predict(graph, plan, cm, interval=False)
    monkeypatch.setattr(GraphStructure, "crossing", lambda self, b: _definition(self, b))
    monkeypatch.setattr(GraphStructure, "crossing_elems", lambda self, b: sum(
        self.input_elems if p < 0 else self.layers[p].output_elems for p in _definition(self, b)))
    scanned = predict(replace(graph), plan, cm, interval=False)  # a new graph object: a structure of its own
    assert fast.feasible
    assert (fast.iteration_s, fast.memory_bytes, fast.details["stage_bounds"]) == (
        scanned.iteration_s, scanned.memory_bytes, scanned.details["stage_bounds"])
