"""`Block`: the unit the out-of-core planner, the recompute terms and the cooperative model work on.

A block is one or more consecutive layers priced at one per-device batch: its forward and backward time,
the bytes it keeps from forward to backward, the bytes of its input (what a checkpoint keeps when the
block is recomputed) and the bytes of its weights. Pure data; adapters from a ModelGraph live in
`predictor.block_costs`.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Block:
    """One block at a fixed per-device batch. Times in seconds, sizes in bytes."""

    name: str
    fwd_s: float
    bwd_s: float
    activation_bytes: float  # kept from the forward pass until this block's backward pass
    input_bytes: float = 0.0  # the block's input: the checkpoint kept on the device when it is recomputed
    weight_bytes: float = 0.0

    def __post_init__(self):
        for name in ("fwd_s", "bwd_s", "activation_bytes", "input_bytes", "weight_bytes"):
            if getattr(self, name) < 0:
                raise ValueError(f"block {self.name!r}: {name} must be >= 0, got {getattr(self, name)}")

