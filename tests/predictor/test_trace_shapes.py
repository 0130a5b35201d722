"""The tracer's own shape propagation (predictor.trace._ShapeRecorder, which skips modules and functions whose
output shape follows from their arguments) records exactly the shapes torch.fx's ShapeProp does."""
from __future__ import annotations

import pytest
import torch
from torch.fx import symbolic_trace
from torch.fx.passes.shape_prop import ShapeProp

from predictor import zoo
from predictor.trace import _broadcast, _ShapeRecorder


@pytest.mark.parametrize("name, knobs", [("resnet", {"width": 8, "image": 64}), ("inception_v3", {}),
                                         ("efficientnet_b0", {}), ("se_resnext101_32x4d", {}),
                                         ("small_cnn3d", {"width": 4, "image": 16}), ("alexnet", {}),
                                         ("cosmoflow", {"width": 4, "blocks": 3, "image": 16, "fc": 32})])
def test_same_shapes_as_torch_shape_prop(name, knobs):
    with torch.device("meta"):
        module, shape = zoo.build(name, **knobs)
    gm = symbolic_trace(module.to("meta"))
    x = torch.empty((2, *shape), device="meta")
    ShapeProp(gm).propagate(x)
    reference = {n.name: tuple(n.meta["tensor_meta"].shape) for n in gm.graph.nodes
                 if hasattr(n.meta.get("tensor_meta"), "shape")}
    for n in gm.graph.nodes:
        n.meta.pop("tensor_meta", None)
    _ShapeRecorder(gm).run(x)
    ours = {n.name: tuple(n.meta["tensor_meta"].shape) for n in gm.graph.nodes if "tensor_meta" in n.meta}
    assert ours == reference


def test_broadcast_by_hand():
    assert _broadcast((2, 3, 4, 4), (2, 3, 1, 1)) == (2, 3, 4, 4)
    assert _broadcast((3, 1), (4,)) == (3, 4)
    assert _broadcast((2, 3), (2, 4)) is None
