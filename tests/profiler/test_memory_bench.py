"""Memory benchmarks: STREAM byte counting, kernel results, the size sweep, LLC detection, host<->device."""
import numpy as np
import pytest
import torch

from kernels.stream import SCALAR, STREAM_OPS, TorchStream, stream_bytes, stream_flops
from profiler import bench_memory as bm, caches
from profiler.cases import GRID_ENV, measure_case
from profiler.errors import UserError


def test_stream_bytes_counted_the_stream_way():
    n = 1000
    assert stream_bytes("copy", n) == 2 * 8 * n
    assert stream_bytes("scale", n) == 2 * 8 * n
    assert stream_bytes("add", n) == 3 * 8 * n
    assert stream_bytes("triad", n) == 3 * 8 * n
    assert stream_bytes("dot", n) == 2 * 8 * n
    assert stream_flops("triad", n) == 2 * n and stream_flops("copy", n) == 0


def test_torch_stream_kernels_compute_stream():
    s = TorchStream(16)
    s.kernel("copy")()  # c = a = 1
    assert torch.all(s.c == 1.0)
    s.kernel("scale")()  # b = s*c
    assert torch.allclose(s.b, torch.full((16,), SCALAR, dtype=torch.float64))
    s.kernel("add")()  # c = a + b
    assert torch.allclose(s.c, torch.full((16,), 1.0 + SCALAR, dtype=torch.float64))
    s.kernel("triad")()  # a = b + s*c
    assert torch.allclose(s.a, torch.full((16,), SCALAR + SCALAR * (1.0 + SCALAR), dtype=torch.float64))
    assert float(s.kernel("dot")()) == pytest.approx(float((s.a * s.b).sum()))


def test_stream_sizes_go_from_cache_to_far_beyond_llc():
    llc = 32 * 2**20
    for quick in (True, False):
        sizes = bm.stream_sizes(llc, quick)
        assert sizes[0] * 8 <= 64 * 2**10  # in L1/L2
        assert sizes[-1] * 8 >= 4 * llc  # each array >= 4x LLC
        assert sizes == sorted(sizes)
    assert len(bm.stream_sizes(llc, False)) > len(bm.stream_sizes(llc, True))


def test_llc_from_sysfs(tmp_path):
    for index, level, size in (("index0", 1, "32K"), ("index2", 2, "1024K"), ("index3", 3, "32768K")):
        (tmp_path / index).mkdir()
        (tmp_path / index / "level").write_text(f"{level}\n")
        (tmp_path / index / "size").write_text(f"{size}\n")
    assert caches.cpu_last_level_cache_bytes(tmp_path) == 32 * 2**20
    assert caches.cpu_last_level_cache_bytes(tmp_path / "missing") == caches.DEFAULT_LLC_BYTES


def test_stream_cases_share_arrays_per_size_and_measure(monkeypatch):
    monkeypatch.setenv(GRID_ENV, "tiny")
    cases = bm.stream_cases("cpu", quick=True)
    assert [c.variant for c in cases[:5]] == list(STREAM_OPS)
    assert {c.dtype for c in cases} == {"float64"}
    s = measure_case(cases[3], "cpu", dict(warmup_s=0.002, budget_s=0.01, min_samples=3, max_samples=5))
    assert s.benchmark == "stream" and s.variant == "triad"
    assert s.bytes_moved == 3 * 8 * s.params["n"] and s.params["array_bytes"] == 8 * s.params["n"]


def test_host_device_needs_cuda():
    with pytest.raises(UserError, match="--device cuda"):
        bm.host_device_cases("cpu", quick=True)


def test_host_device_sizes():
    sizes = bm.host_device_sizes(quick=False)
    assert sizes[0] == 4096 and sizes[-1] == 2**30 and all(b == 4 * a for a, b in zip(sizes, sizes[1:]))


@pytest.mark.gpu
def test_cupy_stream_kernels_match_numpy():
    pytest.importorskip("cupy")
    from kernels.stream import CupyStream

    n = 100_003  # not a multiple of the block size
    s = CupyStream(n)
    for op in STREAM_OPS:
        s.kernel(op)()
    a, b, c = (np.full(n, 1.0), np.full(n, 2.0), np.zeros(n))
    c[:] = a
    b[:] = SCALAR * c
    c[:] = a + b
    a[:] = b + SCALAR * c
    assert np.allclose(s.a.get(), a) and np.allclose(s.b.get(), b) and np.allclose(s.c.get(), c)
    assert s.dot_result() == pytest.approx(float(a @ b), rel=1e-9)


@pytest.mark.gpu
def test_gpu_stream_and_copies_measure(monkeypatch):
    pytest.importorskip("cupy")
    monkeypatch.setenv(GRID_ENV, "tiny")
    timer = dict(warmup_s=0.002, budget_s=0.01, min_samples=3, max_samples=5)
    for case in bm.stream_cases("cuda", quick=True)[:5] + bm.host_device_cases("cuda", quick=True):
        s = measure_case(case, "cuda", timer)
        assert all(t > 0 for t in s.times_s), case.label


def test_gpu_stream_falls_back_to_torch_when_cuda_c_cannot_run(monkeypatch):
    class Broken:
        def __init__(self, n):
            raise ImportError("No module named 'cupy'")

    monkeypatch.setattr(bm, "CupyStream", Broken)
    assert bm.gpu_stream_kernels() == ("torch", "ImportError: No module named 'cupy'")
