"""A toy residual graph and a synthetic cost model shared by the out-of-core / cooperative tests."""
from predictor.graph import Layer, ModelGraph


class FlatCostModel:
    """Every kernel call costs `call_s` + work-free; copies at 1 GB/s; collectives `collective_s`."""

    device_memory_bytes = 1e9
    devices_per_node = 4
    provenance = "published"

    def __init__(self, call_s=1e-3, collective_s=0.0):
        self.call_s = call_s
        self.collective_s = collective_s

    def compute_time_s(self, op, pass_, params, dtype):
        return self.call_s * params.get("N", params.get("M", 1))

    def memory_time_s(self, bytes_moved, *, where="device"):
        return bytes_moved / 1e9

    def collective_time_s(self, op, size_bytes, group_size, nodes=1):
        return 0.0 if group_size <= 1 else self.collective_s

    def host_device_time_s(self, size_bytes, direction="h2d", pinned=True):
        return size_bytes / 1e9

    def at_bound(self, bound):
        return self


def residual_graph() -> ModelGraph:
    """conv -> relu -> conv -> add(conv, input) -> flatten -> linear; input 2x4x4."""
    c = dict(kernel=(3, 3), stride=(1, 1), padding=(1, 1))
    layers = (
        Layer("conv1", "conv2d", (2, 4, 4), (2, 4, 4), (2, 2, 3, 3), params=36, inputs=("",), **c),
        Layer("relu1", "relu", (2, 4, 4), (2, 4, 4), inputs=("conv1",)),
        Layer("conv2", "conv2d", (2, 4, 4), (2, 4, 4), (2, 2, 3, 3), params=36, inputs=("relu1",), **c),
        Layer("add", "add", (2, 4, 4), (2, 4, 4), inputs=("conv2", "")),
        Layer("flat", "flatten", (2, 4, 4), (32,), inputs=("add",)),
        Layer("fc", "linear", (32,), (10,), (10, 32), params=330, inputs=("flat",)),
    )
    return ModelGraph("toy-residual", (2, 4, 4), layers)
