"""Pipeline (layer) parallelism with the GPipe schedule: the chain is cut into one contiguous stage per
rank, the batch into S micro-batches; every stage runs all S forwards (receiving activations from the
previous stage, sending its output to the next), then all S backwards in reverse order (receiving
dL/dy from the next stage, sending dL/dx to the previous). Written as explicit send/recv rather than
torch.distributed.pipelining, whose schedules target GPU/NCCL; the schedule is the one whose bubble is
(p-1)/(S+p-1) (GPipe, Huang et al., arXiv 1811.06965 §2.3; docs/method.md §13).

Stage cut: the predictor's (so the run measures the pipeline that was predicted), else contiguous stages
balanced on forward+backward FLOPs; the cut is recorded with every run. Batch norm uses each micro-batch's statistics (as GPipe does), so with
batch norm and S > 1 the loss differs slightly from the serial net's; the equivalence test uses a net
without batch norm.
"""
from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn
from torch.nn import functional as F

from predictor.graph import Layer, ModelGraph
from predictor.runner.comm import _timed
from predictor.runner.replica import Replica
from predictor.strategies.pipeline import partition
from profiler.errors import UserError


def stage_starts(layers: list[Layer], stages: int, graph_starts: tuple[int, ...] = (), graph: ModelGraph | None = None) -> list[int]:
    """Start index (into `layers`, the runner's chain) of each stage. `graph_starts`: the predictor's cut
    (indices into graph.layers, Prediction.details["stage_bounds"]), so the run measures the predicted
    pipeline; without it, the predictor's partition on per-layer forward+backward FLOPs."""
    if stages > len(layers):
        raise UserError(f"pipeline: {stages} stages but the net has only {len(layers)} layers")
    if graph_starts:
        names = [graph.layers[i].name for i in graph_starts]
        position = {layer.name: i for i, layer in enumerate(layers)}
        starts = []
        for graph_index, name in zip(graph_starts, names):
            later = [position[l.name] for l in graph.layers[graph_index:] if l.name in position]
            starts.append(later[0] if later else len(layers))
        if len(set(starts)) != stages or starts[0] != 0 or starts[-1] >= len(layers):
            raise UserError(f"pipeline: stage cut {graph_starts} leaves an empty stage in the runner's chain")
        return starts
    costs = [max(l.flops_fwd + l.flops_bwd_data + l.flops_bwd_weight, 1.0) for l in layers]
    return partition(costs, stages)


class StageReplica(Replica):
    """A rank that owns one contiguous stage of the chain (self.modules; the cut: stage_starts): what the pipeline
    and the cooperative runners share, the micro-batch loop included."""

    def __init__(self, layers: list[Layer], modules: list[nn.Module], group, stages: int, micro_batches: int,
                 graph_starts: tuple[int, ...] = (), graph: ModelGraph | None = None):
        self.stage_starts = stage_starts(layers, stages, graph_starts, graph)
        self.bounds = list(zip(self.stage_starts, self.stage_starts[1:] + [len(layers)]))  # (begin, end) per stage
        self.rank = dist.get_rank(group)
        self.group, self.stages, self.micro_batches = group, stages, micro_batches
        begin, end = self.bounds[self.rank]
        super().__init__(modules[begin:end])
        self.first_index = begin
        self.is_first, self.is_last = self.rank == 0, self.rank == stages - 1

    def _peer(self, rank: int) -> int:
        """The global rank of the group's `rank`."""
        return dist.get_global_rank(self.group, rank)

    def _run_micro_batches(self, inputs, targets, *, send_outputs: bool, backward_each: bool) -> torch.Tensor:
        """The stage's forward over each micro-batch (`inputs` may receive each one as it is drawn); the last stage
        takes the loss, returned as the mean over the batch (0 elsewhere). send_outputs: pass each output to the
        next stage (GPipe); backward_each: run a micro-batch's backward right after its forward (the cooperative
        backward pipeline), else leave them all to backward_saved."""
        self.saved = []
        total = torch.zeros((), dtype=torch.float32)
        for xm, ym in zip(inputs, targets):
            out = xm
            for module in self.modules:
                out = module(out)
            if self.is_last:
                out = F.cross_entropy(out, ym) / self.micro_batches
                total = total + out.detach()
            elif send_outputs:
                _timed(dist.send, out.detach().contiguous(), self._peer(self.rank + 1), self.group)
            self.saved.append((xm, out))
            if backward_each:
                self.backward_saved()
        return total

    def backward_saved(self) -> None:
        """The saved micro-batches' backwards, last first: dL/dy from the next stage (the loss on the last one),
        dL/dx to the previous one."""
        for xm, out in reversed(self.saved):
            if self.is_last:
                out.backward()
            else:
                grad = torch.empty_like(out)
                _timed(dist.recv, grad, self._peer(self.rank + 1), self.group)
                out.backward(grad)
            if not self.is_first:
                _timed(dist.send, xm.grad.contiguous(), self._peer(self.rank - 1), self.group)
        self.saved = []

    def serial_grads(self):
        return {f"{i + self.first_index}.{name}": p.grad for i, m in enumerate(self.modules) for name, p in m.named_parameters()}


class PipelineReplica(StageReplica):
    def __init__(self, layers: list[Layer], modules: list[nn.Module], group, stages: int, micro_batches: int,
                 graph_starts: tuple[int, ...] = (), graph: ModelGraph | None = None):
        super().__init__(layers, modules, group, stages, micro_batches, graph_starts, graph)
        self.in_shape = layers[self.first_index].input_shape

    def local_batch(self, x, y):
        if x.shape[0] % self.micro_batches:
            raise UserError(f"pipeline: batch {x.shape[0]} is not divisible by {self.micro_batches} micro-batches")
        return x, y

    def _receive(self, xm) -> torch.Tensor:
        """A micro-batch's input from the previous stage (shaped like the batch's slice `xm`)."""
        received = torch.empty((xm.shape[0], *self.in_shape), dtype=xm.dtype, device=xm.device)
        _timed(dist.recv, received, self._peer(self.rank - 1), self.group)
        return received.requires_grad_(True)

    def forward(self, x, y):
        """All micro-batch forwards; returns the mean loss on the last stage (0 elsewhere)."""
        xs = x.chunk(self.micro_batches)
        inputs = xs if self.is_first else (self._receive(xm) for xm in xs)
        return self._run_micro_batches(inputs, y.chunk(self.micro_batches), send_outputs=True, backward_each=False)

    def backward(self, loss) -> None:
        self.backward_saved()
