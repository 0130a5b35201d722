"""Transformer ops in the graph, cost and memory models, checked by hand against the published formulas:
FLOPs per GPT layer (Narayanan et al., SC'21, appendix: 24 B s h^2 + 4 B s^2 h forward, lm-head 2 B s h V),
parameters (12 h^2 + 13 h per layer plus embeddings, against torch's own count), activation bytes per layer
(Korthikanti et al., MLSys 2023, §4.1: 34 s b h + 5 a s^2 b in 16-bit), traced shapes against a real forward
pass, the cost model's fallbacks where a profile lacks the transformer families, and the CLI."""
import math

import pytest
import torch

from calibrate import shapes
from calibrate.cost_model import load_cost_model
from calibrate.shipped import shipped_profile
from predictor.api import load_model
from predictor.layercost import LayerCoster, Split
from predictor.memory import saved_tensors
from predictor.plan import Plan
from predictor.strategies import evaluate
from predictor.strategies.context import Context
from predictor.synthetic import SyntheticCostModel
from predictor.trace import example_input, trace_module
from predictor.zoo import build
from profiler.errors import UserError

KNOBS = dict(layers=2, hidden=64, heads=4, seq=32, vocab=512)
GEMM_OPS = ("linear", "bmm", "sdpa")


def _first_block(graph):
    """The layers of the first transformer block: from its first module to the next block's first."""
    names = [l.name for l in graph.layers]
    first = next(i for i, n in enumerate(names) if n.startswith("blocks.0."))
    stop = next(i for i, n in enumerate(names) if n.startswith("blocks.1."))
    return graph.layers[first:stop]


@pytest.mark.parametrize("name, attention, causal_factor", [("gpt", "math", 1.0), ("bert", "math", 1.0),
                                                             ("gpt", "fused-softmax", 1.0),
                                                             ("bert", "sdpa", 1.0), ("gpt", "sdpa", 0.5)])
def test_layer_forward_flops_are_megatrons(name, attention, causal_factor):
    """Per sample (B = 1): 24 s h^2 for the four GEMMs, 4 s^2 h for the score and context products; a fused
    causal attention runs half of the latter (its kernels skip the masked blocks)."""
    g = load_model(name, attention=attention, **KNOBS)
    s, h = KNOBS["seq"], KNOBS["hidden"]
    flops = sum(l.flops_fwd for l in _first_block(g) if l.op in GEMM_OPS)
    assert flops == pytest.approx(24 * s * h ** 2 + causal_factor * 4 * s ** 2 * h, rel=1e-12)
    # the backward passes: 2x the forward GEMMs; fused attention's backward 2.5x its forward (FlashAttention-2)
    attn = [l for l in _first_block(g) if l.op in ("bmm", "sdpa")]
    backward = sum(l.flops_bwd_data + l.flops_bwd_weight for l in attn)
    assert backward == pytest.approx((2.5 if attention == "sdpa" else 2.0) * causal_factor * 4 * s ** 2 * h)


def test_lm_head_flops_and_loss():
    g = load_model("gpt", **KNOBS)
    s, h, v = KNOBS["seq"], KNOBS["hidden"], KNOBS["vocab"]
    head = next(l for l in g.layers if l.name == "head")
    assert head.flops_fwd == 2 * s * h * v and head.params == 0  # tied to the token embedding
    loss = g.layers[-1]
    assert loss.op == "cross_entropy" and loss.input_shape == (s, v) and loss.inputs == ("head",)


def _hand_params(name, layers, hidden, seq, vocab, **_):
    per_layer = 12 * hidden ** 2 + 13 * hidden
    if name == "gpt":
        return layers * per_layer + (vocab + seq) * hidden + 2 * hidden
    return layers * per_layer + (vocab + seq + 2) * hidden + 2 * hidden + hidden ** 2 + 3 * hidden + vocab


@pytest.mark.parametrize("name", ["gpt", "bert"])
@pytest.mark.parametrize("knobs", [KNOBS, dict(layers=3, hidden=96, heads=6, seq=16, vocab=1000)])
def test_parameter_counts_match_torch_and_the_formula(name, knobs):
    module, _ = build(name, **knobs)
    torch_count = sum(p.numel() for p in module.parameters())  # tied weights once
    assert load_model(name, **knobs).params == torch_count == _hand_params(name, **knobs)


