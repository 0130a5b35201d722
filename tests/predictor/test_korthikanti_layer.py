"""Megatron's own runs (issue 41 item 1): one transformer layer of Korthikanti et al.'s 22B model against their
Table 4, each new term by hand (the attention products' backward, sequence parallelism's re-gather, the fp16
optimizer's passes), and the corpus rows mapped the way Megatron ran them."""
from __future__ import annotations

import pytest

from predictor.api import load_cost_model, load_model
from predictor.layercost import HALF_OPTIMIZER_PASS_BYTES, LayerCoster, _pass_params, update_bytes
from predictor.plan import Plan
from predictor.published.rowmap import load_rules
from predictor.published.transformer import interpret_transformer, load_transformer_corpus
from predictor.strategies import evaluate
from predictor.strategies.context import Context
from tests.kernels_only import kernels_only  # kernels alone: the host floor is tested apart

PROFILE = "a100-80gb-dgx-8gpu.published"
#: Korthikanti et al. 2022, Table 4: forward and backward ms of one layer of the 22B model (t = 8, micro-batch 4)
TABLE4 = {(False, False, "full"): (7.7, 11.9), (True, False, "full"): (7.2, 11.8), (False, True, "full"): (7.7, 19.5),
          (False, True, "selective"): (7.7, 13.2), (True, True, "selective"): (7.2, 13.1)}


@pytest.fixture(scope="module")
def cost_model():
    return kernels_only(load_cost_model(PROFILE)[0])


def _layer_ms(cm, sp: bool, recompute: bool, granularity: str) -> tuple[float, float]:
    """(forward, backward) ms of one 22B transformer layer: the 8-layer model's times less the 7-layer one's."""
    out = []
    for layers in (8, 7):
        graph = load_model("gpt", layers=layers, hidden=6144, heads=64, seq=2048, vocab=51200,
                           attention="fused-softmax", residual="bias-dropout-add")
        plan = Plan("data+tensor+pipeline", batch=4, devices=8, devices_per_node=8, p_data=1, p_tensor=8, stages=1,
                    micro_batches=1, dtype="fp16", optimizer="adam", schedule="1f1b", mixed_precision="half",
                    framework="no-overlap", sequence_parallel=sp, recompute=recompute,
                    recompute_granularity=granularity, stack="other")
        pred = evaluate(Context(graph, cm), plan, 80e9)
        out.append((pred.compute_fwd_s + pred.details["tensor_fwd_collective_s"],
                    pred.compute_bwd_s + pred.details["tensor_bwd_collective_s"] + pred.recompute_s))
    return tuple((a - b) * 1e3 for a, b in zip(*out))


@pytest.mark.parametrize("setting", list(TABLE4))
def test_one_22b_layer_against_table4(cost_model, setting):
    """Forward within 6% and forward + backward within 3% of each Table 4 row (the published A100 profile, nothing
    fitted to these figures)."""
    fwd, bwd = _layer_ms(cost_model, *setting)
    want_f, want_b = TABLE4[setting]
    assert fwd == pytest.approx(want_f, rel=0.06)
    assert fwd + bwd == pytest.approx(want_f + want_b, rel=0.03)


def test_sequence_parallel_backward_is_no_faster(cost_model):
    """Table 4: sequence parallelism saves 0.5 ms of the forward but 0.1 ms of the backward (the inputs gathered
    again for the weight gradients): within 0.3 ms here."""
    base = _layer_ms(cost_model, False, False, "full")
    sp = _layer_ms(cost_model, True, False, "full")
    assert base[0] - sp[0] > 0.3
    assert abs(base[1] - sp[1]) < 0.3


def test_attention_products_backward_is_two_products(cost_model):
    """BmmBackward0 of Q K^T and P V: dA = dC B^T and dB = A^T dC, the batched GEMM's bwd_data and bwd_weight."""
    graph = load_model("gpt", layers=1, hidden=256, heads=4, seq=128, vocab=1024, attention="fused-softmax")
    coster = LayerCoster(graph, cost_model, "fp16")
    from predictor.layercost import Split
    bmms = [i for i, layer in enumerate(graph.layers) if layer.op == "bmm"]
    assert len(bmms) == 2
    for i in bmms:
        op, params = _pass_params(graph.layers[i], Split(2))
        _, bwd = coster.times(i, Split(2))
        two = (cost_model.compute_time_s(op, "bwd_data", params, "float16")
               + cost_model.compute_time_s(op, "bwd_weight", params, "float16"))
        assert bwd == pytest.approx(two + cost_model.framework_overhead_s("bwd"))


def test_half_optimizer_passes():
    """Megatron's fp16 optimizer step, per parameter: fp16 grads to fp32 main grads (6 bytes), unscale and inf check
    (8), gradient norm (4), Adam on fp32 (28), main weights back to fp16 (6), zero the fp16 grads (2) = 54 bytes;
    autocast keeps 28 (a half gradient read, a half weight copy written beside Adam's fp32 words)."""
    assert HALF_OPTIMIZER_PASS_BYTES == 26
    assert update_bytes(1.0, "adam", "fp16", "half") == 54
    assert update_bytes(1.0, "adam", "fp16") == 28
    assert update_bytes(1.0, "adam", "fp32", "half") == 28  # no half copies in fp32


