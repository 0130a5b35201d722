"""Process subgroups for hybrids: rank = d * p_model + m, so a model group is p_model consecutive ranks
(one node's devices when ranks are numbered node by node, as ParaDL maps hybrids: model inside a node,
data across nodes, docs/method.md §7) and a data group holds the ranks with the same model index."""
from __future__ import annotations

import torch.distributed as dist

_cache: dict[tuple[int, int], tuple[object, object]] = {}


def subgroups(p_data: int, p_model: int):
    """(model_group, data_group) of this rank, for a world of p_data * p_model ranks. Every rank creates
    every group (torch.distributed requires it), once per layout."""
    key = (p_data, p_model)
    if key not in _cache:
        world, rank = dist.get_world_size(), dist.get_rank()
        if p_data * p_model != world:
            raise ValueError(f"layout {p_data} x {p_model} does not match world size {world}")
        if p_data == 1:
            _cache[key] = (dist.group.WORLD, None)
        elif p_model == 1:
            _cache[key] = (None, dist.group.WORLD)
        else:
            model_group = data_group = None
            for d in range(p_data):
                group = dist.new_group([d * p_model + m for m in range(p_model)])
                if rank // p_model == d:
                    model_group = group
            for m in range(p_model):
                group = dist.new_group([d * p_model + m for d in range(p_data)])
                if rank % p_model == m:
                    data_group = group
            _cache[key] = (model_group, data_group)
    return _cache[key]