@pytest.mark.parametrize("name, attention", [("gpt", "sdpa"), ("gpt", "math"), ("bert", "sdpa"),
                                             ("gpt", "fused-softmax"), ("bert", "fused-softmax")])
def test_traced_shapes_match_a_real_forward_pass(name, attention):
    torch.manual_seed(0)
    module, shape = build(name, attention=attention, **KNOBS)
    seen = {}
    for mod_name, mod in module.named_modules():
        if mod_name and not list(mod.children()):
            mod.register_forward_hook(lambda m, i, o, n=mod_name: seen.__setitem__(n, tuple(o.shape[1:])))
    x = example_input(module, shape, 3)
    assert x.dtype == torch.long and int(x.max()) < KNOBS["vocab"]
    out = module(x)
    traced, _ = build(name, attention=attention, **KNOBS)
    graph = trace_module(traced, shape, name)
    layers = {l.name: l for l in graph.layers}
    checked = [n for n in seen if n in layers]
    assert len(checked) >= 10
    for n in checked:
        if n == "pos" or n == "token_type":
            continue  # position and type ids are one (1, seq) constant: the sample dimension is broadcast
        assert layers[n].output_shape == seen[n], n
    assert layers["head" if name == "gpt" else "decoder"].output_shape == tuple(out.shape[1:])
    assert not graph.unsupported


def _per_layer_saved_bytes(attention, act_bytes=2):
    """Saved bytes per sample of one transformer layer: the model with 2 layers minus the one with 1."""
    totals = []
    for layers in (1, 2):
        g = load_model("gpt", attention=attention, **{**KNOBS, "layers": layers})
        totals.append(sum(t.elems * (t.bytes_per_elem or act_bytes) for t in saved_tensors(g)))
    return totals[1] - totals[0]


def test_activation_memory_per_layer_is_korthikantis():
    """34 s b h + 5 a s^2 b bytes in 16-bit (b = 1): the layer norms' inputs, QKV, score-product operands,
    softmax output, dropout masks and outputs, GELU input, linear inputs. Modelled on top: each layer norm's
    float32 mean and rstd per token (2 norms x 8 bytes x s), which the paper leaves out."""
    s, h, a = KNOBS["seq"], KNOBS["hidden"], KNOBS["heads"]
    assert _per_layer_saved_bytes("math") == 34 * s * h + 5 * a * s ** 2 + 2 * 8 * s


def test_fused_softmax_keeps_korthikantis_count():
    """Megatron's attention (fused scale-mask-softmax) keeps what the unfused path keeps: the probabilities, the
    dropout mask and output; the scale and mask kept nothing there either."""
    s, h, a = KNOBS["seq"], KNOBS["hidden"], KNOBS["heads"]
    assert _per_layer_saved_bytes("fused-softmax") == 34 * s * h + 5 * a * s ** 2 + 2 * 8 * s


def _score_layers(graph):
    """The layers of the first block whose output is the (heads, seq, seq) score matrix."""
    return [l for l in _first_block(graph) if l.output_shape == (KNOBS["heads"], KNOBS["seq"], KNOBS["seq"])]


@pytest.mark.parametrize("name", ["gpt", "bert"])
def test_fused_softmax_is_one_layer_per_block(name):
    """bmm, one softmax layer (scale, mask and softmax), dropout, bmm: exactly one softmax-like pass per block, where
    math runs three: the scale by a number, the mask (GPT's causal masked_fill, BERT's additive padding mask: a
    constant, so both a `scale` of the scores), softmax."""
    fused = load_model(name, attention="fused-softmax", **KNOBS)
    math_ = load_model(name, attention="math", **KNOBS)
    assert not fused.unsupported
    assert [l.op for l in _score_layers(fused)] == ["bmm", "softmax", "dropout"]
    assert [l.op for l in _score_layers(math_)] == ["bmm", "scale", "scale", "softmax", "dropout"]
    softmax = [l for l in fused.layers if l.op == "softmax"]
    assert [l.name for l in softmax] == [f"blocks.{k}.attn.softmax" for k in range(KNOBS["layers"])]
    assert not any(l.op in ("mul", "add", "scale") and l.output_shape == softmax[0].output_shape for l in fused.layers)
    first = _score_layers(fused)
    assert first[1].inputs == (first[0].name,) and first[2].inputs == (first[1].name,)


