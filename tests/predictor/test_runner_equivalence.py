"""Every strategy's loss and gradients equal the serial net's (2 gloo ranks; 4 for the hybrids).

Batch norm takes statistics over what one replica sees: the whole batch for the model-parallel strategies
(spatial syncs them over its group), the local batch under data parallelism and the micro-batch in the
pipeline, as in DDP and GPipe. Cases with a data-parallel part or micro-batches therefore use a net
without batch norm, where the serial result is exact."""
from __future__ import annotations

import pytest
import torch

from predictor.runner.build import build_replica
from predictor.runner.config import RunConfig
from predictor.runner.launch import spawn_ranks
from tests.runner_nets import mlp, net2d, net2d_strided, net3d

# spawns processes or ranks, or profiles real training steps: not in the fast inner loop (-m "not slow")
pytestmark = pytest.mark.slow

BATCH = 4


def _serial(graph):
    cfg = RunConfig(graph.name, "serial", 1, BATCH)
    replica = build_replica(cfg, graph)
    x, y = _batch(graph)
    loss = replica.forward(x, y)
    replica.backward(loss)
    return float(loss.detach()), {k: v.clone() for k, v in replica.serial_grads().items()}


def _batch(graph):
    from predictor.runner.nets import synthetic_batch

    return synthetic_batch(graph, BATCH, seed=1)


def _zero_halo(x, dim, before, after, group):
    """A wrong spatial implementation: zeros instead of the neighbours' rows (no exchange)."""
    shape = list(x.shape)
    shape[dim] = before
    head = x.new_zeros(shape)
    shape[dim] = after
    return torch.cat([head, x, x.new_zeros(shape)], dim=dim)


def _distributed(rank, world, device, emit, cases):
    import torch.distributed as dist

    from predictor.runner import comm

    exchange = comm.halo_extend
    for index, (graph, cfg) in enumerate(cases):
        comm.halo_extend = _zero_halo if cfg.model.endswith("-broken") else exchange
        replica = build_replica(cfg, graph, device)
        x, y = replica.local_batch(*_batch(graph))
        loss = replica.forward(x, y)
        replica.backward(loss)
        replica.sync_grads()
        loss = loss.detach().reshape(1).clone()
        if cfg.strategy == "pipeline":
            dist.broadcast(loss, world - 1)
        elif cfg.degrees[0] > 1:
            dist.all_reduce(loss)
            loss /= world
        grads = {k: v.detach().numpy().copy() for k, v in replica.serial_grads().items()}  # plain arrays: ranks exit
        emit((index, rank, float(loss), grads))


CASES = [
    ("data", net2d(bn=False), 2, {}),
    ("spatial", net2d(), 2, {}),
    ("spatial", net3d(), 2, {}),
    ("spatial", net2d_strided(), 2, {}),
    ("channel", net2d_strided(), 2, {}),
    ("filter", net2d(), 2, {}),
    ("filter", net3d(), 2, {}),
    ("channel", net2d(), 2, {}),
    ("channel", net3d(), 2, {}),
    ("pipeline", net2d(bn=False), 2, {"micro_batches": 2}),
    ("data", net2d(bn=False), 2, {"recompute_segments": 2}),
    ("data+spatial", net2d(bn=False), 4, {"p_model": 2}),
    ("data+filter", net2d(bn=False), 4, {"p_model": 2}),
    ("tensor", mlp(), 2, {}),
    ("tensor", mlp(), 4, {}),
    ("data+tensor", mlp(), 4, {"p_model": 2}),
    ("spatial", net2d(), 2, {"model": "tiny2d-broken"}),  # control: the check catches a missing halo
]


@pytest.mark.parametrize("ranks", [2, 4])
def test_every_strategy_matches_serial(ranks):
    """One launch per world size runs every case (spawning ranks dominates the test's time)."""
    torch.set_num_threads(1)
    cases = [(graph, RunConfig(extra.get("model", graph.name), strategy, n, BATCH, **{k: v for k, v in extra.items() if k != "model"}))
             for strategy, graph, n, extra in CASES if n == ranks]
    results = list(spawn_ranks(ranks, _distributed, (cases,)))
    assert len(results) == ranks * len(cases)
    covered = {index: set() for index in range(len(cases))}
    for index, rank, loss, grads in results:
        graph, cfg = cases[index]
        where = f"{cfg.label} {graph.name} rank {rank}"
        serial_loss, serial_grads = _serial(graph)
        if cfg.model.endswith("-broken"):
            assert loss != pytest.approx(serial_loss, rel=1e-5), f"{where}: a zero halo went unnoticed"
            covered.pop(index, None)
            continue
        assert loss == pytest.approx(serial_loss, rel=1e-5, abs=1e-6), where
        assert grads, f"{where}: no gradients reported"
        for name, grad in grads.items():
            torch.testing.assert_close(torch.from_numpy(grad), serial_grads[name], rtol=1e-4, atol=1e-5,
                                       msg=lambda m: f"{where} {name}: {m}")
        covered[index] |= set(grads)
    for index, names in covered.items():
        assert names == set(_serial(cases[index][0])[1]), f"{cases[index][1].label}: parameters without a gradient"


def test_serial_recompute_matches_serial():
    graph = net2d()
    serial_loss, serial_grads = _serial(graph)
    replica = build_replica(RunConfig(graph.name, "serial", 1, BATCH, recompute_segments=3), graph)
    loss = replica.forward(*_batch(graph))
    replica.backward(loss)
    assert float(loss.detach()) == pytest.approx(serial_loss, rel=1e-6)
    for name, grad in replica.serial_grads().items():
        torch.testing.assert_close(grad, serial_grads[name])


def test_offload_needs_a_gpu_without_one():
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    from profiler.errors import UserError

    with pytest.raises(UserError, match="CUDA"):
        build_replica(RunConfig("tiny2d", "serial", 1, BATCH, offload=True), net2d())


@pytest.mark.gpu
def test_offload_matches_serial_on_gpu():
    torch.backends.cudnn.allow_tf32 = False  # fp32 convolutions, comparable with the CPU serial net
    graph = net2d()
    serial_loss, serial_grads = _serial(graph)
    replica = build_replica(RunConfig(graph.name, "serial", 1, BATCH, offload=True), graph, device="cuda")
    x, y = _batch(graph)
    loss = replica.forward(x.cuda(), y.cuda())
    replica.backward(loss)
    assert float(loss.detach()) == pytest.approx(serial_loss, rel=1e-4)
    for name, grad in replica.serial_grads().items():
        torch.testing.assert_close(grad.cpu(), serial_grads[name], rtol=1e-3, atol=1e-4)
