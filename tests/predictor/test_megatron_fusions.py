"""Megatron-LM's fused bias + dropout + residual add (`residual="bias-dropout-add"`, predictor.zoo.transformer),
checked by hand: one `bias_dropout_add` layer per residual branch, its FLOPs and bytes (profiler.opmath), its cost
(an add's forward, a dropout's backward), the tensors it keeps (Korthikanti et al. 2022's count unchanged), the op
audit of its CPU reference, and the runner computing the same function as the unfused model."""
import pytest
import torch

from calibrate import shapes
from calibrate.cost_model import load_cost_model
from calibrate.shipped import shipped_profile
from predictor.api import load_model
from predictor.layercost import LayerCoster, Split
from predictor.memory import saved_tensors
from predictor.strategies.tensor import tensor_split
from predictor.synthetic import SyntheticCostModel
from profiler.opmath import element_pass_bytes
from tests.kernels_only import kernels_only  # kernels alone: the host floor is tested apart

KNOBS = dict(layers=2, hidden=64, heads=4, seq=32, vocab=512, attention="fused-softmax")
FUSED = dict(KNOBS, residual="bias-dropout-add")


def _block(graph, k):
    return [l for l in graph.layers if l.name.startswith(f"blocks.{k}.")]


def test_one_bias_dropout_add_layer_per_residual_branch():
    """Each block: the output projection's and fc2's dropout and residual add become one layer each, reading the
    branch first and the residual second; no (seq, hidden) dropout or add is left in a block."""
    fused, plain = load_model("gpt", **FUSED), load_model("gpt", **KNOBS)
    assert not fused.unsupported
    s, h = KNOBS["seq"], KNOBS["hidden"]
    for k in range(KNOBS["layers"]):
        sites = [l for l in _block(fused, k) if l.op == "bias_dropout_add"]
        assert [l.name for l in sites] == [f"blocks.{k}.add1", f"blocks.{k}.add2"]
        assert [l.inputs[0] for l in sites] == [f"blocks.{k}.attn.proj", f"blocks.{k}.mlp.fc2"]
        assert sites[1].inputs[1] == sites[0].name
        assert all(l.output_shape == (s, h) and l.params == 0 for l in sites)

    def tokenwise(graph, op):
        return sum(l.op == op and l.output_shape == (s, h) for l in graph.layers)

    # the embeddings' sum and dropout stay; the blocks' 2 dropouts and 2 residual adds each go
    assert (tokenwise(fused, "dropout"), tokenwise(fused, "add")) == (1, 1)
    assert (tokenwise(plain, "dropout"), tokenwise(plain, "add")) == (1 + 2 * KNOBS["layers"], 1 + 2 * KNOBS["layers"])
    assert fused.params == plain.params  # the biases stay in the projections
    assert sum(l.flops_fwd for l in fused.layers) == sum(l.flops_fwd for l in plain.layers)


def test_bias_dropout_add_at_zero_dropout_is_the_add():
    g = load_model("gpt", **dict(FUSED, dropout=0.0))
    assert not any(l.op in ("bias_dropout_add", "dropout") for l in g.layers)
    assert [l.op for l in _block(g, 0)].count("add") == 2


def test_bias_dropout_add_flops_bytes_cost_and_saved_bytes_by_hand():
    """s = 32 tokens of h = 64, one sample, fp16: s h = 2048 elements. FLOPs 2 per element forward (mask scale,
    add) and 1 backward; forward reads the branch and the residual and writes the sum, 3 x 2048 x 2 B = 12288 B,
    the add family at {N = 1, C = s, H = 1, W = h}; backward reads dy and writes dx, 2 x 2048 x 2 B = 8192 B at
    the triad bandwidth; it keeps its 1-byte mask, 2048 B."""
    g = load_model("gpt", **FUSED)
    i = next(k for k, l in enumerate(g.layers) if l.name == "blocks.0.add1")
    layer = g.layers[i]
    elems = 2048
    assert (layer.flops_fwd, layer.flops_bwd_data, layer.flops_bwd_weight) == (2 * elems, elems, 0)
    assert element_pass_bytes("bias_dropout_add", "fwd", elems, 2) == 12288
    assert element_pass_bytes("bias_dropout_add", "bwd_data", elems, 2) == 8192
    params = {"N": 1, "C": 32, "W": 64, "H": 1}
    assert shapes.work("add", "fwd", params, "float16")["bytes"] == 12288
    cm = kernels_only(load_cost_model(shipped_profile("a100-dgx-8gpu.published")))

    class Recorder(SyntheticCostModel):
        calls = []

        def compute_time_s(self, op, pass_, p, dtype):
            self.calls.append((op, pass_, dict(p)))
            return cm.compute_time_s(op, pass_, p, dtype)

        def memory_time_s(self, bytes_moved, *, where="device"):
            return cm.memory_time_s(bytes_moved, where=where)

        def framework_overhead_s(self, pass_):
            return 0.0

    coster = LayerCoster(g, Recorder(), "fp16")
    fwd, bwd = coster.times(i, Split(n=1))
    assert Recorder.calls == [("add", "fwd", params)]
    readers = coster.readers[i]  # the next norm and the next residual add: autograd sums their gradients
    assert readers == 2
    assert fwd == pytest.approx(cm.compute_time_s("add", "fwd", params, "float16"))
    assert bwd == pytest.approx(cm.memory_time_s(8192) + cm.memory_time_s(3 * elems * 2))
    saved = [t for t in saved_tensors(g) if i in t.savers]  # its output is kept by the next norm, not by it
    assert [(t.producer, t.elems, t.bytes_per_elem) for t in saved] == [(i, elems, 1)]


