"""Data parallelism: every rank holds the whole net, trains on B/p samples, and DistributedDataParallel
all-reduces the gradients, overlapped with backward in buckets (PyTorch DDP design notes; docs/method.md §8, §9)."""
from __future__ import annotations

from torch.nn.parallel import DistributedDataParallel

from predictor.runner.serial import SerialReplica


class DataReplica(SerialReplica):
    """DDP over the data group; recompute_segments and offload as in SerialReplica."""

    def __init__(self, modules, data_group, p_data, recompute_segments: int = 0, offload: bool = False):
        super().__init__(modules, data_group, p_data, recompute_segments, offload)
        self.net = DistributedDataParallel(self.net, process_group=data_group)

    def sync_grads(self) -> None:
        """DDP already averaged the gradients during backward."""
