"""The expert all-to-alls beside another micro-batch's compute (Megatron-Core's combined 1F1B,
`--moe-a2a-overlap`, Plan.moe_a2a_overlap; docs/method.md §14c), each term by hand: the combined share of the passes,
the per-layer hiding, the layers cut into transformer layers, where the layout has it, the command line and the
published rows."""
from __future__ import annotations

from dataclasses import replace

import pytest

from predictor.cli import main
from predictor.plan import Plan
from predictor.strategies import evaluate
from predictor.strategies.hybrid3d import (a2a_overlap_s, combined_share, moe_blocks, moe_cp_terms,
                                           tensor_split)
from predictor.strategies.moe_context import group_nodes, moe_layers
from tests.predictor.test_moe_context import moe_setup


@pytest.fixture(scope="module")
def moe():
    return moe_setup(layers=4, capacity_factor=0)


def plan(**kw) -> Plan:
    base = dict(batch=32, devices_per_node=8, p_data=8, p_tensor=1, stages=1, micro_batches=4, dtype="bf16",
                optimizer="adam", schedule="1f1b", mixed_precision="half", p_expert=8)
    base.update(kw)
    devices = base["p_data"] * base["p_tensor"] * base["stages"]
    return Plan("data+tensor+pipeline", devices=devices, **base)


def test_combined_share_counts_the_passes_that_run_alone():
    """Without pipelining the first forward and the last backward run alone: (S - 1)/S of the passes combine. With
    interleaving rank k's warm-up is 2(K - k - 1) + (v - 1)K + 1 forwards (schedules.py, one more with the overlap),
    as many cool-down backwards run alone; at most all of them."""
    assert combined_share(4, 1, 1, 0) == pytest.approx(3 / 4)
    assert combined_share(1, 1, 1, 0) == 0.0
    assert combined_share(128, 8, 4, 0) == pytest.approx((512 - (14 + 24 + 1)) / 512)
    assert combined_share(128, 8, 4, 7) == pytest.approx((512 - 25) / 512)
    assert combined_share(2, 8, 2, 0) == 0.0  # the warm-up is longer than the step: nothing combines


def test_each_transformer_layer_hides_its_all_to_alls_behind_the_other_pass():
    """Two layers (blocks): forward all-to-alls 3 and 1 s beside backward compute 2 and 5 s, backward all-to-alls
    4 and 1 s beside forward compute 10 and 0.5 s: hideable min(3, 2) + min(4, 10) + min(1, 5) + min(1, 0.5) = 7.5 s
    per micro-batch; S = 4, share 3/4: hidden 22.5 s of 36; at efficiency 0.6 the compute beside it slows by 9 s."""
    a2a_f = [3.0, 0.0, 1.0, 0.0]
    a2a_b = [0.0, 4.0, 0.0, 1.0]
    times = [(4.0, 1.0), (6.0, 1.0), (0.25, 3.0), (0.25, 2.0)]
    exposed, hidden = a2a_overlap_s(a2a_f, a2a_b, times, [[0, 1], [2, 3]], 4, 0.75, 0.6)
    assert hidden == pytest.approx(22.5 - 0.4 * 22.5)
    assert exposed == pytest.approx(36 - 22.5 + 0.4 * 22.5)
    assert sum(a2a_overlap_s(a2a_f, a2a_b, times, [[0, 1], [2, 3]], 4, 0.75, 1.0)) == pytest.approx(36)
    assert a2a_overlap_s(a2a_f, a2a_b, times, [[0, 1], [2, 3]], 4, 0.0, 0.6) == (pytest.approx(36), 0.0)


def test_layers_are_cut_after_each_combine(moe):
    assert moe_blocks([3, 7], range(10)) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert moe_blocks([3, 7], [5, 6, 7, 8]) == [[5, 6, 7], [8]]
    _, _, ctx = moe
    dispatch, combine, _ = moe_layers(ctx)
    blocks = moe_blocks(combine, range(ctx.n_layers))
    assert len([b for b in blocks if set(b) & set(dispatch)]) == len(dispatch) == 4  # one block per MoE layer


def test_the_overlap_replaces_the_exposed_all_to_all_by_the_formula(moe):
    """One stage, S = 4 micro-batches of 1: expert_alltoall exposed = S·ΣA - hidden + (1 - eta)·hidden with hidden from the
    layer terms (moe_cp_terms) at share 3/4; compute, the other collectives and the memory are unchanged."""
    graph, cm, ctx = moe
    base, over = plan(), plan(moe_a2a_overlap=True)
    assert over.moe_a2a_overlapped and "ep8/a2a-overlap" in over.describe()
    p0, p1 = evaluate(ctx, base), evaluate(ctx, over)
    ts = tensor_split(graph)
    groups = group_nodes(base)
    times, _, _, a2a_f, a2a_b, _, _ = moe_cp_terms(ctx, ts, "bf16", 1, 32 // 8 // 4, 1, False, 1, 8,
                                                  groups["context"][0], groups["expert"][0], 1)
    blocks = moe_blocks(moe_layers(ctx)[1], range(ctx.n_layers))
    exposed, hidden = a2a_overlap_s(a2a_f, a2a_b, times, blocks, 4, 3 / 4, cm.overlap_efficiency())
    assert p0.comm_exposed_s["expert_alltoall"] == pytest.approx(4 * (sum(a2a_f) + sum(a2a_b)))
    assert p1.comm_exposed_s["expert_alltoall"] == pytest.approx(exposed)
    assert p1.comm_hidden_s["expert_alltoall"] == pytest.approx(hidden) and hidden > 0
    assert p1.iteration_s < p0.iteration_s
    assert p1.compute_fwd_s == p0.compute_fwd_s and p1.memory_bytes == p0.memory_bytes
    for key in ("layer_collective", "gradient"):
        assert p1.comm_exposed_s.get(key) == p0.comm_exposed_s.get(key)


