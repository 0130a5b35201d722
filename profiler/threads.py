"""How many CPU threads a rank gets when several ranks share one host: its share of the cores.

The profile's compute samples are what one device of the predicted run computes; on a CPU host each rank is
a device, and R ranks training on C cores run C // R threads each (torchrun sets OMP_NUM_THREADS=1 for
several ranks per node; profiler/comm/worker.py gives its spawned ranks the same share). Timing compute with
all the cores and then predicting R ranks would credit each rank with cores it does not have.
"""
from __future__ import annotations

import os

import torch


def rank_share_threads(ranks: int) -> int:
    """Threads per rank for `ranks` ranks on this host: cores // ranks, at most torch's current count, >= 1."""
    return max(1, min(torch.get_num_threads(), (os.cpu_count() or 1) // max(ranks, 1)))
