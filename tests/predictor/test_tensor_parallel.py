"""Tensor parallelism (predictor.strategies.tensor) against the Megatron-LM papers' counts: per MLP block one
all-reduce of b·s·h elements in forward and one in backward, per transformer layer two and two (Shoeybi et al.
2019 §3, Fig. 4); with sequence parallelism each all-reduce a reduce-scatter + all-gather (Korthikanti et al. 2022
§4.2.2); weights and activations per device; tp = 1 equals serial; the pairs found in a graph."""
from __future__ import annotations

import math

import pytest

from predictor.api import load_model, predict, predict_all
from predictor.graph import Layer, ModelGraph
from predictor.plan import Plan
from predictor.strategies.tensor import tensor_split
from predictor.synthetic import SyntheticCostModel

H, N = 64, 8  # hidden size, samples per iteration
FP32 = 4


def _graph(name: str, items: list[tuple]) -> ModelGraph:
    """items: (name, op, out features or None = same, inputs or None = the previous layer)."""
    shapes, layers, previous = {"": (H,)}, [], ""
    for lname, op, out, inputs in items:
        inputs = tuple(inputs) if inputs else (previous,)
        x = shapes[inputs[0]]
        y = (out,) if out else x
        weight = (out, x[0]) if op == "linear" else ()
        params = out * x[0] + out if op == "linear" else 0
        flop = 2.0 * params if op == "linear" else float(y[0])
        layers.append(Layer(lname, op, x, y, weight, params, flops_fwd=flop, flops_bwd_data=flop,
                            flops_bwd_weight=flop if params else 0.0, inputs=inputs))
        shapes[lname], previous = y, lname
    return ModelGraph(name, (H,), tuple(layers))


def mlp_block(prefix: str = "", first_input: str | None = None) -> list[tuple]:
    """Linear h -> 4h, ReLU, Linear 4h -> h, residual add (Megatron's MLP block)."""
    return [(f"{prefix}fc1", "linear", 4 * H, [first_input] if first_input is not None else None),
            (f"{prefix}act", "relu", None, None), (f"{prefix}fc2", "linear", H, None),
            (f"{prefix}res", "add", None, [f"{prefix}fc2", first_input or ""])]


def transformer_layer(prefix: str, x: str) -> list[tuple]:
    """A transformer layer with a stand-in attention core (dropout over the QKV features: the heads' score and
    context products are not graph ops yet): LN, QKV h -> 3h, core, out-projection 3h -> h, residual add, LN,
    MLP block."""
    return [(f"{prefix}ln1", "layernorm", None, [x]), (f"{prefix}qkv", "linear", 3 * H, None),
            (f"{prefix}core", "dropout", None, None), (f"{prefix}proj", "linear", H, None),
            (f"{prefix}res1", "add", None, [f"{prefix}proj", x]), (f"{prefix}ln2", "layernorm", None, None),
            (f"{prefix}fc1", "linear", 4 * H, None), (f"{prefix}act", "relu", None, None),
            (f"{prefix}fc2", "linear", H, None), (f"{prefix}res2", "add", None, [f"{prefix}fc2", f"{prefix}res1"])]


