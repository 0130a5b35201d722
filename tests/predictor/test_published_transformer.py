"""`predictor validate --published transformer`: loaders, row -> plan mapping, skipped rows, the data+tensor+pipeline
strategy's terms by hand, and the report's JSON schema."""
from __future__ import annotations

import copy
import dataclasses
import json
import math

import pytest
import yaml

from predictor.api import load_cost_model, load_model, predict
from predictor.plan import Plan
from predictor.published.command import transformer_report
from predictor.published.rowmap import Setup, Skipped, load_rules
from predictor.published.transformer import (TRANSFORMER_FILE, VTRAIN_COLUMNS, VTRAIN_FILE, VTRAIN_SINGLE_FILE,
                                              VTRAIN_SINGLE_SOURCE, interpret_transformer,
                                              lddl_phase2_mix, load_transformer_corpus, load_vtrain_csv,
                                              megatron_attention, parse_transformer_record)
from predictor.published.validate import Predictor
from predictor.layercost import Split
from predictor.strategies.context import Context
from predictor.strategies.hybrid3d import (attention_core, layout_nodes, megatron_partition, p2p_count, pipeline_terms,
                                           recomputed_layers, vocab_parallel)
from predictor.strategies.tensor import layer_split, tensor_split
from profiler.errors import UserError
from tests.kernels_only import kernels_only  # kernels alone: the host floor is tested apart

RULES = load_rules()


def _records():
    return yaml.load(TRANSFORMER_FILE.read_text(encoding="utf-8"), Loader=yaml.CSafeLoader)


def _by_id(runs, prefix):
    return next(r for r in runs if r.id.startswith(prefix))


def _one_line(err) -> str:
    text = str(err.value)
    assert "\n" not in text
    return text


# ---- loaders --------------------------------------------------------------------------------------------------
def test_malformed_yaml_record_is_a_one_line_error_naming_file_record_and_field(tmp_path):
    recs = _records()[:2]
    recs[1] = copy.deepcopy(recs[1])
    recs[1]["num_gpus"] = 0
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(recs), encoding="utf-8")
    with pytest.raises(UserError) as err:
        load_transformer_corpus(path)
    text = _one_line(err)
    assert str(path) in text and "record 1" in text and recs[1]["id"] in text and "num_gpus" in text
    recs[1]["num_gpus"] = 8
    recs[1]["parallelism"]["tensor"] = "two"
    path.write_text(yaml.safe_dump(recs), encoding="utf-8")
    with pytest.raises(UserError) as err:
        load_transformer_corpus(path)
    assert "parallelism.tensor" in _one_line(err)


def test_malformed_vtrain_rows_are_one_line_errors(tmp_path):
    lines = VTRAIN_FILE.read_text(encoding="utf-8-sig").splitlines()
    header, row = lines[0], lines[1].split(",")
    path = tmp_path / "v.csv"
    bad = list(row)
    bad[VTRAIN_COLUMNS.index("micro batch")] = "x"
    path.write_text("\n".join([header, ",".join(bad)]), encoding="utf-8")
    with pytest.raises(UserError) as err:
        load_vtrain_csv(path)
    text = _one_line(err)
    assert str(path) in text and "row 2" in text and "micro batch" in text
    bad = list(row)
    bad[VTRAIN_COLUMNS.index("# GPUs")] = str(int(row[VTRAIN_COLUMNS.index("# GPUs")]) * 2)
    path.write_text("\n".join([header, ",".join(bad)]), encoding="utf-8")
    with pytest.raises(UserError) as err:
        load_vtrain_csv(path)
    assert "# GPUs" in _one_line(err)
    path.write_text(header.replace("micro batch", "micro"), encoding="utf-8")
    with pytest.raises(UserError) as err:
        load_vtrain_csv(path)
    assert "micro batch" in _one_line(err)


def test_vtrain_single_node_file_reads_without_a_parameter_count(tmp_path):
    """vTrain's data/ground_truth_single.csv has every column but the parameter count: its 1440 rows read under their
    own source, ids naming layers and hidden size; a header missing another column is a one-line error."""
    runs = load_vtrain_csv(VTRAIN_SINGLE_FILE, source=VTRAIN_SINGLE_SOURCE)
    assert len(runs) == 1440 and {r.source for r in runs} == {VTRAIN_SINGLE_SOURCE}
    first = VTRAIN_SINGLE_FILE.read_text(encoding="utf-8-sig").splitlines()[1].split(",")
    col = dict(zip(VTRAIN_COLUMNS[1:], first))
    r = runs[0]
    assert r.id == (f"vtrain-single-r2-l{col['# layers']}h{col['hidden size']}-{col['# GPUs']}gpu-"
                    f"t{col['tensor parallelism']}d{col['data parallelism']}p{col['pipeline parallelism']}-"
                    f"mb{col['micro batch']}-gb{col['global batch']}")
    assert r.measured_s == pytest.approx(float(col["iteration time (ms)"]) / 1e3)
    assert r.url.endswith("data/ground_truth_single.csv") and max(x.num_gpus for x in runs) == 8
    path = tmp_path / "s.csv"
    header = VTRAIN_SINGLE_FILE.read_text(encoding="utf-8-sig").splitlines()[0]
    path.write_text(header.replace("# layers", "layers") + "\n" + ",".join(first) + "\n", encoding="utf-8")
    with pytest.raises(UserError) as err:
        load_vtrain_csv(path)
    assert "# layers" in _one_line(err) and str(path) in _one_line(err)


