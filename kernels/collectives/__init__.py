"""Collective and point-to-point kernels over torch.distributed, one module per operation, nccl-tests style.

Each module has NAME, `message_bytes(requested_bytes, n, element_bytes)` (the S actually used, nccl-tests
conventions, from nccl-tests' doc/PERFORMANCE.md; docs/method.md §1), `busbw_factor(n)`, `min_group_size`,
`max_group_size` (None = any) and `setup(size_bytes, group, peers, rank, device, dtype) -> call`, where
`call()` runs one blocking operation on pre-allocated buffers. `peers` are the group's global ranks in
order. Imports nothing of paraoracle's own.
"""
from kernels.collectives import allgather, allreduce, alltoall, broadcast, halo, reduce_scatter, sendrecv

OPERATIONS = {m.NAME: m for m in (allreduce, allgather, reduce_scatter, alltoall, broadcast, sendrecv, halo)}
