"""Config + graph -> this rank's Replica (the strategy implementation), on the right device and dtype."""
from __future__ import annotations

import torch

from predictor.graph import ModelGraph
from predictor.runner.channel import ChannelReplica
from predictor.runner.config import RunConfig
from predictor.runner.data import DataReplica
from predictor.runner.filter import FilterReplica
from predictor.runner.groups import subgroups
from predictor.recompute import chain_segments
from predictor.runner.nets import BRANCHED_STRATEGIES, build_graph_net, build_serial, is_chain
from predictor.runner.pipeline import PipelineReplica
from predictor.runner.replica import Replica
from predictor.runner.serial import SerialReplica
from predictor.runner.spatial import SpatialReplica
from predictor.runner.tensor import TensorReplica
from profiler.errors import UserError

#: tf32 runs fp32 tensors (predictor.runner.settings.run_settings turns TF32 math on for it)
TORCH_DTYPES = {"float32": torch.float32, "fp32": torch.float32, "tf32": torch.float32, "bfloat16": torch.bfloat16,
                "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16}


def torch_dtype(name: str) -> torch.dtype:
    try:
        return TORCH_DTYPES[name]
    except KeyError:
        raise UserError(f"dtype {name!r} is not supported by the runner (known: {', '.join(TORCH_DTYPES)})") from None


def build_replica(cfg: RunConfig, graph: ModelGraph, device: str = "cpu", seed: int = 0) -> Replica:
    """Every rank calls this with the same arguments; the world size must equal cfg.ranks."""
    dtype = torch_dtype(cfg.dtype)
    if not is_chain(graph):  # residual sums or concatenations: the whole net as one module
        if cfg.strategy not in BRANCHED_STRATEGIES:
            raise UserError(f"model {graph.name} has branches (residual adds or concatenations): the validation runner "
                            f"runs such nets as {' or '.join(BRANCHED_STRATEGIES)} only, not {cfg.strategy}")
        segments = chain_segments(graph, cfg.recompute_segments) if cfg.recompute_segments else ()
        net = build_graph_net(graph, seed, segments).to(device=device, dtype=dtype)
        if cfg.strategy == "serial":
            return SerialReplica([net], offload=cfg.offload)
        _, data_group = subgroups(cfg.ranks, 1)
        return DataReplica([net], data_group, cfg.ranks, 0, cfg.offload)
    layers, modules = build_serial(graph, seed)
    for module in modules:
        module.to(device=device, dtype=dtype)
    p_data, p_model = cfg.degrees
    if p_data * p_model != cfg.ranks:
        raise UserError(f"{cfg.label} on {cfg.ranks} ranks: {p_data} data x {p_model} model replicas do not fill them")
    if cfg.strategy == "serial":
        return SerialReplica(modules, recompute_segments=cfg.recompute_segments, offload=cfg.offload)
    model_group, data_group = subgroups(p_data, p_model)
    if cfg.strategy == "data":
        return DataReplica(modules, data_group, p_data, cfg.recompute_segments, cfg.offload)
    if cfg.recompute_segments or cfg.offload:
        raise UserError(f"recompute/offload runs are implemented for serial and data, not {cfg.strategy}")
    if cfg.strategy == "pipeline":
        return PipelineReplica(layers, modules, model_group, p_model, cfg.micro_batches, cfg.stage_starts, graph)
    if cfg.strategy in ("tensor", "data+tensor"):
        return TensorReplica(graph, layers, modules, model_group, p_model, data_group, p_data)
    kind = {"spatial": SpatialReplica, "data+spatial": SpatialReplica, "filter": FilterReplica,
            "data+filter": FilterReplica, "channel": ChannelReplica}[cfg.strategy]
    return kind(layers, modules, model_group, p_model, data_group, p_data)
