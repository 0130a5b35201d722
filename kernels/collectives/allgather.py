"""all_gather_into_tensor (nccl-tests all_gather_perf): S = sendcount*element_bytes*n, the gathered
output buffer; busbw = algbw * (n-1)/n (nccl-tests doc/PERFORMANCE.md; docs/method.md §6)."""

NAME = "allgather"
min_group_size, max_group_size = 2, None


def message_bytes(requested_bytes: int, n: int, element_bytes: int) -> int:
    return max(1, requested_bytes // (element_bytes * n)) * element_bytes * n


def busbw_factor(n: int) -> float:
    return (n - 1) / n


def setup(size_bytes, group, peers, rank, device, dtype):
    import torch  # imported on use: the factors and sizes above are read without torch
    import torch.distributed as dist

    # torch >= 2.13 renames all_gather_into_tensor (deprecated, warns) to all_gather_single
    _all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor

    out = torch.zeros(size_bytes // torch.tensor([], dtype=dtype).element_size(), dtype=dtype, device=device)
    piece = torch.zeros(out.numel() // len(peers), dtype=dtype, device=device)

    def call():
        _all_gather(out, piece, group=group)

    return call
