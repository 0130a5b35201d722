"""Every strategy's compute, communication and memory terms on a tiny 3-layer net, against closed forms.

Net (per sample): input (2, 8, 8) -> conv1 3x3 pad 1, 4 filters, no bias (72 params) -> relu1 ->
conv2 3x3 pad 1, 4 filters, no bias (144) -> flatten (256) -> fc 256->2, no bias (512). 728 params.
Synthetic cost model: compute = FLOPs / 1e9, memory = bytes / 1e9, ring alpha-beta with alpha = 1 us,
1 GB/s inside a node, 0.1 GB/s across nodes (predictor/synthetic.py).
"""
import dataclasses
import math

import pytest

from predictor.graph import ModelGraph
from predictor.layerspec import load_layer_spec
from predictor.layout import data_network_share
from predictor.plan import Plan
from predictor.strategies import evaluate
from predictor.strategies.context import Context
from predictor.strategies.pipeline import partition
from predictor.strategies.spatial import halo_bytes
from predictor.synthetic import SyntheticCostModel

PEAK = 1e9
ALPHA = 1e-6
INTRA = 1e9
INTER = 1e8
PARAMS = 72 + 144 + 512

SPEC = """
name: tiny
input: [2, 8, 8]
layers:
  - {name: conv1, op: conv2d, filters: 4, kernel: 3, padding: 1, bias: false}
  - {name: relu1, op: relu}
  - {name: conv2, op: conv2d, filters: 4, kernel: 3, padding: 1, bias: false}
  - {name: flat, op: flatten}
  - {name: fc, op: linear, out: 2, bias: false}
"""


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> ModelGraph:
    path = tmp_path_factory.mktemp("spec") / "tiny.yaml"
    path.write_text(SPEC)
    return load_layer_spec(path)


@pytest.fixture(scope="module")
def cm():
    return SyntheticCostModel(peak_flops_per_s=PEAK, launch_s=0.0, memory_bytes_per_s=1e9, alpha_s=ALPHA,
                              intra_bytes_per_s=INTRA, inter_bytes_per_s=INTER, device_memory_bytes=1e9,
                              devices_per_node=4)


def run(graph, cm, **kw):
    kw.setdefault("devices_per_node", 4)
    pred = evaluate(Context(graph, cm), Plan(**kw))
    assert pred.feasible, pred.reason
    return pred


def ring_allreduce(g, s, bw=INTRA):
    return 2 * (g - 1) * ALPHA + 2 * (g - 1) / g * s / bw


def ring_gather(g, s, bw=INTRA):  # allgather, reduce-scatter, all-to-all
    return (g - 1) * ALPHA + (g - 1) / g * s / bw


def p2p(s, bw=INTRA):  # sendrecv, halo
    return ALPHA + s / bw


def conv_flops(n, c, f, h, w):
    return 2 * n * c * f * 9 * h * w


def test_graph_shapes(tiny):
    assert tiny.params == PARAMS
    assert [l.output_shape for l in tiny.layers] == [(4, 8, 8), (4, 8, 8), (4, 8, 8), (256,), (2,)]