class Recording(SyntheticCostModel):
    """The synthetic machine, remembering every collective the strategy asks it to cost."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.calls: list[tuple[str, float, int]] = []

    def collective_time_s(self, op, size_bytes, group, nodes):
        self.calls.append((op, size_bytes, group))
        return super().collective_time_s(op, size_bytes, group, nodes)


def _tensor(graph, p, sp=False, cm=None, p_data=1, **kw):
    cm = cm or Recording()
    plan = Plan("data+tensor" if p_data > 1 else "tensor", batch=N, devices=p * p_data, devices_per_node=8,
                p_tensor=p, p_data=p_data, sequence_parallel=sp, **kw)
    pred = predict(graph, plan, cm, interval=False)
    return pred, cm


def _expected_s(cm, ops) -> float:
    return sum(cm.collective_time_s(op, size, g, 1) for op, size, g in ops)


BH = N * H * FP32  # b·s·h elements in bytes: one per-sample hidden vector of every sample


def test_mlp_block_one_allreduce_each_way():
    graph = _graph("mlp", [("emb", "linear", H, None)] + mlp_block(first_input="emb") + [("head", "linear", 10, None)])
    ts = tensor_split(graph)
    assert [graph.layers[i].name for i in ts.columns] == ["fc1"]
    assert [graph.layers[i].name for i in ts.rows] == ["fc2"]
    assert [graph.layers[i].name for i in ts.replicated_linears] == ["emb", "head"]
    pred, cm = _tensor(graph, 4)
    assert sorted(set(cm.calls)) == [("allreduce", BH, 4)]  # g: the row's output; f: dL/dx of fc1's input
    assert pred.details["tensor_fwd_collective_s"] == pytest.approx(_expected_s(cm, [("allreduce", BH, 4)]))
    assert pred.details["tensor_bwd_collective_s"] == pytest.approx(_expected_s(cm, [("allreduce", BH, 4)]))
    assert pred.comm_exposed_s["gradient"] == 0.0  # no gradient exchange inside the tensor group


def test_transformer_layer_two_allreduces_each_way():
    graph = _graph("gpt-ish", [("emb", "linear", H, None)] + transformer_layer("l0.", "emb")
                   + transformer_layer("l1.", "l0.res2") + [("head", "linear", 10, None)])
    pred, cm = _tensor(graph, 2)
    per_direction = [("allreduce", BH, 2)] * 4  # 2 per layer, 2 layers
    assert pred.details["tensor_fwd_collective_s"] == pytest.approx(_expected_s(cm, per_direction))
    assert pred.details["tensor_bwd_collective_s"] == pytest.approx(_expected_s(cm, per_direction))
    ts = tensor_split(graph)
    assert len(ts.columns) == len(ts.rows) == 4 and len(ts.column_inputs) == 4


def test_sequence_parallel_replaces_each_allreduce_by_reduce_scatter_and_allgather():
    graph = _graph("gpt-ish", [("emb", "linear", H, None)] + transformer_layer("l0.", "emb")
                   + transformer_layer("l1.", "l0.res2") + [("head", "linear", 10, None)])
    cm = Recording()
    pred, _ = _tensor(graph, 2, sp=True, cm=cm)
    rs, ag, ar = ("reduce_scatter", BH, 2), ("allgather", BH, 2), ("allreduce", BH, 2)
    # forward: every row reduce-scatters (4); the columns whose input is token-split all-gather it: layer 0's
    # attention reads ln1(emb), which is replicated (emb comes before any row), the other 3 columns all-gather;
    # the head all-gathers the last residual
    assert pred.details["tensor_fwd_collective_s"] == pytest.approx(_expected_s(cm, [rs] * 4 + [ag] * 3 + [ag]))
    # backward: every row all-gathers dL/dy (4); the 3 token-split column inputs reduce-scatter dL/dx, layer 0's
    # replicated one all-reduces it; emb's output, sliced into the first residual add, all-gathers its gradient;
    # the 3 columns reading a token-split input gather it again for their weight gradients
    assert pred.details["tensor_bwd_collective_s"] == pytest.approx(
        _expected_s(cm, [ag] * 4 + [rs] * 3 + [ar] + [ag] + [ag] * 3))
    plain, _ = _tensor(graph, 2)
    assert pred.activations_bytes < plain.activations_bytes  # layer norms' inputs split over tokens


def test_weights_and_activations_per_device():
    graph = _graph("mlp", [("emb", "linear", H, None)] + mlp_block(first_input="emb") + [("head", "linear", 10, None)])
    p = 4
    pred, _ = _tensor(graph, p)
    emb, head = H * H + H, 10 * H + 10
    fc1 = 4 * H * H + 4 * H  # column: weight and bias split
    fc2_weight, fc2_bias = 4 * H * H, H  # row: weight split, bias replicated (added after the all-reduce)
    local = emb + head + fc1 / p + fc2_weight / p + fc2_bias
    assert pred.details["params_per_device"] == pytest.approx(local)
    assert pred.weights_bytes == pytest.approx(FP32 * local)
    assert pred.grads_bytes == pytest.approx(FP32 * local)
    # saved for backward: emb's input (the model input, h), fc1's input (h, replicated, as in Megatron), the ReLU
    # output that fc2 also saves (4h / p), head's input (h)
    assert pred.activations_bytes == pytest.approx(N * FP32 * (H + H + 4 * H / p + H))


def test_one_rank_equals_serial():
    graph = _graph("gpt-ish", [("emb", "linear", H, None)] + transformer_layer("l0.", "emb") + [("head", "linear", 10, None)])
    cm = SyntheticCostModel()
    serial = predict(graph, Plan("serial", batch=N, devices=1, devices_per_node=8), cm, interval=False)
    for sp in (False, True):
        one, _ = _tensor(graph, 1, sp=sp, cm=cm)
        assert one.iteration_s == serial.iteration_s
        assert one.memory_bytes == serial.memory_bytes


def test_compute_shrinks_and_data_tensor_syncs_the_slices():
    graph = _graph("mlp", [("emb", "linear", H, None)] + mlp_block(first_input="emb") + [("head", "linear", 10, None)])
    t1, _ = _tensor(graph, 1)
    t4, _ = _tensor(graph, 4)
    assert t4.compute_fwd_s < t1.compute_fwd_s
    hybrid, cm = _tensor(graph, 2, p_data=2)
    assert hybrid.comm_exposed_s["gradient"] + hybrid.comm_hidden_s["gradient"] > 0
    local = _tensor(graph, 2)[0].details["params_per_device"]
    assert hybrid.details["params_per_device"] == pytest.approx(local)


def test_swiglu_two_columns_share_one_backward_allreduce():
    graph = _graph("swiglu", [("emb", "linear", H, None), ("gate", "linear", 4 * H, ["emb"]),
                              ("up", "linear", 4 * H, ["emb"]), ("act", "silu", None, ["gate"]),
                              ("prod", "mul", None, ["act", "up"]), ("down", "linear", H, None),
                              ("head", "linear", 10, None)])
    ts = tensor_split(graph)
    assert [graph.layers[i].name for i in ts.columns] == ["gate", "up"]
    pred, cm = _tensor(graph, 2)
    one = [("allreduce", BH, 2)]
    assert pred.details["tensor_fwd_collective_s"] == pytest.approx(_expected_s(cm, one))
    assert pred.details["tensor_bwd_collective_s"] == pytest.approx(_expected_s(cm, one))


def test_unpaired_linears_stay_replicated():
    # a column whose split output would reach a replicated operand (a residual with the unsplit input) is barred
    graph = _graph("odd", [("emb", "linear", H, None), ("fc", "linear", H, None), ("res", "add", None, ["fc", "emb"]),
                           ("head", "linear", 10, None)])
    ts = tensor_split(graph)
    assert ts.columns == ts.rows == () and ts.width_gcd == 0
    pred, _ = _tensor(graph, 2)
    assert not pred.feasible and "no linear -> linear pair" in pred.reason


def test_degree_must_divide_the_split_widths():
    graph = _graph("mlp", [("emb", "linear", H, None)] + mlp_block(first_input="emb") + [("head", "linear", 10, None)])
    pred, _ = _tensor(graph, 3)
    assert not pred.feasible and "p_tensor 3 does not divide the 256 features of layer fc1" in pred.reason


def test_cnns_have_no_pairs_and_vgg_its_classifier():
    assert tensor_split(load_model("resnet", width=4, image=32)).columns == ()
    vgg = load_model("vgg16", width=4, fc=64, image=32, num_classes=10)
    ts = tensor_split(vgg)
    assert len(ts.columns) == len(ts.rows) == 1 and len(ts.replicated_linears) == 1
    assert ts.width_gcd == 64 and math.gcd(ts.width_gcd, 4) == 4


def test_run_ranks_tensor_next_to_the_others():
    graph = _graph("mlp", [("emb", "linear", H, None)] + mlp_block(first_input="emb") + [("head", "linear", 10, None)])
    preds = predict_all(graph, N, 2, SyntheticCostModel(), strategies=("data", "tensor", "data+tensor"),
                        interval=False)
    by_name = {p.plan.strategy: p for p in preds}
    assert by_name["tensor"].feasible and by_name["tensor"].plan.p_tensor == 2


@pytest.mark.parametrize("attention", ["sdpa", "math", "fused-softmax"])
def test_gpt_two_allreduces_each_way_per_layer(attention):
    """The zoo's GPT (traced): QKV and the MLP's first linear column-parallel, the attention core split by heads,
    the output projection and the MLP's second linear row-parallel; the tied LM head replicated."""
    from predictor.api import load_cost_model
    layers, seq, hidden, heads, b, p = 3, 32, 64, 4, 8, 4
    graph = load_model("gpt", layers=layers, seq=seq, hidden=hidden, heads=heads, attention=attention)
    ts = tensor_split(graph)
    names = [graph.layers[i].name for i in ts.columns + ts.rows]
    assert sorted(names) == sorted(f"blocks.{k}.{m}" for k in range(layers)
                                   for m in ("attn.qkv", "attn.proj", "mlp.fc", "mlp.fc2"))
    assert [graph.layers[i].name for i in ts.replicated_linears] == ["head"]
    assert ts.width_gcd == heads
    cm, _ = load_cost_model(None)
    plan = Plan("tensor", batch=b, devices=p, devices_per_node=8, p_tensor=p)
    pred = predict(graph, plan, cm, interval=False)
    bsh = b * seq * hidden * FP32
    one_way = 2 * layers * cm.collective_time_s("allreduce", bsh, p, 1)
    assert pred.details["tensor_fwd_collective_s"] == pytest.approx(one_way)
    assert pred.details["tensor_bwd_collective_s"] == pytest.approx(one_way)
    serial = predict(graph, Plan("serial", batch=b, devices=1, devices_per_node=8), cm, interval=False)
    one = predict(graph, Plan("tensor", batch=b, devices=1, devices_per_node=8), cm, interval=False)
    assert (one.iteration_s, one.memory_bytes) == (serial.iteration_s, serial.memory_bytes)
    # per layer 12h^2 + 13h parameters: QKV (3h^2 + 3h) and fc (4h^2 + 4h) split with their biases, proj and fc2
    # weights (h^2, 4h^2) split and their biases (2h) whole, the two layer norms (4h) whole; embeddings
    # (vocab + seq) h (the head is tied to the token embedding) and the final norm (2h) whole
    h, vocab = hidden, 512
    per_layer = (12 * h * h + 7 * h) / p + 2 * h + 4 * h
    assert pred.details["params_per_device"] == pytest.approx(layers * per_layer + (vocab + seq) * h + 2 * h)
    assert serial.details["params_per_device"] == layers * (12 * h * h + 13 * h) + (vocab + seq) * h + 2 * h
    # saved activations: A_replicated + A_split / p (the split part halves from p = 2 to 4)
    act = {q: predict(graph, Plan("tensor", batch=b, devices=q, devices_per_node=8, p_tensor=q), cm,
                      interval=False).activations_bytes for q in (1, 2, 4)}
    assert act[1] - act[2] == pytest.approx(2 * (act[2] - act[4])) and act[2] > act[4]
    eight = predict(graph, Plan("tensor", batch=b, devices=8, devices_per_node=8, p_tensor=8), cm, interval=False)
    assert not eight.feasible and f"does not divide the {heads} heads" in eight.reason


