"""Bidirectional neighbour (halo) exchange as spatial parallelism does it: each rank of a ring sends S
bytes to its left and S bytes to its right neighbour and receives the same from both, all four transfers
posted at once with batch_isend_irecv. S = one face, count*element_bytes; busbw = algbw * 1 (each link
carries S per direction, like nccl-tests sendrecv; nccl-tests doc/PERFORMANCE.md)."""

NAME = "halo"
min_group_size, max_group_size = 2, None
_RIGHTWARD, _LEFTWARD = 1, 2  # tags, so a pair (left == right) still matches each face to its buffer


def message_bytes(requested_bytes: int, n: int, element_bytes: int) -> int:
    return max(1, requested_bytes // element_bytes) * element_bytes


def busbw_factor(n: int) -> float:
    return 1.0


def setup(size_bytes, group, peers, rank, device, dtype):
    import torch  # imported on use: the factors and sizes above are read without torch
    import torch.distributed as dist

    count = size_bytes // torch.tensor([], dtype=dtype).element_size()
    send_left, send_right, recv_left, recv_right = (torch.zeros(count, dtype=dtype, device=device) for _ in range(4))
    me = peers.index(rank)
    left, right = peers[(me - 1) % len(peers)], peers[(me + 1) % len(peers)]
    ops = [
        dist.P2POp(dist.isend, send_right, right, group, _RIGHTWARD),
        dist.P2POp(dist.isend, send_left, left, group, _LEFTWARD),
        dist.P2POp(dist.irecv, recv_left, left, group, _RIGHTWARD),
        dist.P2POp(dist.irecv, recv_right, right, group, _LEFTWARD),
    ]

    def call():
        for work in dist.batch_isend_irecv(ops):
            work.wait()

    return call