def test_serial_and_data(tiny, cm):
    n = 4  # B = 8 over 2 replicas
    fwd = (conv_flops(n, 2, 4, 8, 8) + n * 256 + conv_flops(n, 4, 4, 8, 8) + 2 * n * 2 * 256) / PEAK
    # conv1 has no input gradient (fed by the model input): only its weight gradient
    bwd = (conv_flops(n, 2, 4, 8, 8) + n * 256 + 2 * conv_flops(n, 4, 4, 8, 8) + 2 * 2 * n * 2 * 256) / PEAK
    pred = run(tiny, cm, strategy="data", batch=8, devices=2, p_data=2)
    assert pred.compute_fwd_s == pytest.approx(fwd)
    assert pred.compute_bwd_s == pytest.approx(bwd)
    assert pred.update_s == pytest.approx(PARAMS * 12 / 1e9)  # SGD: read w, g, write w (fp32)
    # one 25 MB bucket holds every gradient: ready only at the end of backward -> all exposed, plus DDP's two
    # gradient copies (into the bucket and back: 2 x (read + write) x 4 bytes per parameter at 1 GB/s)
    copies = PARAMS * 16 / 1e9
    assert pred.comm_exposed_s["gradient"] == pytest.approx(ring_allreduce(2, PARAMS * 4) + copies)
    assert pred.comm_hidden_s["gradient"] == pytest.approx(0.0)
    assert pred.iteration_s == pytest.approx(fwd + bwd + PARAMS * 12 / 1e9 + ring_allreduce(2, PARAMS * 4) + copies)
    # memory: w, g, DDP bucket copy; saved: input (128) by conv1, relu1 out (256) by relu1+conv2, conv2 out by fc
    assert pred.weights_bytes == pred.grads_bytes == PARAMS * 4
    assert pred.optimizer_bytes == 0
    assert pred.comm_buffers_bytes == PARAMS * 4
    assert pred.activations_bytes == n * (128 + 256 + 256) * 4
    # backward peak: at fc every saved tensor is alive plus fc's dL/dy (2) and dL/dx (256); earlier
    # layers hold fewer saved tensors (conv1: 128 + 256; relu1, conv2: 384 + 512), so fc sets the peak
    assert pred.workspace_bytes == n * (2 + 256) * 4
    serial = run(tiny, cm, strategy="serial", batch=8, devices=1)
    assert serial.comm_exposed_total_s == 0 and serial.comm_buffers_bytes == 0
    assert serial.activations_bytes == 2 * pred.activations_bytes


def test_framework_overhead_is_paid_once_per_layer_and_pass(tiny, cm):
    """5 layers: every one is a module call; conv1 needs no input gradient but has a weight gradient, so
    all 5 are autograd nodes in backward."""
    with_overhead = dataclasses.replace(cm, framework_fwd_s=3e-6, framework_bwd_s=7e-6)
    base = run(tiny, cm, strategy="serial", batch=8, devices=1)
    pred = run(tiny, with_overhead, strategy="serial", batch=8, devices=1)
    assert pred.compute_fwd_s == pytest.approx(base.compute_fwd_s + 5 * 3e-6)
    assert pred.compute_bwd_s == pytest.approx(base.compute_bwd_s + 5 * 7e-6)
    # a pipeline pays it once per layer per micro-batch: 4 micro-batches over 2 stages
    gpipe = dict(strategy="pipeline", batch=8, devices=2, stages=2, micro_batches=4)
    assert run(tiny, with_overhead, **gpipe).iteration_s > run(tiny, cm, **gpipe).iteration_s + 4 * 5 * 10e-6 / 2


def test_ranks_sharing_cores_compute_slower(tiny, cm):
    """A CPU node with 2 cores: 2 ranks get a core each; 4 ranks share them, so every compute term doubles
    while the collectives keep their cost."""
    shared = dataclasses.replace(cm, cores_per_node=2)
    for devices, factor in ((2, 1.0), (4, 2.0)):
        plan = dict(strategy="data", batch=8, devices=devices, p_data=devices)
        alone, sharing = run(tiny, cm, **plan), run(tiny, shared, **plan)
        assert sharing.compute_fwd_s == pytest.approx(factor * alone.compute_fwd_s)
        assert sharing.compute_bwd_s == pytest.approx(factor * alone.compute_bwd_s)
        assert sharing.update_s == pytest.approx(factor * alone.update_s)
        # the allreduce keeps its cost; DDP's two gradient copies run on the (shared) cores
        copies = PARAMS * 16 / 1e9
        assert sharing.comm_exposed_s["gradient"] == pytest.approx(alone.comm_exposed_s["gradient"] + (factor - 1) * copies)
    # ranks spread over nodes: 4 devices, 2 per node -> a core each again
    spread = dict(strategy="data", batch=8, devices=4, p_data=4, devices_per_node=2)
    assert run(tiny, shared, **spread).compute_fwd_s == pytest.approx(run(tiny, cm, **spread).compute_fwd_s)


def test_optimizers_and_mixed_precision(tiny, cm):
    adam = run(tiny, cm, strategy="serial", batch=8, devices=1, optimizer="adam")
    assert adam.optimizer_bytes == PARAMS * 8
    assert adam.update_s == pytest.approx(PARAMS * 28 / 1e9)  # read w, g, m, v; write w, m, v
    momentum = run(tiny, cm, strategy="serial", batch=8, devices=1, optimizer="momentum")
    assert momentum.update_s == pytest.approx(PARAMS * 20 / 1e9)
    half = run(tiny, cm, strategy="serial", batch=8, devices=1, dtype="bf16")
    fp32 = run(tiny, cm, strategy="serial", batch=8, devices=1)
    assert half.weights_bytes == PARAMS * 6  # fp32 master + half copy
    assert half.activations_bytes == fp32.activations_bytes / 2
    assert half.grads_bytes == fp32.grads_bytes == PARAMS * 4  # autocast: fp32 gradients


