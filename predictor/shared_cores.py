"""Ranks sharing a CPU node's cores: each computes `CostModel.rank_slowdown(ranks)` times slower.

A CPU profile's compute was measured by one process using its threads alone. When more ranks x threads
than cores run on a node (4 gloo ranks on the 2-core VM), the cores are shared out and every kernel, memory
pass and per-layer framework overhead takes that much longer. Collectives keep their measured cost.
"""
from __future__ import annotations

from calibrate.cost_api import CostModel


class SharedCores:
    """A CostModel whose compute, device-memory and framework times are `factor` times the wrapped one's."""

    def __init__(self, cost_model: CostModel, factor: float):
        self._cm = cost_model
        self.factor = factor

    def __getattr__(self, name):
        return getattr(self._cm, name)

    def compute_time_s(self, op, pass_, params, dtype):
        return self.factor * self._cm.compute_time_s(op, pass_, params, dtype)

    def framework_overhead_s(self, pass_):
        return self.factor * self._cm.framework_overhead_s(pass_)

    def optimizer_overhead_s(self, tensors):
        return self.factor * self._cm.optimizer_overhead_s(tensors)

    def memory_time_s(self, bytes_moved, *, where="device"):
        return self.factor * self._cm.memory_time_s(bytes_moved, where=where)

    def rank_slowdown(self, ranks_on_node):
        return 1.0  # already applied

    def at_bound(self, bound):
        return SharedCores(self._cm.at_bound(bound), self.factor)