def test_vtrain_single_node_report_is_apart_from_the_transformer_rows():
    """`--published vtrain-single`: every single-node row predicted, none in the transformer report's rows."""
    from predictor.published.command import vtrain_single_report

    report = vtrain_single_report()
    assert report["rows_validated"] == 1440 and report["rows_skipped"] == 0
    assert set(report["by_source"]) == {VTRAIN_SINGLE_SOURCE}
    assert 0.0 < report["overall_accuracy"] < 1.0
    assert not any(r.source == VTRAIN_SINGLE_SOURCE for r in load_transformer_corpus() + load_vtrain_csv())


# ---- row -> plan ----------------------------------------------------------------------------------------------
def test_vtrain_row_maps_to_megatron_3d_plan():
    runs = load_vtrain_csv()
    cells = VTRAIN_FILE.read_text(encoding="utf-8-sig").splitlines()[1].split(",")
    col = dict(zip(VTRAIN_COLUMNS, cells))
    setup = interpret_transformer(runs[0], RULES)
    assert isinstance(setup, Setup)
    plan = dict(setup.plan)
    d, mb, gb = int(col["data parallelism"]), int(col["micro batch"]), int(col["global batch"])
    assert plan["strategy"] == "data+tensor+pipeline" and plan["schedule"] == "1f1b" and plan["recompute"]
    assert (plan["p_data"], plan["p_tensor"], plan["stages"]) == (
        d, int(col["tensor parallelism"]), int(col["pipeline parallelism"]))
    assert plan["micro_batches"] == gb // (d * mb) and plan["batch"] == gb and plan["devices"] == int(col["# GPUs"])
    knobs = dict(setup.knobs)
    assert (knobs["layers"], knobs["hidden"], knobs["heads"], knobs["seq"]) == (
        int(col["# layers"]), int(col["hidden size"]), int(col["attention heads"]), int(col["sequence length"]))
    assert setup.model == "gpt" and setup.dtype == "fp16" and setup.optimizer == "adam"
    # vTrain's config states 800 Gb/s of network per node: its own profile; Megatron-DeepSpeed runs DeepSpeed's
    # pipeline engine, which partitions the boundary tensor over the tensor group
    assert setup.profile == "a100-40gb-4hdr-8gpu.published.yaml" and setup.framework == "no-overlap"
    assert plan["pipeline_boundary"] == "partitioned"
    assert runs[0].measured_s == pytest.approx(float(col["iteration time (ms)"]) / 1e3)


def test_yaml_rows_of_each_source_map_by_hand():
    runs = load_transformer_corpus()
    recs = {r["id"]: r for r in _records()}

    run = _by_id(runs, "dlperf-megatron-")
    rec, setup = recs[run.id], interpret_transformer(run, RULES)
    par = rec["parallelism"]
    plan = dict(setup.plan)
    assert plan["strategy"] == "data+tensor+pipeline"
    assert (plan["p_data"], plan["p_tensor"], plan["stages"]) == (par["data"], par["tensor"], par["pipeline"])
    assert plan["micro_batches"] == rec["global_batch"] // (par["data"] * par["micro_batch"])
    assert plan["recompute"] == rec["activation_checkpointing"]
    assert setup.dtype == "fp16" and setup.profile == "v100-dgx1-1edr-8gpu.published.yaml"
    assert dict(setup.knobs)["vocab"] == rec["model_details"]["vocab"]
    assert plan["pipeline_boundary"] == "whole"  # Megatron-LM itself: no rule, the default
    assert setup.stack == "other"  # Megatron's fp16 module: not the CNN-fitted PyTorch (autocast) factor

    run = next(r for r in runs if r.id.startswith("llmfoundry-") and recs[r.id]["activation_checkpointing"]
               and recs[r.id]["parallelism"]["fsdp_sharding"] == "FULL_SHARD")
    rec, setup = recs[run.id], interpret_transformer(run, RULES)
    plan = dict(setup.plan)
    assert plan["strategy"] == "data+recompute" and plan["zero_stage"] == 3 and plan["p_data"] == rec["num_gpus"]
    assert plan["batch"] == rec["global_batch"] and dict(plan["extra"])["checkpoint_segments"] == \
        rec["model_details"]["layers"]
    assert setup.dtype == "bf16" and setup.profile.startswith(rec["system"]["gpu"][:4].lower())
    assert setup.stack == "pytorch"  # Composer under autocast
    assert run.measured_s == rec["derived"]["seconds_per_optimizer_step"]
    run = next(r for r in runs if r.id.startswith("llmfoundry-")
               and recs[r.id]["parallelism"]["fsdp_sharding"] == "SHARD_GRAD_OP")
    assert dict(interpret_transformer(run, RULES).plan)["zero_stage"] == 2

    run = _by_id(runs, "dle-pyt-bert_large-dgxa100-80-tf32")
    rec, setup = recs[run.id], interpret_transformer(run, RULES)
    plan = dict(setup.plan)
    assert (plan["strategy"], plan["p_data"], plan["batch"]) == ("data", rec["num_gpus"], rec["global_batch"])
    assert setup.model == "bert" and setup.dtype == "tf32" and setup.optimizer == "adam"  # LAMB: Adam's state
    assert setup.profile == "a100-80gb-dgx-8gpu.published.yaml"

    run = _by_id(runs, "dlperf-bert_base-ngc_tf1-fp32-1gpu")
    setup = interpret_transformer(run, RULES)
    assert dict(setup.plan)["strategy"] == "serial" and setup.stack == "tensorflow" and setup.dtype == "fp32"


