"""The op audit: every aten op a real training step of each zoo model runs (torch.profiler, CPU) maps to a
calibrated family through a layer op the tracer made of the model, or to an explicitly modelled, free or
ignored cost (predictor.op_audit.AUDIT). A new op, or a layer the tracer no longer produces, fails here."""
import pytest
import torch

from predictor import op_audit as oa
from predictor import trace
from predictor.zoo import ZOO

# spawns processes or ranks, or profiles real training steps: not in the fast inner loop (-m "not slow")
pytestmark = pytest.mark.slow

TRACER_OPS = (set(trace._MODULE_OPS.values()) | set(trace._FUNCTION_OPS.values()) | set(trace._METHOD_OPS.values())
              | set(trace._FUSED_MODULES.values()))


def _describe(rows) -> str:
    return "; ".join(f"{r.where} {r.op} ({', '.join(sorted(r.contexts)) or 'no context'})" for r in rows)


CASES = [(name, {}) for name in sorted(ZOO)] + [("gpt", {"attention": "math"}), ("bert", {"attention": "math"}),
                                                ("gpt", {"attention": "fused-softmax"}),
                                                ("bert", {"attention": "fused-softmax"}),
                                                ("gpt", {"attention": "fused-softmax", "residual": "bias-dropout-add"}),
                                                ("gpt", {"mlp": "swiglu", "norm": "rmsnorm"})]


@pytest.mark.parametrize("name, knobs", CASES, ids=[n + "".join(f"-{v}" for v in k.values()) for n, k in CASES])
def test_every_op_of_a_zoo_training_step_is_costed(name, knobs):
    assert name in oa.SMALL_KNOBS, f"add a small version of {name} to predictor.op_audit.SMALL_KNOBS"
    rows, graph = oa.audit_zoo_model(name, **knobs)
    assert not graph.unsupported
    assert not oa.unmapped(rows), f"{name}: ops with no AUDIT entry: {_describe(oa.unmapped(rows))}"
    layer_ops = {layer.op for layer in graph.layers}
    missing = oa.missing_layers(rows, layer_ops)
    assert not missing, f"{name}: ops whose layers the tracer did not produce: {_describe(missing)}"
    seen = {row.key for row in rows}
    linear = any(layer.op == "linear" for layer in graph.layers)  # a detector (ssd300) has none
    assert ({("step", "aten::add_")} | ({("forward", "aten::linear"), ("backward", "aten::mm")} if linear else set())) <= seen
    assert sum(r.calls for r in rows if r.key == ("backward", "aten::mm")) == 2 * 2 * sum(
        layer.op == "linear" for layer in graph.layers)  # bwd_data and bwd_weight per linear layer, 2 steps


def test_ddp_hooks_are_costed():
    rows, _ = oa.audit_zoo_model("small_cnn2d", ddp=True)
    assert not oa.unmapped(rows), _describe(oa.unmapped(rows))
    seen = {row.key for row in rows}
    assert {("collective", "c10d::allreduce_"), ("ddp reducer", "aten::mul"), ("ddp reducer", "aten::copy_")} <= seen


def test_an_op_nobody_decided_on_is_reported():
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Hardswish(), torch.nn.Linear(16, 3))
    unmapped = {row.key for row in oa.unmapped(oa.audit_step(model, (8,)))}
    assert {("forward", "aten::hardswish"), ("backward", "aten::hardswish_backward")} <= unmapped


def test_the_table_is_well_formed_and_printed(capsys):
    for (where, op), entry in oa.AUDIT.items():
        assert where in oa.WHERE and op.startswith(("aten::", "c10d::")), (where, op)
        assert entry.cost in oa.COSTS and entry.reason
        assert set(entry.layer_ops) <= TRACER_OPS, (where, op, entry.layer_ops)
        assert entry.layer_ops or entry.cost != "family", (where, op)
    assert oa.main([]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:4] == ["where", "op", "cost", "costed"] and len(out) == len(oa.AUDIT) + 1
