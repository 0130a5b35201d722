"""Mixture of experts and context parallelism in data+tensor+pipeline (issue 41 item 4), each term by hand: the MoE
graph, the busiest expert rank's tokens, the dispatch/combine all-to-all volumes, the experts' GEMMs and memory under
expert parallelism; the context-parallel token split, attention blocks, the ring's overlap and activation memory."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from calibrate.collective_model import bus_factor
from predictor.api import load_cost_model, load_model
from predictor.cli import main
from predictor.layercost import Split
from predictor.plan import Plan
from predictor.search import search
from predictor.strategies import evaluate
from predictor.strategies.context import Context
from predictor.strategies.hybrid3d import moe_cp_terms
from predictor.strategies.moe_context import (attention_spans, busiest_factor, expected_max_normal, kv_elems,
                                              moe_layers, ring_exposed)
from predictor.strategies.tensor import tensor_split
from tests.kernels_only import kernels_only  # kernels alone: the host floor is tested apart

L, H, HEADS, SEQ, VOCAB, FFN, E, K = 4, 256, 8, 256, 1024, 512, 8, 2
ACT = 2  # bf16


def moe_setup(layers: int = L, capacity_factor: float = 1.25):
    """(graph, kernels-only H100 cost model, context) of the tests' small mixture of experts."""
    graph = load_model("gpt", layers=layers, hidden=H, heads=HEADS, seq=SEQ, vocab=VOCAB, ffn=FFN, experts=E, top_k=K,
                       capacity_factor=capacity_factor, dropout=0.0)
    cm = kernels_only(load_cost_model("h100-dgx-8gpu.published")[0])
    return graph, cm, Context(graph, cm)


@pytest.fixture(scope="module")
def moe():
    return moe_setup()


@pytest.fixture(scope="module")
def dense():
    graph = load_model("gpt", layers=L, hidden=H, heads=HEADS, seq=SEQ, vocab=VOCAB, ffn=FFN, dropout=0.0)
    cm = kernels_only(load_cost_model("h100-dgx-8gpu.published")[0])
    return graph, cm, Context(graph, cm)


def plan(**kw) -> Plan:
    base = dict(batch=32, devices_per_node=8, p_data=8, p_tensor=1, stages=1, micro_batches=4, dtype="bf16",
                optimizer="adam", schedule="1f1b", mixed_precision="half", p_expert=1, p_context=1)
    base.update(kw)
    devices = base["p_data"] * base["p_tensor"] * base["stages"] * base["p_context"]
    return Plan("data+tensor+pipeline", devices=devices, **base)


# ---- the graph -------------------------------------------------------------------------------------------------
def test_moe_graph_has_router_dispatch_experts_and_combine(moe, dense):
    """Per layer: a router of E·h weights, the dispatch to s·k slots, E experts of h·f + f + f·h + h parameters each
    (GELU with biases) on the slots, and the combine back to s tokens; the experts' FLOPs are the top-k's only."""
    graph, _, ctx = moe
    ops = [l.op for l in graph.layers]
    assert ops.count("router") == ops.count("moe_dispatch") == ops.count("moe_combine") == L
    dispatch, combine, experts = moe_layers(ctx)
    assert len(dispatch) == L and all(graph.layers[i].capacity_factor == 1.25 for i in dispatch)
    assert graph.layers[dispatch[0]].output_shape == (SEQ * K, H) and graph.layers[combine[0]].output_shape == (SEQ, H)
    linears = [i for i in experts if graph.layers[i].op == "linear"]
    assert len(linears) == 2 * L and all(graph.layers[i].groups == E for i in linears)
    per_expert = H * FFN + FFN + FFN * H + H
    router = E * H
    assert graph.params - dense[0].params == L * (E * per_expert + router - per_expert)
    fc = graph.layers[linears[0]]
    assert fc.flops_fwd == 2 * SEQ * K * H * FFN  # every routed token through one expert's GEMM


