"""OpenXLA's measured H100 GEMM table (calibrate.xla_matmul) and the held-out benchmark on it (bench.xla_gemm)."""
import argparse
import re

import numpy as np
import pytest

from calibrate import gpu_kernel_fit as gf
from calibrate.xla_matmul import DATA_FILE, DATA_FILES, load
from profiler.errors import UserError


def test_the_carried_table_reads_as_samples_by_hand():
    """375 entries of b in {1, 2, 4} x m, n, k in 256..4096; 4096^3 in bf16 at 780.2 TFLOP/s is 176 us; a batch of b
    products is one b·m-row GEMM; every sample labelled by its K."""
    gpu, samples = load()
    assert gpu == "H100 SXM5" and set(samples) == {"bfloat16", "tf32"}
    bf16 = samples["bfloat16"]
    assert len(bf16) == len(samples["tf32"]) == 375
    cube = next(s for s in bf16 if s.params["M"] == s.params["N"] == s.params["K"] == 4096)
    assert cube.time_s == pytest.approx(2 * 4096 ** 3 / 7.80164e14, rel=1e-4) and cube.group == "K4096"
    assert {s.group for s in bf16} == {f"K{k}" for k in (256, 512, 1024, 2048, 4096)}
    assert max(s.params["M"] for s in bf16) == 4 * 4096
    gpu, b200 = load(DATA_FILES[1])  # the B200's table: the same 375 products, its own rates
    assert gpu == "B200" and len(b200["bfloat16"]) == 375
    cube = next(s for s in b200["bfloat16"] if s.params["M"] == s.params["N"] == s.params["K"] == 4096)
    assert cube.time_s == pytest.approx(2 * 4096 ** 3 / 1.41687e15, rel=1e-4)


@pytest.mark.parametrize("table, text, field", [
    ("xla", "gpu_key: sm_90\nentries: []\n", "entries"),
    ("xla", "gpu_key: sm_75\nentries:\n  - [1, 256, 256, 256, 1.0e12, 1.0e12]\n", "gpu_key"),
    ("xla", "gpu_key: sm_90\nentries:\n  - [1, 256, 256, 1.0e12, 1.0e12]\n", "entries[0]"),
    ("xla", "gpu_key: sm_90\nentries:\n  - [1, 0, 256, 256, 1.0e12, 1.0e12]\n", "entries[0]"),
    ("xla", "gpu_key: sm_90\nentries:\n  - [1, 256, 256, 256, -1.0, 1.0e12]\n", "entries[0]"),
    ("fp8", "gpu: H100 SXM5\nsources: {a: x}\nentries: {a: []}\n", "entries.a"),
    ("fp8", "gpu: H100 SXM5\nsources: {}\nentries: {a: [[1, 64, 64, 64, 1.0]]}\n", "entries.a"),
    ("fp8", "gpu: H100 SXM5\nsources: {a: x}\nentries: {a: [[1, 64, 64, 64]]}\n", "entries.a[0]"),
    ("fp8", "gpu: H100 SXM5\nsources: {a: x}\nentries: {a: [[0, 64, 64, 64, 1.0]]}\n", "entries.a[0]"),
    ("fp8", "gpu: H100 SXM5\nsources: {a: x}\nentries: {a: [[1, 64, 64, 64, -1.0]]}\n", "entries.a[0]"),
    ("fp8", "entries: {a: [[1, 64, 64, 64, 1.0]]}\n", "gpu"),
])
def test_a_malformed_table_is_a_one_line_error(tmp_path, table, text, field):
    """OpenXLA's table (calibrate.xla_matmul) and the published FP8 products (calibrate.fp8_products) alike."""
    from calibrate import fp8_products
    path = tmp_path / "t.yaml"
    path.write_text(text)
    with pytest.raises(UserError, match=rf"t\.yaml.*{re.escape(field)}") as err:
        (load if table == "xla" else fp8_products.load)(path)
    assert "\n" not in str(err.value)


