"""Built-in models as torch.nn.Modules, constructible at full or down-scaled size.

`ZOO[name]` = (module, builder, input-shape function), by name: the module is imported only when a model is
built, so listing the zoo (and predicting from a cached graph, predictor.graph_cache) needs no torch. Every
builder takes keyword knobs (`width`, `image`, `depth`, `num_classes`, ...) so the validation runner can run
small versions on CPU. Activations are not in-place so the saved-tensor memory model (memory.py) describes
exactly what autograd keeps.
"""
from __future__ import annotations

import importlib

ZOO: dict[str, tuple[str, str, str]] = {
    "resnet50": ("resnet", "resnet50", "input_shape"),
    "resnet101": ("resnet", "resnet101", "input_shape"),
    "resnet152": ("resnet", "resnet152", "input_shape"),
    "resnext101_32x4d": ("resnext", "resnext101_32x4d", "input_shape"),
    "se_resnext101_32x4d": ("resnext", "se_resnext101_32x4d", "input_shape"),
    "efficientnet_b0": ("efficientnet", "efficientnet_b0", "input_shape_b0"),
    "efficientnet_b4": ("efficientnet", "efficientnet_b4", "input_shape_b4"),
    "resnet": ("resnet", "resnet_custom", "input_shape"),
    "vgg16": ("vgg", "vgg16", "input_shape"),
    "alexnet": ("alexnet", "alexnet", "input_shape"),
    "inception_v3": ("inception", "inception_v3", "input_shape"),
    "cosmoflow": ("cosmoflow", "cosmoflow", "input_shape"),
    "deepcam": ("deepcam", "deepcam", "input_shape"),
    "ssd300": ("ssd", "ssd300", "input_shape"),
    "small_cnn2d": ("small", "small_cnn2d", "input_shape_2d"),
    "small_cnn3d": ("small", "small_cnn3d", "input_shape_3d"),
    "gpt": ("gpt", "gpt", "input_shape"),
    "bert": ("bert", "bert", "input_shape"),
}


#: how a transformer's code is written (the zoo BERT's `ops=` knob): "torch" one op per GELU, layer norm and dropout;
#: "tf" TensorFlow BERT's primitives (predictor.zoo.tf_ops)
MODEL_CODE = ("torch", "tf")


def build(name: str, **knobs):
    """(torch.nn.Module, per-sample input shape) of a zoo model. Raises KeyError for an unknown name."""
    module_name, builder, shape = ZOO[name]
    module = importlib.import_module(f"predictor.zoo.{module_name}")
    return getattr(module, builder)(**knobs), getattr(module, shape)(**knobs)