@pytest.mark.parametrize("slots,bias", [(24, True), (24, False), (21, True), (5, False)])
def test_expert_linear_runs_each_slot_through_its_experts_weights(slots, bias):
    """The module's forward (one batched product over equal blocks, one product per expert otherwise) gives each slot
    i the output of expert floor(i E / slots)'s weights, slot by slot (5 slots over 8 experts: some experts idle)."""
    import torch

    from predictor.zoo.transformer import ExpertLinear

    torch.manual_seed(0)
    layer = ExpertLinear(8, 6, 5, bias)
    if bias:
        torch.nn.init.normal_(layer.bias)
    z = torch.randn(3, slots, 6)
    expert = [i * 8 // slots for i in range(slots)]
    want = torch.stack([z[:, i] @ layer.weight[e].T + (layer.bias[e] if bias else 0) for i, e in enumerate(expert)],
                       dim=1)
    assert torch.allclose(layer(z), want, atol=1e-5)


def test_bad_knobs_are_one_line_errors(capsys):
    for knobs in (["experts=1"], ["experts=4", "top_k=5"], ["experts=4", "capacity_factor=-1"], ["kv_heads=3"],
                  ["head_dim=0"]):
        args = ["run", "--model", "gpt", "--batch", "8", "--gpus", "2"] + [a for k in knobs for a in ("--model-arg", k)]
        assert main(args) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and knobs[-1].split("=")[0] in err[0]


# ---- the busiest expert rank --------------------------------------------------------------------------------------
def test_expected_maximum_of_normals():
    assert expected_max_normal(1) == 0.0
    assert expected_max_normal(2) == pytest.approx(1 / math.sqrt(math.pi), rel=1e-4)
    assert expected_max_normal(8) == pytest.approx(1.42360, rel=1e-4)  # Harter's (1961) table


def test_busiest_factor_is_the_multinomial_maximum_capped_by_the_capacity():
    """ep ranks each routing `rows` slots, spread evenly: the largest load over the mean, from 4000 draws of the
    multinomial, against rows + e_ep·sqrt(rows); the capacity factor caps it; one rank has no imbalance."""
    rng = np.random.default_rng(7)
    for rows, ep in ((512, 8), (4096, 4), (64, 16)):
        loads = rng.multinomial(rows * ep, [1 / ep] * ep, size=4000)
        simulated = loads.max(axis=1).mean() / rows
        assert busiest_factor(rows, ep, 0) == pytest.approx(simulated, rel=0.01)
    assert busiest_factor(16, 16, 1.25) == 1.25 and busiest_factor(16, 16, 0) > 1.25
    assert busiest_factor(4096, 1, 1.25) == 1.0


# ---- expert parallelism ---------------------------------------------------------------------------------------------
def test_expert_gemms_are_one_per_local_expert_on_its_share_of_the_tokens(moe):
    """An expert linear at micro-batch m on one of ep ranks: E/ep GEMMs of m·s·k·ep/E rows (the mean share of the
    rank's routed tokens), the framework overhead once."""
    graph, cm, ctx = moe
    _, _, experts = moe_layers(ctx)
    i = min(j for j in experts if graph.layers[j].op == "linear")
    m, ep = 4, 4
    coster = ctx.coster("bf16")
    fwd, bwd = coster.times(i, Split(m, expert_div=ep))
    params = {"M": m * SEQ * K * ep // E, "N": FFN, "K": H}
    gemm = lambda p: cm.compute_time_s("linear", p, params, "bfloat16")  # noqa: E731
    over_f, over_b = cm.framework_overhead_s("fwd"), cm.framework_overhead_s("bwd")
    assert fwd == pytest.approx(E // ep * gemm("fwd") + over_f)
    assert bwd == pytest.approx(E // ep * (gemm("bwd_data") + gemm("bwd_weight")) + over_b)


def test_alltoall_volumes_by_hand(moe):
    """Per MoE layer and micro-batch, four all-to-alls over the ep ranks (dispatch and combine, forward and
    backward), each of the busiest rank's routed tokens x hidden x bytes, of which (ep - 1)/ep leaves the rank."""
    graph, cm, ctx = moe
    p = plan(p_expert=8)
    pred = evaluate(ctx, p)
    assert pred.feasible, pred.reason
    m = 32 // 8 // 4
    busiest = busiest_factor(m * SEQ * K, 8, 1.25)
    size = m * SEQ * K * H * ACT * busiest
    assert bus_factor("alltoall", 8) == pytest.approx(7 / 8)
    one = ctx.collective("alltoall", size, 8, 1)
    assert pred.comm_exposed_s["expert_alltoall"] == pytest.approx(4 * 4 * L * one)  # S = 4 micro-batches
    assert pred.details["expert_busiest_factor"] == pytest.approx(busiest)
    assert evaluate(ctx, plan()).comm_exposed_s.get("expert_alltoall", 0.0) == 0.0


def test_expert_memory_is_sharded_by_ep(moe):
    """Each rank holds 1/ep of every expert layer's parameters, with their gradients and Adam state; the
    distributed optimizer shards the dense state over the d·cp replicas and the experts' over their d·cp/ep."""
    graph, cm, ctx = moe
    _, _, experts = moe_layers(ctx)
    expert = sum(graph.layers[i].params for i in experts)
    dense = graph.params - expert
    one, eight = evaluate(ctx, plan()), evaluate(ctx, plan(p_expert=8))
    assert one.details["params_per_device"] == pytest.approx(graph.params)
    assert eight.details["params_per_device"] == pytest.approx(dense + expert / 8)
    assert eight.details["expert_params_per_device"] == pytest.approx(expert / 8)
    assert eight.optimizer_bytes == pytest.approx(8 * (dense + expert / 8))  # Adam's two fp32 words
    zero = evaluate(ctx, plan(p_expert=4, zero_stage=1))
    assert zero.optimizer_bytes == pytest.approx(8 * dense / 8 + 8 * (expert / 4) / 2)  # d = 8, edp = 8 / 4
    assert zero.weights_bytes == pytest.approx(2 * (dense + expert / 4) + 4 * dense / 8 + 4 * (expert / 4) / 2)


def test_expert_parallel_checks(moe, dense):
    _, _, ctx = moe
    for kw, why in ((dict(p_expert=3), "does not divide the 8 experts"),
                    (dict(p_expert=8, p_data=4), "does not divide the data x context ranks 4"),
                    (dict(p_expert=2, p_tensor=2, p_data=4), "needs --sequence-parallel")):
        pred = evaluate(ctx, plan(**kw))
        assert not pred.feasible and why in pred.reason
    assert evaluate(ctx, plan(p_expert=2, p_tensor=2, p_data=4, sequence_parallel=True)).feasible
    assert "mixture-of-experts" in evaluate(dense[2], plan(p_expert=2)).reason
    assert "data+tensor+pipeline" in evaluate(ctx, Plan("data", batch=8, devices=2, devices_per_node=8, p_data=2,
                                                        p_expert=2)).reason


# ---- context parallelism ----------------------------------------------------------------------------------------
def test_context_parallel_runs_every_layer_on_its_share_of_the_tokens(dense):
    """A linear at 1/cp of the tokens; fused attention as cp blocks of (s/cp)² (each rank's queries against every
    chunk of keys), causal as the whole was."""
    graph, cm, ctx = dense
    coster, m, cp = ctx.coster("bf16"), 2, 4
    qkv = next(i for i, l in enumerate(graph.layers) if l.op == "linear")
    over = cm.framework_overhead_s("fwd")
    f, _ = coster.times(qkv, Split(m, seq_div=cp))
    assert f == pytest.approx(cm.compute_time_s("linear", "fwd", {"M": m * SEQ // cp, "N": 3 * H, "K": H},
                                                "bfloat16") + over)
    sdpa = next(i for i, l in enumerate(graph.layers) if l.op == "sdpa")
    f, _ = coster.times(sdpa, Split(m, seq_div=cp))
    block = cm.compute_time_s("sdpa", "fwd", {"B": m * HEADS, "S": SEQ // cp, "D": H // HEADS, "causal": 1},
                              "bfloat16")
    assert f == pytest.approx(cp * block + over)


def test_ring_overlap_by_hand():
    """cp - 1 steps, each sending one chunk's keys and values while the attention of the chunk in hand runs; only
    the excess is exposed; backward sends keys, values and their gradients."""
    class Stub:
        def collective(self, op, size, group, nodes):
            assert op == "sendrecv" and group == 2
            return size * 1e-9 * (2 if nodes > 1 else 1)

    ctx = Stub()
    assert ring_exposed(ctx, 4, 1.0, 2.0, 1e6, 1) == (0.0, 0.0)  # 1 ms of sending under 1 s of attention
    f, b = ring_exposed(ctx, 4, 1e-4, 1e-4, 1e6, 1)
    assert f == pytest.approx(3 * (1e-3 - 1e-4)) and b == pytest.approx(3 * (2e-3 - 1e-4))
    f2, _ = ring_exposed(ctx, 4, 1e-4, 1e-4, 1e6, nodes=2)
    assert f2 == pytest.approx(3 * (2e-3 - 1e-4))  # a ring that leaves the node: paced by the inter-node hop
    assert ring_exposed(ctx, 1, 0.0, 0.0, 1e9, 1) == (0.0, 0.0)


def test_context_ring_in_a_plan_by_hand(dense):
    """The plan's exposed ring is, per attention and micro-batch, ring_exposed of its block times (the attention
    layers' times over cp) and one chunk's keys and values (2·s·h/cp per sample, h/t on a tensor rank)."""
    graph, cm, ctx = dense
    p = plan(p_context=4, p_data=2, micro_batches=4)
    pred = evaluate(ctx, p)
    assert pred.feasible, pred.reason
    ts = tensor_split(graph)
    m = 32 // 2 // 4
    times, *_ = moe_cp_terms(ctx, ts, "bf16", 1, m, 1, False, 4, 1, 1, 1)
    spans = attention_spans(ctx, ts.rows, ts.columns)
    assert len(spans) == L and all(kv_elems(ctx, s) == 2 * SEQ * H for s in spans)
    expected = 0.0
    for span in spans:
        f, b = ring_exposed(ctx, 4, sum(times[i][0] for i in span) / 4, sum(times[i][1] for i in span) / 4,
                            m * 2 * SEQ * H * ACT / 4, 1)
        expected += f + b
    assert pred.comm_exposed_s["context_ring"] == pytest.approx(4 * expected)


def test_context_parallel_divides_the_activations(dense):
    """At the same micro-batch every saved tensor holds 1/cp of its tokens: cp = 2 keeps half the activations."""
    _, _, ctx = dense
    one, two = evaluate(ctx, plan(p_data=2)), evaluate(ctx, plan(p_data=2, p_context=2))
    assert two.feasible and two.activations_bytes == pytest.approx(one.activations_bytes / 2)
    assert two.weights_bytes == one.weights_bytes  # weights replicated over the context ranks


def test_grouped_query_attention_sends_fewer_keys_and_values():
    graph = load_model("gpt", layers=2, hidden=H, heads=HEADS, kv_heads=2, seq=SEQ, vocab=VOCAB, dropout=0.0)
    ctx = Context(graph, None)
    ts = tensor_split(graph)
    spans = attention_spans(ctx, ts.rows, ts.columns)
    assert kv_elems(ctx, spans[0]) == 2 * SEQ * 2 * (H // HEADS)
    qkv = next(l for l in graph.layers if l.op == "linear")
    assert qkv.output_shape == (SEQ, H + 2 * 2 * (H // HEADS))


def test_head_dim_sets_the_query_width_and_the_output_projection():
    """Qwen3's heads are 128 wide on a 2048 hidden: q is heads x head_dim wide, k and v kv_heads x head_dim, and the
    output projection maps heads x head_dim back to hidden; attention params by hand."""
    hd = 2 * (H // HEADS)  # twice the default width
    graph = load_model("gpt", layers=1, hidden=H, heads=HEADS, kv_heads=2, head_dim=hd, seq=SEQ, vocab=VOCAB,
                       dropout=0.0)
    linears = [l for l in graph.layers if l.op == "linear"]
    qkv, proj = linears[0], linears[1]
    assert qkv.output_shape == (SEQ, HEADS * hd + 2 * 2 * hd)
    assert proj.input_shape == (SEQ, HEADS * hd) and proj.output_shape == (SEQ, H)
    default = load_model("gpt", layers=1, hidden=H, heads=HEADS, kv_heads=2, seq=SEQ, vocab=VOCAB, dropout=0.0)
    extra = (H * (HEADS * hd + 4 * hd) + HEADS * hd + 4 * hd) - (H * (H + 4 * (H // HEADS)) + H + 4 * (H // HEADS))
    extra += HEADS * hd * H - H * H  # the output projection's weight (its bias is hidden wide either way)
    assert graph.params - default.params == extra
    ctx = Context(graph, None)
    ts = tensor_split(graph)
    assert kv_elems(ctx, attention_spans(ctx, ts.rows, ts.columns)[0]) == 2 * SEQ * 2 * hd


def test_context_parallel_checks(dense):
    _, _, ctx = dense
    assert "must divide into 2 x 3 chunks" in evaluate(ctx, plan(p_context=3, p_data=2)).reason
    cnn = Context(load_model("small_cnn2d"), load_cost_model(None)[0])
    assert "no token sequence" in evaluate(cnn, plan(p_context=2, p_data=1, batch=8, micro_batches=1)).reason


# ---- the commands ---------------------------------------------------------------------------------------------------
def test_run_reports_experts_and_context(capsys):
    args = ["run", "--profile", "h100-dgx-8gpu.published", "--model", "gpt", "--model-arg", "layers=2",
            "--model-arg", "experts=8", "--model-arg", "seq=512", "--batch", "16", "--gpus", "16", "--strategy",
            "data+tensor+pipeline", "--tensor-parallel", "2", "--pipeline-stages", "1", "--sequence-parallel",
            "--expert-parallel", "4", "--context-parallel", "2", "--dtype", "bf16"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "d4 t2/sp cp2 ep4" in out and "experts: 1/4 of them per rank" in out and "context: the sequence over 2" in out
    assert main(args + ["--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    pred = doc["predictions"][0] if "predictions" in doc else doc[0]
    assert pred["plan"]["p_expert"] == 4 and pred["plan"]["p_context"] == 2
    assert pred["comm_exposed_s"]["expert_alltoall"] > 0


def test_search_tries_expert_parallel_layouts(moe):
    graph, cm, _ = moe
    found = search(graph, cm, batch=16, max_devices=8, min_devices=8, devices_per_node=8, dtype="bf16",
                   optimizer="adam", top=200, interval=False)
    degrees = {p.plan.p_expert for p in found.best if p.plan.strategy == "data+tensor+pipeline"}
    assert {2, 4, 8} <= degrees
    fixed = search(graph, cm, batch=16, max_devices=8, min_devices=8, devices_per_node=8, dtype="bf16",
                   optimizer="adam", top=50, interval=False, expert_parallel=4, context_parallel=2)
    assert fixed.best and all(p.plan.p_expert == 4 and p.plan.p_context == 2 for p in fixed.best)


# ---- the published rows -----------------------------------------------------------------------------------------
def test_published_rows_map_to_expert_and_context_plans():
    from predictor.published.rowmap import load_rules
    from predictor.published.transformer import interpret_transformer, load_transformer_corpus
    runs = {r.id: r for r in load_transformer_corpus()}
    rules = load_rules()
    moe_row = interpret_transformer(runs["mcoremoe-mixtral-8x7b-64gpu-t1e8p4v8"], rules)
    plan_, knobs = dict(moe_row.plan), dict(moe_row.knobs)
    assert (plan_["p_expert"], plan_["p_context"], plan_["p_data"], plan_["stages"], plan_["virtual_stages"]) == \
        (8, 1, 16, 4, 8)
    assert (knobs["experts"], knobs["top_k"], knobs["capacity_factor"], knobs["kv_heads"], knobs["attention"]) == \
        (8, 2, 0, 8, "sdpa")
    qwen = interpret_transformer(runs["mbridge-qwen3-30b-a3b-16gpu-ep16d16"], rules)
    plan_, knobs = dict(qwen.plan), dict(qwen.knobs)
    assert (plan_["p_expert"], plan_["p_data"], plan_["p_tensor"]) == (16, 16, 1)
    assert (knobs["experts"], knobs["top_k"], knobs["head_dim"], knobs["hidden"], knobs["heads"]) == (128, 8, 128, 2048, 32)
    assert knobs["dispatcher"] == "deepep"
    cp_row = interpret_transformer(runs["nemocp-llama2-7b-1024k-1024gpu-t8cp32d4"], rules)
    plan_ = dict(cp_row.plan)
    assert (plan_["p_context"], plan_["p_tensor"], plan_["p_data"], plan_["sequence_parallel"]) == (32, 8, 4, True)
    assert cp_row.dtype == "fp8" and dict(cp_row.knobs)["seq"] == 1 << 20


def test_malformed_model_settings_are_one_line_errors(tmp_path):
    import yaml

    from predictor.published.transformer import TRANSFORMER_FILE, load_transformer_corpus
    from profiler.errors import UserError
    rows = yaml.load(TRANSFORMER_FILE.read_text(encoding="utf-8"), Loader=yaml.CSafeLoader)
    rec = next(r for r in rows if r["id"].startswith("mcoremoe"))
    for key, value, field in (("zoo_attention", "flash", "model_details.zoo_attention"),
                              ("capacity_factor", -1, "model_details.capacity_factor"),
                              ("experts", 0, "model_details.experts")):
        bad = dict(rec, model_details=dict(rec["model_details"], **{key: value}))
        path = tmp_path / "t.yaml"
        path.write_text(yaml.safe_dump([bad]), encoding="utf-8")
        with pytest.raises(UserError) as err:
            load_transformer_corpus(path)
        assert field in str(err.value) and "\n" not in str(err.value)
    bad = dict(rec, parallelism=dict(rec["parallelism"], expert="eight"))
    path.write_text(yaml.safe_dump([bad]), encoding="utf-8")
    with pytest.raises(UserError) as err:
        load_transformer_corpus(path)
    assert "parallelism.expert" in str(err.value)


def test_the_report_lists_them_apart(tmp_path, capsys):
    import yaml

    from predictor.published.transformer import TRANSFORMER_FILE
    recs = [r for r in yaml.load(TRANSFORMER_FILE.read_text(encoding="utf-8"), Loader=yaml.CSafeLoader)
            if r["id"].startswith(("mcoremoe", "nemocp-llama3-8b"))]
    path = tmp_path / "moe.yaml"
    path.write_text(yaml.safe_dump(recs), encoding="utf-8")
    assert main(["validate", "--published", str(path)]) == 0
    out = capsys.readouterr().out
    assert "mixture-of-experts and context-parallel runs (reported apart)" in out
    line = next(l for l in out.splitlines() if l.strip().startswith("mcoremoe-mixtral"))
    assert line.split()[2:4] == ["8", "1"] and float(line.split()[-2]) > 0  # EP 8, CP 1, an exposed all-to-all


def test_rows_with_expert_or_context_parallelism_are_reported_apart_whatever_their_source():
    from predictor.published import moe_context_rows
    report = {"rows": [
        {"id": "a", "source": "other", "gpus": 16, "plan": {"p_expert": 16, "p_context": 1}, "measured_s": 2.0,
         "predicted_s": 1.5, "accuracy": 0.75, "fits_in_memory": True, "terms": {"expert_alltoall_s": 0.5}},
        {"id": "b", "source": "other", "gpus": 8, "plan": {"p_expert": 1, "p_context": 1}, "measured_s": 1.0,
         "predicted_s": 1.0, "accuracy": 1.0, "fits_in_memory": True, "terms": {}},
        {"id": "c", "source": "nemocp", "gpus": 8, "plan": {}, "measured_s": 1.0, "predicted_s": 0.9,
         "accuracy": 0.9, "fits_in_memory": True, "terms": {}}]}
    assert [r["id"] for r in moe_context_rows.rows(report)] == ["a", "c"]
    text = "\n".join(moe_context_rows.render_text(report))
    assert "other: 1 rows, mean 75.0%" in text and "nemocp: 1 rows, mean 90.0%" in text


def test_deduplicating_dispatch_sends_each_token_once_per_remote_node_by_hand():
    """E = 8 experts on N = 2 nodes (4 each), top-2: a token misses a node with probability C(4,2)/C(8,2) = 6/28, so
    it reaches 1 - 6/28 = 11/14 other nodes on average; DeepEP's dispatch of S bytes of routed copies sends
    S/2 x 11/14 through the NIC, the slower of that and the all-to-all inside the node's 4 ranks."""
    from predictor.strategies.moe_context import deepep_seconds, expected_remote_nodes

    assert expected_remote_nodes(8, 2, 2) == pytest.approx(11 / 14)
    assert expected_remote_nodes(8, 2, 1) == 0.0
    assert expected_remote_nodes(128, 8, 2) == pytest.approx(1 - math.comb(64, 8) / math.comb(128, 8))

    class Calls:
        def __init__(self):
            self.seen = []

        def collective(self, op, size, group, nodes):
            self.seen.append((op, size, group, nodes))
            return {"sendrecv": 2.0, "alltoall": 1.0}[op]

    ctx = Calls()
    assert deepep_seconds(ctx, 8, 1000.0, 2, 8, 2) == 2.0  # the NIC send is the slower
    assert ctx.seen == [("sendrecv", pytest.approx(1000.0 / 2 * 11 / 14), 2, 2), ("alltoall", 1000.0, 4, 1)]
    ctx.seen.clear()
    assert deepep_seconds(ctx, 8, 1000.0, 1, 8, 2) == 1.0 and ctx.seen == [("alltoall", 1000.0, 8, 1)]
    assert deepep_seconds(ctx, 1, 1000.0, 1, 8, 2) == 0.0


def test_the_dispatcher_knob_reaches_the_dispatch_layer_and_is_checked():
    from profiler.errors import UserError
    graph = load_model("gpt", layers=1, hidden=H, heads=HEADS, seq=SEQ, vocab=VOCAB, experts=4, dispatcher="deepep")
    assert [l.dispatcher for l in graph.layers if l.op == "moe_dispatch"] == ["deepep"]
    assert all(l.dispatcher == "" for l in graph.layers if l.op != "moe_dispatch")
    with pytest.raises(UserError, match="dispatcher must be one of"):
        load_model("gpt", layers=1, hidden=H, heads=HEADS, seq=SEQ, vocab=VOCAB, experts=4, dispatcher="nccl")