def test_cli_runs_tensor_and_names_a_bad_degree(capsys):
    from predictor.cli import main
    assert main(["run", "--model", "gpt", "--batch", "8", "--gpus", "2", "--strategy", "tensor",
                 "--sequence-parallel", "--json"]) == 0
    import json
    pred = json.loads(capsys.readouterr().out)["predictions"][0]
    assert pred["feasible"] and pred["plan"]["p_tensor"] == 2 and pred["plan"]["sequence_parallel"]
    assert pred["details"]["replicated_linears"] == ["head"]
    assert main(["run", "--model", "gpt", "--batch", "8", "--gpus", "3", "--strategy", "tensor"]) == 2
    err = capsys.readouterr().err.strip()
    assert "p_tensor 3 does not divide" in err and len(err.splitlines()) == 1


def test_cli_sets_the_3d_degrees_and_names_a_layout_that_does_not_divide(capsys):
    """--tensor-parallel T --pipeline-stages P on G devices: G / (T P) data replicas; a layout that does not
    divide the devices is one line, exit 2. 8 layers: the default 8 stages each hold one (Megatron's chunks)."""
    from predictor.cli import main
    import json

    args = ["run", "--model", "gpt", "--model-arg", "layers=8", "--batch", "16", "--profile", "a100-dgx-8gpu.published",
            "--strategy", "data+tensor+pipeline", "--gpus", "16"]
    assert main(args + ["--tensor-parallel", "4", "--pipeline-stages", "2", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)["predictions"][0]["plan"]
    assert (plan["p_tensor"], plan["stages"], plan["p_data"], plan["schedule"]) == (4, 2, 2, "1f1b")
    assert main(args + ["--tensor-parallel", "2", "--json"]) == 0  # default stages: every other device
    plan = json.loads(capsys.readouterr().out)["predictions"][0]["plan"]
    assert (plan["p_tensor"], plan["stages"], plan["p_data"]) == (2, 8, 1)
    assert main(args + ["--tensor-parallel", "4", "--pipeline-stages", "3"]) == 2
    err = capsys.readouterr().err.strip()
    assert "tensor degree 4 x 3 pipeline stages does not divide 16 devices" in err and len(err.splitlines()) == 1


def test_cli_passes_the_pipeline_boundary_and_the_mixed_precision(capsys):
    """--pipeline-boundary partitioned costs less p2p across nodes than whole (16 MB boundaries: bandwidth-bound);
    --mixed-precision half halves the
    gradients each device keeps; a bad choice is one line, exit 2."""
    from predictor.cli import main
    import json

    args = ["run", "--model", "gpt", "--model-arg", "layers=4", "--model-arg", "heads=8", "--model-arg", "hidden=1024",
            "--model-arg", "seq=1024", "--micro-batches", "2", "--batch", "16",
            "--profile", "a100-40gb-4hdr-8gpu.published", "--strategy", "data+tensor+pipeline", "--gpus", "16",
            "--tensor-parallel", "8", "--pipeline-stages", "2", "--dtype", "fp16", "--optimizer", "adam", "--json"]
    out = {}
    for extra in ([], ["--pipeline-boundary", "partitioned"], ["--mixed-precision", "half"]):
        assert main(args + extra) == 0
        out[tuple(extra)] = json.loads(capsys.readouterr().out)["predictions"][0]
    whole, split, half = out[()], out[("--pipeline-boundary", "partitioned")], out[("--mixed-precision", "half")]
    assert split["plan"]["pipeline_boundary"] == "partitioned" and whole["plan"]["pipeline_boundary"] == "whole"
    assert split["comm_exposed_s"]["pipeline_p2p"] < whole["comm_exposed_s"]["pipeline_p2p"]
    assert half["plan"]["mixed_precision"] == "half" and half["grads_bytes"] == whole["grads_bytes"] / 2
    assert half["plan"]["schedule"] == split["plan"]["schedule"] == "1f1b"  # a non-default flag kept Megatron's
    assert main(args + ["--mixed-precision", "quarter"]) == 2
    assert "--mixed-precision" in capsys.readouterr().err


def test_cli_recompute_turns_on_megatrons_full_recomputation(capsys):
    """--recompute on data+tensor+pipeline: the transformer layers' forward runs again (recompute_s > 0) and fewer
    activations are kept; strategies without a pipeline ignore it."""
    from predictor.cli import main
    import json

    args = ["run", "--model", "gpt", "--model-arg", "layers=4", "--batch", "16", "--profile", "a100-dgx-8gpu.published",
            "--strategy", "data+tensor+pipeline", "--gpus", "8", "--tensor-parallel", "4", "--pipeline-stages", "2",
            "--micro-batches", "4", "--dtype", "bf16", "--optimizer", "adam", "--json"]
    assert main(args) == 0
    plain = json.loads(capsys.readouterr().out)["predictions"][0]
    assert main(args + ["--recompute"]) == 0
    again = json.loads(capsys.readouterr().out)["predictions"][0]
    assert not plain["plan"]["recompute"] and again["plan"]["recompute"] and again["plan"]["schedule"] == "1f1b"
    assert plain["recompute_s"] == 0 < again["recompute_s"]
    assert again["activations_bytes"] < plain["activations_bytes"]
    assert main(args + ["--recompute", "--recompute-granularity", "selective"]) == 0
    core = json.loads(capsys.readouterr().out)["predictions"][0]
    assert core["plan"]["recompute_granularity"] == "selective" and 0 < core["recompute_s"] < again["recompute_s"]
    data = ["run", "--model", "gpt", "--model-arg", "layers=4", "--batch", "16", "--strategy", "data", "--gpus", "2",
            "--json"]
    assert main(data + ["--recompute"]) == 0
    assert not json.loads(capsys.readouterr().out)["predictions"][0]["plan"]["recompute"]
    gpipe = ["run", "--model", "gpt", "--model-arg", "layers=4", "--batch", "16", "--strategy", "pipeline", "--gpus",
             "2", "--micro-batches", "4", "--json"]
    assert main(gpipe + ["--recompute"]) == 0
    assert json.loads(capsys.readouterr().out)["predictions"][0]["plan"]["recompute"]
