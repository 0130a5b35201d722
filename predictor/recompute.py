"""Activation checkpointing (recompute) terms that any strategy can add to its prediction.

A checkpointed segment keeps only its input on the device during the forward pass and runs its forward
again during the backward pass, just before its own backward (GPipe's "re-materialisation",
Huang et al., arXiv 1811.06965 §2.3: peak activation memory O(N + (L/K)(N/M)) instead of O(N L); with
sqrt(G) equal segments of G layers the stored part is O(sqrt(G)) segments). The extra compute is one
forward of every checkpointed segment. The layout of `sequential_segments` is the one of
`torch.utils.checkpoint.checkpoint_sequential`, so measured recompute runs (validation runner) and these
predictions describe the same schedule.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from predictor.blocks import Block

Segment = tuple[int, int]  # [start, stop) block indices of one checkpointed segment


@dataclass(frozen=True)
class RecomputeTerms:
    """What checkpointing the given segments adds and saves (per device, per iteration)."""

    extra_fwd_s: float  # forward time of the checkpointed segments, run again during backward
    peak_activation_bytes: float  # activation memory peak with checkpointing
    activation_bytes_without: float  # activation memory kept without checkpointing (all blocks)
    segments: tuple[Segment, ...]

    @property
    def saved_bytes(self) -> float:
        return self.activation_bytes_without - self.peak_activation_bytes


def sqrt_segment_count(n_blocks: int) -> int:
    """The classic sqrt(G) choice of segment count for G blocks (at least 1)."""
    return max(1, round(math.sqrt(n_blocks)))


def sequential_segments(n_blocks: int, n_segments: int) -> tuple[Segment, ...]:
    """Checkpointed segments as `torch.utils.checkpoint.checkpoint_sequential(functions, n_segments)` lays
    them out: the first n_segments-1 chunks of n_blocks // n_segments blocks are checkpointed; the rest
    (the last chunk plus any remainder) runs normally, since its activations are needed first in backward."""
    if n_segments < 1:
        raise ValueError(f"n_segments must be >= 1, got {n_segments}")
    size = n_blocks // n_segments
    if size == 0:
        return ()
    return tuple((start, start + size) for start in range(0, size * (n_segments - 1), size))


def per_block_segments(indices: Sequence[int]) -> tuple[Segment, ...]:
    """Per-layer (per-block) recompute: each chosen block is its own checkpointed segment."""
    return tuple((i, i + 1) for i in sorted(set(indices)))


def checkpoint_terms(blocks: Sequence[Block], segments: Sequence[Segment]) -> RecomputeTerms:
    """Extra compute and activation memory when `segments` (disjoint, [start, stop)) are checkpointed.

    Memory, following the backward pass block by block in reverse order: a checkpointed segment holds its
    input (the first block's input_bytes) from its forward until its backward ends, and its blocks'
    activations only while it is rematerialised for its backward; other blocks hold their activations from
    forward to their backward. The peak is the larger of the end of the forward pass (all kept blocks plus
    all checkpoints) and the moment each segment is rematerialised (kept blocks and checkpoints before it,
    plus its own activations; what comes after it has been freed by its backward)."""
    segments = tuple(sorted(segments))
    in_segment = [None] * len(blocks)
    for k, (start, stop) in enumerate(segments):
        if not 0 <= start < stop <= len(blocks):
            raise ValueError(f"segment {(start, stop)} is outside 0..{len(blocks)}")
        for i in range(start, stop):
            if in_segment[i] is not None:
                raise ValueError(f"segments overlap at block {i}")
            in_segment[i] = k

    def held_before(index: int) -> float:
        """Bytes held by blocks before `index` once the forward pass is over."""
        kept = sum(b.activation_bytes for i, b in enumerate(blocks[:index]) if in_segment[i] is None)
        checkpoints = sum(blocks[start].input_bytes for start, _ in segments if start < index)
        return kept + checkpoints

    end_of_forward = held_before(len(blocks))
    during_recompute = [held_before(start) + blocks[start].input_bytes
                        + sum(b.activation_bytes for b in blocks[start:stop]) for start, stop in segments]
    extra_fwd_s = sum(blocks[i].fwd_s for i, k in enumerate(in_segment) if k is not None)
    return RecomputeTerms(
        extra_fwd_s=extra_fwd_s,
        peak_activation_bytes=max([end_of_forward, *during_recompute]),
        activation_bytes_without=sum(b.activation_bytes for b in blocks),
        segments=segments,
    )


#: ops the validation runner builds no module for (predictor.runner.nets.build_layer): not in its chain
NO_MODULE_OPS = ("dropout", "softmax_loss")


def chain_segments(graph, n_segments: int) -> tuple[Segment, ...]:
    """`sequential_segments` over the chain of modules the validation runner checkpoints (the graph's
    layers minus those without a module), as [start, stop) ranges of graph layer indices."""
    chain = [i for i, layer in enumerate(graph.layers) if layer.op not in NO_MODULE_OPS]
    return tuple((chain[start], chain[stop - 1] + 1) for start, stop in sequential_segments(len(chain), n_segments))
