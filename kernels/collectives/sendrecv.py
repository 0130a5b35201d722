"""One-directional send/recv between a pair: the group's first rank sends S bytes to the second.
S = count*element_bytes; busbw = algbw * 1 (nccl-tests sendrecv_perf and doc/PERFORMANCE.md; nccl-tests
shifts a ring r->r+1, which for a pair of ranks is bidirectional, so here only pairs are measured)."""

NAME = "sendrecv"
min_group_size, max_group_size = 2, 2


def message_bytes(requested_bytes: int, n: int, element_bytes: int) -> int:
    return max(1, requested_bytes // element_bytes) * element_bytes


def busbw_factor(n: int) -> float:
    return 1.0


def setup(size_bytes, group, peers, rank, device, dtype):
    import torch  # imported on use: the factors and sizes above are read without torch
    import torch.distributed as dist

    buf = torch.zeros(size_bytes // torch.tensor([], dtype=dtype).element_size(), dtype=dtype, device=device)
    sender, receiver = peers

    def call():
        if rank == sender:
            dist.send(buf, dst=receiver, group=group)
        else:
            dist.recv(buf, src=sender, group=group)

    return call
