"""Autograd-aware collectives the model-parallel runners use, with a clock on the time spent in them.

Every function takes the process group it works in, so hybrids run the same layer code inside a subgroup; all
chunks along the split dimension are equal (the strategy modules check divisibility). Backward rules (ParaDL tech
report, Table III; docs/method.md §10-§12): a gather whose consumer is split reduce-scatters its gradient
(grad_mode="sum": ParaDL charges an all-reduce and notes a reduce-scatter suffices), one whose consumer is
replicated keeps this rank's chunk ("slice"); an all-reduce of partial outputs sums the gradients of split
consumers ("sum") or passes a replicated one through ("identity"); all_reduce_keep (channel parallelism) keeps a
chunk forward and all-gathers the chunks' gradients backward.
"""
from __future__ import annotations

import time

import torch
import torch.distributed as dist

from kernels.collectives import reduce_scatter


class CommClock:
    """Seconds spent inside this module's collectives since the last reset (process-wide)."""

    seconds = 0.0

    @classmethod
    def reset(cls) -> None:
        cls.seconds = 0.0


def _timed(fn, *args, **kwargs):
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    CommClock.seconds += time.perf_counter() - start
    return out


def _all_reduce(tensor: torch.Tensor, group) -> torch.Tensor:
    _timed(dist.all_reduce, tensor, op=dist.ReduceOp.SUM, group=group)
    return tensor


def _chunk(tensor: torch.Tensor, dim: int, group) -> torch.Tensor:
    size = dist.get_world_size(group)
    return tensor.chunk(size, dim=dim)[dist.get_rank(group)].contiguous()


class _Gather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim, group, grad_mode):
        ctx.dim, ctx.group, ctx.grad_mode = dim, group, grad_mode
        return _all_gather_cat(x, dim, group)

    @staticmethod
    def backward(ctx, grad):
        if ctx.grad_mode == "sum":
            return _reduce_scatter(grad, ctx.dim, ctx.group), None, None, None
        return _chunk(grad.contiguous(), ctx.dim, ctx.group), None, None, None