def test_megatron_rows_run_the_fused_softmax_where_megatrons_kernel_runs():
    """FusedScaleMaskSoftmax.forward's condition (fp16/bf16, 16 < s <= 2048, s % 4, micro batch x heads per
    tensor rank % 4); the rest fall back to torch's softmax (math). BERT rows keep math, MPT rows sdpa."""
    assert megatron_attention("fp16", 2048, 64, 8, 2) == "fused-softmax"  # 2 x 8 = 16 attention batches
    assert megatron_attention("bf16", 1024, 12, 1, 1) == "fused-softmax"
    assert megatron_attention("fp16", 2048, 48, 16, 2) == "math"  # 2 x 3 = 6 is not a multiple of 4
    assert megatron_attention("fp16", 4096, 64, 8, 2) == "math"  # longer than the kernel takes
    assert megatron_attention("fp16", 16, 64, 8, 2) == "math"
    assert megatron_attention("fp16", 1022, 64, 8, 2) == "math"  # s % 4
    assert megatron_attention("fp32", 2048, 64, 8, 2) == "math"
    attention = {}
    for run in load_transformer_corpus() + load_vtrain_csv():
        setup = interpret_transformer(run, RULES)
        if isinstance(setup, Setup):
            attention.setdefault((run.source, setup.model), set()).add(dict(setup.knobs)["attention"])
    assert attention[("vtrain", "gpt")] == {"fused-softmax", "math"}  # r41: 48 heads over t = 16, micro batch 2
    assert attention[("dlperf", "gpt")] == {"fused-softmax"}
    assert attention[("dlperf", "bert")] == attention[("dle", "bert")] == {"math"}
    assert attention[("llmfoundry", "gpt")] == {"sdpa"}
    r41 = next(r for r in load_vtrain_csv() if r.id.startswith("vtrain-r41-"))
    assert dict(interpret_transformer(r41, RULES).knobs)["attention"] == "math"


def test_megatron_rows_fuse_bias_dropout_and_the_residual_add():
    """Every Megatron row (vTrain's Megatron-DeepSpeed, DLPerf's Megatron-LM) runs bias_dropout_add_fused_train
    (on by default, no dtype or shape condition); BERT (DLE's BertSelfOutput: dense, dropout, LayerNorm(x +
    input)) and MPT rows keep dropout and add apart."""
    residual = {}
    for run in load_transformer_corpus() + load_vtrain_csv():
        setup = interpret_transformer(run, RULES)
        if isinstance(setup, Setup):
            residual.setdefault((run.source, setup.model), set()).add(dict(setup.knobs).get("residual", "add"))
    assert residual[("vtrain", "gpt")] == residual[("dlperf", "gpt")] == {"bias-dropout-add"}
    assert residual[("dlperf", "bert")] == residual[("dle", "bert")] == residual[("llmfoundry", "gpt")] == {"add"}


def test_each_source_reads_its_logits_as_its_code_does():
    """Plan.cross_entropy per source (docs/decisions/2026-12-06-loss-precision.md): llm-foundry's MPT fused
    (flash-attn's CrossEntropyLoss), NVIDIA's PyTorch BERT in half precision (no autocast), TensorFlow, OneFlow and
    every Megatron row on a float32 copy; a fused loss moves the least, a float32 copy the most."""
    seen = {}
    for run in load_transformer_corpus() + load_vtrain_csv():
        setup = interpret_transformer(run, RULES)
        if isinstance(setup, Setup):
            stack = "pytorch" if "pytorch" in run.framework.lower() else run.framework.split()[0].lower()
            seen.setdefault((run.source, setup.model, stack), set()).add(dict(setup.plan).get("cross_entropy",
                                                                                               "float32"))
    assert seen[("llmfoundry", "gpt", "pytorch")] == {"fused"}
    assert seen[("dle", "bert", "pytorch")] == seen[("dlperf", "bert", "pytorch")] == {"half"}
    assert seen[("dlperf", "bert", "tensorflow")] == seen[("dlperf", "bert", "oneflow")] == {"float32"}
    assert {impl for (source, model, _), impls in seen.items() if model == "gpt" and source != "llmfoundry"
            for impl in impls} == {"float32"}  # Megatron's .float() copy
    graph = load_model("gpt", layers=1, hidden=64, heads=2, seq=32, vocab=1000)
    cm = kernels_only(load_cost_model("a100-dgx-8gpu.published")[0])
    times = [predict(graph, Plan(strategy="serial", batch=8, devices=1, devices_per_node=8, dtype="bf16",
                                 cross_entropy=impl), cm).iteration_s for impl in ("fused", "half", "float32")]
    assert times[0] < times[1] < times[2]
    bad = predict(graph, Plan(strategy="serial", batch=8, devices=1, devices_per_node=8, cross_entropy="fp8"), cm)
    assert not bad.feasible and "cross-entropy" in bad.reason


def test_each_bert_runs_as_its_code_is_written():
    """transformer_code (docs/decisions/2026-12-06-tensorflow-bert.md): TensorFlow 1's BERT gathers the 20 masked
    positions for its head, runs AMP as the graph rewrite, its primitives as kernels without XLA and its Adam as
    element-wise ops; OneFlow gathers too; NVIDIA's PyTorch BERT of NGC 20.03 runs its head on every token under the
    default autocast."""
    seen = {}
    for run in load_transformer_corpus():
        setup = interpret_transformer(run, RULES)
        if isinstance(setup, Setup) and run.source == "dlperf" and setup.model == "bert":
            knobs, plan = dict(setup.knobs), dict(setup.plan)
            key = ("xla" if "xla" in run.framework.lower() else run.framework.split()[0].lower(), setup.dtype)
            seen.setdefault(key, set()).add((knobs.get("ops", "torch"), knobs.get("mlm_positions", 0),
                                             plan.get("mixed_precision", "autocast"), setup.optimizer))
    assert seen[("tensorflow", "fp16")] == {("tf", 20, "graph-rewrite", "adamw-ops")}
    assert seen[("tensorflow", "fp32")] == {("tf", 20, "autocast", "adamw-ops")}  # fp32: no mixed precision to rewrite
    assert seen[("xla", "fp16")] == {("torch", 20, "graph-rewrite", "adamw-ops")}  # XLA fuses the primitives
    assert seen[("oneflow", "fp16")] == seen[("oneflow", "fp32")] == {("torch", 20, "autocast", "adam")}
    assert seen[("pytorch", "fp16")] == seen[("pytorch", "fp32")] == {("torch", 0, "autocast", "adam")}


