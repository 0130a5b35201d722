"""Cooperative-process model parallelism (Yu & Park, IEEE Access 2023) against GPipe on the same devices.

Only the paper's abstract is public; this models our reading of it, with K processes each owning one contiguous
stage: an all-gather of every stage's weights, a forward of stages 0..K-2 on N/K samples each without autograd
whose stage inputs reach their owners by all-to-all, then a backward pipeline in which each stage recomputes its
forward ahead, so only the backward travels the fill/drain chain. GPipe with re-materialisation beside it, with the
ParaDL pipeline form. The trade-off this exposes: no forward bubble and a forward at micro-batch N/K, for an
all-gather and an all-to-all every iteration and a full copy of the weights. Formulas and memory: docs/method.md
§18; against the paper's speed-ups: docs/validation.md ("Cooperative vs GPipe against the paper").
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

from predictor.blocks import Block

BlocksAt = Callable[[int], Sequence[Block]]  # per-device samples -> one Block per layer at that batch
Collective = Callable[[str, float, int], float]  # (op, nccl-tests size S in bytes, group size) -> seconds


@dataclass(frozen=True)
class PipelineCost:
    """One iteration of a pipelined scheme on K devices. Times in seconds, memory in bytes per device."""

    scheme: str  # "gpipe", "gpipe-no-remat" or "cooperative"
    stages: int
    micro_batches: int
    forward_s: float  # forward work on the critical path (cooperative: the prediction step)
    backward_s: float  # backward work on the critical path, without bubble or recompute
    recompute_s: float
    bubble_s: float
    p2p_s: float  # stage-to-stage sends
    collectives_s: float  # cooperative: weight all-gather + all-to-all of stage inputs
    weight_bytes: float  # weights held by the busiest device
    state_bytes: float  # its gradients and optimizer state (its own stage)
    activation_bytes: float  # its activations, stage inputs and buffers

    @property
    def iteration_s(self) -> float:
        return self.forward_s + self.backward_s + self.recompute_s + self.bubble_s + self.p2p_s + self.collectives_s

    @property
    def memory_bytes(self) -> float:
        return self.weight_bytes + self.state_bytes + self.activation_bytes


@dataclass(frozen=True)
class _Stage:
    fwd_s: float
    bwd_s: float
    activation_bytes: float
    input_bytes: float  # boundary tensors entering the stage
    weight_bytes: float


def _stages(blocks: Sequence[Block], partition, boundary_bytes) -> list[_Stage]:
    return [_Stage(fwd_s=sum(b.fwd_s for b in blocks[s:e]), bwd_s=sum(b.bwd_s for b in blocks[s:e]),
                   activation_bytes=sum(b.activation_bytes for b in blocks[s:e]), input_bytes=boundary_bytes[k],
                   weight_bytes=sum(b.weight_bytes for b in blocks[s:e]))
            for k, (s, e) in enumerate(partition)]


def _state_bytes(weight_bytes: float, optimizer_state_per_param: int) -> float:
    """Gradients and optimizer state (fp32) of a stage's weights."""
    return weight_bytes * (1 + optimizer_state_per_param)


