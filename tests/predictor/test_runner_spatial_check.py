"""The spatial runner refuses, with a one-line error, a layer whose split slabs would not give each rank its
share of the serial output (a window without padding along the split dim), instead of crashing later."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from predictor.layerspec import load_layer_spec
from predictor.runner.spatial import SpatialReplica
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
    _check(_layers(tmp_path, 1))


def test_unpadded_conv_is_refused(tmp_path):
    layers = _layers(tmp_path, 0)  # 16 -> 14 rows: two slabs of 8 would give 8 + 8 rows
    with pytest.raises(UserError, match="layer c1 .* gives each rank 8 output rows, not its share 7"):
        _check(layers)
