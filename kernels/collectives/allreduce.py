"""all_reduce (nccl-tests all_reduce_perf): S = count*element_bytes, the buffer each rank holds;
busbw = algbw * 2(n-1)/n (ring or tree optimum; nccl-tests doc/PERFORMANCE.md, docs/method.md §6)."""

NAME = "allreduce"
min_group_size, max_group_size = 2, None


def message_bytes(requested_bytes: int, n: int, element_bytes: int) -> int:
    return max(1, requested_bytes // element_bytes) * element_bytes


def busbw_factor(n: int) -> float:
    return 2 * (n - 1) / n


def setup(size_bytes, group, peers, rank, device, dtype):
    import torch  # imported on use: the factors and sizes above are read without torch
    import torch.distributed as dist

    buf = torch.zeros(size_bytes // torch.tensor([], dtype=dtype).element_size(), dtype=dtype, device=device)

    def call():
        dist.all_reduce(buf, group=group)

    return call