def test_fused_softmax_op_audit_maps_its_cpu_ops_to_the_softmax_layer():
    """On the CPU the zoo's FusedScaleMaskSoftmax runs its reference forward (mul, masked_fill, softmax) and their
    backwards; every one is in the audit and reaches a layer the tracer made (the scale and mask through softmax)."""
    from predictor import op_audit as oa

    rows, graph = oa.audit_zoo_model("gpt", attention="fused-softmax")
    assert not oa.unmapped(rows) and not oa.missing_layers(rows, {l.op for l in graph.layers})
    seen = {row.key for row in rows}
    assert {("forward", "aten::mul"), ("forward", "aten::masked_fill"), ("forward", "aten::softmax"),
            ("backward", "aten::_softmax_backward_data")} <= seen
    assert "mul" not in {l.op for l in graph.layers}  # the forward scale reaches no mul layer: the softmax layer
    for key in (("forward", "aten::mul"), ("forward", "aten::masked_fill"), ("backward", "aten::mul")):
        assert "softmax" in oa.AUDIT[key].layer_ops, key


def test_fused_softmax_flops_bytes_and_saved_bytes_by_hand():
    """a = 4 heads, s = 32, one sample, fp16: the fused layer over the a s^2 = 4096 scores does softmax's 4 FLOPs
    per element each way, moves 2 a s^2 x 2 B = 16384 B forward (read the scores, write the probabilities) and
    3 a s^2 x 2 B = 24576 B backward (read the probabilities and their gradient, write the scores' gradient),
    costed by the softmax family at {N, C = a, H = W = s} (here its bytes at the profile's triad bandwidth), and
    keeps its output, a s^2 x 2 B = 8192 B."""
    a, s = KNOBS["heads"], KNOBS["seq"]
    g = load_model("gpt", attention="fused-softmax", **KNOBS)
    i = next(k for k, l in enumerate(g.layers) if l.name == "blocks.0.attn.softmax")
    layer = g.layers[i]
    assert (layer.op, layer.input_shape, layer.output_shape) == ("softmax", (a, s, s), (a, s, s))
    assert (layer.flops_fwd, layer.flops_bwd_data, layer.flops_bwd_weight) == (4 * 4096, 4 * 4096, 0)
    params = {"N": 1, "C": a, "H": s, "W": s}
    assert shapes.work("softmax", "fwd", params, "float16")["bytes"] == 16384
    assert shapes.work("softmax", "bwd_data", params, "float16")["bytes"] == 24576
    cm = load_cost_model(shipped_profile("a100-dgx-8gpu.published"))
    assert not cm.compute_in_domain("softmax", "fwd", params, "float16")  # no softmax family: triad bytes

    class Recorder(SyntheticCostModel):
        calls = []

        def compute_time_s(self, op, pass_, p, dtype):
            self.calls.append((op, pass_, dict(p)))
            return cm.compute_time_s(op, pass_, p, dtype)

    fwd, bwd = LayerCoster(g, Recorder(), "fp16").times(i, Split(n=1))
    assert Recorder.calls == [("softmax", "fwd", params), ("softmax", "bwd_data", params)]
    scale = cm.coefficients.compute["relu/fwd/float16"].time_scale.value  # the memory-bound families' scale
    assert (fwd, bwd) == (pytest.approx(scale * cm.memory_time_s(16384)), pytest.approx(scale * cm.memory_time_s(24576)))
    saved = [t for t in saved_tensors(g) if t.producer == i]
    assert [(t.elems, t.bytes_per_elem, t.savers) for t in saved] == [(a * s * s, None, (i,))]  # 2 B in fp16


def test_fused_attention_saves_no_score_matrix():
    """With SDPA the 5 a s^2 b term goes: Q, K, V and the output are kept, plus a float32 log-sum-exp per
    query and head (Dao et al. 2022); the attention dropout is inside the kernel (it keeps only an RNG state).
    The kernel keeps its output while the output projection keeps the copy that merges the heads back
    (reshape of a transposed tensor): 2 s b h more than the unfused path, where the context product's output
    is not kept."""
    s, h, a = KNOBS["seq"], KNOBS["hidden"], KNOBS["heads"]
    assert _per_layer_saved_bytes("sdpa") == 34 * s * h + 2 * s * h + 4 * a * s + 2 * 8 * s


