"""The monotone ceiling (calibrate.monotone_ceiling) by hand, and its column in `bench deepbench`'s table."""
import numpy as np
import pytest

from bench import deepbench
from calibrate.monotone_ceiling import dominated_pairs, monotone_ceiling


def test_pairs_need_equal_configuration_and_every_size_at_most():
    shapes = [("NN", (1, 2, 3)), ("NN", (2, 2, 3)), ("NT", (4, 4, 4)), ("NN", (1, 3, 2))]
    assert dominated_pairs(shapes) == [(0, 1)]  # (1,3,2) vs (2,2,3): neither dominates; NT never pairs with NN


def test_monotone_measurements_are_reachable_exactly():
    acc = monotone_ceiling([("c", (1,)), ("c", (2,)), ("c", (4,))], [1e-6, 2e-6, 3e-6])
    assert np.allclose(acc, 1.0)


def test_a_smaller_shape_measured_slower_costs_by_hand():
    # shape (1) takes 2 us, the larger (2) takes 1 us: a prediction with p1 <= p2 gets at best p1 = p2 = 1 us
    # (accuracies 0.5 and 1) or any p in [1, 2] us (1 - (2 - p)/2 + 1 - (p - 1)/1 is largest at p = 1): mean 0.75
    acc = monotone_ceiling([("c", (1,)), ("c", (2,))], [2e-6, 1e-6])
    assert acc.mean() == pytest.approx(0.75)
    assert sorted(acc) == pytest.approx([0.5, 1.0])


def test_unrelated_configurations_are_free():
    acc = monotone_ceiling([("a", (1,)), ("b", (2,))], [2e-6, 1e-6])  # different transposes: no constraint
    assert np.allclose(acc, 1.0)


def test_bad_input_is_refused():
    with pytest.raises(ValueError):
        monotone_ceiling([("c", (1,))], [0.0])
    with pytest.raises(ValueError):
        monotone_ceiling([("c", (1,)), ("c", (2,))], [1e-6])


def _row(family, params, measured_s):
    return {"gpu": "G", "dtype": "float32", "family": family, "application": "A", "params": params,
            "measured_s": measured_s, "in_sample_s": measured_s, "held_out_s": measured_s, "algorithm": None,
            "cudnn_algorithm": None}


def test_the_deepbench_table_reports_the_ceiling_per_cell():
    def gemm(m, t):
        return _row("gemm/fwd", {"M": m, "N": 16, "K": 64, "transpose_a": False, "transpose_b": False}, t)
    conv = {"N": 1, "C": 8, "H": 7, "W": 7, "F": 8, "kernel": [3, 3], "stride": [1, 1], "padding": [1, 1]}
    rows = [gemm(128, 2e-6), gemm(256, 1e-6), _row("conv2d/fwd", conv, 5e-6)]
    summary = deepbench.table(rows)
    assert summary["G"]["float32"]["gemm/fwd"]["monotone_ceiling"]["mean_accuracy"] == pytest.approx(0.75)
    assert summary["G"]["float32"]["conv2d/fwd"]["monotone_ceiling"]["mean_accuracy"] == pytest.approx(1.0)
    text = deepbench.markdown(summary, rows, [], {})
    assert "monotone ceiling (mean)" in text and "| 75.0% |" in text
    worst = [f for f in deepbench.figures(summary) if f.name.startswith("monotone ceiling")]
    assert len(worst) == 1 and worst[0].value == pytest.approx(75.0)
