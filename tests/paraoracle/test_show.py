"""`profiler show`: headline figures from a real tiny profile and by hand from synthetic samples; bad files
give one line and exit 2."""
from pathlib import Path

import pytest
import yaml

from calibrate.shipped import shipped_profile, shipped_profiles
from paraoracle import cmd_show
from paraoracle.cli import profiler_main as main
from profiler.profile import SCHEMA_VERSION, Machine, Profile, Provenance, Sample, save_profile

QUICK_CPU = str(Path(__file__).resolve().parents[1] / "data" / "drift_quick_cpu_profile.yaml")


def _profile(samples, kind="calibrated", settings=None, coefficients=None):
    return Profile(schema_version=SCHEMA_VERSION, machine=Machine(hostname="h", cpu_cores=2, memory_bytes=8e9),
                   provenance=Provenance(kind=kind, source="test"), created="2026-01-01T00:00:00+00:00",
                   settings=settings or {}, samples=samples, coefficients=coefficients or {})


def _s(benchmark, variant, times, **kw):
    return Sample(benchmark=benchmark, variant=variant, device=kw.pop("device", "cpu"), threads=1, times_s=times, **kw)


def test_headline_figures_by_hand():
    samples = [
        _s("gemm", "fwd", [1.0, 2.0, 3.0], params={"M": 1}, flops=4e9),  # median 2 s -> 2 GFLOP/s
        _s("gemm", "fwd", [1.0], params={"M": 2}, flops=3e9),  # 3 GFLOP/s: the best
        _s("conv3d", "fwd", [0.5], params={"N": 1}, flops=1e9),
        _s("stream", "triad", [1e-6], params={"n": 1000, "array_bytes": 8000}, bytes_moved=24_000, dtype="float64"),
        _s("stream", "triad", [0.1], params={"n": 10**8, "array_bytes": 8e8}, bytes_moved=2.4e9, dtype="float64"),
        _s("host_device", "h2d_pinned", [0.01], params={"size_bytes": 10**8}, bytes_moved=1e8, device="cuda"),
    ]
    p = _profile(samples, settings={"last_level_cache_bytes": 32 * 2**20})
    best = cmd_show.best_compute(p)
    assert best[0][:3] == ("gemm", "fwd", "float32") and best[0][3] == pytest.approx(3e9)
    assert best[1][0] == "conv3d" and best[1][3] == pytest.approx(2e9)
    [(side, kernel, cache, dram)] = cmd_show.stream_figures(p)
    assert (side, kernel) == ("host", "triad")
    assert cache == pytest.approx(24e9) and dram == pytest.approx(24e9)
    [(variant, rate, size)] = cmd_show.host_device_figures(p)
    assert variant == "h2d_pinned" and rate == pytest.approx(1e10) and size == 1e8


def test_collective_busbw_by_hand():
    group = {"size": 4, "nodes": 1}
    samples = [
        _s("allreduce", "throughput", [0.01], params={"size_bytes": 1e8, "group": group}, bytes_moved=1e8),
        _s("allreduce", "latency", [1e-6], params={"size_bytes": 1e8, "group": group}, bytes_moved=1e8),
    ]
    [(op, n, nodes, bw, size)] = cmd_show.collective_figures(_profile(samples))
    # algbw = 1e8 / 0.01 = 1e10; busbw factor 2(n-1)/n = 1.5 (nccl-tests doc/PERFORMANCE.md); latency rows ignored
    assert (op, n, nodes, size) == ("allreduce", 4, 1, 1e8) and bw == pytest.approx(1.5e10)


def test_published_profile_is_flagged_loudly(tmp_path, capsys):
    path = tmp_path / "pub.yaml"
    save_profile(_profile([], kind="published"), path)
    assert main(["show", str(path)]) == 0
    assert "PUBLISHED profile" in capsys.readouterr().out


