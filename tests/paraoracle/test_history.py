"""`profiler history`: series across >= 5 dated profiles, change points, the PNG plot, bad input."""
from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import numpy as np
import pytest

from calibrate import history
from paraoracle.cli import profiler_main as main
from profiler.profile import load_profile, save_profile

DATA = Path(__file__).resolve().parents[1] / "data" / "drift_cpu_profile.yaml"
START = dt.datetime(2026, 10, 1, 2, 0, tzinfo=dt.timezone.utc)


def _folder(tmp_path, count=8, step_at=5, step=1.2, benchmark="gemm"):
    """`count` profiles two days apart, re-sampled from the real profile; from profile `step_at` on, every
    `benchmark` sample is `step` times slower."""
    base = load_profile(DATA)
    rng = np.random.default_rng(3)
    folder = tmp_path / "profiles"
    folder.mkdir()
    for i in range(count):
        profile = base.model_copy(deep=True)
        profile.created = (START + dt.timedelta(days=2 * i, hours=int(rng.integers(0, 6)))).isoformat()
        for s in profile.samples:
            factor = step if (i >= step_at and s.benchmark == benchmark) else 1.0
            s.times_s = (rng.choice(s.times_s, len(s.times_s)) * factor).tolist()
        save_profile(profile, folder / f"vm-{i:02d}.yaml")
    return folder


def test_change_point_detection_closed_cases():
    flat = [100.0, 101.0, 99.5, 100.2, 100.4, 99.8, 100.1]
    assert history.detect_change_points(flat) == []
    step = [100.0, 101.0, 99.5, 100.2, 80.0, 80.5, 79.6, 80.3]
    assert history.detect_change_points(step) == [4]
    small_step = [100.0, 100.5, 99.5, 100.2, 97.0, 97.5, 96.8, 97.3]  # -3%: real but under 5%
    assert history.detect_change_points(small_step) == []
    assert history.detect_change_points(small_step, min_effect=0.02) == [4]
    assert history.detect_change_points([1.0, 2.0, 3.0]) == []  # too short for two segments


def test_history_folder_writes_plot_and_finds_the_step(tmp_path, capsys):
    folder = _folder(tmp_path)
    png = tmp_path / "history.png"
    assert main(["history", str(folder), "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert png.stat().st_size > 20_000 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    gemm = next(line for line in out.splitlines() if "compute gemm" in line)
    assert "2026-10-" in gemm and "-16." in gemm  # 20% slower = -16.7% throughput, dated
    others = [line for line in out.splitlines() if "float32 cpu" in line or "stream" in line]
    assert all("none" in line for line in others if "gemm" not in line)


def test_history_json_orders_by_created(tmp_path, capsys):
    folder = _folder(tmp_path, count=5, step_at=3)
    files = sorted(folder.iterdir(), reverse=True)  # given newest first: must still be ordered by `created`
    assert main(["history", *map(str, files), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    gemm = next(s for s in doc["series"] if s["family"] == "compute gemm float32 cpu")
    assert gemm["created"] == sorted(gemm["created"])
    assert len(gemm["values"]) == 5 and gemm["unit"] == "FLOP/s"
    assert [c["created"][:10] for c in gemm["change_points"]] == ["2026-10-07"]


def test_partial_files_are_ignored(tmp_path):
    folder = _folder(tmp_path, count=5)
    (folder / "vm-99.yaml.partial").write_text("not: a profile")
    assert main(["history", str(folder)]) == 0  # would be exit 2 (corrupt profile) if it were read


def test_mixed_machines_refused_unless_forced(tmp_path, capsys):
    folder = _folder(tmp_path, count=5)
    other = load_profile(folder / "vm-04.yaml")
    other.machine.hostname = "other-node"
    save_profile(other, folder / "vm-04.yaml")
    assert main(["history", str(folder)]) == 2
    assert "different machines" in capsys.readouterr().err
    assert main(["history", str(folder), "--force"]) == 0


@pytest.mark.parametrize(
    "argv, message",
    [
        (["history", "{one}"], "at least two profiles"),
        (["history", "{missing}"], "missing: no such profile file and no shipped profile of that name"),
        (["history", "{empty}"], "holds no profile"),
        (["history", "{one}", "{one}", "--plot", "{tmp}/plot.jpg"], ".png"),
        (["history", "{one}", "{one}", "--plot", "{tmp}/nowhere/plot.png"], "does not exist"),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path, capsys, argv, message):
    (tmp_path / "empty").mkdir()
    names = {"one": str(DATA), "missing": str(tmp_path / "missing"), "empty": str(tmp_path / "empty"), "tmp": str(tmp_path)}
    assert main([a.format(**names) for a in argv]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
