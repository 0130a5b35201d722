"""Expert tensor parallelism and Megatron-Core's parallel folding (Plan.p_expert_tensor, `--expert-tensor-parallel`;
docs/method.md §14b), each term by hand: an expert linear's GEMMs on its share of the tokens, no tensor-parallel
collectives on whole experts, the expert parameters per rank, the expert and expert-data groups' ranks, the checks,
the search and the command line."""
from __future__ import annotations

import math

import pytest

from predictor.api import load_cost_model, load_model
from predictor.cli import main
from predictor.plan import Plan
from predictor.search import search
from predictor.strategies import evaluate
from predictor.strategies.hybrid3d import moe_cp_terms
from predictor.strategies.moe_context import busiest_factor, expert_replicas, group_nodes, moe_layers
from predictor.strategies.tensor import tensor_split
from tests.predictor.test_moe_context import E, FFN, HEADS, H, K, SEQ, VOCAB, moe_setup


@pytest.fixture(scope="module")
def moe():
    return moe_setup(layers=2, capacity_factor=0)


def plan(**kw) -> Plan:
    base = dict(batch=16, devices_per_node=8, p_data=4, p_tensor=2, stages=1, micro_batches=4, dtype="bf16",
                optimizer="adam", schedule="1f1b", mixed_precision="half", p_expert=4, sequence_parallel=True)
    base.update(kw)
    devices = base["p_data"] * base["p_tensor"] * base["stages"]
    return Plan("data+tensor+pipeline", devices=devices, **base)


def _expert_linears(ctx):
    _, _, experts = moe_layers(ctx)
    return sorted(i for i in experts if ctx.layers[i].op == "linear" and ctx.layers[i].groups > 1)