def test_a_code_rule_must_name_known_choices(tmp_path):
    from predictor.published.rowmap import RULES_FILE

    for key, value in (("ops", "jax"), ("mlm_head", "some"), ("mixed_precision", "fp4"), ("optimizer", "lion")):
        data = yaml.safe_load(RULES_FILE.read_text())
        data["transformer_code"] = [{"match": "TensorFlow", key: value}]
        bad = tmp_path / "rules.yaml"
        bad.write_text(yaml.safe_dump(data))
        with pytest.raises(UserError, match=rf"rules\.yaml: section transformer_code\[0\]\.{key}: must be one of"):
            load_rules(bad)


def test_dle_phase2_rows_run_on_lddl_bins_of_the_wikipedia_histogram():
    """LDDL's 8 bins of 64 tokens, each at its upper length, in the shares of Graphcore's Wikipedia seq-512
    histogram (16,279,552 sequences, the total its packing README prints); only DLE's seq-512 rows use them."""
    mix = lddl_phase2_mix()
    assert [length for length, _ in mix] == [64, 128, 192, 256, 320, 384, 448, 512]
    assert sum(share for _, share in mix) == pytest.approx(1.0)
    assert mix[-1][1] == pytest.approx(4428329 / 16279552)  # 27.2% of the sequences in the 449-512 bin
    # by hand: 64 x (1x2863079 + 2x3150804 + 3x1855542 + 4x1349565 + 5x1050206 + 6x859509 + 7x722518
    # + 8x4428329) = 64 x 71021915 tokens over 16279552 sequences
    assert sum(length * share for length, share in mix) == pytest.approx(64 * 71021915 / 16279552)  # 279.2
    binned = {}
    for run in load_transformer_corpus():
        setup = interpret_transformer(run, RULES)
        if isinstance(setup, Setup) and setup.model == "bert":
            binned.setdefault((run.source, dict(setup.knobs)["seq"]), set()).add(setup.seq_mix)
    assert binned[("dle", 512)] == {mix}
    assert binned[("dle", 128)] == binned[("dlperf", 128)] == {()}


def test_a_binned_row_is_the_share_weighted_mean_of_the_step_at_each_length():
    """E[step] = sum_k w_k T(L_k): a quarter of the micro-steps at 128 tokens and three quarters at 512 (a small
    BERT on a DLE row's system and plan)."""
    rec = copy.deepcopy(next(r for r in _records() if r["id"] == "dle-pyt-bert_large-dgxa100-80-amp-seq512-8gpu"))
    rec["model_details"].update(layers=2, hidden=64, heads=4)
    rec["global_batch"] = 64
    setup = interpret_transformer(parse_transformer_record(rec, 0, "t.yaml"), RULES)
    assert len(setup.seq_mix) == 8
    predictor = Predictor()
    mixed = predictor.predict(dataclasses.replace(setup, seq_mix=((128, 1.0), (512, 3.0))))
    at = {seq: predictor.predict(dataclasses.replace(setup, seq_mix=(), knobs=tuple(sorted(
        {**dict(setup.knobs), "seq": seq}.items())))) for seq in (128, 512)}
    assert at[128].predicted_s < mixed.predicted_s < at[512].predicted_s
    assert mixed.predicted_s == pytest.approx(0.25 * at[128].predicted_s + 0.75 * at[512].predicted_s)
    assert mixed.terms["compute_s"] == pytest.approx(0.25 * at[128].terms["compute_s"]
                                                     + 0.75 * at[512].terms["compute_s"])
    assert mixed.interval_s[1] == pytest.approx(0.25 * at[128].interval_s[1] + 0.75 * at[512].interval_s[1])


def test_rows_without_a_shape_are_skipped_with_the_reason():
    runs = load_transformer_corpus()
    blog = [r for r in runs if r.id.startswith("megatron-v1-blog")]
    assert blog
    for run in blog:
        out = interpret_transformer(run, RULES)
        assert isinstance(out, Skipped) and "not stated" in out.reason


def test_a_pipeline_boundary_rule_must_name_a_known_boundary(tmp_path):
    from predictor.published.rowmap import RULES_FILE

    data = yaml.safe_load(RULES_FILE.read_text())
    data["transformer_pipeline_boundaries"] = [{"match": "Megatron", "boundary": "sideways"}]
    bad = tmp_path / "rules.yaml"
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(UserError, match=r"rules\.yaml: section transformer_pipeline_boundaries\[0\]\.boundary"):
        load_rules(bad)


# ---- data+tensor+pipeline by hand -----------------------------------------------------------------------------
def test_pipeline_terms_and_layout_by_hand():
    assert pipeline_terms(2.0, 3.0, 2.0, S=8, K=4, v=1) == (8 * 7.0, 3 * 7.0)
    assert pipeline_terms(2.0, 3.0, 0.0, S=8, K=4, v=2) == (8 * 5.0, 3 * 5.0 / 2)
    assert p2p_count(S=8, K=4, v=1) == 2 * (8 + 2) and p2p_count(S=8, K=4, v=2) == 2 * (16 + 2)
    assert p2p_count(S=8, K=1, v=1) == 0
    base = dict(batch=64, dtype="fp16", optimizer="adam", schedule="1f1b")
    # t=8 fills a node; data neighbours 8 ranks apart (2 nodes), pipeline neighbours 16 apart
    assert layout_nodes(Plan("data+tensor+pipeline", devices=64, devices_per_node=8, p_data=2, p_tensor=8,
                             stages=4, **base)) == (1, 2, 2)
    # t=2, d=2, K=2 on one 8-GPU node: everything inside it
    assert layout_nodes(Plan("data+tensor+pipeline", devices=8, devices_per_node=8, p_data=2, p_tensor=2,
                             stages=2, **base)) == (1, 1, 1)