@pytest.mark.parametrize("profile", ["a100-dgx-8gpu.published", "v100-abci-4gpu.published"])
def test_fused_site_costs_an_adds_forward_and_a_dropouts_backward(profile):
    """Against the unfused model's layers at the same site: forward is the add's (the dropout's forward pass
    and one layer's framework overhead go), backward the dropout's plus the add's less one overhead."""
    cm = kernels_only(load_cost_model(shipped_profile(profile)))
    fused, plain = load_model("gpt", **FUSED), load_model("gpt", **KNOBS)
    cf, cp = LayerCoster(fused, cm, "fp16"), LayerCoster(plain, cm, "fp16")
    index = {l.name: i for i, l in enumerate(plain.layers)}
    split = Split(n=4)
    overhead = cm.framework_overhead_s("bwd")
    for i, layer in enumerate(fused.layers):
        if layer.op != "bias_dropout_add":
            continue
        add = next(j for j, l in enumerate(plain.layers) if l.op == "add" and l.inputs and
                   plain.layers[index[l.inputs[1]]].op == "dropout" and
                   plain.layers[index[plain.layers[index[l.inputs[1]]].inputs[0]]].name == layer.inputs[0])
        drop = index[plain.layers[add].inputs[1]]
        f, b = cf.times(i, split)
        (fa, ba), (fd, bd) = cp.times(add, split), cp.times(drop, split)
        assert f == pytest.approx(fa)
        assert b == pytest.approx(bd + ba - overhead)
        assert f < fa + fd


def test_bias_dropout_add_keeps_korthikantis_count():
    """34 s b h + 5 a s^2 b bytes in 16-bit per layer (+ the norms' statistics, 2 x 8 s): the fused kernel keeps the
    dropout mask (s b h) as the unfused dropout did, and the add kept nothing."""
    s, h, a = KNOBS["seq"], KNOBS["hidden"], KNOBS["heads"]
    totals = []
    for layers in (1, 2):
        g = load_model("gpt", **{**FUSED, "layers": layers})
        totals.append(sum(t.elems * (t.bytes_per_elem or 2) for t in saved_tensors(g)))
    assert totals[1] - totals[0] == 34 * s * h + 5 * a * s ** 2 + 2 * 8 * s


def test_op_audit_maps_the_fused_residuals_cpu_ops():
    """On the CPU the zoo's BiasDropoutAdd runs its reference (dropout, add; backward dropout's dy * mask): every
    op is in the audit and reaches a layer the tracer made."""
    from predictor import op_audit as oa

    rows, graph = oa.audit_zoo_model("gpt", attention="fused-softmax", residual="bias-dropout-add")
    assert not oa.unmapped(rows) and not oa.missing_layers(rows, {l.op for l in graph.layers})
    for key in (("forward", "aten::add"), ("forward", "aten::dropout"), ("backward", "aten::mul")):
        assert key in {row.key for row in rows}
        assert "bias_dropout_add" in oa.AUDIT[key].layer_ops, key


def test_tensor_parallel_pairs_are_unchanged():
    """The fused layers sit after the row-parallel projections (on whole tokens): the same column/row pairs."""
    pairs = []
    for knobs in (FUSED, KNOBS):
        graph = load_model("gpt", **knobs)
        ts = tensor_split(graph)
        pairs.append(([graph.layers[i].name for i in ts.columns], [graph.layers[i].name for i in ts.rows],
                      ts.width_gcd))
    assert pairs[0] == pairs[1] and len(pairs[0][0]) == 2 * KNOBS["layers"]


def test_runner_computes_the_same_function_as_the_unfused_model():
    """The validation runner (dropout at p = 0) builds both graphs from the same seed: same parameters, same loss,
    same gradients."""
    from predictor.runner.nets import build_graph_net, loss, synthetic_batch

    nets, results = [], []
    for knobs in (FUSED, KNOBS):
        graph = load_model("gpt", **knobs)
        net = build_graph_net(graph, 0)
        x, y = synthetic_batch(graph, 2, seed=0)
        value = loss(net(x), y)
        value.backward()
        nets.append(net)
        results.append(value.detach())
    assert torch.equal(results[0], results[1])
    fused, plain = (list(n.parameters()) for n in nets)
    assert len(fused) == len(plain)
    for p, q in zip(fused, plain):
        assert torch.equal(p, q) and torch.allclose(p.grad, q.grad, rtol=0, atol=1e-7)