def test_half_precision_parameters_keep_and_all_reduce_half_gradients(tiny, cm):
    """mixed_precision="half" (Megatron-LM --fp16, DeepSpeed fp16): 2-byte gradients, all-reduced as such, beside
    6 bytes of weights (half + fp32 master); nothing changes in fp32 or under autocast."""
    base = dict(strategy="data", batch=8, devices=2, p_data=2, dtype="fp16", optimizer="adam")
    amp = run(tiny, cm, **base)
    half = run(tiny, cm, **base, mixed_precision="half")
    assert half.grads_bytes == PARAMS * 2 and amp.grads_bytes == PARAMS * 4
    assert half.weights_bytes == amp.weights_bytes == PARAMS * 6 and half.optimizer_bytes == amp.optimizer_bytes
    # one bucket at the end of backward (bucket_bytes above the gradients): the all-reduce and DDP's two copies
    one = dict(base, bucket_bytes=1e9)
    for mixed, width in (("autocast", 4), ("half", 2)):
        pred = run(tiny, cm, **one, mixed_precision=mixed)
        assert pred.comm_exposed_s["gradient"] == pytest.approx(
            ring_allreduce(2, PARAMS * width) + PARAMS * width * 4 / 1e9)
    fp32 = dict(base, dtype="fp32")
    assert run(tiny, cm, **fp32, mixed_precision="half").iteration_s == run(tiny, cm, **fp32).iteration_s
    assert not evaluate(Context(tiny, cm), Plan(**base, devices_per_node=4, mixed_precision="quarter")).feasible


def test_data_plus_pipeline_groups_across_nodes_share_the_network(tiny, cm):
    """4 devices, 2 per node, 2 stages: each node holds one pipeline; the data pairs (ranks 0 and 2 for stage 1,
    1 and 3 for stage 2) all-reduce at once through each node's network, half of it each."""
    pred = run(tiny, cm, strategy="data+pipeline", batch=8, devices=4, devices_per_node=2, p_data=2, stages=2,
               micro_batches=2)
    assert pred.details["stage_bounds"] == [(0, 2), (2, 5)]
    total = pred.comm_exposed_s["gradient"] + pred.comm_hidden_s["gradient"]  # the most exposed stage's one bucket
    assert total in [pytest.approx(ring_allreduce(2, p * 4, INTER / 2)) for p in (72, 144 + 512)]


def test_data_groups_beside_each_other_split_each_nodes_network():
    """layout.data_network_share: c = min(inner, devices per node) data groups per node share its network."""
    assert data_network_share(4, 8, 8) == 1 / 8  # tensor 8 inside a node, 4 replicas: 8 groups per node
    assert data_network_share(8, 2, 8) == 1 / 2  # inner 2 on 2 nodes: 2 groups per node, 4 ranks each on it
    assert data_network_share(4, 2, 8) == 1.0  # the same on one node: no network
    assert data_network_share(16, 1, 8) == 1.0  # plain data parallelism: one group
    assert data_network_share(2, 4, 8) == 1.0  # the group stays inside a node
    assert data_network_share(2, 16, 8) == 1 / 8  # inner groups span nodes: 8 data groups cross each node


def test_bucket_overlap_hides_early_buckets(tiny, cm):
    n = 4
    pred = run(tiny, cm, strategy="data", batch=8, devices=2, p_data=2, bucket_bytes=2048)
    bwd_fc = 2 * 2 * n * 2 * 256 / PEAK
    total_bwd = pred.compute_bwd_s
    # bucket 1 = fc's 2048 bytes, ready after fc's backward; bucket 2 = conv2 + conv1 (864 bytes) at the end
    end1 = bwd_fc + ring_allreduce(2, 2048)
    end2 = max(end1, total_bwd) + ring_allreduce(2, 864)
    copies = (2048 + 864) * 4 / 1e9  # DDP's two gradient copies: read + write each, at 1 GB/s
    assert pred.comm_exposed_s["gradient"] == pytest.approx(end2 - total_bwd + copies)
    assert pred.comm_hidden_s["gradient"] == pytest.approx(ring_allreduce(2, 2048) + ring_allreduce(2, 864) - (end2 - total_bwd))