def test_the_overlap_applies_only_where_megatron_runs_it(moe):
    """No expert parallelism, two stages on plain 1F1B, full recomputation or a float32 model: not applied (the same
    prediction; Megatron-Core's TransformerConfig refuses them); two stages interleaved: applied."""
    _, _, ctx = moe
    for kw in (dict(p_expert=1), dict(stages=2, p_data=4, p_expert=4),
               dict(recompute=True, recompute_granularity="full"), dict(dtype="fp32")):
        off, on = plan(**kw), plan(moe_a2a_overlap=True, **kw)
        assert not on.moe_a2a_overlapped and "a2a-overlap" not in on.describe()
        assert evaluate(ctx, on).iteration_s == pytest.approx(evaluate(ctx, off).iteration_s)
    inter = plan(stages=2, p_data=4, p_expert=4, schedule="interleaved", virtual_stages=2, micro_batches=4)
    assert evaluate(ctx, inter).feasible
    assert replace(inter, moe_a2a_overlap=True).moe_a2a_overlapped
    off, on = evaluate(ctx, inter), evaluate(ctx, replace(inter, moe_a2a_overlap=True))
    assert on.iteration_s < off.iteration_s
    # the interleaved warm-up runs one more forward: rank 0 holds 2(K - 1) + (v - 1)K + 1 + 1 = 6 chunk micro-batches,
    # not 5, so its activations grow by a fifth
    from predictor.strategies.pipeline import in_flight
    assert in_flight(replace(inter, moe_a2a_overlap=True), 0) == in_flight(inter, 0) + 1 == 6
    assert on.activations_bytes == pytest.approx(off.activations_bytes * 6 / 5)


def test_run_takes_the_flag_and_refuses_it_where_it_cannot_apply(capsys):
    args = ["run", "--profile", "h100-dgx-8gpu.published", "--model", "gpt", "--model-arg", "layers=2",
            "--model-arg", "experts=8", "--batch", "32", "--gpus", "8", "--strategy", "data+tensor+pipeline",
            "--tensor-parallel", "1", "--dtype", "bf16"]
    assert main(args + ["--pipeline-stages", "1", "--expert-parallel", "8", "--moe-a2a-overlap"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # the table wraps at the terminal's width
    assert "ep8/a2a-overlap" in out and "hidden behind another micro-batch's compute" in out
    for extra, why in ((["--pipeline-stages", "1"], "needs --expert-parallel above 1"),
                       (["--pipeline-stages", "2", "--expert-parallel", "4"], "needs --schedule interleaved"),
                       (["--pipeline-stages", "1", "--expert-parallel", "8", "--recompute"],
                        "not with full recomputation"),
                       (["--pipeline-stages", "1", "--expert-parallel", "8", "--dtype", "fp32"], "bf16 or fp16")):
        assert main(args + extra + ["--moe-a2a-overlap"]) == 2
        err = capsys.readouterr().err
        assert why in err and "Traceback" not in err and err.count("\n") == 1


def test_published_overlap_pairs_are_rows():
    """Both published A/B pairs are in the corpus, each overlapped row mapped with the overlap and its pair without."""
    from predictor.published.rowmap import Skipped, load_rules
    from predictor.published.transformer import TRANSFORMER_FILE, interpret_transformer, load_transformer_corpus

    rules = load_rules()
    runs = {r.id: r for r in load_transformer_corpus(TRANSFORMER_FILE)}
    for pair in ("mbridge-qwen3-30b-a3b-bf16-16gpu-ep16d16", "mzoo-qwen3-235b-a22b-256gpu-t2p8v4e32etp1"):
        without, with_ = (interpret_transformer(runs[pair + tail], rules) for tail in ("", "-a2aoverlap"))
        assert not isinstance(without, Skipped) and not isinstance(with_, Skipped)
        assert dict(with_.plan)["moe_a2a_overlap"] and not dict(without.plan)["moe_a2a_overlap"]
        assert runs[pair + "-a2aoverlap"].measured_s < runs[pair].measured_s


def test_search_gives_the_overlap_to_every_expert_layout_that_has_it(moe):
    from predictor.search import search

    graph, cm, _ = moe
    found = search(graph, cm, batch=32, max_devices=8, min_devices=8, devices_per_node=8, dtype="bf16",
                   optimizer="adam", top=400, interval=False, moe_a2a_overlap=True)
    experts = [p.plan for p in found.best if p.plan.p_expert > 1]
    assert experts and any(p.moe_a2a_overlapped for p in experts)
    assert all(p.moe_a2a_overlapped == (p.stages == 1 or p.schedule == "interleaved") for p in experts
               if not (p.recompute and p.recompute_granularity == "full"))
