"""Predicted memory per device vs the measured peak of real CPU training steps (within 15%).

Measurement: torch.distributed._tools.mem_tracker.MemTracker, which follows every tensor storage
allocated inside the step (parameters, gradients, optimizer state, activations, temporaries, DDP bucket
buffers) and records the peak of their sum — a live-tensor-bytes tracker; RSS would include allocator
caching and the Python heap. One warm-up step runs first so the measured step sees steady-state
gradients and optimizer state (except DDP, built inside the tracker so its bucket copy is counted).
"""
import os
import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed._tools.mem_tracker import MemTracker

from predictor.plan import Plan
from predictor.strategies import evaluate
from predictor.strategies.context import Context
from predictor.synthetic import SyntheticCostModel
from predictor.trace import trace_module
from predictor.zoo import build

TOLERANCE = 0.15


def _optimizer(name, params):
    if name == "adam":
        return torch.optim.Adam(params)
    return torch.optim.SGD(params, lr=0.01, momentum=0.9 if name == "momentum" else 0.0)


def _step(model, opt, batch, shape):
    x = torch.randn(batch, *shape)
    model(x).float().pow(2).mean().backward()
    opt.step()
    opt.zero_grad(set_to_none=False)


def measured_peak_bytes(name, batch, optimizer, knobs):
    torch.manual_seed(0)
    model, shape = build(name, **knobs)
    opt = _optimizer(optimizer, list(model.parameters()))
    _step(model, opt, batch, shape)
    tracker = MemTracker()
    tracker.track_external(model, opt)
    with tracker:
        _step(model, opt, batch, shape)
    return tracker.get_tracker_snapshot("peak")[torch.device("cpu")]["Total"]


def predicted(name, plan, knobs):
    model, shape = build(name, **knobs)
    graph = trace_module(model, shape, name)
    return evaluate(Context(graph, SyntheticCostModel()), plan)


CASES = [
    ("small_cnn2d", 16, "sgd", {}),
    ("resnet", 8, "adam", dict(width=8, image=64)),
    ("vgg16", 4, "momentum", dict(width=8, fc=64, image=64, num_classes=10)),
    ("cosmoflow", 2, "sgd", dict(width=4, blocks=3, image=32, fc=32)),
    ("inception_v3", 2, "sgd", dict(width=0.125, image=75, num_classes=10)),
    ("efficientnet_b0", 4, "sgd", dict(width=0.25, depth=0.5, image=64, num_classes=10)),
    ("se_resnext101_32x4d", 4, "sgd", dict(width=8, groups=4, image=64, num_classes=10)),
]


@pytest.mark.slow  # runs real training steps
@pytest.mark.parametrize("name, batch, optimizer, knobs", CASES, ids=[c[0] for c in CASES])
def test_serial_memory_matches_measured_peak(name, batch, optimizer, knobs):
    measured = measured_peak_bytes(name, batch, optimizer, knobs)
    plan = Plan("serial", batch=batch, devices=1, devices_per_node=1, optimizer=optimizer)
    pred = predicted(name, plan, knobs)
    assert pred.memory_bytes == pytest.approx(measured, rel=TOLERANCE), (pred.memory_bytes, measured)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ddp_rank(rank, world, port, name, batch, knobs, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        torch.manual_seed(0)
        model, shape = build(name, **knobs)
        tracker = MemTracker()
        tracker.track_external(model)
        with tracker:
            ddp = torch.nn.parallel.DistributedDataParallel(model)
            opt = _optimizer("sgd", list(ddp.parameters()))
            _step(ddp, opt, batch // world, shape)
        out[rank] = tracker.get_tracker_snapshot("peak")[torch.device("cpu")]["Total"]
    finally:
        dist.destroy_process_group()


@pytest.mark.slow  # runs real training steps
def test_data_parallel_memory_matches_measured_peak_on_two_gloo_ranks():
    name, batch, knobs = "resnet", 8, dict(width=8, image=64)
    with mp.Manager() as manager:
        out = manager.dict()
        mp.spawn(_ddp_rank, args=(2, _free_port(), name, batch, knobs, out), nprocs=2, join=True)
        measured = dict(out)
    plan = Plan("data", batch=batch, devices=2, devices_per_node=2, p_data=2)
    pred = predicted(name, plan, knobs)
    for rank, peak in measured.items():
        assert pred.memory_bytes == pytest.approx(peak, rel=TOLERANCE), (rank, pred.memory_bytes, peak)