def test_data_group_across_nodes_uses_inter_node_links(tiny, cm):
    # 4 devices, 2 per node: filter pairs inside a node, data pairs (ranks 0 and 2, ranks 1 and 3) across nodes;
    # the two data pairs all-reduce at once through each node's network, half of it each
    pred = run(tiny, cm, strategy="data+filter", batch=8, devices=4, devices_per_node=2, p_data=2, p_filter=2)
    copies = PARAMS * 4 / 2 * 4 / 1e9  # DDP's two gradient copies of this device's half of the parameters
    assert pred.comm_exposed_s["gradient"] == pytest.approx(ring_allreduce(2, PARAMS * 4 / 2, INTER / 2) + copies)
    assert pred.details["nodes_inner_group"] == 1
    # plain data parallelism over the same 4 devices: one group, the whole network (its 4-rank ring crosses it)
    alone = run(tiny, cm, strategy="data", batch=8, devices=4, devices_per_node=2, p_data=4)
    assert alone.comm_exposed_s["gradient"] == pytest.approx(
        ring_allreduce(4, PARAMS * 4, INTER) + PARAMS * 4 * 4 / 1e9)


def test_spatial_halo_and_gather(tiny, cm):
    n = 8
    pred = run(tiny, cm, strategy="spatial", batch=8, devices=2, p_spatial=2, spatial_split=(1, 2))
    assert pred.details["spatial_layers"] == 3  # conv1, relu1, conv2; flatten cannot be split
    # compute: conv1, relu1, conv2 on 8 x 4 blocks; fc replicated on all 8 samples
    fwd = (conv_flops(n, 2, 4, 8, 4) + n * 4 * 32 + conv_flops(n, 4, 4, 8, 4) + 2 * n * 2 * 256) / PEAK
    assert pred.compute_fwd_s == pytest.approx(fwd)
    # halo, W split in 2, width 1: forward rows of x = n*C*1*H*4 bytes per side; backward on dL/dy (not conv1)
    halo_fwd = p2p(2 * n * 2 * 1 * 8 * 4) + p2p(2 * n * 4 * 1 * 8 * 4)
    halo_bwd = p2p(2 * n * 4 * 1 * 8 * 4)
    assert pred.details["halo_fwd_s"] == pytest.approx(halo_fwd)
    assert pred.details["halo_bwd_s"] == pytest.approx(halo_bwd)
    assert pred.comm_exposed_s["halo"] == pytest.approx(halo_fwd + halo_bwd)
    assert pred.comm_exposed_s["layer_collective"] == pytest.approx(ring_gather(2, n * 256 * 4))
    # activations: input and relu1 out halved; conv2 out saved by fc gathered (full)
    assert pred.activations_bytes == pytest.approx(n * (128 / 2 + 256 / 2 + 256) * 4)


@pytest.fixture(scope="module")
def bn_net(tmp_path_factory) -> ModelGraph:
    """conv (C = 4) -> batch norm -> linear: the smallest net with module buffers and synced BN stats."""
    path = tmp_path_factory.mktemp("spec") / "bn.yaml"
    path.write_text("input: [2, 8, 8]\nlayers:\n"
                    "  - {name: conv1, op: conv2d, filters: 4, kernel: 3, padding: 1, bias: false}\n"
                    "  - {name: bn1, op: batchnorm}\n"
                    "  - {name: flat, op: flatten}\n"
                    "  - {name: fc, op: linear, out: 2, bias: false}\n")
    return load_layer_spec(path)


def test_spatial_batch_norm_is_synchronised_over_the_group(bn_net, cm):
    pred = run(bn_net, cm, strategy="spatial", batch=8, devices=2, p_spatial=2, spatial_split=(1, 2))
    # bn1 (C = 4) is in the spatial region: one allreduce of (2C + 1) fp32 stats forward, one backward
    sync = 2 * ring_allreduce(2, (2 * 4 + 1) * 4)
    assert pred.details["batch_norm_sync_s"] == pytest.approx(sync)
    assert pred.comm_exposed_s["layer_collective"] == pytest.approx(ring_gather(2, 8 * 256 * 4) + sync)


