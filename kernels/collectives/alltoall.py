"""all_to_all_single (nccl-tests alltoall_perf): S = per-peer count*n*element_bytes, each rank's whole
send buffer (n pieces of S/n); busbw = algbw * (n-1)/n (nccl-tests doc/PERFORMANCE.md; docs/method.md §6)."""

NAME = "alltoall"
min_group_size, max_group_size = 2, None


def message_bytes(requested_bytes: int, n: int, element_bytes: int) -> int:
    return max(1, requested_bytes // (element_bytes * n)) * element_bytes * n


def busbw_factor(n: int) -> float:
    return (n - 1) / n


def setup(size_bytes, group, peers, rank, device, dtype):
    import torch  # imported on use: the factors and sizes above are read without torch
    import torch.distributed as dist

    send = torch.zeros(size_bytes // torch.tensor([], dtype=dtype).element_size(), dtype=dtype, device=device)
    recv = torch.empty_like(send)

    def call():
        dist.all_to_all_single(recv, send, group=group)

    return call
