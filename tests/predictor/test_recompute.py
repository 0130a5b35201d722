"""Recompute (activation checkpointing) terms on hand-computed toy block lists."""
import pytest

from predictor.blocks import Block
from predictor.recompute import checkpoint_terms, per_block_segments, sequential_segments, sqrt_segment_count


def toy(n=4, fwd_s=1.0, act=10.0, inp=2.0):
    return [Block(f"b{i}", fwd_s=fwd_s, bwd_s=2 * fwd_s, activation_bytes=act, input_bytes=inp) for i in range(n)]


def test_sequential_segments_match_torch_checkpoint_sequential_layout():
    # checkpoint_sequential(10 functions, 3): chunks of 3; [0,3) and [3,6) checkpointed, 6..9 run normally
    assert sequential_segments(10, 3) == ((0, 3), (3, 6))
    assert sequential_segments(4, 1) == ()
    assert sequential_segments(2, 4) == ()
    assert sqrt_segment_count(16) == 4 and sqrt_segment_count(1) == 1


def test_no_segments_changes_nothing():
    terms = checkpoint_terms(toy(), ())
    assert terms.extra_fwd_s == 0 and terms.saved_bytes == 0 and terms.peak_activation_bytes == 40


def test_two_segments_closed_form():
    # [0,2) checkpointed: end of forward holds blocks 2,3 (20) + checkpoint (2) = 22;
    # rematerialising [0,2) holds its checkpoint (2) + its blocks (20) = 22; one extra forward of 2 blocks
    terms = checkpoint_terms(toy(), sequential_segments(4, 2))
    assert terms.extra_fwd_s == pytest.approx(2.0)
    assert terms.peak_activation_bytes == pytest.approx(22.0)
    assert terms.saved_bytes == pytest.approx(18.0)


def test_per_block_recompute_closed_form():
    # blocks 0,1,2 each checkpointed: end of forward = block 3 (10) + 3 checkpoints (6) = 16;
    # rematerialising block 2: checkpoints of 0,1 (4) + its own (2) + its activations (10) = 16
    terms = checkpoint_terms(toy(), per_block_segments([2, 0, 1]))
    assert terms.extra_fwd_s == pytest.approx(3.0)
    assert terms.peak_activation_bytes == pytest.approx(16.0)


def test_large_segment_peak_is_its_rematerialisation():
    blocks = toy(n=6)
    terms = checkpoint_terms(blocks, [(0, 5)])  # 50 bytes rematerialised + 2 checkpoint > 10 + 2 at end of fwd
    assert terms.peak_activation_bytes == pytest.approx(52.0)


def test_bad_segments_raise():
    with pytest.raises(ValueError):
        checkpoint_terms(toy(), [(0, 2), (1, 3)])
    with pytest.raises(ValueError):
        checkpoint_terms(toy(), [(2, 9)])


def test_chain_segments_skip_layers_without_a_module():
    from predictor.graph import Layer, ModelGraph
    from predictor.recompute import chain_segments
    ops = ["conv2d", "relu", "dropout", "conv2d", "relu", "linear", "softmax_loss"]
    graph = ModelGraph("chain", (1,), tuple(Layer(f"l{i}", op, (1,), (1,)) for i, op in enumerate(ops)))
    # chain = layers 0,1,3,4,5; two segments of 2 -> the first [0,1] checkpointed -> layers [0, 2)
    assert chain_segments(graph, 2) == ((0, 2),)
    # five segments of 1 -> the first four chain layers (0, 1, 3, 4), each its own segment
    assert chain_segments(graph, 5) == ((0, 1), (1, 2), (3, 4), (4, 5))


def test_recompute_strategy_closed_form_on_a_conv_chain():
    from predictor.api import predict
    from predictor.plan import Plan
    from tests.outofcore_toys import FlatCostModel, conv_chain_graph

    graph, cost = conv_chain_graph(), FlatCostModel(call_s=1e-3)
    serial = predict(graph, Plan("serial", batch=8, devices=1, devices_per_node=1), cost, interval=False)
    rc = predict(graph, Plan("serial+recompute", batch=8, devices=1, devices_per_node=1,
                             extra=(("checkpoint_segments", 2),)), cost, interval=False)
    # 10 chain layers, 2 segments of 5: conv0 relu0 conv1 relu1 conv2 are checkpointed; their forward (5 calls
    # of 1 ms x 8 samples) runs again
    assert rc.recompute_s == pytest.approx(5 * 8e-3)
    assert rc.iteration_s == pytest.approx(serial.iteration_s + 5 * 8e-3)
    # per sample (fp32): saved tensors are the input and each ReLU output, 2048 elems = 8192 B each -> 40960 B.
    # checkpointed: end of forward = relu2 + relu3 + checkpoint = 24576; rematerialising the segment =
    # checkpoint + conv0's saved input + relu0 + relu1 = 32768 (the model input counted twice: conservative)
    assert serial.activations_bytes == pytest.approx(8 * 40960)
    assert rc.activations_bytes == pytest.approx(8 * 32768)
    assert rc.details["checkpoint_segments"] == 2


def test_recompute_strategy_default_is_sqrt_segments_and_rejects_bad_counts():
    from predictor.api import predict
    from predictor.plan import Plan
    from tests.outofcore_toys import FlatCostModel, conv_chain_graph

    graph, cost = conv_chain_graph(), FlatCostModel()
    rc = predict(graph, Plan("data+recompute", batch=8, devices=2, devices_per_node=2, p_data=2), cost, interval=False)
    assert rc.details["checkpoint_segments"] == 3  # round(sqrt(10))
    bad = predict(graph, Plan("serial+recompute", batch=8, devices=1, devices_per_node=1,
                              extra=(("checkpoint_segments", 11),)), cost, interval=False)
    assert not bad.feasible and "checkpoint_segments 11" in bad.reason


def test_recompute_on_a_model_parallel_strategy_is_proportional():
    from predictor.api import predict
    from predictor.plan import Plan
    from tests.outofcore_toys import FlatCostModel, conv_chain_graph

    graph, cost = conv_chain_graph(), FlatCostModel(call_s=1e-3)
    base = dict(batch=8, devices=2, devices_per_node=2, p_filter=2)
    plain = predict(graph, Plan("filter", **base), cost, interval=False)
    rc = predict(graph, Plan("filter+recompute", extra=(("checkpoint_segments", 2),), **base), cost, interval=False)
    # unsplit: 9 forward kernels of equal cost, 5 checkpointed -> 5/9 of the forward again;
    # saved 8192 of 40960 bytes per sample (see the serial closed form above) -> activations x 0.8
    assert rc.recompute_s == pytest.approx(plain.compute_fwd_s * 5 / 9)
    assert rc.activations_bytes == pytest.approx(plain.activations_bytes * 0.8)
    assert rc.iteration_s == pytest.approx(plain.iteration_s + rc.recompute_s)
    assert rc.plan.strategy == "filter+recompute"