def test_dropout_at_zero_is_the_identity():
    g = load_model("gpt", dropout=0.0, **KNOBS)
    assert not any(l.op == "dropout" for l in g.layers)
    assert sum(l.op == "dropout" for l in load_model("gpt", **KNOBS).layers) == 1 + 2 * KNOBS["layers"]


def _measured_peak_bytes(knobs, batch):
    """Peak live-tensor bytes of the second of two SGD steps with cross-entropy over every token (CPU)."""
    from torch.distributed._tools.mem_tracker import MemTracker

    torch.manual_seed(0)
    model, shape = build("gpt", **knobs)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = example_input(model, shape, batch)

    def step():
        torch.nn.functional.cross_entropy(model(x).flatten(0, 1), x.flatten()).backward()
        opt.step()
        opt.zero_grad(set_to_none=False)

    step()
    tracker = MemTracker()
    tracker.track_external(model, opt)
    with tracker:
        step()
    return tracker.get_tracker_snapshot("peak")[torch.device("cpu")]["Total"]


@pytest.mark.slow  # runs real training steps
@pytest.mark.parametrize("attention", ["math", "sdpa", "fused-softmax"])
def test_memory_within_10_percent_of_live_tensors_on_cpu(attention):
    """Dropout off: on the CPU dropout keeps a float mask (not the bool one of the GPU kernels the model counts)
    and fused attention with dropout runs PyTorch's unfused fallback."""
    knobs = dict(layers=2, hidden=64, heads=4, seq=64, vocab=256, attention=attention, dropout=0.0)
    measured = _measured_peak_bytes(knobs, 4)
    plan = Plan("serial", batch=4, devices=1, devices_per_node=1)
    predicted = evaluate(Context(load_model("gpt", **knobs), SyntheticCostModel()), plan).memory_bytes
    assert predicted == pytest.approx(measured, rel=0.10)


def test_memory_scales_with_the_batch_and_the_loss_is_float32():
    g = load_model("gpt", **KNOBS)
    plans = [Plan("serial", batch=b, devices=1, devices_per_node=1, dtype="bf16") for b in (2, 4)]
    acts = [evaluate(Context(g, SyntheticCostModel()), p).activations_bytes for p in plans]
    assert acts[1] == pytest.approx(2 * acts[0])
    loss = [t for t in saved_tensors(g) if g.layers[t.producer].op == "cross_entropy"]
    assert len(loss) == 1 and loss[0].bytes_per_elem == 4 and loss[0].elems == KNOBS["seq"] * KNOBS["vocab"]


def test_published_profile_costs_transformer_ops_by_fallback():
    """A shipped published profile has no bmm/sdpa/layernorm/gelu/softmax family: bmm costs as the GEMM of
    the same FLOPs, the norms and activations as triad traffic at the scale the profile gives its memory-bound
    families (ReLU's, fitted to published CNN runs), and every substitution is recorded."""
    cm = load_cost_model(shipped_profile("v100-abci-4gpu.published"))
    bmm = {"B": 32, "M": 128, "N": 128, "K": 64}
    assert cm.compute_time_s("bmm", "fwd", bmm, "float32") == cm.compute_time_s(
        "gemm", "fwd", {"M": 32 * 128, "N": 128, "K": 64}, "float32")
    ln = {"N": 8, "C": 128, "H": 1, "W": 768}
    nbytes = 2 * 8 * 128 * 768 * 4
    assert shapes.work("layernorm", "fwd", ln, "float32")["bytes"] == nbytes
    scale = cm.coefficients.compute["relu/fwd/float32"].time_scale.value
    assert scale > 1.0 and cm.coefficients.compute["batchnorm/fwd/float32"].time_scale.value == scale
    assert cm.compute_time_s("layernorm", "fwd", ln, "float32") == pytest.approx(scale * cm.memory_time_s(nbytes))
    sdpa = {"B": 32, "S": 128, "D": 64, "causal": 1}
    full = cm.compute_time_s("sdpa", "fwd", {**sdpa, "causal": 0}, "float32")
    assert cm.compute_time_s("sdpa", "fwd", sdpa, "float32") == pytest.approx(full / 2)
    assert {"bmm fwd float32", "layernorm fwd float32", "sdpa fwd float32"} <= set(cm.substitutions)
    assert cm.compute_in_domain("softmax", "fwd", ln, "float32") is False


