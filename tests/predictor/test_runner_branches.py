"""Nets with branches in the validation runner (predictor.runner.nets.GraphNet): a residual sum and a
concatenation run as the graph says, checkpointed segments give the same loss and gradients, and the
model-parallel strategies refuse such nets with one line."""
from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from predictor.layerspec import load_layer_spec
from predictor.recompute import chain_segments
from predictor.runner.build import build_replica
from predictor.runner.config import RunConfig
from predictor.runner.nets import build_graph_net, is_chain, synthetic_batch
from profiler.errors import UserError

SPEC = """name: branchy
input: [3, 8, 8]
layers:
  - {name: stem, op: conv2d, filters: 4, kernel: 3, padding: 1}
  - {name: bn, op: batchnorm}
  - {name: r0, op: relu}
  - {name: c1, op: conv2d, filters: 4, kernel: 3, padding: 1}
  - {name: r1, op: relu}
  - {name: c2, op: conv2d, filters: 4, kernel: 3, padding: 1}
  - {name: sum, op: add, inputs: [c2, r0]}
  - {name: side, op: conv2d, filters: 2, kernel: 1, inputs: [r0]}
  - {name: cat, op: concat, inputs: [sum, side]}
  - {name: pool, op: maxpool, kernel: 2}
  - {name: flat, op: flatten}
  - {name: fc, op: linear, out: 5}
"""


@pytest.fixture
def graph(tmp_path):
    path = tmp_path / "branchy.yaml"
    path.write_text(SPEC)
    return load_layer_spec(str(path))


def test_graph_net_computes_the_graph(graph):
    assert not is_chain(graph)
    net = build_graph_net(graph, seed=0)
    m = dict(zip([l.name for l in net.layers], net.mods))
    x = torch.randn(2, 3, 8, 8)
    r0 = m["r0"](m["bn"](m["stem"](x)))
    s = m["c2"](m["r1"](m["c1"](r0))) + r0
    y = m["fc"](m["flat"](m["pool"](torch.cat([s, m["side"](r0)], dim=1))))
    torch.testing.assert_close(net(x), y)


def test_checkpointed_segments_same_loss_and_grads(graph):
    x, y = synthetic_batch(graph, 4, seed=1)
    results = []
    for segments in ((), chain_segments(graph, 3)):
        net = build_graph_net(graph, seed=0, segments=segments)
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        results.append((loss.detach(), [p.grad.clone() for p in net.parameters()]))
    assert chain_segments(graph, 3)  # the test checkpoints something
    torch.testing.assert_close(results[0][0], results[1][0])
    for a, b in zip(results[0][1], results[1][1]):
        torch.testing.assert_close(a, b)


def test_model_parallel_refuses_branches(graph):
    cfg = RunConfig(model="branchy", strategy="filter", ranks=2, batch=4)
    with pytest.raises(UserError, match="has branches .* serial or data only, not filter"):
        build_replica(cfg, graph)


def test_serial_replica_trains_a_branched_net(graph):
    replica = build_replica(RunConfig(model="branchy", strategy="serial", ranks=1, batch=4, recompute_segments=2), graph)
    x, y = synthetic_batch(graph, 4, seed=2)
    loss = replica.forward(x, y)
    replica.backward(loss)
    assert all(p.grad is not None for p in replica.parameters())