def test_megatron_rows_map_to_their_layouts():
    """Korthikanti's 175B seq+sel as Table 3 and §6 state it (interleaved 3, sequence parallel, selective), and
    Narayanan's 76B as run_table_1.sh runs it (5 layers per virtual stage of 15: 3 chunks, torch DDP)."""
    runs = {r.id: r for r in load_transformer_corpus()}
    rules = load_rules()
    k = dict(interpret_transformer(runs["korthikanti2022-175b-seq-sel"], rules).plan)
    assert (k["p_tensor"], k["stages"], k["p_data"], k["micro_batches"]) == (8, 8, 1, 64)
    assert (k["schedule"], k["virtual_stages"], k["sequence_parallel"]) == ("interleaved", 3, True)
    assert (k["recompute"], k["recompute_granularity"], k["pipeline_boundary"]) == (True, "selective", "partitioned")
    n_setup = interpret_transformer(runs["narayanan2021-76b-1024gpu"], rules)
    n = dict(n_setup.plan)
    assert (n["p_tensor"], n["stages"], n["p_data"], n["micro_batches"]) == (8, 4, 32, 28)
    assert (n["schedule"], n["virtual_stages"], n["recompute_granularity"]) == ("interleaved", 3, "full")
    assert n_setup.framework == "no-overlap" and n_setup.profile.startswith("a100-80gb-dgx-8gpu")
    assert interpret_transformer(runs["narayanan2021-1.7b-32gpu"], rules).framework == "ddp"  # DDP=torch


def test_narayanan_time_from_eq3():
    """1T on 3072 GPUs at 163 TFLOP/s: F = 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) / (163e12 x 3072)."""
    run = next(r for r in load_transformer_corpus() if r.id == "narayanan2021-1t-3072gpu")
    f = 96 * 3072 * 2048 * 128 * 25600 ** 2 * (1 + 2048 / (6 * 25600) + 51200 / (16 * 128 * 25600))
    assert run.measured_s == pytest.approx(f / (163e12 * 3072), rel=1e-4)


@pytest.mark.parametrize("where, key, value", [
    ("parallelism", "virtual_stages", 0), ("parallelism", "sequence_parallel", "yes"),
    ("parallelism", "pipeline_boundary", "scattered"), ("parallelism", "ddp_impl", "apex"),
    ("parallelism", "distributed_optimizer", 1), ("parallelism", "tp_comm_overlap", "on"),
    (None, "recompute_granularity", "attention")])
def test_a_malformed_layout_setting_is_one_line_exit_2(tmp_path, capsys, where, key, value):
    import yaml

    from predictor.cli import main
    from predictor.published.transformer import TRANSFORMER_FILE
    rec = next(r for r in yaml.load(TRANSFORMER_FILE.read_text(encoding="utf-8"), Loader=yaml.CSafeLoader)
               if r["id"] == "korthikanti2022-22b-seq-sel")
    (rec[where] if where else rec)[key] = value
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump([rec]), encoding="utf-8")
    assert main(["validate", "--published", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and key in err and rec["id"] in err


def test_a_half_precision_model_takes_no_autocast_stack_factor(cost_model):
    """The stacks' mixed factors were fitted to autocast CNN runs (PyTorch: x1.19 on the A100 profiles); a model
    held in fp16 (mixed_precision half) runs none of it, under any --stack; autocast keeps its factor."""
    from predictor.api import predict
    graph = load_model("gpt", layers=2, hidden=256, heads=4, seq=128, vocab=1024)
    base = dict(batch=8, devices=8, devices_per_node=8, p_data=2, p_tensor=2, stages=2, micro_batches=4, dtype="fp16",
                optimizer="adam", schedule="1f1b")

    def compute(**kw):
        pred = predict(graph, Plan("data+tensor+pipeline", **base, **kw), cost_model, interval=False)
        return pred.compute_fwd_s + pred.compute_bwd_s

    assert compute(mixed_precision="half", stack="pytorch") == pytest.approx(compute(mixed_precision="half",
                                                                                      stack="other"))
    factor = cost_model.stack_time_scale("pytorch", "float16")
    assert factor > 1.1
    ratio = compute(mixed_precision="autocast", stack="pytorch") / compute(mixed_precision="autocast", stack="other")
    assert ratio == pytest.approx(factor, rel=0.01)  # the fp16 kernels take it (framework overheads do not)


def test_megatrons_runs_are_reported_apart():
    """The transformer report carries Megatron's papers' rows apart, Calculon beside Table 5's eight, and the CLI
    prints them in a section of their own; every Table 5 row fits."""
    from predictor.published.command import transformer_report
    from predictor.published.megatron_papers import CALCULON_S, render_text
    runs = [r for r in load_transformer_corpus() if r.source == "korthikanti2022"]
    report = transformer_report(runs=runs, sources=["corpus"])
    papers = report["megatron_papers"]
    assert {r["id"] for r in papers["rows"]} == {r.id for r in runs}
    table5 = papers["table5"]
    assert table5["rows"] == len(CALCULON_S) == 8 and table5["does_not_fit"] == []
    assert 0.9 < table5["calculon_accuracy"]["mean"] < 1.0
    lines = render_text(report)
    assert lines[0].startswith("\nMegatron's own runs") and any("Table 5 (8 rows)" in line for line in lines)
