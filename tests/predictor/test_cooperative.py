"""Cooperative-process vs GPipe: hand-computed iteration times and memory on a linear toy model."""
import pytest

from predictor.blocks import Block
from predictor.cooperative import best_micro_batches, cooperative, gpipe

PARTITION = [(0, 2), (2, 4)]
BOUNDARY = [0.0, 3.0]  # bytes per sample entering each stage


def blocks_at(n):
    """Four layers whose work is linear in the batch: fwd n s, bwd 2n s, 10n activation bytes, 8 weight bytes."""
    return [Block(f"l{i}", fwd_s=n, bwd_s=2 * n, activation_bytes=10 * n, input_bytes=3 * n, weight_bytes=8)
            for i in range(4)]


def no_comm(*args):
    return 0.0


def test_gpipe_closed_form():
    # M = 4 micro-batches of n = 2: stage F = 4, B = 8, recompute F = 4; T = (M + K - 1)(F + F + B) = 5 x 16
    c = gpipe(blocks_at, 8, PARTITION, BOUNDARY, 4, p2p_s=lambda b: 0.0)
    assert c.iteration_s == pytest.approx(80.0)
    assert c.bubble_s == pytest.approx(16.0) and c.recompute_s == pytest.approx(16.0)
    # busiest device (stage 1): weights 16 + grads 16 + Adam 32 + boundary 3 x 8 samples + one micro-batch 40
    assert c.activation_bytes == pytest.approx(24 + 40)
    assert c.memory_bytes == pytest.approx(16 + 16 + 32 + 64)
    no_remat = gpipe(blocks_at, 8, PARTITION, BOUNDARY, 4, p2p_s=lambda b: 0.0, remat=False)
    assert no_remat.iteration_s == pytest.approx(5 * 12.0)
    assert no_remat.activation_bytes == pytest.approx(4 * 40)


def test_gpipe_p2p_term():
    # 2 (M + K - 2) sends of the boundary (3 bytes x n = 6 bytes at 1 s/byte)
    c = gpipe(blocks_at, 8, PARTITION, BOUNDARY, 4, p2p_s=lambda b: b)
    assert c.p2p_s == pytest.approx(2 * 4 * 6.0)


def test_cooperative_closed_form_beats_gpipe_without_comm():
    # prediction: stage 0's forward (2 layers) on N/K = 4 samples = 8 s; backward pipeline M (F + B) + (K - 1) B
    c = cooperative(blocks_at, 8, PARTITION, BOUNDARY, 4, p2p_s=lambda b: 0.0, collective_s=no_comm)
    assert c.iteration_s == pytest.approx(8 + 4 * 12 + 1 * 8)
    assert c.iteration_s < gpipe(blocks_at, 8, PARTITION, BOUNDARY, 4, p2p_s=lambda b: 0.0).iteration_s


def test_cooperative_memory_holds_all_weights_but_no_stored_activations():
    c = cooperative(blocks_at, 8, PARTITION, BOUNDARY, 4, p2p_s=lambda b: 0.0, collective_s=no_comm)
    # stage 1: stage input for 8 samples (24) + max(two micro-batches of stage activations 2 x 40,
    # prediction peak: one layer in+out at 4 samples (12 + 40) + send buffer 3 x 4 samples x 2 = 24 -> 76)
    assert c.activation_bytes == pytest.approx(24 + max(80, 76))
    assert c.memory_bytes == pytest.approx(32 + 16 + 32 + c.activation_bytes)  # all 4 layers' weights
    no_remat = gpipe(blocks_at, 8, PARTITION, BOUNDARY, 4, p2p_s=lambda b: 0.0, remat=False)
    assert c.activation_bytes < no_remat.activation_bytes


def test_weight_all_gather_can_make_gpipe_the_better_choice():
    def slow_allgather(op, size, group):
        return 100.0 if op == "allgather" else 0.0
    c = cooperative(blocks_at, 8, PARTITION, BOUNDARY, 4, p2p_s=lambda b: 0.0, collective_s=slow_allgather)
    assert c.iteration_s > gpipe(blocks_at, 8, PARTITION, BOUNDARY, 4, p2p_s=lambda b: 0.0).iteration_s


