"""Shared test fixtures and the GPU marker's skip rule."""
import shutil

import pytest
import torch


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU (torch.cuda.is_available() is False)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def nvcc():
    path = shutil.which("nvcc")
    if path is None:
        pytest.skip("nvcc is not on PATH")
    return path


@pytest.fixture(autouse=True, scope="session")
def _private_graph_cache(tmp_path_factory):
    """Traced graphs are cached on disk (predictor.graph_cache): the tests use a cache of their own, never the
    user's, so a stale user cache cannot hide a tracer change."""
    import os

    saved = os.environ.get("PARAORACLE_CACHE")
    os.environ["PARAORACLE_CACHE"] = str(tmp_path_factory.mktemp("paraoracle-cache"))
    yield
    if saved is None:
        os.environ.pop("PARAORACLE_CACHE", None)
    else:
        os.environ["PARAORACLE_CACHE"] = saved