def test_linear_on_tokens_is_one_gemm_over_batch_times_seq():
    g = load_model("gpt", **KNOBS)
    qkv = next(i for i, l in enumerate(g.layers) if l.name == "blocks.0.attn.qkv")

    class Recorder(SyntheticCostModel):
        calls = []

        def compute_time_s(self, op, pass_, params, dtype):
            self.calls.append((op, pass_, dict(params)))
            return super().compute_time_s(op, pass_, params, dtype)

    cm = Recorder()
    LayerCoster(g, cm, "fp32").times(qkv, Split(n=4))
    h, s = KNOBS["hidden"], KNOBS["seq"]
    assert ("linear", "fwd", {"M": 4 * s, "N": 3 * h, "K": h}) in cm.calls


def test_every_transformer_layer_is_costed_and_the_cnn_linear_is_unchanged():
    g = load_model("bert", attention="math", **KNOBS)
    coster = LayerCoster(g, SyntheticCostModel(), "bf16")
    for i, layer in enumerate(g.layers):
        fwd, bwd = coster.times(i, Split(n=2))
        assert fwd >= 0 and bwd >= 0
        if layer.op not in ("flatten",):
            assert fwd > 0, layer.name
    cnn = load_model("small_cnn2d")
    fc = next(i for i, l in enumerate(cnn.layers) if l.op == "linear")
    from predictor.layercost import _pass_params
    layer = cnn.layers[fc]
    assert _pass_params(layer, Split(n=8)) == ("linear", {"M": 8, "N": layer.output_shape[0],
                                                          "K": layer.input_shape[0]})


