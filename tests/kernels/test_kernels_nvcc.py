"""GPU readiness without a GPU: every CUDA C source in kernels/ compiles with nvcc."""
import subprocess
from pathlib import Path

import pytest

import kernels

SOURCES = sorted(Path(kernels.__file__).parent.glob("*.cu"))


def test_there_are_cuda_sources():
    assert any(p.name == "stream.cu" for p in SOURCES)


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_cuda_source_compiles(source, nvcc, tmp_path):
    result = subprocess.run([nvcc, "--ptx", str(source), "-o", str(tmp_path / "out.ptx")],
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "out.ptx").read_text()
    for name in ("stream_copy", "stream_scale", "stream_add", "stream_triad", "stream_dot"):
        if source.name == "stream.cu":
            assert f".entry {name}(" in text, name  # extern "C": unmangled, as cupy's get_function expects
