"""The storage benchmark (profiler.bench_storage, `profiler calibrate --only storage --path DIR --readers N`) on this
machine at small sizes, its fit (calibrate.storage_fit), and its one-line errors on a bad or read-only place."""
from __future__ import annotations

import errno
import os
import subprocess
import sys
import tempfile

import pytest

from calibrate.storage_fit import fit_storage, published_storage
from profiler import bench_storage
from profiler.errors import UserError
from profiler.profile import load_profile


def test_measures_small_and_large_files_cold_and_warm(tmp_path):
    samples = bench_storage.measure_storage(tmp_path, readers=2, quick=True)
    assert [s.variant for s in samples] == ["small_cold", "small_warm", "large_cold", "large_warm"]
    small, large = samples[0], samples[2]
    assert small.params["files"] == 64 and small.params["file_bytes"] == bench_storage.SMALL_FILE_BYTES
    assert large.params["files"] == 2 and large.bytes_moved == 2 * 4 * 2**20
    assert all(len(s.times_s) == 3 and min(s.times_s) > 0 for s in samples)
    assert list(tmp_path.iterdir()) == []  # its files are gone
    fit = fit_storage(samples)
    assert fit.node_read_bytes_per_s.value > 0 and fit.node_files_per_s.value > 0 and fit.readers == 2
    assert fit.page_cache_bytes_per_s.value > 0
    if fit.filesystem not in bench_storage.SHARED_FILESYSTEMS:  # this machine's /tmp: a local file system
        assert fit.shared is False and fit.local_read_bytes_per_s == fit.node_read_bytes_per_s
        assert fit.aggregate_read_bytes_per_s is None


def test_shared_file_systems_leave_the_shared_figures_unknown(tmp_path):
    samples = bench_storage.measure_storage(tmp_path, readers=1, quick=True)
    for s in samples:
        s.params["filesystem"] = "lustre"
    fit = fit_storage(samples)
    assert fit.shared is True and fit.aggregate_read_bytes_per_s is None and fit.metadata_ops_per_s is None
    assert fit.local_read_bytes_per_s is None and "cannot be measured from one node" in fit.sources[0]


def test_bad_places_are_one_line_errors(tmp_path, monkeypatch):
    with pytest.raises(UserError, match="no such folder"):
        bench_storage.check_path(tmp_path / "missing")
    (tmp_path / "file").write_text("x")
    with pytest.raises(UserError, match="not a folder"):
        bench_storage.check_path(tmp_path / "file")
    for code, words in ((errno.EROFS, "read-only file system"), (errno.EACCES, "not writable")):
        def refuse(*args, code=code, **kwargs):
            raise OSError(code, os.strerror(code))
        monkeypatch.setattr(tempfile, "mkdtemp", refuse)
        with pytest.raises(UserError, match=words):
            bench_storage.check_path(tmp_path)
        monkeypatch.undo()
    with pytest.raises(UserError, match="--readers"):
        bench_storage.measure_storage(tmp_path, readers=0, quick=True)


def _calibrate(*args):
    return subprocess.run([sys.executable, "-m", "paraoracle.cli", "calibrate", "--device", "cpu",
                           "--quick", *args], capture_output=True, text=True)


@pytest.mark.slow  # end to end: a calibration subprocess on this machine; CI runs it
def test_cli_writes_a_storage_profile_and_refuses_bad_places(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    done = _calibrate("--only", "storage", "--path", str(data), "--readers", "2", "--out", str(tmp_path / "s.yaml"))
    assert done.returncode == 0, done.stderr
    storage = load_profile(tmp_path / "s.yaml").coefficients["storage"]
    assert storage["node_read_bytes_per_s"]["value"] > 0 and storage["readers"] == 2
    for args, words in (((("--path", str(tmp_path / "nowhere")),), "no such folder"),
                        ((("--path", str(tmp_path / "s.yaml")),), "not a folder"),
                        (((),), "give --path DIR")):
        flat = [a for pair in args for a in pair]
        bad = _calibrate("--only", "storage", *flat, "--out", str(tmp_path / "x.yaml"))
        assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and words in bad.stderr
    assert not (tmp_path / "x.yaml").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through permission bits")
def test_cli_unwritable_folder_exit_2(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        bad = _calibrate("--only", "storage", "--path", str(locked), "--out", str(tmp_path / "x.yaml"))
    finally:
        locked.chmod(0o755)
    assert bad.returncode == 2 and "not writable" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_published_storage_is_unknown_but_sourced():
    fit = published_storage("a100-dgx-8gpu.published.yaml")
    assert fit.local_capacity_bytes == pytest.approx(4 * 3.84e12) and fit.aggregate_read_bytes_per_s is None
    assert "unknown" in fit.sources[0]
    assert published_storage("v100-abci-4gpu.published.yaml").local_capacity_bytes is None
