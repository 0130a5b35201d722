"""broadcast from the group's first rank (nccl-tests broadcast_perf): S = count*element_bytes;
busbw = algbw * 1, the root's link is the bottleneck (nccl-tests doc/PERFORMANCE.md)."""

NAME = "broadcast"
min_group_size, max_group_size = 2, None


def message_bytes(requested_bytes: int, n: int, element_bytes: int) -> int:
    return max(1, requested_bytes // element_bytes) * element_bytes


def busbw_factor(n: int) -> float:
    return 1.0


def setup(size_bytes, group, peers, rank, device, dtype):
    import torch  # imported on use: the factors and sizes above are read without torch
    import torch.distributed as dist

    buf = torch.zeros(size_bytes // torch.tensor([], dtype=dtype).element_size(), dtype=dtype, device=device)
    root = peers[0]

    def call():
        dist.broadcast(buf, src=root, group=group)

    return call
