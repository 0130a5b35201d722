"""Out-of-core training planner (KARMA-style): per block keep, swap or recompute, under a memory cap.

KARMA (Wahib et al., SC'20) mixes swapping layers to the host with recomputing them; its equations are not public,
so this is our own schedule for that description: a swapped block's transfers run double-buffered behind the
neighbouring block's compute and only their excess is exposed, a recomputed block keeps its input and runs its
forward again, and the peak memory follows the backward pass block by block. The choice minimising the iteration
time under the cap is a multiple-choice knapsack, solved exhaustively up to EXHAUSTIVE_MAX_BLOCKS blocks and by a
dynamic programme beyond (memory in `resolution` units, rounded up so a plan found always fits).
`data_parallel_iteration` adds data parallelism with gradients all-reduced, updated on the host and streamed back
block by block. Formulas: docs/method.md §17.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from predictor.blocks import Block

KEEP, SWAP, RECOMPUTE = "keep", "swap", "recompute"
CHOICES = (KEEP, SWAP, RECOMPUTE)  # order = preference on equal time
EXHAUSTIVE_MAX_BLOCKS = 8

TransferTime = Callable[[float], float]  # bytes -> seconds


@dataclass(frozen=True)
class Link:
    """Host<->device transfer time t = latency + bytes / bandwidth (one direction)."""

    latency_s: float
    bandwidth_bytes_per_s: float

    def time_s(self, size_bytes: float) -> float:
        return 0.0 if size_bytes <= 0 else self.latency_s + size_bytes / self.bandwidth_bytes_per_s


@dataclass(frozen=True)
class OutOfCorePlan:
    """The chosen action per block and the single-device iteration time with its breakdown."""

    choices: tuple[str, ...]
    compute_s: float  # sum of forward and backward
    recompute_s: float  # extra forward of recomputed blocks
    exposed_transfer_s: float  # swap time not hidden behind compute
    peak_bytes: float  # device memory at the worst moment (module docstring)
    swapped_bytes: float  # activation bytes sent to the host per iteration (each way)

    @property
    def iteration_s(self) -> float:
        return self.compute_s + self.recompute_s + self.exposed_transfer_s


def exposed_swap_s(blocks: Sequence[Block], i: int, d2h_s: TransferTime, h2d_s: TransferTime) -> float:
    """Exposed time of swapping block i out in forward and back in backward (module docstring)."""
    next_fwd_s = blocks[i + 1].fwd_s if i + 1 < len(blocks) else 0.0
    next_bwd_s = blocks[i + 1].bwd_s if i + 1 < len(blocks) else 0.0
    size = blocks[i].activation_bytes
    return max(0.0, d2h_s(size) - next_fwd_s) + max(0.0, h2d_s(size) - next_bwd_s)


def activation_peak_bytes(blocks: Sequence[Block], choices: Sequence[str]) -> float:
    """Activation bytes on the device at the worst moment of the iteration (module docstring)."""
    held = peak = 0.0
    for i, (block, choice) in enumerate(zip(blocks, choices)):
        resident = _resident_bytes(block, choice)
        in_use = block.activation_bytes if choice != KEEP else 0.0
        arriving = blocks[i - 1].activation_bytes if i > 0 and choices[i - 1] == SWAP else 0.0
        peak = max(peak, held + resident + in_use + arriving)
        held += resident
    return max(peak, held)


def evaluate(blocks: Sequence[Block], choices: Sequence[str], d2h_s: TransferTime, h2d_s: TransferTime,
             static_bytes: float = 0.0) -> OutOfCorePlan:
    """Time and memory of a given per-block choice (module docstring formulas)."""
    if len(choices) != len(blocks):
        raise ValueError(f"{len(choices)} choices for {len(blocks)} blocks")
    unknown = set(choices) - set(CHOICES)
    if unknown:
        raise ValueError(f"unknown choice(s) {sorted(unknown)}; known: {', '.join(CHOICES)}")
    return OutOfCorePlan(
        choices=tuple(choices),
        compute_s=sum(b.fwd_s + b.bwd_s for b in blocks),
        recompute_s=sum(b.fwd_s for b, c in zip(blocks, choices) if c == RECOMPUTE),
        exposed_transfer_s=sum(exposed_swap_s(blocks, i, d2h_s, h2d_s) for i, c in enumerate(choices) if c == SWAP),
        peak_bytes=static_bytes + activation_peak_bytes(blocks, choices),
        swapped_bytes=sum(b.activation_bytes for b, c in zip(blocks, choices) if c == SWAP),
    )


def plan(blocks: Sequence[Block], cap_bytes: float, d2h_s: TransferTime, h2d_s: TransferTime,
         static_bytes: float = 0.0, resolution: int = 2048,
         exhaustive_max_blocks: int = EXHAUSTIVE_MAX_BLOCKS) -> OutOfCorePlan | None:
    """The fastest keep/swap/recompute choice whose peak device memory is within cap_bytes, or None when
    even swapping or recomputing everything does not fit. static_bytes: weights, gradients, optimizer
    state and workspace the caller keeps on the device. Lists of up to `exhaustive_max_blocks` blocks are
    searched exhaustively, longer ones by the dynamic programme over `resolution` memory units."""
    blocks = list(blocks)
    if not blocks:
        return evaluate(blocks, (), d2h_s, h2d_s, static_bytes) if static_bytes <= cap_bytes else None
    swap_s = [exposed_swap_s(blocks, i, d2h_s, h2d_s) for i in range(len(blocks))]
    if len(blocks) <= exhaustive_max_blocks:
        choices = _exhaustive(blocks, cap_bytes - static_bytes, swap_s)
    else:
        choices = _dynamic_programme(blocks, cap_bytes - static_bytes, swap_s, resolution)
    return None if choices is None else evaluate(blocks, choices, d2h_s, h2d_s, static_bytes)


def _resident_bytes(block: Block, choice: str) -> float:
    """Bytes a block keeps on the device until its backward: all, none (swapped) or its input (recomputed)."""
    return block.activation_bytes if choice == KEEP else block.input_bytes if choice == RECOMPUTE else 0.0


def _option_costs(block: Block, swap_s: float) -> dict[str, tuple[float, float]]:
    """choice -> (extra seconds, resident bytes)."""
    extra_s = {KEEP: 0.0, SWAP: swap_s, RECOMPUTE: block.fwd_s}
    return {c: (extra_s[c], _resident_bytes(block, c)) for c in CHOICES}


def _exhaustive(blocks, budget_bytes, swap_s):
    best, best_key = None, None
    options = [_option_costs(b, s) for b, s in zip(blocks, swap_s)]
    # keeping every block has the least key there is, (0.0, [0, ..., 0]), when no choice has a negative extra
    # time: if it fits, the enumeration below would return it (a search meets this case on most device counts)
    keep_all = (KEEP,) * len(blocks)
    if all(extra >= 0.0 for option in options for extra, _ in option.values()) and \
            activation_peak_bytes(blocks, keep_all) <= budget_bytes:
        return keep_all
    for choices in itertools.product(CHOICES, repeat=len(blocks)):
        if activation_peak_bytes(blocks, choices) > budget_bytes:
            continue
        key = (sum(options[i][c][0] for i, c in enumerate(choices)), [CHOICES.index(c) for c in choices])
        if best_key is None or key < best_key:
            best, best_key = choices, key
    return best


def _dynamic_programme(blocks, budget_bytes, swap_s, resolution, shortcut: bool = True):
    """Knapsack over blocks in forward order (module docstring); memory in units of budget/resolution,
    rounded up. dp[k][m]: least extra time of the blocks so far holding m units, k = the last block's
    choice index. shortcut=False always runs the programme (tests compare it with the shortcut)."""
    if budget_bytes < 0:
        return None
    unit = budget_bytes / resolution if budget_bytes > 0 else 1.0

    def units_of(size):
        return math.ceil(size / unit - 1e-9) if size > 0 else 0

    room = resolution if budget_bytes > 0 else 0
    held = np.arange(room + 1)  # units held by the blocks before this one, per dp index
    options = [_option_costs(b, s) for b, s in zip(blocks, swap_s)]
    if shortcut and _keeping_all_wins(blocks, options, units_of, room):
        return (KEEP,) * len(blocks)
    n_states = len(CHOICES)
    start = np.full(room + 1, np.inf)
    start[0] = 0.0
    dp = [start] + [np.full(room + 1, np.inf)] * (n_states - 1)  # nothing held, as after a kept block
    came_from = []  # per block, per state (= its choice): the previous block's state per memory level
    for i, block in enumerate(blocks):
        new = [np.full(room + 1, np.inf) for _ in range(n_states)]
        came = [np.zeros(room + 1, dtype=np.int8) for _ in range(n_states)]
        for k, choice in enumerate(CHOICES):
            extra_s, size = options[i][choice]
            units = units_of(size)
            in_use = units_of(block.activation_bytes) if choice != KEEP else 0
            for prev in range(n_states - 1, -1, -1):  # the last assignment wins ties: a kept predecessor
                arriving = units_of(blocks[i - 1].activation_bytes) if i > 0 and CHOICES[prev] == SWAP else 0
                fits = held + units + in_use + arriving <= room  # this block's peak, per held level
                shifted = np.full(room + 1, np.inf)
                if units <= room:
                    shifted[units:] = np.where(fits[: room + 1 - units], dp[prev][: room + 1 - units], np.inf) + extra_s
                better = shifted <= new[k]
                new[k] = np.where(better, shifted, new[k])
                came[k] = np.where(better, prev, came[k])
        dp = new
        came_from.append(came)
    best_time = min(float(dp[k].min()) for k in range(n_states))
    if math.isinf(best_time):
        return None
    # among the fastest plans, the one holding the most (swapping nothing it need not), ending in KEEP first
    state, m = max(((k, int(np.flatnonzero(dp[k] <= best_time)[-1])) for k in range(n_states)
                    if dp[k].min() <= best_time), key=lambda km: (km[1], -km[0]))
    choices = []
    for came, option in zip(reversed(came_from), reversed(options)):
        choice = CHOICES[state]
        choices.append(choice)
        state, m = int(came[state][m]), m - units_of(option[choice][1])
    return tuple(reversed(choices))


def _keeping_all_wins(blocks, options, units_of, room) -> bool:
    """Whether _dynamic_programme would return every block kept: it costs no extra time, so when no choice has
    a negative extra time it is among the fastest; of those the programme takes the one holding the most units,
    ending in KEEP, and walks back through kept predecessors on ties, so it returns keeping every block when
    that fits in the units and no recompute that costs nothing holds more than the kept activations."""
    held = 0
    for block, option in zip(blocks, options):
        if not all(extra >= 0.0 for extra, _ in option.values()):
            return False
        units = units_of(block.activation_bytes)
        if not option[RECOMPUTE][0] > 0.0 and units_of(option[RECOMPUTE][1]) > units:
            return False
        if held + units > room:
            return False
        held += units
    return True


@dataclass(frozen=True)
class DataParallelOutOfCore:
    """Multi-node out-of-core data parallelism: one device's plan plus the pipelined update."""

    plan: OutOfCorePlan
    backward_end_s: float  # end of the backward pass (forward + backward incl. recompute and exposure)
    iteration_s: float  # when the next forward can run without waiting for weights

    @property
    def exposed_update_s(self) -> float:
        """Gradient exchange, copies and host update not hidden behind the backward pass."""
        return self.iteration_s - self.backward_end_s


