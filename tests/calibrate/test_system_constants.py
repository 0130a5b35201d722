"""Per-GPU-family constants fitted to published runs: the fit recovers known constants; the file is checked."""
import pytest

from calibrate.system_constants import FLEET_DTYPES as FLEET_ORDER, SystemConstants, fleet_constants, for_family, gpu_family, load_constants
from predictor.published.constants_fit import MIN_ROWS, ScaledCostModel, fit_family, with_constants
from profiler.errors import UserError


def _rows(a: dict, g: dict, n: int = 12):
    """Synthetic records whose measured time is exactly a_d (F + M) + g_d G + R."""
    rows = []
    for i in range(n):
        d = ("float16", "tf32")[i % 2]
        parts = {"F": 0.05 + 0.01 * i, "M": 0.03 + 0.002 * i, "G": 0.004 * (i % 3), "R": 0.001, "dtype": d}
        measured = a[d] * (parts["F"] + parts["M"]) + g.get(d, 1.0) * parts["G"] + parts["R"]
        rows.append((parts, measured))
    return rows


def test_fit_recovers_known_constants():
    a, g = {"float16": 1.3, "tf32": 2.0}, {"float16": 8.0, "tf32": 6.0}
    rows = _rows(a, g)
    c = fit_family(rows, "A100", [f"r{i}" for i in range(len(rows))], ["src"])
    assert c.flops_time_scale == pytest.approx(a, rel=0.02) and c.bytes_time_scale == c.flops_time_scale
    assert c.grouped_time_scale == pytest.approx(g, rel=0.05)
    assert c.rows == len(rows) and c.fitted_sources == ("src",)


def test_too_few_rows_keep_the_datasheet():
    assert fit_family(_rows({"float16": 2, "tf32": 2}, {}, n=MIN_ROWS - 1), "A100", [], []) is None


def test_fleet_constants_by_hand():
    """A family's dtype without rows takes the fleet's geometric mean over the fitted families; a dtype no family
    has, the mean of its precision class (tf32 from float32, bfloat16 from float16), else of every value."""
    x = SystemConstants(family="X", flops_time_scale={"float32": 2.0, "float16": 1.0},
                        bytes_time_scale={"float32": 2.0, "float16": 1.0}, grouped_time_scale={"float16": 4.0},
                        rows=5, fitted_sources=("a",))
    y = SystemConstants(family="Y", flops_time_scale={"float32": 0.5}, bytes_time_scale={"float32": 0.5},
                        rows=7, fitted_sources=("b",))
    fleet = fleet_constants({"X": x, "Y": y})
    assert fleet.flops_time_scale == {"float32": 1.0, "tf32": 1.0, "float16": 1.0, "bfloat16": 1.0}
    assert fleet.grouped_time_scale == {"float32": 4.0, "tf32": 4.0, "float16": 4.0, "bfloat16": 4.0}
    assert fleet.rows == 12 and fleet.fitted_sources == ("a", "b")
    own = for_family({"X": x, "Y": y}, "Y")
    assert own.flops_time_scale == {"float32": 0.5, "tf32": 1.0, "float16": 1.0, "bfloat16": 1.0}
    assert own.grouped_time_scale["float32"] == 4.0 and own.from_fleet == ("tf32", "float16", "bfloat16")
    assert "fleet" in own.describe("float16") and "fleet" not in own.describe("float32")
    assert "fleet" in own.describe("float32", grouped=True) and own.grouped_from_fleet == FLEET_ORDER
    assert "12 single-node published rows of sources a, b" in own.describe("float16")  # the fleet's rows, not Y's
    assert "fleet" not in for_family({"X": x, "Y": y}, "X").describe("float16", grouped=True)
    assert for_family({"X": x, "Y": y}, "Z") == fleet and for_family({"X": x, "Y": y}, None) == fleet
    assert for_family({}, "X") is None and fleet_constants({}) is None
    three = fleet_constants({"X": x, "Y": y, "W": SystemConstants(family="W", flops_time_scale={"float16": 4.0})})
    assert three.flops_time_scale["float16"] == pytest.approx(2.0, abs=1e-4)  # (1 * 4) ** (1/2)


def test_bounds_hold_on_absurd_data():
    rows = [({"F": 1.0, "M": 0.0, "G": 0.0, "R": 0.0, "dtype": "float32"}, 1000.0) for _ in range(6)]
    assert fit_family(rows, "V100", ["x"] * 6, ["s"]).flops_time_scale["float32"] == pytest.approx(20.0)


