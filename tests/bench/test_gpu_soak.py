"""`python -m bench gpu-soak`: burst and sustained GEMM rates by hand with a stand-in clock, and a CPU dry run that
writes its figures and windows (the GPU run belongs to scripts/gpu_check.sh)."""
from __future__ import annotations

import json

import pytest

from bench import gpu_soak
from bench.__main__ import main


class FakeDevice:
    """A GEMM that takes 1 ms for its first 10 calls after the idle pause (boost) and 1.25 ms afterwards."""

    def __init__(self):
        self.now, self.calls = 0.0, 0

    def matmul(self):
        self.calls += 1
        self.now += 1e-3 if self.calls <= 11 else 1.25e-3  # the first call is the set-up call

    def clock(self):
        return self.now

    def pause(self, seconds):
        self.now += seconds


def test_burst_and_sustained_rates_by_hand():
    dev, flops = FakeDevice(), 2e9
    result = gpu_soak.soak(dev.matmul, lambda: None, flops, seconds=1.0, window_s=0.1, idle_s=2.0, burst_calls=10,
                           sample=lambda: {"sm_clock_mhz": 1500}, clock=dev.clock, pause=dev.pause)
    assert result["burst_flops_per_s"] == pytest.approx(flops / 1e-3)
    assert result["sustained_flops_per_s"] == pytest.approx(flops / 1.25e-3)
    assert result["sustained_over_burst"] == pytest.approx(0.8)
    assert len(result["windows"]) >= 9 and all(w["sm_clock_mhz"] == 1500 for w in result["windows"])


def test_a_cpu_dry_run_writes_figures_and_windows(tmp_path, capsys):
    assert main(["gpu-soak", "--device", "cpu", "--dtype", "fp32", "--size", "64", "--seconds", "0.2",
                 "--window-s", "0.05", "--idle-s", "0", "--results", str(tmp_path)]) == 0
    figures = json.loads((tmp_path / "gpu-soak.json").read_text())["figures"]
    assert [f["unit"] for f in figures] == ["TFLOP/s", "TFLOP/s", "ratio"] and all(f["value"] > 0 for f in figures)
    windows = [json.loads(line) for line in (tmp_path / "gpu-soak.windows.jsonl").read_text().splitlines()]
    assert windows and all(w["tflops"] > 0 and w["device"] == "cpu" for w in windows)


def test_cuda_without_a_gpu_is_a_one_line_error(capsys, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["gpu-soak", "--seconds", "0.1"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
