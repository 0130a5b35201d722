"""Collectives repeated over time (`profiler calibrate --only collectives --repeat-over MINUTES`): the rounds kept in
the samples, the quietest round fitted, the background load from inter-leaf rounds, and `profiler history`'s
round-to-round spread."""
from __future__ import annotations

import subprocess
import sys

import pytest

from calibrate.at_scale_fit import quietest_rounds, round_times
from calibrate.history import ROUND_SPREAD_FAMILY, build_series, round_spread
from profiler.at_scale_sections import MAX_ROUNDS, MIN_ROUNDS, rounds
from profiler.profile import Sample, load_profile


def _sample(k, size, nodes, t):
    return Sample(benchmark="allreduce", variant="throughput", device="cpu", threads=1,
                  params={"size_bytes": size, "group": {"size": 4 * nodes, "nodes": nodes}},
                  times_s=[t, t * 1.01, t * 0.99], extra={"round": k})


def test_rounds_schedule():
    assert rounds(0.01) == MIN_ROUNDS and rounds(60) == 12 and rounds(10_000) == MAX_ROUNDS


def test_quietest_round_is_fitted_and_every_round_kept_for_the_load():
    samples = [_sample(k, 2**20, 16, t) for k, t in enumerate((0.02, 0.01, 0.04))]
    samples.append(Sample(benchmark="allreduce", variant="throughput", device="cpu", threads=1,
                          params={"size_bytes": 4, "group": {"size": 2, "nodes": 1}}, times_s=[1e-5]))
    kept = quietest_rounds(samples)
    assert len(kept) == 2 and min(s.times_s[0] for s in kept if s.extra) == 0.01
    assert round_times(samples) == {("allreduce", 64, 16, 2**20.0): pytest.approx({0: 0.02, 1: 0.01, 2: 0.04})}


def test_round_spread_prefers_the_fabric():
    samples = [_sample(k, 2**20, 16, t) for k, t in enumerate((0.01, 0.02, 0.04))]
    samples += [_sample(k, 2**20, 1, t) for k, t in enumerate((1.0, 9.0, 1.0))]  # one node: not the fabric's
    import numpy as np
    expected = np.percentile([0.01, 0.02, 0.04], 95) / np.percentile([0.01, 0.02, 0.04], 5)
    assert round_spread(samples) == pytest.approx(expected)
    assert round_spread([_sample(0, 4, 2, 1.0)]) is None


@pytest.mark.slow
def test_cli_repeats_collectives_and_history_tracks_them(tmp_path):
    """Two quick calibrations of 2 local ranks (3 rounds each, allreduce up to 4 KiB), then profiler history."""
    for name in ("a", "b"):
        done = subprocess.run([sys.executable, "-m", "paraoracle.cli", "calibrate", "--device", "cpu", "--quick",
                               "--only", "collectives", "--ranks", "2", "--collectives", "allreduce",
                               "--max-message-bytes", "4096", "--repeat-over", "0.02", "--out",
                               str(tmp_path / f"{name}.yaml")], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
    profile = load_profile(tmp_path / "a.yaml")
    assert sorted({s.extra["round"] for s in profile.samples}) == [0, 1, 2]
    assert profile.settings["collectives"]["repeat"]["rounds"] == 3
    assert any("--repeat-over" in note for note in profile.coefficients.get("notes", [])) is False  # no fabric fitted
    series = build_series([profile, load_profile(tmp_path / "b.yaml")])
    assert ROUND_SPREAD_FAMILY in {s.family for s in series}
    shown = subprocess.run([sys.executable, "-m", "paraoracle.cli", "history", str(tmp_path)], capture_output=True,
                           text=True)
    assert shown.returncode == 0 and "round-to-round spread" in shown.stdout