def test_show_real_tiny_profile(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PARAORACLE_GRID", "tiny")
    path = tmp_path / "tiny.yaml"
    assert main(["calibrate", "--device", "cpu", "--out", str(path)]) == 0
    capsys.readouterr()
    assert main(["show", str(path), "--detail"]) == 0
    out = capsys.readouterr().out
    for needle in ("gemm", "conv2d", "conv3d", "STREAM", "triad", "coefficients", "collectives skipped",
                   "per parameter tensor", "compute calls costed by their own measured times"):
        assert needle in out, needle


@pytest.mark.parametrize("content,needle", [
    ("schema_version: [unclosed", "corrupt YAML"),
    (yaml.safe_dump({"schema_version": 999}), "schema_version"),
    (yaml.safe_dump({"schema_version": SCHEMA_VERSION, "machine": {"hostname": "h"}}), "provenance"),
])
def test_bad_profiles_one_line_exit_2(tmp_path, capsys, content, needle):
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    assert main(["show", str(path)]) == 2  # in-process: an uncaught error fails the test
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and str(path) in lines[0]


def test_partial_profiles_say_so(tmp_path, capsys):
    path = tmp_path / "p.yaml.partial"
    settings = {"interrupted": True, "failed_points": {"relu fwd bfloat16 N=1": "no kernel"}}
    save_profile(_profile([_s("gemm", "fwd", [1.0], params={"M": 1}, flops=1.0)], settings=settings), path)
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "INTERRUPTED" in out and "1 points could not run" in out and "profiler fit" in out


def _lines(capsys, *argv) -> list[str]:
    assert main(["show", *argv]) == 0
    return capsys.readouterr().out.splitlines()


@pytest.mark.parametrize("path", [str(p) for p in shipped_profiles("*.yaml")] + [QUICK_CPU])
def test_first_screen_is_at_most_40_lines(path, capsys):
    """The default is one screen: machine, headline throughputs and bandwidths, the fits' summary."""
    lines = _lines(capsys, path)
    assert len(lines) <= cmd_show.SUMMARY_LINES
    assert lines[-1].endswith("profiler show --detail")
    assert any(line.startswith("compute: ") for line in lines) and any(line.startswith("fits: ") for line in lines)
    assert any(line.startswith(("memory (STREAM triad): ")) for line in lines)
    detail = _lines(capsys, path, "--detail")
    assert len(detail) > len(lines) and any(line.startswith("compute ") and "launch" in line for line in detail)


def test_first_screen_names_the_worst_three_fits(capsys):
    """The quick CPU profile: 10 of its fits miss the 10% target; the three worst by held-out median error."""
    from calibrate.report import WARN_MEDIAN_REL_ERROR, fit_qualities
    from profiler.profile import load_profile

    held = [(q.median_rel_error, name) for name, q in fit_qualities(load_profile(QUICK_CPU)) if q is not None]
    outside = sorted((e, n) for e, n in held if e > WARN_MEDIAN_REL_ERROR)[::-1]
    [fits] = [line for line in _lines(capsys, QUICK_CPU) if line.startswith("fits: ")]
    assert f"{len(outside)} outside the 10% target" in fits and len(outside) >= 3
    assert fits.endswith("worst: " + ", ".join(f"{n} {e:.1%}" for e, n in outside[:3]))
    warnings = [line for line in _lines(capsys, QUICK_CPU, "--detail") if line.startswith("warning: ")]
    assert len(warnings) == len(outside)  # --detail keeps every warning


def test_first_screen_groups_identical_devices(capsys):
    lines = _lines(capsys, str(shipped_profile("v100-dgx1-8gpu.published")))
    assert "gpus: 8 x Tesla V100-SXM2-16GB, 16 GiB" in "\n".join(lines)
    assert not any(line.startswith("gpu 1:") for line in lines)


def test_first_screen_gives_a_meshed_nodes_group_bandwidths(capsys):
    """A DGX-1's pairs and quads all-reduce at their own figures (vTrain's measured sweep): the screen lists them by
    group size; a node whose GPUs are linked alike (HGX A100 4-GPU) has no such line."""
    lines = _lines(capsys, str(shipped_profile("v100-dgx1-8gpu.published")))
    groups = [line for line in lines if line.startswith("all-reduce inside a node by group size: ")]
    assert len(groups) == 1 and "2 GPUs 22.6 GB/s" in groups[0] and "4 GPUs 85.4 GB/s" in groups[0]
    lines = _lines(capsys, str(shipped_profile("a100-sxm-4gpu-2hdr.published")))
    assert not any(line.startswith("all-reduce inside a node by group size") for line in lines)


def test_first_screen_names_the_kernel_model_and_what_it_costs(capsys):
    """An A100 published profile borrows the H200's measured kernel model for its 3-D convolutions only: the screen
    says so, with that model's held-out accuracy of those families; a profile without one has no such line."""
    lines = _lines(capsys, str(shipped_profile("a100-80gb-dgx-8gpu.published")))
    head = [line for line in lines if line.startswith("GPU kernel model")]
    assert head == ["GPU kernel model (A100-SXM4-80GB, 108 SMs) costs conv3d; dtypes bfloat16, float16, float32, tf32"]
    held = [line for line in lines if line.startswith("  float16 held out")]
    assert len(held) == 1 and "conv3d/fwd" in held[0] and "conv2d" not in held[0]
    assert not any(line.startswith("GPU kernel model") for line in _lines(capsys, QUICK_CPU))


def test_first_screen_gives_a_gpu_profiles_host_dispatch(capsys):
    """A published GPU profile's host time per layer pass (the floor a pass takes unless replayed as CUDA graphs) is on
    the first screen; a CPU profile, whose host runs the kernels, has no such line."""
    lines = _lines(capsys, str(shipped_profile("h100-dgx-8gpu.published")))
    assert [line for line in lines if line.startswith("host dispatch per layer pass")] == [
        "host dispatch per layer pass (its least time unless replayed as CUDA graphs): forward 13.5 us, backward 25.4 us;"
        " each expert GEMM 24.75 us"]
    assert not any(line.startswith("host dispatch") for line in _lines(capsys, QUICK_CPU))
