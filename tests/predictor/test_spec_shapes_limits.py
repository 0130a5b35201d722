"""Layer specs and shapes files describe only shapes that can exist: kernels within the padded input,
strides >= 1, at least one layer, divisible groups, operands of a size that can be allocated."""
from __future__ import annotations

import pytest
import yaml

from predictor.layerspec import load_layer_spec
from profiler.errors import UserError
from profiler.shape_file import load_shape_cases

CONV = {"name": "c", "op": "conv2d", "filters": 4, "kernel": 3}


@pytest.mark.parametrize("spec, needle", [
    ({"input": [3, 8, 8], "layers": []}, "at least one layer"),
    ({"input": [], "layers": [CONV]}, "1 to 4 integers"),
    ({"input": [3, -8, 8], "layers": [CONV]}, "input dimension"),
    ({"input": [3, 8, 8], "layers": [{**CONV, "kernel": 0}]}, "kernel"),
    ({"input": [3, 8, 8], "layers": [{**CONV, "kernel": [3, -3]}]}, "kernel"),
    ({"input": [3, 8, 8], "layers": [{**CONV, "kernel": 11}]}, "larger than the padded input"),
    ({"input": [3, 8, 8], "layers": [{**CONV, "stride": 0}]}, "stride"),
    ({"input": [3, 8, 8], "layers": [{**CONV, "padding": -1}]}, "padding"),
    ({"input": [3, 8, 8], "layers": [{"op": "maxpool", "kernel": 9}]}, "larger than the padded input"),
    ({"input": [3, 8, 8], "layers": [{**CONV, "filters": 10 ** 12}]}, "filters"),
    ({"input": [3, 8, 8], "layers": [dict(CONV), dict(CONV)]}, "used by an earlier layer"),
    ({"input": [3, 8, 8], "layers": [{**CONV, "inputs": "c"}]}, "inputs must be a non-empty list"),
    ({"input": [3, 8, 8], "layers": [{"op": ["conv2d"]}]}, "unsupported op"),
    ({"input": [4, 8, 8], "layers": [{**CONV, "filters": 6, "groups": 4}]}, "groups 4 must divide"),
    ({"input": [3, 8, 8], "layers": [{**CONV, "dilation": 5}]}, "larger than the padded input"),
    ({"input": [3, 8, 8], "layers": [{**CONV, "dilation": 0}]}, "dilation"),
    ({"input": [3, 8, 8], "layers": [{**CONV, "op": "conv_transpose2d", "dilation": 2}]}, "takes no dilation"),
    ({"input": [3, 8, 8], "layers": [{**CONV, "op": "conv_transpose2d", "output_padding": 1}]}, "smaller than the stride"),
    ({"input": [3, 2, 2], "layers": [{**CONV, "op": "conv_transpose2d", "padding": 3}]}, "out of range"),
    ({"input": [3, 8, 8], "layers": [{**CONV, "op": "conv_transpose3d"}]}, "needs a 3-D input"),
])
def test_impossible_layer_spec_is_refused(tmp_path, spec, needle):
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    with pytest.raises(UserError, match=needle) as err:
        load_layer_spec(path)
    assert str(path) in str(err.value)


@pytest.mark.parametrize("entry, needle", [
    ({"op": "conv2d", "params": {"N": 1, "C": 4, "F": 4, "H": 8, "W": 8, "kernel": 11}}, "larger than the padded input"),
    ({"op": "conv2d", "params": {"N": 1, "C": 4, "F": 6, "H": 8, "W": 8, "kernel": 3, "groups": 4}}, "must divide C and F"),
    ({"op": "gemm", "params": {"M": 1 << 20, "N": 1 << 20, "K": 1 << 20}}, "operand"),
    ({"op": "gemm", "params": {"M": 2, "N": 2, "K": 1 << 30}}, "larger than"),
    ({"op": "relu", "params": {"N": 1, "C": 1, "H": 4, "W": 4, "colour": 3}}, "takes no param colour"),
])
def test_impossible_shape_is_refused(tmp_path, entry, needle):
    path = tmp_path / "shapes.yaml"
    path.write_text(yaml.safe_dump({"shapes": [entry]}))
    with pytest.raises(UserError, match=needle):
        load_shape_cases(str(path), "cpu", ("float32",))