def test_predictor_run_gpt_data_parallel(capsys):
    from predictor.cli import main  # in-process: an uncaught error fails the test

    assert main(["run", "--model", "gpt", "--model-arg", "layers=2", "--batch", "8", "--gpus", "2",
                 "--strategy", "data"]) == 0
    out = capsys.readouterr().out
    assert "gpt" in out and "data" in out
    # the shipped published profile has no transformer families: the run says how it costed them
    assert "no calibrated family for gelu, layernorm, sdpa" in out
    assert main(["run", "--model", "gpt", "--model-arg", "heads=5", "--batch", "8", "--gpus", "2"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "heads" in err


def test_more_layers_cost_more_time_and_memory():
    preds = []
    for layers in (2, 4):
        g = load_model("gpt", **{**KNOBS, "layers": layers})
        preds.append(evaluate(Context(g, SyntheticCostModel()),
                              Plan("data", batch=8, devices=2, devices_per_node=2, p_data=2)))
    assert preds[1].compute_fwd_s > preds[0].compute_fwd_s and preds[1].compute_bwd_s > preds[0].compute_bwd_s
    assert preds[1].memory_bytes > preds[0].memory_bytes


@pytest.mark.parametrize("name, extra", [("gpt", {}), ("gpt", {"attention": "math"}), ("bert", {}),
                                         ("gpt", {"attention": "fused-softmax"}),
                                         ("gpt", {"mlp": "swiglu", "norm": "rmsnorm"})])
def test_runner_builds_the_traced_transformer(name, extra):
    """The validation runner's net from the graph has the zoo model's parameters (the head tied again), its
    output shape, and trains on token ids with a label per token."""
    from predictor.runner.nets import build_graph_net, loss, synthetic_batch

    graph = load_model(name, **extra, **KNOBS)
    net = build_graph_net(graph, 0)
    assert sum(p.numel() for p in net.parameters()) == graph.params
    x, y = synthetic_batch(graph, 3, seed=0)
    assert x.dtype == torch.long and y.shape == (3, KNOBS["seq"])
    out = net(x)
    assert out.shape == (3, KNOBS["seq"], KNOBS["vocab"])
    loss(out, y).backward()
    assert all(p.grad is not None for p in net.parameters())


@pytest.mark.slow  # trains on 1 and 2 ranks
def test_validate_measures_a_gpt_serially_and_data_parallel(tmp_path, capsys):
    import json

    from predictor.cli import main

    suite = tmp_path / "suite.yaml"
    suite.write_text("warmup: 1\niterations: 2\nruns:\n"
                     "  - {model: gpt, knobs: {layers: 2, hidden: 32, heads: 2, seq: 16, vocab: 64}, batch: 4, "
                     "ranks: 1, strategies: [serial]}\n"
                     "  - {model: gpt, knobs: {layers: 2, hidden: 32, heads: 2, seq: 16, vocab: 64}, batch: 4, "
                     "ranks: 2, strategies: [data]}\n")
    out = tmp_path / "runs.jsonl"
    profile = str(shipped_profile("v100-abci-4gpu.published"))  # any profile works for the mechanics
    assert main(["validate", "--profile", profile, "--suite", str(suite), "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["label"] for r in rows] == ["serial", "data"]
    for r in rows:
        assert r["measured_time_s"] > 0 and r["predicted_time_s"] > 0 and r["measured_peak_memory_bytes"] > 0


class _MHANet(torch.nn.Module):
    """An encoder layer written with nn.MultiheadAttention (batch first, self-attention)."""

    def __init__(self, need_weights: bool, batch_first: bool = True):
        super().__init__()
        self.need_weights = need_weights
        self.emb = torch.nn.Embedding(100, 32)
        self.mha = torch.nn.MultiheadAttention(32, 4, dropout=0.1, batch_first=batch_first)
        self.fc = torch.nn.Linear(32, 10)

    def forward(self, ids):
        x = self.emb(ids)
        y, _ = self.mha(x, x, x, need_weights=self.need_weights)
        return self.fc(x + y)


@pytest.mark.parametrize("need_weights", [False, True])
def test_multihead_attention_is_expanded_into_the_layers_it_runs(need_weights):
    """Fused attention when no weights are asked for, else PyTorch's unfused path (scores, softmax, dropout,
    context); parameters equal torch's; attention FLOPs 8 s h^2 (projections) + 4 s^2 h (unfused)."""
    graph = trace_module(_MHANet(need_weights), (16,), "mha")
    assert not graph.unsupported
    assert graph.params == sum(p.numel() for p in _MHANet(need_weights).parameters())
    ops = [l.op for l in graph.layers if l.name.startswith("mha.")]
    if need_weights:
        assert ops == ["linear", "bmm", "softmax", "dropout", "bmm", "copy", "linear"]
    else:
        assert ops == ["linear", "sdpa", "copy", "linear"]
    s, h = 16, 32
    gemm = sum(l.flops_fwd for l in graph.layers if l.name.startswith("mha.") and l.op in GEMM_OPS)
    assert gemm == 8 * s * h ** 2 + 4 * s ** 2 * h
    assert next(l for l in graph.layers if l.name == "add").inputs == ("emb", "mha.out_proj")
    from predictor.runner.nets import check_runnable
    with pytest.raises(UserError, match="validation runner runs it on"):
        check_runnable(graph)


def test_sequence_first_multihead_attention_is_reported():
    graph = trace_module(_MHANet(False, batch_first=False), (16,), "mha")
    assert graph.unsupported == ("mha (MultiheadAttention)",)


def test_llama_style_mlp_and_norms():
    """SwiGLU (three bias-free h x ffn projections, SiLU, a product) and RMSNorm (h weights, rstd saved)."""
    knobs = dict(KNOBS, mlp="swiglu", norm="rmsnorm", ffn=96)
    module, _ = build("gpt", **knobs)
    graph = load_model("gpt", **knobs)
    h, ffn, layers = KNOBS["hidden"], 96, KNOBS["layers"]
    attention = 4 * h * h + 4 * h  # QKV and output projections with biases
    hand = layers * (attention + 3 * h * ffn + 2 * h) + (KNOBS["vocab"] + KNOBS["seq"]) * h + h
    assert graph.params == sum(p.numel() for p in module.parameters()) == hand
    ops = {l.op for l in graph.layers}
    assert {"rmsnorm", "silu", "mul"} <= ops and "layernorm" not in ops and "gelu" not in ops
    coster = LayerCoster(graph, SyntheticCostModel(), "bf16")
    assert all(coster.times(i, Split(n=2))[0] >= 0 for i in range(len(graph.layers)))


HF_STYLE = """import math, torch, torch.nn as nn
class Attn(nn.Module):
    def __init__(self, h=32, heads=4, seq=16):
        super().__init__()
        self.num_heads, self.head_dim = heads, h // heads
        self.c_attn = nn.Linear(h, 3 * h); self.c_proj = nn.Linear(h, h)
        self.attn_dropout = nn.Dropout(0.1); self.resid_dropout = nn.Dropout(0.1)
        self.register_buffer("bias", torch.tril(torch.ones(seq, seq, dtype=torch.bool)).view(1, 1, seq, seq), persistent=False)
    def _split_heads(self, t):
        new_shape = t.size()[:-1] + (self.num_heads, self.head_dim)
        return t.view(new_shape).permute(0, 2, 1, 3)
    def forward(self, hidden):
        query, key, value = self.c_attn(hidden).split(self.num_heads * self.head_dim, dim=2)
        query, key, value = self._split_heads(query), self._split_heads(key), self._split_heads(value)
        w = torch.matmul(query, key.transpose(-1, -2))
        w = w / torch.full([], value.size(-1) ** 0.5, dtype=w.dtype, device=w.device)
        q_len, k_len = query.size(-2), key.size(-2)
        causal = self.bias
        w = torch.where(causal, w, torch.full([], -1e9, device=w.device))
        w = nn.functional.softmax(w, dim=-1).type(value.dtype)
        out = torch.matmul(self.attn_dropout(w), value)
        out = out.permute(0, 2, 1, 3).contiguous()
        out = out.view(out.size()[:-2] + (self.num_heads * self.head_dim,))
        return self.resid_dropout(self.c_proj(out))
class Block(nn.Module):
    def __init__(self):
        super().__init__(); self.ln_1 = nn.LayerNorm(32); self.attn = Attn(); self.ln_2 = nn.LayerNorm(32)
        self.mlp = nn.Sequential(nn.Linear(32, 128), nn.GELU(approximate="tanh"), nn.Linear(128, 32), nn.Dropout(0.1))
    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))
class Model(nn.Module):
    input_shape = (16,)
    def __init__(self):
        super().__init__(); self.wte = nn.Embedding(100, 32); self.wpe = nn.Embedding(16, 32)
        self.h = nn.ModuleList([Block(), Block()]); self.ln_f = nn.LayerNorm(32); self.lm_head = nn.Linear(32, 100, bias=False)
        self.lm_head.weight = self.wte.weight
    def forward(self, input_ids):
        pos = torch.arange(0, input_ids.size(-1), dtype=torch.long, device=input_ids.device).unsqueeze(0)
        x = self.wte(input_ids) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))
def model():
    return Model()
"""


def test_a_huggingface_style_gpt2_traces_costs_and_runs(tmp_path):
    """GPT-2 as HuggingFace writes it (sizes from .size(), permute, split into Q, K, V, scores divided by a
    tensor built from a size, torch.where with a causal buffer, a dtype cast, .contiguous(), position ids from
    torch.arange, a head tied to the token embedding), loaded as file.py:callable: every op known, parameters
    as torch counts them, the same per-layer GEMM FLOPs, and the validation runner trains it."""
    from predictor.runner.nets import build_graph_net, loss, synthetic_batch

    path = tmp_path / "hf_gpt2.py"
    path.write_text(HF_STYLE)
    graph = load_model(f"{path}:model")
    assert not graph.unsupported
    namespace = {}
    exec(compile(HF_STYLE, str(path), "exec"), namespace)
    assert graph.params == sum(p.numel() for p in namespace["model"]().parameters())
    s, h = 16, 32
    gemm = sum(l.flops_fwd for l in graph.layers if l.op in ("linear", "bmm") and l.name != "lm_head") / 2
    assert gemm == 24 * s * h ** 2 + 4 * s ** 2 * h  # per layer, two layers
    assert {"copy", "softmax", "bmm", "layernorm", "gelu"} <= {l.op for l in graph.layers}
    net = build_graph_net(graph, 0)
    x, y = synthetic_batch(graph, 2, seed=0)
    loss(net(x), y).backward()