def gpipe(blocks_at: BlocksAt, batch: int, partition, boundary_bytes_per_sample: Sequence[float],
          micro_batches: int, p2p_s: Callable[[float], float], *, remat: bool = True,
          optimizer_state_per_param: int = 2) -> PipelineCost:
    """GPipe iteration and memory (module docstring). boundary_bytes_per_sample[k]: bytes per sample
    entering stage k (0 for the first); p2p_s(bytes) -> seconds of one stage-to-stage send."""
    n = batch // micro_batches
    stages = _stages(blocks_at(n), partition, [b * n for b in boundary_bytes_per_sample])
    k, m = len(stages), micro_batches
    f_max = max(s.fwd_s for s in stages)
    b_max = max(s.bwd_s for s in stages)
    back_max = max(s.bwd_s + (s.fwd_s if remat else 0.0) for s in stages)
    p2p_max = max(p2p_s(s.input_bytes) for s in stages[1:]) if k > 1 else 0.0
    step_s = f_max + back_max
    memory = []
    for s in stages:
        acts = s.input_bytes * m + s.activation_bytes if remat else s.activation_bytes * m
        state = _state_bytes(s.weight_bytes, optimizer_state_per_param)
        memory.append((s.weight_bytes + state + acts, s.weight_bytes, state, acts))
    _, weights, state, acts = max(memory)
    return PipelineCost(scheme="gpipe" if remat else "gpipe-no-remat", stages=k, micro_batches=m,
                        forward_s=m * f_max, backward_s=m * b_max, recompute_s=m * (back_max - b_max),
                        bubble_s=(k - 1) * step_s, p2p_s=2 * (m + k - 2) * p2p_max, collectives_s=0.0,
                        weight_bytes=weights, state_bytes=state, activation_bytes=acts)


def cooperative(blocks_at: BlocksAt, batch: int, partition, boundary_bytes_per_sample: Sequence[float],
                micro_batches: int, p2p_s: Callable[[float], float], collective_s: Collective, *,
                optimizer_state_per_param: int = 2) -> PipelineCost:
    """Cooperative-process iteration and memory (module docstring), K = len(partition) processes."""
    k, m = len(partition), micro_batches
    n = batch // m
    stages = _stages(blocks_at(n), partition, [b * n for b in boundary_bytes_per_sample])
    slice_blocks = blocks_at(max(1, batch // k))
    weight_bytes = sum(b.weight_bytes for b in slice_blocks)
    predict_blocks = slice_blocks[: partition[-1][0]]  # the last stage's output is nobody's input
    predict_s = sum(b.fwd_s for b in predict_blocks)
    # each process sends stage j the inputs of its N/K samples: pieces of unequal size; the all-to-all
    # is costed at K times the largest piece (nccl-tests S = each rank's whole send buffer)
    piece_bytes = max(boundary_bytes_per_sample) * (batch / k)
    alltoall_s = collective_s("alltoall", piece_bytes * k, k)
    allgather_s = collective_s("allgather", weight_bytes, k)
    b_max = max(s.bwd_s for s in stages)
    step_max = max(s.fwd_s + s.bwd_s for s in stages)
    grad_p2p_s = max(p2p_s(s.input_bytes) for s in stages[1:]) if k > 1 else 0.0
    # prediction-step peak: one layer's input and output for N/K samples, plus the send buffer
    predict_peak = max((b.input_bytes + b.activation_bytes for b in predict_blocks), default=0.0) + piece_bytes * k
    memory = []
    for s in stages:
        stash = s.input_bytes * m  # stage input for all N samples
        acts = stash + max(2 * s.activation_bytes, predict_peak)
        state = _state_bytes(s.weight_bytes, optimizer_state_per_param)
        memory.append((state + acts, state, acts))
    _, state, acts = max(memory)
    return PipelineCost(scheme="cooperative", stages=k, micro_batches=m,
                        forward_s=predict_s, backward_s=m * b_max, recompute_s=m * (step_max - b_max),
                        bubble_s=(k - 1) * b_max, p2p_s=(m + k - 2) * grad_p2p_s,
                        collectives_s=allgather_s + alltoall_s,
                        weight_bytes=weight_bytes, state_bytes=state, activation_bytes=acts)


def best_micro_batches(evaluate: Callable[[int], PipelineCost], batch: int, memory_cap_bytes: float = math.inf,
                       min_micro_batches: int = 1, max_micro_batches: int | None = None) -> PipelineCost | None:
    """The fastest of `evaluate(M)` over the divisors M of `batch` in [min, max] that fit the memory cap."""
    top = min(batch, max_micro_batches or batch)
    options = [evaluate(m) for m in range(min_micro_batches, top + 1) if batch % m == 0]
    fitting = [c for c in options if c.memory_bytes <= memory_cap_bytes]
    return min(fitting, key=lambda c: c.iteration_s, default=None)