def test_a_folded_expert_linear_runs_whole_on_its_share_of_the_tokens(moe):
    """t = 2, ep = 4, etp = 1: each rank routes its 1/t of the tokens; the ep ranks' slots land on E/ep local experts,
    each GEMM of m·(s/t)·k·ep/E rows at the full width (no 1/t of the columns), times the busiest rank's factor."""
    graph, cm, ctx = moe
    ts = tensor_split(graph)
    m, t, ep = 1, 2, 4
    times = moe_cp_terms(ctx, ts, "bf16", t, m, 1, True, 1, ep, 1, 1, 1)[0]
    fc1 = _expert_linears(ctx)[0]
    rows = m * SEQ * K * ep // (E * t)
    params = {"M": rows, "N": FFN, "K": H}
    gemm = lambda p: cm.compute_time_s("linear", p, params, "bfloat16")  # noqa: E731
    over_f = cm.framework_overhead_s("fwd")
    busiest = busiest_factor(m * SEQ * K / t, ep, 0)
    assert times[fc1][0] == pytest.approx(busiest * (E // ep * gemm("fwd") + over_f))
    unfolded = moe_cp_terms(ctx, ts, "bf16", t, m, 1, True, 1, ep, 1, 1, 0)[0]  # etp = t: M whole, N / t
    params_t = {"M": m * SEQ * K * ep // E, "N": FFN // t, "K": H}
    gemm_t = cm.compute_time_s("linear", "fwd", params_t, "bfloat16")
    assert unfolded[fc1][0] == pytest.approx(busiest_factor(m * SEQ * K, ep, 0) * (E // ep * gemm_t + over_f))


def test_whole_experts_need_no_tensor_parallel_collectives(moe):
    """At etp = t the experts' column linear all-gathers the dispatched slots over the t ranks and the row linear
    reduce-scatters its output; at etp = 1 neither exists (the all-to-alls sit on the dispatch and combine)."""
    graph, _, ctx = moe
    ts = tensor_split(graph)
    fc1, fc2 = _expert_linears(ctx)[:2]
    _, fwd_t, bwd_t, *_ = moe_cp_terms(ctx, ts, "bf16", 2, 1, 1, True, 1, 4, 1, 1, 0)
    _, fwd_1, bwd_1, *_ = moe_cp_terms(ctx, ts, "bf16", 2, 1, 1, True, 1, 4, 1, 1, 1)
    assert fwd_t[fc1] > 0 and fwd_t[fc2] > 0 and bwd_t[fc1] > 0
    assert fwd_1[fc1] == fwd_1[fc2] == bwd_1[fc1] == bwd_1[fc2] == 0.0
    dense = [i for i in ts.rows if i not in _expert_linears(ctx)]  # the attention's row linear keeps its
    assert dense and all(fwd_1[i] == pytest.approx(fwd_t[i]) for i in dense)


def test_folded_experts_keep_whole_weights(moe):
    """Each rank holds E/ep whole experts at etp = 1, E/ep experts at 1/t each at etp = t; their copies (the
    expert-data group) number T x d / (ETP x EP)."""
    graph, _, ctx = moe
    _, _, experts = moe_layers(ctx)
    expert = sum(graph.layers[i].params for i in experts)
    folded, unfolded = evaluate(ctx, plan(p_expert_tensor=1)), evaluate(ctx, plan())
    assert folded.feasible and unfolded.feasible, (folded.reason, unfolded.reason)
    ts = tensor_split(graph)
    bias = sum(graph.layers[i].params - math.prod(graph.layers[i].weight_shape) for i in experts if i in ts.rows)
    assert bias > 0  # a row-parallel linear keeps its whole bias on every tensor rank
    assert folded.details["expert_params_per_device"] == pytest.approx(expert / 4)
    assert unfolded.details["expert_params_per_device"] == pytest.approx((expert - bias) / 8 + bias / 4)
    assert expert_replicas(plan(p_expert_tensor=1)) == 2 and expert_replicas(plan()) == 1
    assert folded.details["expert_tensor_parallel"] == 1 and unfolded.details["expert_tensor_parallel"] == 2


def test_expert_groups_follow_the_expert_grid():
    """Megatron-Core's expert grid "tp-ep-dp-pp" with ETP fastest: at etp = 1 the ep ranks are contiguous (ranks
    0-3 on one 4-GPU node), at etp = t every t-th rank (0, 2, 4, 6: two nodes); the expert-data copies every
    ETP x EP-th rank."""
    folded, unfolded = plan(p_expert_tensor=1, devices_per_node=4), plan(devices_per_node=4)
    assert group_nodes(folded)["expert"][0] == 1 and group_nodes(unfolded)["expert"][0] == 2
    assert group_nodes(folded)["expert_grad"][0] == 2  # ranks 0 and 4
    assert "ep4/etp1" in folded.describe()
    assert "etp" not in unfolded.describe()


def test_folding_checks(moe):
    _, _, ctx = moe
    assert evaluate(ctx, plan(p_expert=8, p_expert_tensor=1)).feasible  # ep 8 over t x d = 8 ranks: only folded
    for kw, why in ((dict(p_expert=8), "does not divide the data x context ranks 4"),
                    (dict(p_expert_tensor=3), "does not divide the tensor degree 2"),
                    (dict(p_expert=1, p_expert_tensor=1), "needs --expert-parallel above 1"),
                    (dict(p_expert=8, p_expert_tensor=1, p_data=2, batch=8),
                     "x expert tensor degree 1 does not divide the tensor x data x context ranks 4")):
        pred = evaluate(ctx, plan(**kw))
        assert not pred.feasible and why in pred.reason, (kw, pred.reason)


def test_search_tries_folded_layouts(moe):
    graph, cm, _ = moe
    found = search(graph, cm, batch=16, max_devices=8, min_devices=8, devices_per_node=8, dtype="bf16",
                   optimizer="adam", top=400, interval=False)
    folded = [p.plan for p in found.best if p.plan.strategy == "data+tensor+pipeline" and p.plan.p_tensor > 1
              and p.plan.p_expert > 1]
    assert any(p.expert_tensor == 1 for p in folded) and any(p.expert_tensor == p.p_tensor for p in folded)
    assert all(p.expert_tensor in (1, p.p_tensor) for p in folded)
    kept = search(graph, cm, batch=16, max_devices=8, min_devices=8, devices_per_node=8, dtype="bf16",
                  optimizer="adam", top=100, interval=False, expert_parallel=8, expert_tensor_parallel=1)
    assert kept.best and all(p.plan.p_expert == 8 and p.plan.expert_tensor == 1 for p in kept.best)


def test_run_takes_the_flag_and_refuses_it_alone(capsys):
    args = ["run", "--profile", "h100-dgx-8gpu.published", "--model", "gpt", "--model-arg", "layers=2",
            "--model-arg", "experts=8", "--batch", "16", "--gpus", "8", "--strategy", "data+tensor+pipeline",
            "--tensor-parallel", "2", "--pipeline-stages", "1", "--sequence-parallel", "--dtype", "bf16"]
    assert main(args + ["--expert-parallel", "8", "--expert-tensor-parallel", "1"]) == 0
    out = capsys.readouterr().out
    assert "ep8/etp1" in out and "each whole (folded over the 2 tensor ranks)" in out
    assert main(args + ["--expert-tensor-parallel", "1"]) == 2
    err = capsys.readouterr().err
    assert "--expert-tensor-parallel 1: needs --expert-parallel above 1" in err and "Traceback" not in err


# ---- each expert GEMM's launch (docs/method.md §3c) ---------------------------------------------------------------
def test_each_expert_gemm_adds_its_launch_once_per_pass():
    """A grouped expert linear on a GPU profile: E/ep GEMMs, each adding the profile's per-expert launch in the
    forward and in each backward pass (data and weight gradients); SwiGLU's up projection shares its gate's fc1
    launch (one GEMM per expert in Megatron-Core's grouped MLP); none under CUDA graphs (host_floor=False), on a
    CPU profile, or without the figure."""
    from predictor.layercost import LayerCoster, Split, fused_expert_partners
    from tests.kernels_only import kernels_only, with_coefficients

    graph = load_model("gpt", layers=1, hidden=H, heads=HEADS, seq=SEQ, vocab=VOCAB, ffn=FFN, experts=E, top_k=K,
                       dropout=0.0, mlp="swiglu")
    cm = load_cost_model("h100-dgx-8gpu.published")[0]
    c = cm.expert_gemm_dispatch_s()
    assert c == pytest.approx(24.75e-6)
    grouped = [i for i, l in enumerate(graph.layers) if l.op == "linear" and l.groups > 1]
    partners = fused_expert_partners(graph)
    assert len(grouped) == 3 and len(partners) == 1 and max(grouped) not in partners  # gate, up (fused), down
    ep = 4
    with_launch, without = LayerCoster(graph, cm, "bf16"), LayerCoster(graph, kernels_only(cm), "bf16")
    host_f, host_b = cm.host_dispatch_s("fwd"), cm.host_dispatch_s("bwd")
    for i in grouped:
        (f1, b1), (f0, b0) = with_launch.times(i, Split(1, expert_div=ep)), without.times(i, Split(1, expert_div=ep))
        launches = 0 if i in partners else E // ep
        assert f1 == pytest.approx(max(f0 + launches * c, host_f))
        assert b1 == pytest.approx(max(b0 + 2 * launches * c, host_b))
    # CUDA graphs capture the experts only where a capacity fixes their shapes; a dropless router's stay eager
    dropless = load_model("gpt", layers=1, hidden=H, heads=HEADS, seq=SEQ, vocab=VOCAB, ffn=FFN, experts=E, top_k=K,
                          dropout=0.0, mlp="swiglu", capacity_factor=0)
    assert LayerCoster(graph, cm, "bf16", host_floor=False).expert_gemm_s == 0.0
    assert LayerCoster(dropless, cm, "bf16", host_floor=False).expert_gemm_s == pytest.approx(c)
    assert LayerCoster(graph, cm, "fp8").expert_gemm_s == pytest.approx(cm.expert_gemm_dispatch_s(fp8=True))
    assert cm.expert_gemm_dispatch_s(fp8=True) == pytest.approx(2 * c)  # TE's FP8 linear: twice the host work
    assert with_coefficients(cm, device_is_host=True).expert_gemm_dispatch_s() == 0.0
    assert kernels_only(cm).expert_gemm_dispatch_s() == 0.0


# ---- the published rows -----------------------------------------------------------------------------------------
def test_rows_map_their_expert_tensor_degree_and_all_to_all_overlap(tmp_path):
    """A row's `parallelism.expert_tensor` becomes the plan's expert tensor degree (0 when it is the tensor degree),
    its `moe_a2a_overlap` the plan's (docs/method.md §14c); a malformed field is a one-line error naming it."""
    import yaml

    from predictor.published.transformer import (TRANSFORMER_FILE, interpret_transformer,
                                                  load_transformer_corpus)
    from predictor.published.rowmap import Skipped, load_rules
    from profiler.errors import UserError

    rules = load_rules()
    runs = {r.id: r for r in load_transformer_corpus(TRANSFORMER_FILE)}
    folded = interpret_transformer(runs["mzoo-qwen3-235b-a22b-256gpu-t4p8v4e8etp1"], rules)
    assert dict(folded.plan)["p_expert_tensor"] == 1 and dict(folded.plan)["p_tensor"] == 4
    default = interpret_transformer(runs["mcoremoe-mixtral-8x7b-64gpu-t1e8p4v8"], rules)
    assert dict(default.plan)["p_expert_tensor"] == 0
    overlapped = interpret_transformer(runs["mbridge-qwen3-235b-a22b-256gpu-t2p8v4e32"], rules)
    assert not isinstance(overlapped, Skipped)
    assert dict(overlapped.plan)["moe_a2a_overlap"] is True and dict(default.plan)["moe_a2a_overlap"] is False
    rows = yaml.load(TRANSFORMER_FILE.read_text(encoding="utf-8"), Loader=yaml.CSafeLoader)
    rec = next(r for r in rows if r["id"] == "mzoo-qwen3-235b-a22b-256gpu-t4p8v4e8etp1")
    path = tmp_path / "t.yaml"
    for key, value in (("expert_tensor", 0), ("moe_a2a_overlap", "yes")):
        path.write_text(yaml.safe_dump([dict(rec, parallelism=dict(rec["parallelism"], **{key: value}))]),
                        encoding="utf-8")
        with pytest.raises(UserError) as err:
            load_transformer_corpus(path)
        assert f"parallelism.{key}" in str(err.value) and "\n" not in str(err.value)


# ---- Megatron-Core's --recompute-modules (docs/method.md §15) -----------------------------------------------------
def test_output_discarding_modules_drop_their_outputs_and_rerun_their_forward(moe):
    """Selective recomputation of layernorm and moe_act: the norms' and the experts' activation outputs are not kept
    (every tensor those layers make, whoever saves it), and each such layer's forward runs again before backward:
    on one stage, recompute = S x their forward times; the activations fall by exactly their outputs' bytes."""
    from predictor.strategies.hybrid3d import module_layers, moe_cp_terms, rank_saved_bytes, tensor_split

    graph, _, ctx = moe
    ts = tensor_split(graph)
    layers = module_layers(ctx, ("layernorm", "moe_act"))
    _, _, experts = moe_layers(ctx)
    norms = {i for i, l in enumerate(graph.layers) if l.op in ("layernorm", "rmsnorm")}
    acts = {i for i in experts if graph.layers[i].op != "linear"}
    assert norms and acts and layers == frozenset(norms | acts)
    assert module_layers(ctx, ("core_attn",)) == frozenset()
    base = plan(p_tensor=1, p_data=8, p_expert=8, sequence_parallel=False, batch=32)
    none = evaluate(ctx, base)
    mods = evaluate(ctx, replace_plan(base, recompute=True, recompute_granularity="selective",
                                      recompute_modules=("layernorm", "moe_act")))
    assert none.feasible and mods.feasible, (none.reason, mods.reason)
    times = moe_cp_terms(ctx, ts, "bf16", 1, 1, 1, False, 1, 8, 1, 1, 0)[0]
    S = base.micro_batches
    assert mods.recompute_s == pytest.approx(S * sum(times[i][0] for i in layers))
    dropped = sum(x.size_bytes("bf16") for x in ctx.saved if x.producer in layers)
    whole = rank_saved_bytes(ctx, "bf16", [0], 1, frozenset(), frozenset(), 1)[0]
    less = rank_saved_bytes(ctx, "bf16", [0], 1, frozenset(), frozenset(), 1, discard=layers)[0]
    assert dropped > 0 and whole - less == pytest.approx(dropped)
    assert mods.activations_bytes < none.activations_bytes
    assert "recompute/selective/layernorm+moe_act" in mods.plan.describe()
    bad = evaluate(ctx, replace_plan(base, recompute=True, recompute_granularity="selective",
                                     recompute_modules=("mlp",)))
    assert not bad.feasible and "unknown recompute module 'mlp'" in bad.reason


def replace_plan(p: Plan, **kw) -> Plan:
    from dataclasses import replace
    return replace(p, **kw)


def test_recompute_modules_flag_and_row_field(tmp_path, capsys):
    import yaml

    from predictor.published.transformer import TRANSFORMER_FILE, load_transformer_corpus
    from profiler.errors import UserError

    args = ["run", "--profile", "h100-dgx-8gpu.published", "--model", "gpt", "--model-arg", "layers=2",
            "--model-arg", "experts=8", "--batch", "16", "--gpus", "8", "--strategy", "data+tensor+pipeline",
            "--tensor-parallel", "1", "--pipeline-stages", "1", "--expert-parallel", "8", "--dtype", "bf16"]
    assert main(args + ["--recompute", "--recompute-granularity", "selective", "--recompute-modules",
                        "layernorm,moe_act"]) == 0
    assert "recompute/selective/layernorm+moe_act" in capsys.readouterr().out
    assert main(args + ["--recompute-modules", "layernorm"]) == 2
    assert "needs --recompute --recompute-granularity selective" in capsys.readouterr().err
    assert main(args + ["--recompute", "--recompute-granularity", "selective", "--recompute-modules", "mlp"]) == 2
    assert "argument --recompute-modules: 'mlp'" in capsys.readouterr().err
    rows = yaml.load(TRANSFORMER_FILE.read_text(encoding="utf-8"), Loader=yaml.CSafeLoader)
    rec = next(r for r in rows if r["id"] == "mzoo-qwen3-235b-a22b-256gpu-t2p8v4e32etp1")
    assert rec["recompute_modules"] == ["layernorm", "moe_act"]
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump([dict(rec, recompute_modules=["mlp"])]), encoding="utf-8")
    with pytest.raises(UserError) as err:
        load_transformer_corpus(path)
    assert "recompute_modules" in str(err.value) and "\n" not in str(err.value)
