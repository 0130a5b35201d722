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