def data_parallel_iteration(single: OutOfCorePlan, blocks: Sequence[Block], *, allreduce_s: TransferTime,
                            d2h_s: TransferTime, h2d_s: TransferTime,
                            host_update_s: TransferTime) -> DataParallelOutOfCore:
    """Iteration time of out-of-core data parallelism with the gradient pipeline (KARMA multi-node form,
    docs/method.md §17), as a flow shop over blocks in backward order (G-1 .. 0) with one resource per stage:
        ar_i  = max(d_i, ar_{i+1}) + T_ar(w_i)          (gradient all-reduce as soon as backward i ends)
        c_i   = max(ar_i, c_{i+1}) + T_d2h(w_i)          (gradients to the host)
        u_i   = max(c_i, u_{i+1}) + T_update(w_i)        (host optimizer: streaming at host bandwidth)
        h_i   = max(u_i, h_{i+1}) + T_h2d(w_i)           (weights back to the device)
    with d_i the end of block i's backward and w_i its weight (= gradient) bytes. The next forward starts at
        S = max(d_0, max_i (h_i - sum_{j<i} FW_j)),
    i.e. block i's forward must find its weights; S is the iteration time. Every callable takes w_i.
    Copies of weights and gradients share the copy engines with activation swaps; that contention is not
    modelled."""
    n = len(blocks)
    if n == 0:
        return DataParallelOutOfCore(plan=single, backward_end_s=0.0, iteration_s=0.0)
    t = sum(b.fwd_s for b in blocks) + _forward_exposure_s(single, blocks, d2h_s)
    backward_done = [0.0] * n
    for i in range(n - 1, -1, -1):
        t += blocks[i].bwd_s + _backward_extra_s(single, blocks, i, h2d_s)
        backward_done[i] = t
    ar = copy = update = back = 0.0
    weights_back = [0.0] * n
    for i in range(n - 1, -1, -1):
        w = blocks[i].weight_bytes
        ar = max(backward_done[i], ar) + allreduce_s(w)
        copy = max(ar, copy) + d2h_s(w)
        update = max(copy, update) + host_update_s(w)
        back = max(update, back) + h2d_s(w)
        weights_back[i] = back
    prefix_fwd = itertools.accumulate((b.fwd_s for b in blocks[:-1]), initial=0.0)
    start_next = max(backward_done[0], *(h - f for h, f in zip(weights_back, prefix_fwd)))
    return DataParallelOutOfCore(plan=single, backward_end_s=backward_done[0], iteration_s=start_next)


def _forward_exposure_s(single: OutOfCorePlan, blocks, d2h_s) -> float:
    return sum(max(0.0, d2h_s(b.activation_bytes) - (blocks[i + 1].fwd_s if i + 1 < len(blocks) else 0.0))
               for i, (b, c) in enumerate(zip(blocks, single.choices)) if c == SWAP)


def _backward_extra_s(single: OutOfCorePlan, blocks, i, h2d_s) -> float:
    """Recompute and exposed swap-in charged to block i's backward."""
    if single.choices[i] == RECOMPUTE:
        return blocks[i].fwd_s
    if single.choices[i] == SWAP:
        next_bwd_s = blocks[i + 1].bwd_s if i + 1 < len(blocks) else 0.0
        return max(0.0, h2d_s(blocks[i].activation_bytes) - next_bwd_s)
    return 0.0
