"""Tensor-parallel communication overlapped with GEMMs (Megatron-Core's --tp-comm-overlap; method.md §14a), by hand:
the exposed part of one collective, the layer terms a plan then costs, what is not overlapped, and the flags (with
--overlap-param-gather's)."""
from __future__ import annotations

import json

import pytest

from predictor.cli import main
from predictor.plan import Plan
from predictor.strategies import evaluate
from predictor.strategies.hybrid3d import layer_terms, layout_nodes, overlap_exposed_s
from predictor.strategies.tensor import tensor_split
from tests.predictor.test_hybrid3d_layouts import H, HEADS, L, SEQ, setup  # noqa: F401 - the fixture
from tests.predictor.test_hybrid3d_layouts import plan as layouts_plan



def plan(**kw) -> Plan:
    return layouts_plan(**{"sequence_parallel": True, **kw})


def test_exposed_part_of_one_collective_by_hand():
    assert overlap_exposed_s(4.0, 1.0, 4) == pytest.approx(1.0 + 0.75 * 3.0)  # the GEMM hides 1 s of 4
    assert overlap_exposed_s(1.0, 4.0, 4) == pytest.approx(0.25)  # the GEMM is longer: the first ring step waits
    assert overlap_exposed_s(2.0, 5.0, 1) == pytest.approx(2.0)  # one rank: nothing to pipeline
    for c, g in ((0.3, 0.1), (0.1, 0.3), (1.0, 1.0)):
        assert c / 8 <= overlap_exposed_s(c, g, 8) <= c


def test_only_the_column_and_row_layers_collectives_are_overlapped(setup):
    graph, _, ctx = setup
    ts, t, m = tensor_split(graph), 4, 2
    nodes = layout_nodes(plan())[0]
    times, fwd, bwd = layer_terms(ctx, ts, "fp16", t, m, nodes, True)
    times_o, fwd_o, bwd_o = layer_terms(ctx, ts, "fp16", t, m, nodes, True, overlap=True)
    assert times_o == times
    gemms = set(ts.rows) | set(ts.columns)
    assert any(fwd[i] > 0 for i in gemms) and any(fwd[i] > 0 for i in range(len(fwd)) if i not in gemms)
    for i in range(len(fwd)):
        if i in gemms:
            assert fwd_o[i] == pytest.approx(overlap_exposed_s(fwd[i], times[i][0], t))
            assert bwd_o[i] == pytest.approx(overlap_exposed_s(bwd[i], times[i][1], t))
        else:  # the embedding's, head's and loss's collectives stay exposed
            assert (fwd_o[i], bwd_o[i]) == (fwd[i], bwd[i])


def test_a_plan_with_overlap_exposes_less_and_computes_the_same(setup):
    _, _, ctx = setup
    without, with_ = evaluate(ctx, plan()), evaluate(ctx, plan(tp_comm_overlap=True))
    assert without.feasible and with_.feasible, (without.reason, with_.reason)
    assert with_.compute_fwd_s == without.compute_fwd_s and with_.compute_bwd_s == without.compute_bwd_s
    assert 0 < with_.comm_exposed_s["layer_collective"] < without.comm_exposed_s["layer_collective"]
    assert with_.iteration_s < without.iteration_s
    assert with_.memory_bytes == without.memory_bytes


def test_overlap_applies_where_sequence_parallelism_is_on(setup):
    """A capability of the stack: a layout without SP (Megatron-Core then has nothing to overlap) costs as before;
    `predictor run` says so when asked for it explicitly (test_the_run_flag_sets_it)."""
    _, _, ctx = setup
    plain, asked = evaluate(ctx, plan(sequence_parallel=False)), evaluate(ctx, plan(sequence_parallel=False,
                                                                                  tp_comm_overlap=True))
    assert asked.feasible and asked.iteration_s == plain.iteration_s


def test_no_overlap_for_a_tensor_group_across_nodes(setup):
    """Userbuffers exchange through CUDA IPC inside one node: t = 4 over nodes of 2 GPUs is costed as before."""
    _, _, ctx = setup
    across = dict(devices_per_node=2)
    assert evaluate(ctx, plan(tp_comm_overlap=True, **across)).iteration_s == evaluate(ctx, plan(**across)).iteration_s


def test_the_run_flag_sets_it(capsys):
    argv = ["run", "--profile", "a100-40gb-4hdr-8gpu.published", "--model", "gpt", "--model-arg", f"layers={L}",
            "--model-arg", f"hidden={H}", "--model-arg", f"heads={HEADS}", "--model-arg", f"seq={SEQ}",
            "--batch", "32", "--gpus", "16", "--strategy", "data+tensor+pipeline", "--tensor-parallel", "4",
            "--pipeline-stages", "2", "--sequence-parallel", "--dtype", "fp16", "--json"]
    times = []
    for extra in ([], ["--tp-comm-overlap"]):
        assert main(argv + extra) == 0
        best = json.loads(capsys.readouterr().out)["predictions"][0]
        times.append(best["iteration_s"])
        assert best["plan"]["tp_comm_overlap"] == bool(extra)
    assert times[1] < times[0]
    assert main([a for a in argv if a != "--sequence-parallel"] + ["--tp-comm-overlap"]) == 2
    assert "--tp-comm-overlap needs --sequence-parallel" in capsys.readouterr().err


def test_the_run_flag_overlaps_the_parameter_gather(capsys):
    argv = ["run", "--profile", "a100-40gb-4hdr-8gpu.published", "--model", "gpt", "--model-arg", f"layers={L}",
            "--model-arg", f"hidden={H}", "--model-arg", f"heads={HEADS}", "--model-arg", f"seq={SEQ}",
            "--batch", "32", "--gpus", "16", "--strategy", "data+tensor+pipeline", "--tensor-parallel", "4",
            "--pipeline-stages", "2", "--zero", "1", "--dtype", "fp16", "--json"]
    gathers = []
    for extra in ([], ["--overlap-param-gather"]):
        assert main(argv + extra) == 0
        best = json.loads(capsys.readouterr().out)["predictions"][0]
        assert best["plan"]["overlap_param_gather"] == bool(extra)
        gathers.append(best["comm_exposed_s"]["parameter_gather"])
    assert gathers[1] < gathers[0]
    assert main([a for a in argv if a not in ("--zero", "1")] + ["--overlap-param-gather"]) == 2
    assert "--zero 1" in capsys.readouterr().err
