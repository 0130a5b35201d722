"""The spatial runner refuses, with a one-line error, a layer whose split slabs would not give each rank its
share of the serial output (a window without padding along the split dim), instead of crashing later."""
from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
import torch

from predictor.layerspec import load_layer_spec
from predictor.runner.spatial import SpatialReplica, _SplitConv, halo_rows
from profiler.errors import UserError


def _layers(tmp_path, padding):
    spec = tmp_path / "net.yaml"
    spec.write_text("name: n\ninput: [3, 16, 16]\nlayers:\n"
                    f"  - {{name: c1, op: conv2d, filters: 4, kernel: 3, stride: 1, padding: {padding}}}\n"
                    "  - {name: p1, op: maxpool, kernel: 2}\n"
                    "  - {name: f, op: flatten}\n"
                    "  - {name: fc, op: linear, out: 10}\n")
    graph = load_layer_spec(str(spec))
    return [l for l in graph.layers if l.op != "input"]


def _check(layers, p_model=2):
    fake = SimpleNamespace(p_model=p_model, split_count=next(i for i, l in enumerate(layers) if l.op == "flatten"))
    SpatialReplica._check(fake, layers)


def test_padded_convs_split(tmp_path):
    """A padded 3x3 conv is accepted, and each rank's slab with its halo rows (zeros past the map's edges, the
    serial padding) gives exactly its share of the serial output: the slabs concatenated are the serial conv."""
    layers = _layers(tmp_path, 1)
    _check(layers)  # raises UserError when refused
    conv = layers[0]
    before, after = halo_rows(conv)
    assert (before, after) == (1, 1)
    torch.manual_seed(0)
    serial = torch.nn.Conv2d(3, 4, 3, stride=1, padding=1)
    split = _SplitConv(copy.deepcopy(serial), conv, group=None)  # its module pads along W only now
    x = torch.randn(2, 3, 16, 16)
    halo = torch.nn.functional.pad(x, (0, 0, before, after))  # what the halo exchange gives the edge ranks
    rows = 16 // 2
    slabs = [split.module(halo[:, :, r * rows: (r + 1) * rows + before + after]) for r in range(2)]
    assert [tuple(s.shape) for s in slabs] == [(2, 4, rows, 16)] * 2
    with torch.no_grad():
        assert torch.allclose(torch.cat(slabs, dim=2), serial(x), atol=1e-5)


def test_unpadded_conv_is_refused(tmp_path):
    layers = _layers(tmp_path, 0)  # 16 -> 14 rows: two slabs of 8 would give 8 + 8 rows
    with pytest.raises(UserError, match="layer c1 .* gives each rank 8 output rows, not its share 7"):
        _check(layers)


def test_a_dilated_conv_splits_with_its_wider_halo_and_a_transposed_one_is_refused(tmp_path):
    """A 3x3 convolution of dilation 2 ('same' padding 2) needs 2 rows from each neighbour; the slabs with that halo
    are the serial convolution. The measured runner does not split a transposed convolution: a one-line error."""
    spec = tmp_path / "net.yaml"
    spec.write_text("name: n\ninput: [3, 16, 16]\nlayers:\n"
                    "  - {name: c1, op: conv2d, filters: 4, kernel: 3, padding: 2, dilation: 2}\n"
                    "  - {name: up, op: conv_transpose2d, filters: 4, kernel: 2, stride: 2}\n"
                    "  - {name: f, op: flatten}\n  - {name: fc, op: linear, out: 10}\n")
    layers = list(load_layer_spec(str(spec)).layers)
    conv = layers[0]
    assert halo_rows(conv) == (2, 2)
    _check([conv] + layers[2:])
    torch.manual_seed(0)
    serial = torch.nn.Conv2d(3, 4, 3, padding=2, dilation=2)
    split = _SplitConv(copy.deepcopy(serial), conv, group=None)
    x = torch.randn(2, 3, 16, 16)
    halo = torch.nn.functional.pad(x, (0, 0, 2, 2))
    slabs = [split.module(halo[:, :, r * 8: (r + 1) * 8 + 4]) for r in range(2)]
    with torch.no_grad():
        assert torch.allclose(torch.cat(slabs, dim=2), serial(x), atol=1e-5)
    with pytest.raises(UserError, match="layer up is a transposed convolution"):
        _check(layers)