@pytest.fixture(scope="module")
def small():
    graph = load_model("gpt", layers=4, hidden=64, heads=4, seq=32, vocab=512, attention="math")
    cm = kernels_only(load_cost_model("a100-dgx-8gpu.published")[0])
    return graph, cm


def test_3d_tensor_collectives_by_hand(small):
    """K = 1: per transformer layer 2 forward (attention and MLP row outputs) and 2 backward (their column inputs)
    all-reduces of m·seq·hidden·2 bytes over the t ranks; Megatron's vocabulary-parallel ends add one forward
    all-reduce of the word embedding's output (VocabParallelEmbedding, m·seq·hidden·2 bytes), one backward
    all-reduce of the head's input (m·seq·hidden·2 bytes) and three of one fp32 value per token in the loss
    (vocab_parallel_cross_entropy: m·seq·4 bytes); each for every one of the S micro-batches."""
    graph, cm = small
    S, m, t = 4, 2, 4
    plan = Plan("data+tensor+pipeline", batch=S * m, devices=t, devices_per_node=8, p_tensor=t, micro_batches=S,
                dtype="fp16", optimizer="adam", schedule="1f1b")
    pred = predict(graph, plan, cm, interval=False)
    assert pred.feasible, pred.reason
    one = cm.collective_time_s("allreduce", m * 32 * 64 * 2, t, 1)
    loss = cm.collective_time_s("allreduce", m * 32 * 4, t, 1)
    assert pred.details["tensor_fwd_collective_s"] == pytest.approx(S * (4 * 2 * one + one + 3 * loss), rel=1e-9)
    assert pred.details["tensor_bwd_collective_s"] == pytest.approx(S * (4 * 2 * one + one), rel=1e-9)
    assert pred.comm_exposed_s["layer_collective"] == pytest.approx(S * (4 * 4 * one + 2 * one + 3 * loss),
                                                                    rel=1e-9)
    assert pred.bubble_s == 0 and pred.comm_exposed_s["pipeline_p2p"] == 0


def test_3d_vocab_parallel_head_loss_and_embedding(small):
    """parallel_lm_logits + vocab_parallel_cross_entropy: the head and its loss run at V/t columns on each rank
    (Split filter_div=t), the word embedding (not the position embedding) keeps V/t of its rows."""
    graph, cm = small
    names = [layer.name for layer in graph.layers]
    split, heads, embeds = vocab_parallel(Context(graph, cm), tensor_split(graph))
    assert sorted(names[i] for i in split) == ["head", "loss"]
    assert [names[i] for i in heads] == ["head"] and [names[i] for i in embeds] == ["tok"]
    S, m, t = 4, 2, 4
    plan = Plan("data+tensor+pipeline", batch=S * m, devices=t, devices_per_node=8, p_tensor=t, micro_batches=S,
                dtype="fp16", optimizer="adam", schedule="1f1b")
    pred = predict(graph, plan, cm, interval=False)
    coster = Context(graph, cm).for_plan(plan).coster("fp16")
    split_of = layer_split(tensor_split(graph), t, m)
    head = coster.times(names.index("head"), Split(m, filter_div=t))
    assert head[0] < coster.times(names.index("head"), Split(m))[0]
    fwd = sum(coster.times(i, Split(m, filter_div=t) if i in split else split_of(i))[0] for i in range(len(names)))
    assert pred.compute_fwd_s == pytest.approx(S * fwd, rel=1e-9)
    # parameters per rank: per layer (12h^2 + 7h)/t + 6h, the token embedding vocab·h/t, position seq·h and the
    # final norm 2h whole (the head is tied to the token embedding: no parameters of its own)
    h, vocab, seq, layers = 64, 512, 32, 4
    per_layer = (12 * h * h + 7 * h) / t + 6 * h
    assert pred.details["params_per_device"] == pytest.approx(layers * per_layer + vocab * h / t + seq * h + 2 * h)


@pytest.mark.parametrize("layers, chunks, per_chunk", [(8, 4, (2, 2, 2, 2)), (10, 4, (3, 3, 2, 2)),
                                                       (4, 4, (1, 1, 1, 1)), (4, 5, None)])
def test_3d_megatron_partition_equal_transformer_layers(layers, chunks, per_chunk):
    """partition_method='type:transformer' / num_layers // pipeline size: L/K transformer layers per chunk (the
    first L mod K one more), the embeddings in the first chunk, the final norm, head and loss in the last; None
    with fewer transformer layers than chunks."""
    graph = load_model("gpt", layers=layers, hidden=64, heads=4, seq=32, vocab=512, attention="math")
    cm, _ = load_cost_model("a100-dgx-8gpu.published")
    starts = megatron_partition(Context(graph, cm), tensor_split(graph), chunks)
    if per_chunk is None:
        assert starts is None
        return
    names = [layer.name for layer in graph.layers]
    firsts = [sum(per_chunk[:j]) for j in range(chunks)]
    assert starts == [0] + [names.index(f"blocks.{k}.ln1") for k in firsts[1:]]
    bounds = list(zip(starts, starts[1:] + [len(names)]))
    held = [{n.split(".")[1] for n in names[a:z] if n.startswith("blocks.")} for a, z in bounds]
    assert tuple(len(x) for x in held) == per_chunk
    assert {"tok", "pos"} <= set(names[bounds[0][0]:bounds[0][1]])
    assert {"ln_f", "head", "loss"} <= set(names[bounds[-1][0]:bounds[-1][1]])


