"""`profiler fit PROFILE [--out PATH]`: refits in place or elsewhere; bad input is one line, exit 2."""
import numpy as np

from calibrate.synthetic import collective_samples, hockney, profile_with, stream_samples
from paraoracle.cli import profiler_main as main
from profiler.profile import load_profile, save_profile

SIZES = [2.0**k for k in range(4, 20)]


def write(tmp_path, samples, name="p.yaml"):
    path = tmp_path / name
    save_profile(profile_with(samples), path)
    return path


def test_fits_in_place(tmp_path, capsys):
    rng = np.random.default_rng(0)
    path = write(tmp_path, collective_samples("allreduce", 2, SIZES, hockney(10e-6, 2e9), rng))
    assert main(["fit", str(path)]) == 0
    profile = load_profile(path)
    assert profile.coefficients["collectives"][0]["op"] == "allreduce"
    assert len(profile.samples) == len(SIZES)  # samples are kept
    assert "1 collective fits" in capsys.readouterr().out


def test_out_leaves_the_source_untouched(tmp_path):
    rng = np.random.default_rng(1)
    path = write(tmp_path, stream_samples([2.0**k for k in range(12, 24)], lambda s: 1e-6 + s / 1e10, rng))
    before = path.read_text()
    out = tmp_path / "fitted.yaml"
    assert main(["fit", str(path), "--out", str(out)]) == 0
    assert path.read_text() == before
    assert "host/triad" in load_profile(out).coefficients["memory"]


def test_profile_without_samples(tmp_path, capsys):
    path = write(tmp_path, [])
    assert main(["fit", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "has no samples" in err and str(path) in err


def test_collective_with_one_message_size(tmp_path, capsys):
    rng = np.random.default_rng(2)
    path = write(tmp_path, collective_samples("allreduce", 2, [4096], hockney(10e-6, 2e9), rng))
    assert main(["fit", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "allreduce (group of 2, 1 node) has throughput samples for only one message size (4096 bytes); need >= 2" in err


def test_missing_file_and_unwritable_out(tmp_path, capsys):
    assert main(["fit", str(tmp_path / "nope.yaml")]) == 2
    assert "no such profile file" in capsys.readouterr().err
    rng = np.random.default_rng(3)
    path = write(tmp_path, collective_samples("allreduce", 2, SIZES, hockney(10e-6, 2e9), rng))
    assert main(["fit", str(path), "--out", str(tmp_path / "no" / "dir.yaml")]) == 2
    assert "does not exist" in capsys.readouterr().err
