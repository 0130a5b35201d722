"""Activation memory of data+tensor+pipeline against Korthikanti et al. 2022, "Reducing Activation Recomputation in
Large Transformer Models" (MLSys 2023, arXiv 2205.05198), by hand (issue 41 item 3).

Per transformer layer in 16-bit, s tokens, b micro-batch, h hidden, a heads, t tensor ranks (the paper's Table 2):
    tensor parallel               s·b·h·(10 + 24/t + 5·a·s/(h·t))
    + sequence parallel           s·b·h·(34/t + 5·a·s/(h·t))
    + selective recomputation     s·b·h·(10 + 24/t)
    + sequence + selective        s·b·h·34/t
    full recomputation            s·b·h·2                (the layer's input alone)
The first pipeline stage holds L layers' worth with 1F1B (p micro-batches of L/p layers) and L·(1 + (p-1)/(p·v)) with
v interleaved chunks per device (§4.2.3). The paper's Figure 1 (GiB, first stage) and Figure 7 (% of the tensor-parallel
baseline) as Calculon's validation records them (calculon-ai/calculon, calculon/llm/validation.py, seqsel_fig1 and
seqsel_fig7, "These profiled values are reported here: https://arxiv.org/pdf/2205.05198.pdf"); the layouts are the
paper's Table 3 (Calculon's validation/seqsel/fig7/*.json: 175B t8 p8 interleaved 3, micro-batch 1).
"""
from __future__ import annotations

import pytest

from predictor.api import load_cost_model, load_model
from predictor.plan import Plan
from predictor.strategies import evaluate
from predictor.strategies.context import Context

GiB = 2 ** 30
SEQ, VOCAB = 2048, 51200
#: name -> (layers, hidden, heads, t, p, GPUs, global batch, micro-batch, interleaved chunks per device): Table 3
MODELS = {
    "22B": (48, 6144, 64, 8, 1, 8, 4, 4, 1),
    "175B": (96, 12288, 96, 8, 8, 64, 64, 1, 3),
    "530B": (105, 20480, 128, 8, 35, 280, 280, 1, 3),
    "1T": (128, 25600, 160, 8, 64, 512, 512, 1, 1),
}
#: Figure 1: activations of the first stage, GiB: tensor parallelism alone, and with sequence parallelism and
#: selective recomputation
FIGURE_1 = {"22B": {"none": 59.25, "seqsel": 9.5625}, "175B": {"none": 66.84375, "seqsel": 12.3515625},
            "530B": {"none": 114.0234375, "seqsel": 23.076171875}, "1T": {"none": 131.25, "seqsel": 26.5625}}
#: Figure 7: % of the tensor-parallel baseline
FIGURE_7 = {"22B": {"seq": 66.84, "sel": 49.42, "seqsel": 16.18, "full": 7.64},
            "175B": {"seq": 62.04, "sel": 56.53, "seqsel": 18.49, "full": 8.71},
            "530B": {"seq": 58.31, "sel": 62.04, "seqsel": 20.27, "full": 9.42},
            "1T": {"seq": 58.31, "sel": 62.04, "seqsel": 20.27, "full": 9.42}}
#: mode -> (sequence parallel, recompute, granularity)
MODES = {"none": (False, False, "full"), "seq": (True, False, "full"), "sel": (False, True, "selective"),
         "seqsel": (True, True, "selective"), "full": (False, True, "full")}


def per_layer_bytes(mode: str, h: int, a: int, t: int, b: int, s: int = SEQ) -> float:
    """Table 2, by hand."""
    sbh = s * b * h
    return sbh * {"none": 10 + 24 / t + 5 * a * s / (h * t), "seq": 34 / t + 5 * a * s / (h * t),
                  "sel": 10 + 24 / t, "seqsel": 34 / t, "full": 2}[mode]


def layers_held(L: int, p: int, v: int) -> float:
    """Layers' worth of activations on the first stage (§4.2.3)."""
    return L * (1 + (p - 1) / (p * v)) if v > 1 else L


@pytest.fixture(scope="module")
def cost_model():
    return load_cost_model("a100-80gb-dgx-8gpu.published")[0]


def predictions(name: str, cm) -> dict:
    L, h, a, t, p, n, B, mb, v = MODELS[name]
    graph = load_model("gpt", layers=L, hidden=h, heads=a, seq=SEQ, vocab=VOCAB, attention="fused-softmax",
                       residual="bias-dropout-add")
    ctx = Context(graph, cm)
    out = {}
    for mode, (sp, recompute, granularity) in MODES.items():
        plan = Plan("data+tensor+pipeline", batch=B, devices=n, devices_per_node=8, p_data=1, p_tensor=t, stages=p,
                    micro_batches=B // mb, dtype="fp16", optimizer="adam", recompute=recompute,
                    recompute_granularity=granularity, schedule="interleaved" if v > 1 else "1f1b", virtual_stages=v,
                    sequence_parallel=sp, mixed_precision="half")
        pred = evaluate(ctx, plan)
        assert pred.feasible, pred.reason
        assert pred.details["memory_stage"] == 0  # the first stage holds the most
        out[mode] = pred
    return out


@pytest.mark.parametrize("name", list(MODELS))
def test_figures_1_and_7_within_5_percent(name, cost_model):
    L, h, a, t, p, n, B, mb, v = MODELS[name]
    preds = predictions(name, cost_model)
    # Figure 1: the whole first stage's activations (the embedding's dropout mask and token ids included)
    for mode, gib in FIGURE_1[name].items():
        assert preds[mode].activations_bytes / GiB == pytest.approx(gib, rel=0.05), mode
    # Table 2 by hand: the transformer layers' part, per mode
    for mode, pred in preds.items():
        expected = per_layer_bytes(mode, h, a, t, mb) * layers_held(L, p, v)
        assert pred.details["layer_activations_bytes"] == pytest.approx(expected, rel=0.03), mode
    # Figure 7: each strategy's transformer-layer activations as a share of the baseline's
    base = preds["none"].details["layer_activations_bytes"]
    for mode, percent in FIGURE_7[name].items():
        assert 100 * preds[mode].details["layer_activations_bytes"] / base == pytest.approx(percent, rel=0.05), mode


def test_full_recompute_keeps_layer_inputs_and_rebuilds_one_layer(cost_model):
    """22B on t8 p1 with one micro-batch of 4 (Table 5's run): recomputation must save memory (it kept a whole
    stage's activations before, 59.7 GiB either way, and the run 'did not fit' on 80 GB; Megatron ran it)."""
    L, h, a, t, _p, _n, _B, mb, _v = MODELS["22B"]
    preds = predictions("22B", cost_model)
    full, none = preds["full"], preds["none"]
    sbh = SEQ * mb * h
    assert full.details["layer_activations_bytes"] == pytest.approx(2 * sbh * L, rel=1e-9)  # fp16 residual stream
    # the one layer rebuilt in backward: its activations at the tensor-parallel shape (Table 2's first row)
    assert full.workspace_bytes == pytest.approx(per_layer_bytes("none", h, a, t, mb), rel=0.03)
    outside = full.activations_bytes - full.details["layer_activations_bytes"]
    assert outside == pytest.approx(none.activations_bytes - none.details["layer_activations_bytes"], rel=1e-9)
    assert full.memory_bytes < 0.7 * none.memory_bytes
    assert full.fits and not none.fits
    assert full.memory_bytes / GiB == pytest.approx(48, rel=0.05)  # Calculon's 48 GiB for this run (issue 41)
