"""A plan's software stack on a published profile: every compute call takes CostModel.stack_time_scale(stack,
dtype) times its time (the stack factors of calibrate.system_constants.StackScales, fitted with the GPU families'
constants to published runs). Communication, memory copies and framework overheads are not scaled. A calibrated
profile measured the stack it runs (factor 1), so the cost model is used as it is.
"""
from __future__ import annotations

from calibrate.cost_api import CostModel

_PROBE_DTYPES = ("float32", "float16")  # one dtype of each precision class


class StackScaled:
    """A CostModel whose compute times are multiplied by the wrapped model's factor for `stack`."""

    def __init__(self, cost_model: CostModel, stack: str):
        self._cm = cost_model
        self.stack = stack
        self._factors: dict[str, float] = {}

    def __getattr__(self, name):
        return getattr(self._cm, name)

    def compute_time_s(self, op, pass_, params, dtype):
        f = self._factors.get(dtype)
        if f is None:
            f = self._factors[dtype] = self._cm.stack_time_scale(self.stack, dtype)
        return f * self._cm.compute_time_s(op, pass_, params, dtype)

    def stack_time_scale(self, stack, dtype):
        return 1.0  # already applied

    def at_bound(self, bound):
        return StackScaled(self._cm.at_bound(bound), self.stack)


def stack_scaled(cost_model: CostModel, stack: str) -> CostModel:
    """`cost_model` scaled to `stack`, or `cost_model` itself when the stack's factors are all 1 (or the model
    has none: a hand-written cost model without stack_time_scale)."""
    factor = getattr(cost_model, "stack_time_scale", None)
    if factor is None or all(factor(stack, d) == 1.0 for d in _PROBE_DTYPES):
        return cost_model
    return StackScaled(cost_model, stack)


def with_conv_search(cost_model: CostModel, search: bool) -> CostModel:
    """Set whether the run lets cuDNN search its convolution algorithms (torch.backends.cudnn.benchmark; the GPU
    kernel model's regimes, calibrate.gpu_kernels) on a cost model that models it; others are unchanged."""
    if hasattr(cost_model, "conv_algorithm_search"):
        cost_model.conv_algorithm_search = search
    return cost_model