def test_data_parallel_costs_ddp_buffer_sync_only_with_batch_norm(bn_net, tiny, cm):
    pred = run(bn_net, cm, strategy="data", batch=8, devices=2, p_data=2)
    # broadcast of bn1's running mean and var (2 x 4 fp32) + its step counter; no rank agreement (DDP's
    # _find_common_rank allreduce runs only under join())
    sync = p2p(2 * 4 * 4) + p2p(8)
    assert pred.details["ddp_buffer_sync_s"] == pytest.approx(sync)
    assert pred.comm_exposed_s["layer_collective"] == pytest.approx(sync)
    assert run(tiny, cm, strategy="data", batch=8, devices=2, p_data=2).details["ddp_buffer_sync_s"] == 0.0


def test_batch_norm_groups_sync_statistics_over_each_group_of_replicas(bn_net, tiny, cm):
    """Plan.bn_group: every batch-norm layer all-reduces its 2 C + 1 statistics over the group forward and backward,
    exposed, on top of DDP's buffer broadcast; inside a node of 4 a group of 2 or 4 crosses no node, 8 spans two."""
    plain = run(bn_net, cm, strategy="data", batch=16, devices=8, p_data=8)
    for group, nodes_bw in ((2, INTRA), (4, INTRA)):
        pred = run(bn_net, cm, strategy="data", batch=16, devices=8, p_data=8, bn_group=group)
        sync = 2 * ring_allreduce(group, (2 * 4 + 1) * 4, nodes_bw)
        assert pred.details["batch_norm_sync_s"] == pytest.approx(sync)
        assert pred.comm_exposed_s["layer_collective"] == pytest.approx(plain.comm_exposed_s["layer_collective"] + sync)
        assert pred.iteration_s == pytest.approx(plain.iteration_s + sync)
        assert pred.plan.describe().startswith(f"d8/bn{group}")
    wide = run(bn_net, cm, strategy="data", batch=16, devices=8, p_data=8, bn_group=8)
    assert wide.details["batch_norm_sync_s"] > 2 * ring_allreduce(8, (2 * 4 + 1) * 4)  # across the two nodes
    assert run(tiny, cm, strategy="data", batch=16, devices=8, p_data=8, bn_group=2).details["batch_norm_sync_s"] == 0.0
    for bad in (dict(strategy="data", p_data=8, bn_group=3), dict(strategy="serial", devices=1, batch=2, bn_group=2),
                dict(strategy="spatial", p_spatial=8, spatial_split=(2, 4), bn_group=2)):
        kw = {"batch": 16, "devices": 8, "devices_per_node": 4, **bad}
        pred = evaluate(Context(bn_net, cm), Plan(**kw))
        assert not pred.feasible and "batch-norm groups" in pred.reason


def test_halo_volume_matches_kernel_geometry(tmp_path):
    path = tmp_path / "k5.yaml"
    path.write_text("input: [3, 16, 16]\nlayers:\n"
                    "  - {name: c5, op: conv2d, filters: 6, kernel: 5, padding: 2}\n"
                    "  - {name: c3s2, op: conv2d, filters: 6, kernel: 3, stride: 2, padding: 1}\n"
                    "  - {name: valid, op: conv2d, filters: 6, kernel: 3, padding: 0}\n")
    ctx = Context(load_layer_spec(path), SyntheticCostModel())
    # 5x5 'same': 2 rows/cols per side; split H by 2, W by 4 -> local 8 x 4; first layer: no backward halo
    assert halo_bytes(ctx, 0, 1, (2, 4), 4) == [(2, 3 * 2 * 4 * 4, 0.0), (4, 3 * 2 * 8 * 4, 0.0)]
    # 3x3 stride 2: 1 input row forward; backward dL/dy rows = ceil(1/2) = 1 on the 4 x 2 local output
    assert halo_bytes(ctx, 1, 1, (2, 4), 4) == [(2, 6 * 1 * 4 * 4, 6 * 1 * 2 * 4), (4, 6 * 1 * 8 * 4, 6 * 1 * 4 * 4)]
    # 3x3 'valid': k - stride = 2 rows from the neighbour
    assert halo_bytes(ctx, 2, 1, (2, 1), 4)[0][1] == 6 * 2 * 8 * 4


