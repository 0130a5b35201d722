"""The compute shapes a prediction costs, recorded so they can be measured (`predictor shapes` ->
`profiler calibrate --shapes`): a model's per-device layers under each strategy, exactly as the cost model is
asked for them (batch, spatial, filter and channel splits, halo-extended inputs, micro-batches)."""
from __future__ import annotations

from calibrate import shapes
from calibrate.cost_api import CostModel
from calibrate.cost_model import gemm_backward_as_forward

#: ops the profiler can measure as they are (profiler/shape_file.py), a linear layer in its three passes
MEASURABLE = ("conv2d", "conv3d", "gemm", "linear", "relu", "batchnorm", "maxpool", "avgpool", "add", "bmm", "sdpa",
              "layernorm", "gelu", "softmax")


class RecordingCostModel:
    """A CostModel that answers as the wrapped one and remembers every compute call it was asked for."""

    def __init__(self, cost_model: CostModel, calls: set | None = None):
        self._cm = cost_model
        self.calls = set() if calls is None else calls

    def __getattr__(self, name):
        return getattr(self._cm, name)

    def compute_time_s(self, op, pass_, params, dtype):
        self.calls.add((op, pass_, shapes.shape_key(params), shapes.canonical_dtype(dtype)))
        return self._cm.compute_time_s(op, pass_, params, dtype)

    def at_bound(self, bound):
        return RecordingCostModel(self._cm.at_bound(bound), self.calls)


def measurable_shapes(calls: set) -> list[dict]:
    """Shapes-file entries (op, params, dtype) for the recorded calls, sorted and without duplicates: a linear
    layer's passes become one linear entry (measured in all three passes, as the cost model costs them with
    linear families), GEMM backward passes the forward GEMMs the cost model costs them as, kernel-less passes
    are dropped."""
    entries = set()
    for op, pass_, params, dtype in calls:
        params = dict(params)
        if (op, pass_) in shapes.ZERO_COST:
            continue
        if op == "gemm" and pass_ != "fwd":
            params = gemm_backward_as_forward(pass_, params)
        if op in MEASURABLE:
            entries.add((op, shapes.shape_key(params), dtype))
    return [{"op": op, "params": dict(params), "dtype": dtype} for op, params, dtype in sorted(entries)]
