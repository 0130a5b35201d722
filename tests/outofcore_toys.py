"""Toy graphs and a synthetic cost model shared by the out-of-core / recompute / cooperative tests."""
from calibrate.cost_api import NeutralExtras
from predictor.graph import Layer, ModelGraph
from profiler.errors import UserError


class FlatCostModel(NeutralExtras):
    """Every kernel call costs `call_s` per sample; memory kernels and host<->device copies run at 1 GB/s;
    collectives cost `collective_s`. host_memory=False: no host memory bandwidth (like a published profile)."""

    device_memory_bytes = 1e9
    devices_per_node = 4
    provenance = "published"

    def __init__(self, call_s=1e-3, collective_s=0.0, host_memory=True):
        self.call_s = call_s
        self.collective_s = collective_s
        self.host_memory = host_memory

    def compute_time_s(self, op, pass_, params, dtype):
        samples = params["M"] if op in ("gemm", "linear") else params.get("N", 1)
        return self.call_s * samples

    def framework_overhead_s(self, pass_):
        return 0.0

    def optimizer_overhead_s(self, tensors):
        return 0.0

    def rank_slowdown(self, ranks_on_node):
        return 1.0

    def memory_time_s(self, bytes_moved, *, where="device"):
        if where == "host" and not self.host_memory:
            raise UserError("profile toy has no coefficient for memory host/triad (STREAM triad)")
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


def conv_chain_graph(n_blocks: int = 4, channels: int = 8, side: int = 16) -> ModelGraph:
    """n equal conv+relu blocks on channels x side x side, then flatten and a linear layer."""
    c = dict(kernel=(3, 3), stride=(1, 1), padding=(1, 1))
    shape = (channels, side, side)
    layers, previous = [], ""
    for k in range(n_blocks):
        layers.append(Layer(f"conv{k}", "conv2d", shape, shape, (channels, channels, 3, 3),
                            params=channels * channels * 9, inputs=(previous,), **c))
        layers.append(Layer(f"relu{k}", "relu", shape, shape, inputs=(f"conv{k}",)))
        previous = f"relu{k}"
    flat = channels * side * side
    layers.append(Layer("flat", "flatten", shape, (flat,), inputs=(previous,)))
    layers.append(Layer("fc", "linear", (flat,), (10,), (10, flat), params=10 * flat + 10, inputs=("flat",)))
    return ModelGraph("conv-chain", shape, tuple(layers))