def _reduce_scatter(tensor: torch.Tensor, dim: int, group) -> torch.Tensor:
    """Each rank's chunk along `dim` of the sum of every rank's `tensor`."""
    size = dist.get_world_size(group)
    whole = tensor.movedim(dim, 0).contiguous()
    mine = whole.new_empty((whole.shape[0] // size, *whole.shape[1:]))
    _timed(reduce_scatter.tensor_op(), mine, whole, group=group)
    return mine.movedim(0, dim).contiguous()


def _all_gather_cat(x: torch.Tensor, dim: int, group) -> torch.Tensor:
    parts = [torch.empty_like(x) for _ in range(dist.get_world_size(group))]
    _timed(dist.all_gather, parts, x.contiguous(), group=group)
    return torch.cat(parts, dim=dim)


class _AllReduceKeep(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim, group):
        ctx.dim, ctx.group = dim, group
        return _chunk(_all_reduce(x.clone(), group), dim, group)

    @staticmethod
    def backward(ctx, grad):
        return _all_gather_cat(grad, ctx.dim, ctx.group), None, None


def all_reduce_keep(x: torch.Tensor, dim: int, group) -> torch.Tensor:
    """This rank's chunk along `dim` of the sum of every rank's x (see module docstring)."""
    return _AllReduceKeep.apply(x, dim, group)


class _AllReduceSum(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group, grad_mode):
        ctx.group, ctx.grad_mode = group, grad_mode
        return _all_reduce(x.clone(), group)

    @staticmethod
    def backward(ctx, grad):
        if ctx.grad_mode == "sum":
            grad = _all_reduce(grad.contiguous().clone(), ctx.group)
        return grad, None, None


class _CopyToGroup(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return _all_reduce(grad.contiguous().clone(), ctx.group), None


def copy_to_group(x: torch.Tensor, group) -> torch.Tensor:
    """Identity forward; the backward all-reduces the gradient (Megatron-LM's "f" before a column-parallel
    layer: each rank's dL/dx is a partial sum over its output features). Its conjugate "g" is
    all_reduce_sum(y, group, "identity")."""
    return _CopyToGroup.apply(x, group)


def gather(x: torch.Tensor, dim: int, group, grad_mode: str) -> torch.Tensor:
    """All-gather equal chunks along `dim`; grad_mode "sum" or "slice" (see module docstring)."""
    return _Gather.apply(x, dim, group, grad_mode)


def all_reduce_sum(x: torch.Tensor, group, grad_mode: str) -> torch.Tensor:
    """Sum of every rank's x; grad_mode "sum" or "identity" (see module docstring)."""
    return _AllReduceSum.apply(x, group, grad_mode)


def _exchange(send_prev, send_next, recv_prev_shape, recv_next_shape, like, group):
    """Send `send_prev` to the previous rank and `send_next` to the next one along the split; receive what
    they sent us. Ends of the chain receive zeros (the zero padding of the unsplit convolution)."""
    rank, size = dist.get_rank(group), dist.get_world_size(group)
    recv_prev = like.new_zeros(recv_prev_shape)
    recv_next = like.new_zeros(recv_next_shape)
    ops = []
    if rank > 0:
        prev = dist.get_global_rank(group, rank - 1)
        if send_prev is not None and send_prev.numel():
            ops.append(dist.P2POp(dist.isend, send_prev.contiguous(), prev, group))
        if recv_prev.numel():
            ops.append(dist.P2POp(dist.irecv, recv_prev, prev, group))
    if rank < size - 1:
        nxt = dist.get_global_rank(group, rank + 1)
        if send_next is not None and send_next.numel():
            ops.append(dist.P2POp(dist.isend, send_next.contiguous(), nxt, group))
        if recv_next.numel():
            ops.append(dist.P2POp(dist.irecv, recv_next, nxt, group))
    if ops:
        start = time.perf_counter()
        for req in dist.batch_isend_irecv(ops):
            req.wait()
        CommClock.seconds += time.perf_counter() - start
    return recv_prev, recv_next


class _Halo(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim, before, after, group):
        ctx.dim, ctx.before, ctx.after, ctx.group = dim, before, after, group
        length = x.shape[dim]
        shape_before = list(x.shape)
        shape_before[dim] = before
        shape_after = list(x.shape)
        shape_after[dim] = after
        # the previous rank needs our first `after` rows (its trailing halo); the next our last `before`
        first = x.narrow(dim, 0, after) if after else None
        last = x.narrow(dim, length - before, before) if before else None
        from_prev, from_next = _exchange(first, last, shape_before, shape_after, x, group)
        return torch.cat([from_prev, x, from_next], dim=dim)

    @staticmethod
    def backward(ctx, grad):
        dim, before, after = ctx.dim, ctx.before, ctx.after
        length = grad.shape[dim] - before - after
        grad_prev_halo = grad.narrow(dim, 0, before)  # belongs to the previous rank's last rows
        grad_next_halo = grad.narrow(dim, before + length, after)  # the next rank's first rows
        grad_x = grad.narrow(dim, before, length).clone()
        shape_first = list(grad_x.shape)
        shape_first[dim] = after
        shape_last = list(grad_x.shape)
        shape_last[dim] = before
        # we receive, from the previous rank, the gradient of our first `after` rows, and from the next
        # rank the gradient of our last `before` rows
        add_first, add_last = _exchange(grad_prev_halo, grad_next_halo, shape_first, shape_last, grad_x, ctx.group)
        if after:
            grad_x.narrow(dim, 0, after).add_(add_first)
        if before:
            grad_x.narrow(dim, length - before, before).add_(add_last)
        return grad_x, None, None, None, None


def halo_extend(x: torch.Tensor, dim: int, before: int, after: int, group) -> torch.Tensor:
    """x extended along `dim` by `before` rows from the previous rank and `after` rows from the next
    (zeros at the ends of the chain); the backward sends the halo gradients back and adds them."""
    if before == 0 and after == 0:
        return x
    return _Halo.apply(x, dim, before, after, group)


def all_reduce_grads(params, group, divide_by: int = 1) -> None:
    """Sum (then divide) the .grad of `params` over `group`, flattened into one buffer per call."""
    grads = [p.grad for p in params if p.grad is not None]
    if not grads or dist.get_world_size(group) == 1:
        return
    flat = torch.cat([g.reshape(-1) for g in grads])
    _all_reduce(flat, group)
    if divide_by != 1:
        flat /= divide_by
    offset = 0
    for g in grads:
        g.copy_(flat[offset:offset + g.numel()].view_as(g))
        offset += g.numel()