def test_the_benchmark_holds_out_each_reduction_depth(tmp_path):
    """On a third of the table (every third entry, all five K groups kept): every prediction held out, the shipped
    profile's beside it, figures written."""
    from bench import xla_gemm
    lines = DATA_FILE.read_text().splitlines()
    head = [l for l in lines if not l.startswith("  - ")]
    rows = [l for l in lines if l.startswith("  - ")][::3]
    small = tmp_path / "small.yaml"
    small.write_text("\n".join(head + rows) + "\n")
    gpu, by_dtype = load(small)
    summary, out = xla_gemm.evaluate(gpu, "bfloat16", by_dtype["bfloat16"])
    assert summary["held_out"]["rows"] == len(rows) and all(np.isfinite(r["held_out_s"]) for r in out)
    assert 0.5 < summary["held_out"]["median_accuracy"] <= summary["in_sample"]["median_accuracy"] + 0.05
    assert summary["published_profile"]["rows"] == len(rows)
    parser = argparse.ArgumentParser()
    xla_gemm.add_arguments(parser)
    assert xla_gemm.run(parser.parse_args([str(small), "--results", str(tmp_path / "r")])) == 0
    assert (tmp_path / "r" / "xla-gemm.json").is_file() and (tmp_path / "r" / "xla-gemm-rows.jsonl").is_file()
    measured = np.array([s.time_s for s in by_dtype["bfloat16"]])
    assert np.all(gf.accuracy(measured, measured) == 1.0)


def test_the_grid_reads_the_single_products_as_a_full_table():
    """125 single products (b = 1) over m, n, k in 256..4096; 4096 x 4096 x 1024 in bf16 at 685.2 TFLOP/s."""
    from calibrate.xla_matmul import grid
    dims, rates = grid("sm_90", "bfloat16")
    assert dims == (256, 512, 1024, 2048, 4096) and len(rates) == 125
    assert rates[(4096, 4096, 1024)] == pytest.approx(6.85221e14)
    assert grid("sm_90", "tf32")[1][(4096, 4096, 4096)] == pytest.approx(4.0315e14)


def test_an_efficiency_grid_interpolates_by_hand_and_holds_its_edges():
    """Two axes, knots 0 and 1 (log10 units): values -1, -2 at x0 = 0 and -3, -5 at x0 = 1 (last axis fastest); at
    (0.5, 0.5) the mean of the four, at (0.25, 1) 0.75 * -2 + 0.25 * -5; beyond the knots the edge's value."""
    from calibrate.coefficients import EfficiencyGrid, EfficiencyModel
    from calibrate.compute import efficiency_at
    g = EfficiencyGrid(axes=["a", "b"], knots=[[0.0, 1.0], [0.0, 1.0]], values=[-1.0, -2.0, -3.0, -5.0])
    assert g.value_at([0.5, 0.5]) == pytest.approx(-11 / 4)
    assert g.value_at([0.25, 1.0]) == pytest.approx(0.75 * -2 + 0.25 * -5)
    assert g.value_at([-3.0, 7.0]) == pytest.approx(-2.0) and g.value_at([1.0, 0.0]) == pytest.approx(-3.0)
    model = EfficiencyModel(features=["x", "b", "a"], init=-0.5, grid=g)  # axes found by name among the features
    assert efficiency_at(model, [9.0, 1.0, 0.0]) == pytest.approx(np.exp(-0.5 - 2.0))


