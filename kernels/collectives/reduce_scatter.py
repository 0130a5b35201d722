"""reduce_scatter_tensor (nccl-tests reduce_scatter_perf): S = recvcount*element_bytes*n, the input
buffer; busbw = algbw * (n-1)/n (nccl-tests doc/PERFORMANCE.md; docs/method.md §6)."""

NAME = "reduce_scatter"
min_group_size, max_group_size = 2, None


def message_bytes(requested_bytes: int, n: int, element_bytes: int) -> int:
    return max(1, requested_bytes // (element_bytes * n)) * element_bytes * n


def busbw_factor(n: int) -> float:
    return (n - 1) / n


def tensor_op():
    """torch.distributed's reduce-scatter of one flat tensor: torch >= 2.13 renames reduce_scatter_tensor
    (deprecated, warns) to reduce_scatter_single."""
    import torch.distributed as dist  # imported on use: the factors and sizes above are read without torch

    return getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor


def setup(size_bytes, group, peers, rank, device, dtype):
    import torch  # imported on use: the factors and sizes above are read without torch

    _reduce_scatter = tensor_op()

    full = torch.zeros(size_bytes // torch.tensor([], dtype=dtype).element_size(), dtype=dtype, device=device)
    piece = torch.zeros(full.numel() // len(peers), dtype=dtype, device=device)

    def call():
        _reduce_scatter(piece, full, group=group)

    return call
