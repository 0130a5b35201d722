"""Layouts Megatron runs inside data+tensor+pipeline (issue 41 item 3), each term by hand: sequence parallelism in
every pipeline stage (Korthikanti et al. 2022, §4.2.2) and the distributed optimizer (ZeRO stage 1) over the
data-parallel replicas."""
from __future__ import annotations

import pytest

from predictor.api import load_cost_model, load_model, predict_all
from predictor.cli import main
from predictor.layout import data_network_share
from predictor.plan import Plan
from predictor.strategies import evaluate
from predictor.strategies.context import Context
from predictor.strategies.hybrid3d import (gather_stall_s, layout_nodes, recomputed_layers, repeated_layers,
                                           sequence_collectives_by_layer, sequence_seeds)
from predictor.strategies.tensor import sequence_split, tensor_split
from tests.kernels_only import kernels_only  # kernels alone: the host floor is tested apart

L, H, HEADS, SEQ, VOCAB = 4, 256, 8, 128, 1024


@pytest.fixture(scope="module")
def setup():
    graph = load_model("gpt", layers=L, hidden=H, heads=HEADS, seq=SEQ, vocab=VOCAB, attention="fused-softmax",
                       residual="bias-dropout-add")
    cm = kernels_only(load_cost_model("a100-40gb-4hdr-8gpu.published")[0])
    return graph, cm, Context(graph, cm)


def plan(**kw) -> Plan:
    base = dict(batch=32, devices=16, devices_per_node=8, p_data=2, p_tensor=4, stages=2, micro_batches=8,
                dtype="fp16", optimizer="adam", schedule="1f1b", mixed_precision="half")
    base.update(kw)
    base["devices"] = base["p_data"] * base["p_tensor"] * base["stages"]
    return Plan("data+tensor+pipeline", **base)


def test_sequence_parallel_is_no_longer_refused(setup):
    _, _, ctx = setup
    pred = evaluate(ctx, plan(sequence_parallel=True))
    assert pred.feasible, pred.reason


def test_sequence_parallel_collectives_per_transformer_layer(setup):
    """Per transformer layer and micro-batch: forward 2 reduce-scatters (row outputs) + 2 all-gathers (the QKV and
    first MLP projections' token-split inputs), backward the mirror image plus 2 all-gathers (those inputs gathered
    again for the weight gradients: Megatron keeps their 1/t share), each of m·s·h·δ bytes; where tensor
    parallelism alone has 2 + 2 all-reduces."""
    graph, cm, ctx = setup
    ts = tensor_split(graph)
    seq = sequence_split(graph, ts, sequence_seeds(ctx, ts))
    m, t, act = 4, 4, 2
    size = lambda x: m * ctx.tensor_elems(x) * act  # noqa: E731
    fwd, bwd = sequence_collectives_by_layer(ctx, ts, seq, size, t, 1)
    sbh = m * SEQ * H * act
    rs, ag = ctx.collective("reduce_scatter", sbh, t, 1), ctx.collective("allgather", sbh, t, 1)
    starts = repeated_layers(ctx, ts)
    assert len(starts) == L + 1
    for a, z in zip(starts, starts[1:]):
        assert sum(fwd.get(i, 0.0) for i in range(a, z)) == pytest.approx(2 * rs + 2 * ag)
        assert sum(bwd.get(i, 0.0) for i in range(a, z)) == pytest.approx(2 * ag + 2 * rs + 2 * ag)
    # outside the layers: the final norm's output all-gathered for the head (forward), nothing else here
    span = recomputed_layers(ctx, ts)
    outside_fwd = sum(v for i, v in fwd.items() if i not in range(span.start, span.stop))
    assert outside_fwd == pytest.approx(ag)
    # the embeddings' outputs are token-split from the start: the first layer's QKV input is gathered, not sliced
    assert not seq.entries