@pytest.mark.parametrize("fields, message", [
    (dict(knots=[[0.0, 1.0]], values=[-1.0, -1.0, -1.0, -1.0]), "1 knot lists for 2 axes"),
    (dict(knots=[[1.0, 0.0], [0.0, 1.0]], values=[-1.0] * 4), "strictly rising"),
    (dict(knots=[[0.0, 1.0], [0.0, 1.0]], values=[-1.0] * 3), "3 values for 4"),
    (dict(knots=[[0.0, 1.0], [0.0, 1.0]], values=[-1.0, -1.0, -1.0, 0.5]), "at most 0"),
])
def test_a_malformed_efficiency_grid_is_refused(fields, message):
    from pydantic import ValidationError
    from calibrate.coefficients import EfficiencyGrid
    with pytest.raises(ValidationError, match=message):
        EfficiencyGrid(axes=["a", "b"], **fields)


def test_a_grid_on_a_feature_the_model_lacks_is_refused():
    from pydantic import ValidationError
    from calibrate.coefficients import EfficiencyGrid, EfficiencyModel
    g = EfficiencyGrid(axes=["a"], knots=[[0.0, 1.0]], values=[-1.0, -2.0])
    with pytest.raises(ValidationError, match="grid axis a is not one of the features"):
        EfficiencyModel(features=["x"], init=0.0, grid=g)


def test_a_table_missing_a_product_is_no_grid(tmp_path):
    """Every (m, n, k) of the measured dimensions must be there: one missing is a one-line error naming the file."""
    from calibrate.xla_matmul import grid
    path = tmp_path / "t.yaml"
    rows = [f"  - [1, {m}, {n}, {k}, 1.0e+12, 1.0e+12]" for m in (256, 512) for n in (256, 512) for k in (256, 512)]
    path.write_text("gpu_key: sm_90\nentries:\n" + "\n".join(rows[:-1]) + "\n")
    with pytest.raises(UserError, match=r"t\.yaml: field 'entries': the b = 1 products do not cover"):
        grid("sm_90", "bfloat16", path)
    path.write_text("gpu_key: sm_90\nentries:\n" + "\n".join(rows) + "\n")
    assert grid("sm_90", "tf32", path)[0] == (256, 512)


def test_the_published_fp8_products_read_by_hand():
    """DeepGEMM's 28 products (4 grouped contiguous, 6 grouped masked among them) and tilelang's 7 on an H800, for the
    H100 datasheet entry; 4 x 8192 x 4096 x 7168 at 1297 TFLOP/s is 4 products' FLOPs in their measured time."""
    from calibrate.fp8_products import load as load_fp8
    gpu, products = load_fp8()
    assert gpu == "H100 SXM5" and len(products) == 35
    assert sum(p.source == "deepgemm" for p in products) == 28 and sum(p.groups > 1 for p in products) == 8
    grouped = next(p for p in products if (p.groups, p.m, p.n, p.k) == (4, 8192, 4096, 7168))
    assert grouped.time_s == pytest.approx(2 * 4 * 8192 * 4096 * 7168 / 1297e12)


def test_the_benchmark_scores_a_profiles_fp8_products_by_hand():
    """A cost model running every FP8 product at 1 PFLOP/s: each row's prediction is its products' FLOPs at that rate,
    each source's mean and least accuracy 1 - |predicted - measured| / measured over its rows, by hand."""
    from bench import xla_gemm
    from calibrate.fp8_products import load as load_fp8

    class Flat:
        def compute_time_s(self, op, pass_, params, dtype):
            assert (op, pass_, dtype) == ("linear", "fwd", "float8")
            return 2.0 * params["M"] * params["N"] * params["K"] / 1e15
    out, rows = xla_gemm.fp8_products(Flat())
    assert set(out) == {"deepgemm", "tilelang"} and out["deepgemm"]["rows"] == 28 and len(rows) == 35
    for source in out:
        products = [p for p in load_fp8()[1] if p.source == source]
        acc = [1 - abs(2.0 * p.groups * p.m * p.n * p.k / 1e15 - p.time_s) / p.time_s for p in products]
        assert out[source]["mean_accuracy"] == pytest.approx(sum(acc) / len(acc))
        assert out[source]["least_accuracy"] == pytest.approx(min(acc))