class _Flat:
    """A cost model where every call costs 1 s and memory passes 0.5 s."""

    def compute_time_s(self, op, pass_, params, dtype):
        return 1.0

    def memory_time_s(self, bytes_moved, *, where="device"):
        return 0.5

    def framework_overhead_s(self, pass_):
        return 0.0

    def at_bound(self, bound):
        return self


def test_scaled_cost_model_scales_by_kind():
    cm = ScaledCostModel(_Flat(), {"float16": 2.0}, {"float16": 3.0}, 1e-5, {"float16": 7.0}, memory_scale=0.0)
    conv = dict(N=1, C=8, F=8, H=4, W=4, kernel=3, stride=1, padding=1)
    assert cm.compute_time_s("conv2d", "fwd", conv, "float16") == 2.0
    assert cm.compute_time_s("conv2d", "fwd", dict(conv, groups=8), "float16") == 7.0
    assert cm.compute_time_s("batchnorm", "fwd", dict(N=1, C=8, H=4, W=4), "float16") == 3.0
    assert cm.compute_time_s("conv2d", "fwd", conv, "float32") == 1.0  # no constant for the dtype
    assert cm.memory_time_s(1e6) == 0.0 and cm.framework_overhead_s("fwd") == 1e-5
    assert with_constants(_Flat(), None).compute_time_s("gemm", "fwd", {}, "float16") == 1.0
    applied = with_constants(_Flat(), SystemConstants("V100", {"float16": 2.0}, {}, {"float16": 2.0}))
    assert applied.compute_time_s("conv2d", "fwd", dict(conv, groups=8), "float16") == 2.0  # grouped falls back
    assert applied.memory_time_s(1.0) == 0.5


def test_gpu_family_names():
    assert [gpu_family(n) for n in ("Tesla V100-SXM2-16GB", "NVIDIA A100-PCIE-40GB", "NVIDIA A100-SXM4-80GB",
                                    "NVIDIA H100-SXM5-80GB", "Tesla P100-SXM2-16GB", "Tesla K80")] == [
        "V100", "A100-PCIe", "A100", "H100", "P100", None]


def test_constants_file_is_checked(tmp_path):
    path = tmp_path / "c.yaml"
    assert load_constants(tmp_path / "absent.yaml") == {}
    for text, match in [("[1]", "'families'"), ("families: {V100: {flops_time_scale: {float32: -1}}}", "flops_time_scale"),
                        ("families: {V100: {per_layer_s: 5}}", "per_layer_s"), ("families: {V100: 3}", "mapping")]:
        path.write_text(text)
        with pytest.raises(UserError, match=match):
            load_constants(path)
    path.write_text("families: {V100: {flops_time_scale: {float32: 1.2}, rows: 3, fitted_sources: [dle]}}")
    assert load_constants(path)["V100"].flops_time_scale == {"float32": 1.2}


def test_model_error_widens_prediction_intervals():
    """A published profile carries the held-out error quantiles; predict() widens its interval to them."""
    from calibrate.coefficients import ModelError
    from predictor.api import default_plans, load_cost_model, load_model, predict

    cm, _ = load_cost_model("v100-dgx1-8gpu.published")  # a shipped profile by name
    me = cm.coefficients.model_error
    assert me is not None and me.coverage == 0.8 and "*" in me.quantiles and me.sources
    graph = load_model("small_cnn2d")
    plan = default_plans(graph, "data", 64, 8, 8, framework="horovod")[0]
    pred = predict(graph, plan, cm)
    low, high = me.ratio_bounds("data", "horovod")
    assert pred.interval_s[0] <= pred.iteration_s * low + 1e-15 and pred.interval_s[1] >= pred.iteration_s * high - 1e-15
    assert me.ratio_bounds("pipeline", "ddp") == me.ratio_bounds("*", "*")  # falls back to the overall quantiles
    with pytest.raises(ValueError, match="low <= high"):
        ModelError(coverage=0.8, quantiles={"*": (0.5, -0.5)}, rows=3)


def test_error_quantiles_and_loso_coverage():
    from predictor.model_error import error_quantiles

    residuals = [("data", "ddp", x / 100) for x in range(-50, 51)] + [("serial", "ddp", 0.0)] * 3
    q = error_quantiles(residuals, coverage=0.8, min_rows=10)
    # |r| of -0.50..0.50: its 80% quantile is 0.40; the 3 serial rows are too few for a key of their own
    assert q["data/*"] == pytest.approx((-0.40, 0.40)) and "serial/*" not in q and "*" in q