def test_sequence_parallel_terms_against_tensor_parallelism(setup):
    """With S micro-batches of m on the slowest rank: the layer collectives become reduce-scatter + all-gather; the
    boundary send is 1/t of the tensor with no all-gather; the activations of the token-wise layers fall by t."""
    graph, cm, ctx = setup
    base, sp = evaluate(ctx, plan()), evaluate(ctx, plan(sequence_parallel=True))
    t, m, act = 4, 2, 2
    tensor_nodes, _, pipe_nodes = layout_nodes(plan())
    boundary = m * SEQ * H * act
    send = ctx.collective("sendrecv", boundary / t, 2, pipe_nodes)
    assert sp.comm_exposed_s["pipeline_p2p"] == pytest.approx(2 * (8 + 2 - 2) * send)
    assert base.comm_exposed_s["pipeline_p2p"] == pytest.approx(2 * (8 + 2 - 2) * ctx.collective(
        "sendrecv", boundary, 2, pipe_nodes))
    # activations: Korthikanti's Table 2 per layer, 10 + 24/t + 5as/(ht) -> 34/t + 5as/(ht)
    a_s_h = 5 * HEADS * SEQ / H
    ratio = (34 / t + a_s_h / t) / (10 + 24 / t + a_s_h / t)
    assert sp.details["layer_activations_bytes"] / base.details["layer_activations_bytes"] == pytest.approx(
        ratio, rel=0.03)
    # compute: the token-wise layers run on 1/t of the tokens, so the forward is faster
    assert sp.compute_fwd_s < base.compute_fwd_s
    # one buffer of the largest all-gathered tensor (m·s·h·δ here)
    assert sp.comm_buffers_bytes - base.comm_buffers_bytes == pytest.approx(boundary)