def test_best_micro_batches_respects_the_memory_cap():
    # a 10 s send per micro-batch: T(M) = (M + 1)(64 / M) + 2 M 10 -> M=1 148, M=2 136, M=4 160, M=8 232;
    # memory 64 + 24 + 160 / M -> M=1 248, M=2 168, M=4 128, M=8 108
    def run(m):
        return gpipe(blocks_at, 8, PARTITION, BOUNDARY, m, p2p_s=lambda b: 10.0)
    assert best_micro_batches(run, 8).micro_batches == 2
    capped = best_micro_batches(run, 8, memory_cap_bytes=150)
    assert capped.micro_batches == 4 and capped.iteration_s == pytest.approx(160.0)
    assert best_micro_batches(run, 8, memory_cap_bytes=100) is None


def test_cooperative_strategy_closed_form_on_a_conv_chain():
    from predictor.api import predict
    from predictor.plan import Plan
    from tests.outofcore_toys import FlatCostModel, conv_chain_graph

    plan = Plan("cooperative", batch=8, devices=2, devices_per_node=2, stages=2, micro_batches=4)
    pred = predict(conv_chain_graph(), plan, FlatCostModel(call_s=1e-3), interval=False)
    # per micro-batch of 2 samples (1 ms per call per sample): conv0 f2 b2 (no data gradient), relu f2 b2,
    # conv f2 b4, fc f2 b4, flatten free; balanced cut after conv2: stage 0 F 10 B 14, stage 1 F 8 B 12 (ms)
    assert pred.details["stage_bounds"] == [(0, 5), (5, 10)]
    # prediction: stage 0's forward on 4 samples = 5 calls x 4 ms = 20; backward pipeline
    # M (F + B)_max + (K - 1) B_max = 4 x 24 + 14 = 110; collectives cost 0 in this model
    assert pred.compute_fwd_s == pytest.approx(20e-3)
    assert pred.iteration_s - pred.update_s == pytest.approx(20e-3 + 110e-3)
    # each process holds every stage's weights, its own stage's gradients
    assert pred.weights_bytes == pytest.approx(4 * pred.details["params_per_device"])
    assert pred.grads_bytes == pytest.approx(4 * max(pred.details["stage_params"]))


def _cooperative_rank(rank, world, device, emit, graph, micro_batches):
    import torch.distributed as dist

    from predictor.runner.cooperative import CooperativeReplica
    from predictor.runner.nets import build_serial, synthetic_batch

    layers, modules = build_serial(graph, seed=0)
    replica = CooperativeReplica(layers, modules, dist.group.WORLD, world, micro_batches)
    x, y = replica.local_batch(*synthetic_batch(graph, 4, seed=1))
    loss = replica.forward(x, y).reshape(1).clone()
    dist.broadcast(loss, world - 1)
    emit((rank, float(loss), {k: v.detach().numpy().copy() for k, v in replica.serial_grads().items()}))


def test_cooperative_runner_matches_the_serial_net():
    """The measured cooperative step (prediction, exchange, backward pipeline) gives the serial net's loss
    and gradients (2 gloo ranks, a net without batch norm, 2 micro-batches)."""
    from predictor.runner.launch import spawn_ranks
    from predictor.runner.nets import build_serial, synthetic_batch
    from tests.runner_nets import net2d
    from torch.nn import functional as F

    graph = net2d(bn=False)
    layers, modules = build_serial(graph, seed=0)
    x, y = synthetic_batch(graph, 4, seed=1)
    out = x
    for module in modules:
        out = module(out)
    serial_loss = F.cross_entropy(out, y)
    serial_loss.backward()
    serial = {f"{i}.{name}": p.grad for i, m in enumerate(modules) for name, p in m.named_parameters()}
    seen = {}
    for rank, loss, grads in spawn_ranks(2, _cooperative_rank, (graph, 2)):
        assert loss == pytest.approx(float(serial_loss.detach()), rel=1e-5)
        seen.update(grads)
    assert set(seen) == set(serial)
    for key, grad in seen.items():
        assert grad == pytest.approx(serial[key].numpy(), rel=1e-4, abs=1e-6), key