def test_filter_and_channel_use_different_collectives(tiny, cm):
    n = 8
    filt = run(tiny, cm, strategy="filter", batch=8, devices=2, p_filter=2)
    # filter: allgather of conv2's input (relu1 out) and fc's input (conv2 out) forward + the loss input;
    # reduce-scatter of the same two input gradients backward
    gathers = 2 * ring_gather(2, n * 256 * 4) + ring_gather(2, n * 2 * 4)
    scatters = 2 * ring_gather(2, n * 256 * 4)
    assert filt.details["allgather_s"] == pytest.approx(gathers)
    assert filt.details["reduce_scatter_s"] == pytest.approx(scatters)
    # layout copies (1 GB/s): per gathered tensor S into the channel layout after the gather, dL/dx into chunks
    # before the reduce-scatter and the chunk back (2S + 2S + 2S/p bytes), and the gathered logits (2S)
    copies = (2 * (2 + 2 + 1) * n * 256 * 4 + 2 * n * 2 * 4) / 1e9
    assert filt.details["layout_copy_s"] == pytest.approx(copies)
    assert filt.comm_exposed_s["layer_collective"] == pytest.approx(gathers + scatters + copies)
    assert filt.weights_bytes == PARAMS * 4 / 2  # weights / p, not / p^2 (ParaDL's bug)
    fwd = (conv_flops(n, 2, 2, 8, 8) + n * 2 * 64 + conv_flops(n, 4, 2, 8, 8) + 2 * n * 1 * 256) / PEAK
    assert filt.compute_fwd_s == pytest.approx(fwd)

    chan = run(tiny, cm, strategy="channel", batch=8, devices=2, p_channel=2)
    # channel: conv1 (reads the 2-channel input) unsplit; conv2 and fc split by input channels:
    # allreduce of their partial outputs forward, allgather of dL/dy backward
    reduces = ring_allreduce(2, n * 256 * 4) + ring_allreduce(2, n * 2 * 4)
    gathers_c = ring_gather(2, n * 256 * 4) + ring_gather(2, n * 2 * 4)
    assert chan.details["allreduce_s"] == pytest.approx(reduces)
    assert chan.details["allgather_s"] == pytest.approx(gathers_c)
    # conv2's partial output into the allreduce buffer, its slice out, the gathered dL/dy back (2S + 2S/p + 2S);
    # the logits' buffer only (2S)
    copies_c = ((2 + 1 + 2) * n * 256 * 4 + 2 * n * 2 * 4) / 1e9
    assert chan.details["layout_copy_s"] == pytest.approx(copies_c)
    assert chan.comm_exposed_s["layer_collective"] == pytest.approx(reduces + gathers_c + copies_c)
    fwd_c = (conv_flops(n, 2, 4, 8, 8) + n * 256 + conv_flops(n, 2, 4, 8, 8) + 2 * n * 2 * 128) / PEAK
    assert chan.compute_fwd_s == pytest.approx(fwd_c)
    assert chan.weights_bytes == (72 + (144 + 512) / 2) * 4
    assert chan.comm_exposed_s["layer_collective"] != pytest.approx(filt.comm_exposed_s["layer_collective"])
    # conv1 runs whole on both devices, each keeping its own 2 filters: its 72 fp32 weight gradients are partial
    # and allreduced over the pair after backward; filter parallelism exchanges no gradient
    assert chan.details["head_gradient_allreduce_s"] == pytest.approx(ring_allreduce(2, 72 * 4))
    assert chan.comm_exposed_s["gradient"] == pytest.approx(ring_allreduce(2, 72 * 4))
    assert filt.comm_exposed_s.get("gradient", 0.0) == 0.0