def test_sequence_parallel_with_full_recompute_checkpoints_split_inputs(setup):
    _, _, ctx = setup
    full = evaluate(ctx, plan(sequence_parallel=True, recompute=True))
    m, t, act = 2, 4, 2
    # first stage: min(S, K) = 2 micro-batches in flight, L/K = 2 layers, each input s·h·δ / t per sample
    assert full.details["layer_activations_bytes"] == pytest.approx(2 * m * (L // 2) * SEQ * H * act / t)


def test_zero1_shards_optimizer_and_master_weights(setup):
    _, _, ctx = setup
    ddp, zero = evaluate(ctx, plan()), evaluate(ctx, plan(zero_stage=1))
    assert zero.feasible, zero.reason
    params = zero.details["params_per_device"]
    d = 2
    assert params == ddp.details["params_per_device"]
    assert zero.optimizer_bytes == pytest.approx(params * 8 / d)  # Adam's two fp32 words
    assert zero.weights_bytes == pytest.approx(params * (2 + 4 / d))  # fp16 copy whole, fp32 master 1/d
    assert zero.grads_bytes == ddp.grads_bytes == pytest.approx(params * 2)  # stage 1: gradients whole
    assert zero.comm_buffers_bytes == pytest.approx(min(params * 2, 2 * 25e6))  # no DDP bucket copy
    # the updated weights all-gathered over the replicas after the step
    _, d_nodes, _ = layout_nodes(plan())
    local = ctx.graph_cached(("3d-tensor-params", 4), lambda: None)  # per layer, on one tensor rank
    largest = max(sum(local[a:z]) for a, z in zero.details["stage_bounds"])
    share = data_network_share(2, 4, 8)
    assert zero.comm_exposed_s["parameter_gather"] == pytest.approx(
        ctx.collective("allgather", largest * 2, d, d_nodes, share))  # fp16 weights
    assert "parameter_gather" not in ddp.comm_exposed_s
    assert zero.update_s < ddp.update_s
    assert zero.memory_bytes < ddp.memory_bytes


def test_the_parameter_gather_beside_the_forward_by_hand():
    """Gathered in the order the first micro-batch needs the layers: the wait is max_i (G_i - N_i)."""
    two = [[(1.0, 1.0), (1.0, 1.0)]]  # one chunk of two layers, equal parameters, 1 s forward each
    assert gather_stall_s(4.0, two, 2) == pytest.approx(max(2.0 - 0.0, 4.0 - 1.0))
    assert gather_stall_s(4.0, [[(1.0, 10.0), (1.0, 10.0)]], 2) == pytest.approx(2.0)  # the first layer's share
    # interleaved, two chunks of one layer: chunk 1 first runs after K = 2 micro-batches went through chunk 0
    assert gather_stall_s(4.0, [[(1.0, 1.0)], [(1.0, 1.0)]], 2) == pytest.approx(max(2.0, 4.0 - 2.0))
    assert gather_stall_s(4.0, [[(1.0, 0.5), (0.0, 5.0)], [(2.0, 1.0)]], 3) == pytest.approx(
        max(4 / 3, 4.0 - 3 * 5.5))  # a layer without parameters needs no gather but takes time
    assert gather_stall_s(4.0, [[(0.0, 1.0)]], 2) == 0.0


def test_overlapping_the_parameter_gather(setup):
    _, _, ctx = setup
    exposed, overlapped = evaluate(ctx, plan(zero_stage=1)), evaluate(ctx, plan(zero_stage=1,
                                                                                 overlap_param_gather=True))
    assert overlapped.feasible, overlapped.reason
    assert 0 < overlapped.comm_exposed_s["parameter_gather"] < exposed.comm_exposed_s["parameter_gather"]
    assert overlapped.compute_fwd_s == exposed.compute_fwd_s and overlapped.memory_bytes == exposed.memory_bytes
    ddp = evaluate(ctx, plan(overlap_param_gather=True))  # nothing to gather without the distributed optimizer
    assert "parameter_gather" not in ddp.comm_exposed_s and ddp.iteration_s == evaluate(ctx, plan()).iteration_s


def test_zero1_reduce_scatters_the_gradients(setup):
    """The gradient exchange is a reduce-scatter: half an all-reduce's bus traffic, so never slower."""
    _, _, ctx = setup
    kw = dict(framework="no-overlap")
    ddp, zero = evaluate(ctx, plan(**kw)), evaluate(ctx, plan(zero_stage=1, **kw))
    assert 0 < zero.comm_exposed_s["gradient"] < ddp.comm_exposed_s["gradient"]


@pytest.mark.parametrize("stage", [2, 3])
def test_zero_above_1_refused_with_pipelines(setup, stage):
    _, _, ctx = setup
    pred = evaluate(ctx, plan(zero_stage=stage))
    assert not pred.feasible and "distributed optimizer is stage 1" in pred.reason


def test_flags_reach_the_3d_plan(setup):
    graph, cm, _ = setup
    pred = predict_all(graph, 32, 16, cm, strategies=("data+tensor+pipeline",), tensor_parallel=4, pipeline_stages=2,
                       micro_batches=8, dtype="fp16", optimizer="adam", zero_stage=1, sequence_parallel=True,
                       interval=False)[0]
    assert pred.feasible and pred.plan.zero_stage == 1 and pred.plan.sequence_parallel
    assert "zero1" in pred.plan.describe() and "/sp" in pred.plan.describe()


def test_cli_zero2_with_pipelines_is_one_line(capsys):
    code = main(["run", "--model", "gpt", "--batch", "8", "--gpus", "8", "--strategy", "data+tensor+pipeline",
                 "--tensor-parallel", "2", "--pipeline-stages", "2", "--zero", "2", "--dtype", "fp16"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "stage 1" in err


def test_fsdp_with_tensor_parallelism_on_one_stage():
    """ZeRO 3 (FSDP) inside the 3-D strategy on one stage (torchtitan's FSDP x TP): at tensor degree 1 it is the data
    strategy's stage 3, term for term, with nothing to hide the collectives behind; with tensor parallelism each
    rank's model state is its tensor shard over the replicas; with pipelines, context or experts it stays refused."""
    from predictor.synthetic import SyntheticCostModel
    graph = load_model("gpt", layers=L, hidden=H, heads=HEADS, seq=SEQ, vocab=VOCAB)
    fast = SyntheticCostModel(peak_flops_per_s=1e30, launch_s=0.0)
    ctx = Context(graph, fast)
    common = dict(batch=32, devices_per_node=8, dtype="fp16", optimizer="adam", mixed_precision="half",
                  micro_batches=2)
    data = evaluate(ctx, Plan("data", devices=16, p_data=16, zero_stage=3, **common))
    three = evaluate(ctx, Plan("data+tensor+pipeline", devices=16, p_data=16, p_tensor=1, stages=1, zero_stage=3,
                               schedule="1f1b", **common))
    assert data.feasible and three.feasible, (data.reason, three.reason)
    assert three.comm_exposed_s["gradient"] == pytest.approx(data.comm_exposed_s["gradient"], rel=1e-6)
    state = lambda p: p.weights_bytes + p.grads_bytes + p.optimizer_bytes  # noqa: E731
    assert state(three) == pytest.approx(state(data), rel=1e-6) and three.details["zero_stage"] == 3
    tp = evaluate(ctx, Plan("data+tensor+pipeline", devices=16, p_data=4, p_tensor=4, stages=1, zero_stage=3,
                            schedule="1f1b", **common))
    from predictor.memory import parameter_bytes
    local = tp.details["params_per_device"] * 4  # this rank's tensor shard of the model, sharded over 4 replicas
    assert tp.feasible and state(tp) == pytest.approx(sum(parameter_bytes(local, "fp16", "adam", "half")) / 4)
    assert graph.params / 4 < local < graph.params / 4 * 1.2  # a quarter, plus what tensor parallelism replicates
    for bad in (dict(stages=2, p_data=2), dict(p_context=2, p_data=2)):
        kw = dict(devices=16, p_data=4, p_tensor=4, stages=1, zero_stage=3, schedule="1f1b", **common)
        kw.update(bad)
        assert not evaluate(ctx, Plan("data+tensor+pipeline", **kw)).feasible