def test_3d_cuts_between_transformer_layers_when_the_vocabulary_is_narrower_than_the_hidden_size():
    """seq x vocab logits narrower than seq x hidden: still an equal count of transformer layers per stage, never a
    stage of the loss alone."""
    graph = load_model("gpt", layers=4, hidden=128, heads=4, seq=32, vocab=64, attention="math")
    cm, _ = load_cost_model("a100-dgx-8gpu.published")
    names = [layer.name for layer in graph.layers]
    pred = predict(graph, Plan("data+tensor+pipeline", batch=8, devices=2, stages=2, devices_per_node=8,
                               micro_batches=4, dtype="fp16", optimizer="adam", schedule="1f1b"), cm, interval=False)
    assert pred.feasible, pred.reason
    assert [a for a, _ in pred.details["stage_bounds"]] == [0, names.index("blocks.2.ln1")]


def test_3d_stage_bounds_megatron_chunks(small):
    """The prediction uses those chunks (4 layers on 2 stages: blocks 0-1 | 2-3); more stages than transformer
    layers is infeasible (Megatron never starts a stage between a layer's attention and MLP)."""
    graph, cm = small
    names = [layer.name for layer in graph.layers]
    base = dict(devices_per_node=8, micro_batches=4, dtype="fp16", optimizer="adam", schedule="1f1b")
    two = predict(graph, Plan("data+tensor+pipeline", batch=8, devices=2, stages=2, **base), cm, interval=False)
    assert [a for a, _ in two.details["stage_bounds"]] == [0, names.index("blocks.2.ln1")]
    five = predict(graph, Plan("data+tensor+pipeline", batch=8, devices=5, stages=5, **base), cm, interval=False)
    assert not five.feasible and "5 pipeline chunks > 4 transformer layers" in five.reason


def test_3d_bubble_recompute_and_p2p_by_hand(small):
    graph, cm = small
    S, m, K, d = 8, 2, 2, 2
    plan = Plan("data+tensor+pipeline", batch=S * m * d, devices=K * d * 2, devices_per_node=8, p_data=d, p_tensor=2,
                stages=K, micro_batches=S, dtype="fp16", optimizer="adam", schedule="1f1b", recompute=True)
    pred = predict(graph, plan, cm, interval=False)
    assert pred.feasible, pred.reason
    fwd_comm = pred.details["tensor_fwd_collective_s"]
    step = (pred.compute_fwd_s + pred.compute_bwd_s + pred.comm_exposed_s["layer_collective"] + pred.recompute_s) / S
    assert 0 < pred.recompute_s < pred.compute_fwd_s + fwd_comm  # the head and loss are not recomputed
    assert pred.bubble_s == pytest.approx((K - 1) * step, rel=1e-9)
    # stages cut between transformer layers: one (seq, hidden) tensor crosses
    boundary = m * 32 * 64 * 2
    assert pred.comm_exposed_s["pipeline_p2p"] == pytest.approx(
        2 * (S + K - 2) * cm.collective_time_s("sendrecv", boundary, 2, 1), rel=1e-9)
    assert pred.comm_exposed_s["gradient"] > 0 and not math.isinf(pred.iteration_s)
    # partitioned (Megatron-LM 2021-2023, DeepSpeed's pipeline engine): 1/t of it per tensor rank over the
    # network, then an all-gather of the whole tensor over the next stage's tensor group
    split = predict(graph, dataclasses.replace(plan, pipeline_boundary="partitioned"), cm, interval=False)
    assert split.comm_exposed_s["pipeline_p2p"] == pytest.approx(
        2 * (S + K - 2) * (cm.collective_time_s("sendrecv", boundary / 2, 2, 1)
                           + cm.collective_time_s("allgather", boundary, 2, 1)), rel=1e-9)
    # nothing else changes (but the stragglers' share of the p2p time, predictor.at_scale)
    assert split.iteration_s - split.comm_exposed_s["pipeline_p2p"] - split.straggler_s == pytest.approx(
        pred.iteration_s - pred.comm_exposed_s["pipeline_p2p"] - pred.straggler_s, rel=1e-9)
    assert "partitioned" in split.plan.describe() and "partitioned" not in pred.plan.describe()
    assert not predict(graph, dataclasses.replace(plan, pipeline_boundary="sideways"), cm, interval=False).feasible


def test_3d_selective_recompute_drops_the_attention_cores_5_a_s2_bytes():
    """Korthikanti et al. 2022 (Table 2): selective recomputation keeps every activation of a layer but the
    attention core's score-sized ones, 5·a·s² bytes per sample and layer in 16-bit (softmax output 2, dropout mask
    1, dropout output 2); it re-runs only the cores' forward (no tensor all-reduce), less than full recomputation."""
    L, h, a, s, b = 2, 64, 4, 32, 4
    graph = load_model("gpt", layers=L, hidden=h, heads=a, seq=s, vocab=128, attention="math")
    cm, _ = load_cost_model("a100-dgx-8gpu.published")
    base = dict(batch=b, devices=1, devices_per_node=8, micro_batches=1, dtype="bf16", optimizer="adam",
                schedule="1f1b")
    none = predict(graph, Plan("data+tensor+pipeline", **base), cm, interval=False)
    full = predict(graph, Plan("data+tensor+pipeline", recompute=True, **base), cm, interval=False)
    selective = predict(graph, Plan("data+tensor+pipeline", recompute=True, recompute_granularity="selective", **base),
                        cm, interval=False)
    assert none.activations_bytes - selective.activations_bytes == pytest.approx(b * L * 5 * a * s * s)
    assert 0 == none.recompute_s < selective.recompute_s < full.recompute_s
    names = [layer.name for layer in graph.layers]
    core = attention_core(Context(graph, cm), tensor_split(graph))
    assert {names[i] for i in core} >= {"blocks.0.attn.attn_drop", "softmax", "matmul", "matmul_1"}
    assert not any(n.startswith("blocks.0.mlp") or n.endswith(("qkv", "proj")) for n in (names[i] for i in core))
    assert not predict(graph, Plan("data+tensor+pipeline", recompute=True, recompute_granularity="partial", **base),
                       cm, interval=False).feasible