def test_pipeline_matches_gpipe_bubble(tiny, cm):
    m = 4  # B = 8, S = 2 micro-batches
    layer = {  # (fwd, bwd) FLOPs per micro-batch
        "conv1": (conv_flops(m, 2, 4, 8, 8), conv_flops(m, 2, 4, 8, 8)),
        "relu1": (m * 256, m * 256),
        "conv2": (conv_flops(m, 4, 4, 8, 8), 2 * conv_flops(m, 4, 4, 8, 8)),
        "fc": (2 * m * 2 * 256, 4 * m * 2 * 256),
    }
    # the balanced cut: [conv1, relu1] | [conv2, flatten, fc]
    f1, b1 = (layer["conv1"][0] + layer["relu1"][0]) / PEAK, (layer["conv1"][1] + layer["relu1"][1]) / PEAK
    f2, b2 = (layer["conv2"][0] + layer["fc"][0]) / PEAK, (layer["conv2"][1] + layer["fc"][1]) / PEAK
    F, B = max(f1, f2), max(b1, b2)
    S, K = 2, 2
    pred = run(tiny, cm, strategy="pipeline", batch=8, devices=2, stages=2, micro_batches=2)
    assert pred.details["stage_bounds"] == [(0, 2), (2, 5)]
    # GPipe as a flow shop of S identical micro-batches: every stage once, then S - 1 more of the slowest,
    # forward and backward; the balanced (S + K - 1)(F + B) only bounds it from above
    assert pred.compute_fwd_s + pred.compute_bwd_s + pred.bubble_s == pytest.approx(
        (f1 + f2 + (S - 1) * F) + (b1 + b2 + (S - 1) * B))
    assert pred.bubble_s == pytest.approx(f1 + f2 + b1 + b2 - F - B) and pred.bubble_s <= (K - 1) * (F + B)
    assert pred.comm_exposed_s["pipeline_p2p"] == pytest.approx(2 * (S + K - 2) * p2p(m * 256 * 4))
    assert pred.update_s == pytest.approx((144 + 512) * 12 / 1e9)
    # memory of the busier stage 2: saved relu1 out (received) + conv2 out for all S micro-batches (= 8
    # samples), its 656 parameters, send/receive buffers of the boundary, activation-gradient workspace
    assert pred.details["memory_stage"] == 1
    assert pred.weights_bytes == 656 * 4
    assert pred.activations_bytes == 8 * (256 + 256) * 4
    assert pred.comm_buffers_bytes == 2 * m * 256 * 4
    assert pred.workspace_bytes == 2 * m * 256 * 4
    recompute = run(tiny, cm, strategy="pipeline", batch=8, devices=2, stages=2, micro_batches=2, recompute=True)
    assert recompute.recompute_s == pytest.approx(f1 + f2 + (S - 1) * F)  # one more forward phase


def test_partition_minimises_the_slowest_stage():
    assert partition([1, 1, 1, 1, 4], 2) == [0, 4]
    costs = [5, 1, 1, 1, 1, 1]
    starts = partition(costs, 3)
    parts = [costs[a:z] for a, z in zip(starts, starts[1:] + [len(costs)])]
    assert len(parts) == 3 and all(parts) and max(map(sum, parts)) == 5
    assert partition([3, 1, 2, 2, 1, 3], 3) == [0, 2, 4]