def test_3d_recomputes_the_transformer_layers_only(small):
    graph, cm = small
    span = recomputed_layers(Context(graph, cm), tensor_split(graph))
    names = [layer.name for layer in graph.layers]
    assert all(i in span for i, n in enumerate(names) if n.startswith("blocks."))
    assert not any(names.index(n) in span for n in ("tok", "pos", "ln_f", "head", "loss"))
    S, m = 4, 2  # one rank, no tensor split: R = S x the forward of those layers at m samples
    plan = Plan("data+tensor+pipeline", batch=S * m, devices=1, devices_per_node=8, micro_batches=S, dtype="fp16",
                optimizer="adam", schedule="1f1b", recompute=True)
    pred = predict(graph, plan, cm, interval=False)
    coster = Context(graph, cm).for_plan(plan).coster("fp16")  # the plan's software stack, as evaluate costs it
    assert pred.recompute_s == pytest.approx(S * sum(coster.times(i, Split(m))[0] for i in span), rel=1e-9)


def test_3d_rejects_gpipe_and_indivisible_micro_batches(small):
    graph, cm = small
    base = dict(devices=4, devices_per_node=8, p_tensor=2, stages=2, dtype="fp16", optimizer="adam")
    assert "1f1b" in predict(graph, Plan("data+tensor+pipeline", batch=8, micro_batches=4, **base), cm).reason
    assert "micro-batches" in predict(graph, Plan("data+tensor+pipeline", batch=8, micro_batches=3,
                                                  schedule="1f1b", **base), cm).reason


# ---- report ---------------------------------------------------------------------------------------------------
def test_report_json_schema(tmp_path):
    recs = [r for r in _records() if r["id"].startswith("megatron-v1-blog")][:1]
    small = copy.deepcopy(next(r for r in _records() if r["id"].startswith("dlperf-megatron-")))
    small["id"] = "dlperf-megatron-tiny"
    small["model_details"].update(layers=2, hidden=64, heads=4, seq_len=32, vocab=512)
    small["parallelism"].update(data=2, tensor=2, pipeline=1, micro_batch=2)
    small["num_gpus"], small["global_batch"] = 4, 8
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(recs + [small]), encoding="utf-8")
    csv = tmp_path / "v.csv"
    csv.write_text(",".join(VTRAIN_COLUMNS) + "\n0.001,8,16,2,64,4,2,32,2,2,2,100.0\n", encoding="utf-8")
    report = transformer_report(corpus=path, vtrain=csv)
    assert report["rows_validated"] == 2 and report["rows_skipped"] == 1
    assert set(report["by_gpu_bucket"]) == {"2-8"}
    assert report["by_gpu_bucket"]["2-8"]["rows"] == 2 and isinstance(report["by_gpu_bucket"]["2-8"]["accuracy"], float)
    assert set(report["by_source"]) == {"dlperf", "vtrain"}
    assert isinstance(report["overall_accuracy"], float)
    row = next(r for r in report["rows"] if r["source"] == "vtrain")
    assert row["plan"]["p_tensor"] == 2 and row["plan"]["stages"] == 2 and row["plan"]["micro_batches"] == 4
    assert row["accuracy"] == pytest.approx(1 - abs(row["predicted_s"] - 0.1) / 0.1)
    assert report["skipped"][0]["reason"]


def _sharded_record(rid, **changes):
    """A user's FSDP / ZeRO row of a decoder-only model (LLaMA blocks, 8 H100s)."""
    rec = {"id": rid, "model": "llama-3-8b", "framework": "torchtitan (PyTorch FSDP2)", "precision": "bf16",
           "optimizer": "AdamW", "num_gpus": 8, "global_batch": 32,
           "model_details": {"layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn": 14336,
                             "seq_len": 8192, "vocab": 128256, "mlp": "swiglu", "norm": "rmsnorm", "tie": False},
           "parallelism": {"fsdp_sharding": "FULL_SHARD", "micro_batch": 2},
           "activation_checkpointing": True,
           "system": {"name": "8 x H100", "gpu": "H100-80GB", "gpus_per_node": 8, "nodes": 1, "gpus_used_per_node": 8},
           "derived": {"seconds_per_optimizer_step": 12.0}, "source": {"url": "https://example.org/run"}}
    for key, value in changes.items():
        target = rec
        *path, last = key.split(".")
        for part in path:
            target = target[part]
        target[last] = value
    return rec