def test_spatial_then_data_redistributes(tiny, cm):
    pred = run(tiny, cm, strategy="spatial-then-data", batch=8, devices=2, p_spatial=2, spatial_split=(1, 2))
    n = 8
    assert pred.comm_exposed_s["redistribute"] == pytest.approx(2 * ring_gather(2, n * 256 * 4 / 2))
    # fc runs data parallel on n / 2 samples instead of replicated on n
    fwd = (conv_flops(n, 2, 4, 8, 4) + n * 4 * 32 + conv_flops(n, 4, 4, 8, 4) + 2 * (n // 2) * 2 * 256) / PEAK
    assert pred.compute_fwd_s == pytest.approx(fwd)


@pytest.mark.parametrize("kw, reason", [
    (dict(strategy="data", batch=6, devices=4, p_data=4), "not divisible"),
    (dict(strategy="filter", batch=8, devices=4, p_filter=4), "filters"),
    (dict(strategy="channel", batch=8, devices=8, p_channel=8), "input channels"),
    (dict(strategy="spatial", batch=8, devices=16, p_spatial=16, spatial_split=(1, 16)), "cannot be split"),
    (dict(strategy="pipeline", batch=8, devices=6, stages=6), "stages"),
    (dict(strategy="pipeline", batch=8, devices=2, stages=2, micro_batches=3), "micro-batches"),
    (dict(strategy="data", batch=8, devices=4, p_data=2), "!="),
])
def test_limits_are_infeasible_not_crashes(tiny, cm, kw, reason):
    pred = evaluate(Context(tiny, cm), Plan(devices_per_node=4, **kw))
    assert not pred.feasible and pred.reason.startswith("infeasible:") and reason in pred.reason
    assert math.isinf(pred.iteration_s)


def test_out_of_memory_flag_and_largest_batch(tiny, cm):
    small = SyntheticCostModel(peak_flops_per_s=PEAK, launch_s=0.0, device_memory_bytes=40_000)
    pred = evaluate(Context(tiny, small), Plan("serial", batch=16, devices=1, devices_per_node=4))
    per_sample = (640 + 258) * 4  # saved tensors + backward-peak workspace
    assert pred.memory_bytes == PARAMS * 8 + 16 * per_sample
    assert not pred.fits and pred.bottleneck == "memory capacity"
    assert pred.max_batch_fits == (40_000 - PARAMS * 8) // per_sample


@pytest.mark.parametrize("kw", [
    dict(strategy="data", batch=8, devices=2, p_data=2, bucket_bytes=2048),
    dict(strategy="spatial", batch=8, devices=2, p_spatial=2, spatial_split=(1, 2)),
    dict(strategy="pipeline", batch=8, devices=2, stages=2, micro_batches=2),
])
def test_chrome_trace_spans_the_predicted_iteration(tiny, cm, kw):
    from predictor.report import chrome_trace

    pred = run(tiny, cm, **kw)
    spans = [e for e in chrome_trace(pred)["traceEvents"] if e["ph"] == "X"]
    assert min(e["ts"] for e in spans) == 0
    assert max(e["ts"] + e["dur"] for e in spans) == pytest.approx(pred.iteration_s * 1e6)


def test_update_pays_the_optimizers_fixed_and_per_tensor_cost(tiny):
    """Weight update = streaming bytes / bandwidth + the optimizer's framework cost: a fixed part per step and
    a part per parameter tensor (the tiny net: conv1 and conv2 weights, no biases, fc weight = 3 tensors)."""
    from dataclasses import replace

    from predictor.strategies.context import param_tensor_count

    base = SyntheticCostModel(peak_flops_per_s=PEAK, launch_s=0.0, memory_bytes_per_s=1e9, device_memory_bytes=1e9)
    with_optimizer = replace(base, optimizer_step_s=50e-6, optimizer_per_tensor_s=3e-6)
    tensors = sum(param_tensor_count(layer) for layer in tiny.layers)
    assert tensors == 3
    plain = run(tiny, base, strategy="serial", batch=8, devices=1)
    paid = run(tiny, with_optimizer, strategy="serial", batch=8, devices=1)
    assert paid.update_s - plain.update_s == pytest.approx(50e-6 + 3 * 3e-6)
    stages = run(tiny, with_optimizer, strategy="pipeline", batch=8, devices=2, stages=2, micro_batches=2)
    assert stages.update_s < paid.update_s  # each stage steps over its own tensors only


def test_gradients_of_a_tensor_read_twice_are_summed_in_backward(cm):
    """A residual block's input is read by the block and by its shortcut: backward adds the two gradients, one
    element-wise pass reading two tensors and writing one (the engine's add that the op audit sees)."""
    from predictor.api import load_model
    from predictor.layercost import LayerCoster, Split, fanout, gradient_sum_bytes

    graph = load_model("resnet", blocks=[1, 1, 1, 1], width=4, image=16, num_classes=3)
    readers = fanout(graph)
    twice = [i for i, r in enumerate(readers) if r == 2]
    assert len(twice) == 4 and max(readers) == 2  # each block's input: its first conv and its shortcut
    layer = graph.layers[twice[0]]
    assert gradient_sum_bytes(layer, Split(8), 4, 2) == 3 * 8 * layer.output_elems * 4
    assert gradient_sum_bytes(layer, Split(8), 4, 1) == 0.0
    with_sum = LayerCoster(graph, cm, "fp32").times(twice[0], Split(8))[1]
    coster = LayerCoster(graph, cm, "fp32")
    coster.readers = [1] * len(readers)
    without = coster.times(twice[0], Split(8))[1]
    assert with_sum - without == pytest.approx(3 * 8 * layer.output_elems * 4 / 1e9)