def test_a_users_sharded_rows_map_to_zero_data_parallelism(tmp_path, capsys):
    """FSDP and DeepSpeed ZeRO rows of decoder-only models (not only llm-foundry's MPT): ZeRO stage from the
    sharding or zero_stage, gradient accumulation from grad_accum or global / (GPUs x micro batch), a half model
    unless the row trains under autocast, HYBRID_SHARD as HSDP over a node, FSDP x tensor parallelism as the 3-D
    strategy on one stage; sharding with pipeline parallelism is skipped with its reason."""
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump([
        _sharded_record("mine-fsdp"),
        _sharded_record("mine-zero2", **{"framework": "DeepSpeed ZeRO-2", "parallelism": {"zero_stage": 2,
                                                                                          "grad_accum": 4},
                                         "precision": "bf16 amp (autocast)"}),
        _sharded_record("mine-2d", **{"parallelism.tensor": 2}),
        _sharded_record("mine-pp", **{"parallelism.pipeline": 2}),
        _sharded_record("mine-cp", **{"parallelism.context": 2}),
        _sharded_record("mine-novocab", **{"model_details.vocab": None}),
        _sharded_record("mine-hsdp", **{"parallelism.fsdp_sharding": "HYBRID_SHARD", "num_gpus": 16,
                                        "global_batch": 64, "system.nodes": 2})]))
    runs = {r.id: r for r in load_transformer_corpus(path)}
    fsdp = interpret_transformer(runs["mine-fsdp"], RULES)
    plan = dict(fsdp.plan)
    assert plan["strategy"] == "data+recompute" and plan["zero_stage"] == 3 and plan["micro_batches"] == 2
    assert plan["mixed_precision"] == "half" and plan["cross_entropy"] == "float32"
    assert dict(fsdp.knobs)["kv_heads"] == 8 and dict(fsdp.knobs)["dropout"] == 0.0
    assert fsdp.profile == "h100-dgx-8gpu.published.yaml"
    zero2 = dict(interpret_transformer(runs["mine-zero2"], RULES).plan)
    assert zero2["zero_stage"] == 2 and zero2["micro_batches"] == 4 and "mixed_precision" not in zero2
    hsdp = dict(interpret_transformer(runs["mine-hsdp"], RULES).plan)
    assert hsdp["zero_stage"] == 3 and hsdp["shard_group"] == 8 and hsdp["micro_batches"] == 2
    two_d = dict(interpret_transformer(runs["mine-2d"], RULES).plan)  # FSDP x TP: 3-D on one stage, ZeRO 3
    assert (two_d["strategy"], two_d["stages"], two_d["p_tensor"], two_d["p_data"], two_d["zero_stage"],
            two_d["micro_batches"], two_d["recompute"]) == ("data+tensor+pipeline", 1, 2, 4, 3, 4, True)
    skipped = interpret_transformer(runs["mine-pp"], RULES)
    assert isinstance(skipped, Skipped) and "pipeline parallelism" in skipped.reason
    assert "context or expert" in interpret_transformer(runs["mine-cp"], RULES).reason
    assert "vocabulary not stated" in interpret_transformer(runs["mine-novocab"], RULES).reason
    from predictor.cli import main
    assert main(["validate", "--published", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert {r["id"] for r in report["rows"]} == {"mine-fsdp", "mine-zero2", "mine-hsdp", "mine-2d"}
    assert all(r["predicted_s"] > 0 for r in report["rows"]) and len(report["skipped"]) == 3
    with pytest.raises(UserError, match="zero_stage"):
        bad = tmp_path / "bad.yaml"
        bad.write_text(yaml.safe_dump([_sharded_record("bad", **{"parallelism.zero_stage": 5})]))
        load_transformer_corpus(bad)


def test_megatron_style_3d_rows_of_other_models_and_frameworks_map_to_3d(tmp_path):
    """A GPT-like model in Megatron-DeepSpeed (BLOOM's layout: t4 p12, ZeRO 1) or in another framework with tensor
    or pipeline parallelism and ZeRO 1 at most (GPT-NeoX) takes the Megatron mapping: data+tensor+pipeline, ZeRO 1 as
    the distributed optimizer; a LLaMA-like row without its vocabulary is skipped rather than given GPT-2's."""
    def three_d(rid, model, framework, gpu, batch, shape, tpd, micro_batch):  # t x p x d on 8-GPU nodes, ZeRO 1
        (layers, hidden, heads, vocab), (t, p, d) = shape, tpd
        return _sharded_record(rid, **{
            "model": model, "framework": framework, "num_gpus": t * p * d, "global_batch": batch,
            "model_details": {"layers": layers, "hidden": hidden, "heads": heads, "seq_len": 2048, "vocab": vocab},
            "parallelism": {"tensor": t, "pipeline": p, "data": d, "micro_batch": micro_batch, "zero_stage": 1},
            "system": {"name": f"{t * p * d // 8} x 8 {gpu}", "gpu": gpu, "gpus_per_node": 8,
                       "nodes": t * p * d // 8, "gpus_used_per_node": 8}})

    bloom = three_d("b-bloom", "bloom-176b", "Megatron-DeepSpeed", "A100-SXM4-80GB", 2048, (70, 14336, 112, 250880),
                    (4, 12, 8), 2)
    neox = three_d("b-neox", "gpt-neox-20b", "GPT-NeoX", "A100-SXM4-40GB", 64, (44, 6144, 64, 50432), (2, 4, 2), 4)
    novocab = _sharded_record("b-novocab", **{"model": "llama-2-7b", "framework": "Megatron-LM",
                                              "model_details.vocab": None})
    path = tmp_path / "threed.yaml"
    path.write_text(yaml.safe_dump([bloom, neox, novocab]))
    runs = {r.id: r for r in load_transformer_corpus(path)}
    for rid, (t, p, d) in (("b-bloom", (4, 12, 8)), ("b-neox", (2, 4, 2))):
        plan = dict(interpret_transformer(runs[rid], RULES).plan)
        assert plan["strategy"] == "data+tensor+pipeline" and (plan["p_tensor"], plan["stages"], plan["p_data"]) == (
            t, p, d) and plan["zero_stage"] == 1 and plan["mixed_precision"] == "half"
    assert dict(interpret_transformer(runs["b-bloom"], RULES).knobs)["vocab"] == 250880
    assert "vocabulary not stated" in interpret_transformer(runs["b-novocab"], RULES).reason
