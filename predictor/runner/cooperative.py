"""Cooperative-process model parallelism, measured: the schedule `predictor/cooperative.py` predicts.

Every rank builds the whole serial net and owns one contiguous stage (the pipeline's cut); the optimizer updates
only the owned stage. One step: every stage's weights broadcast from their owner; each rank runs the forward of
stages 0..K-2 on its N/K slice without autograd, keeping every stage's input, and point-to-point exchanges (an
all-to-all) give each rank its stage's input for all N samples; then the backward pipeline over M micro-batches, a
stage computing its next micro-batch's forward while the next stage is still busy (the "recompute ahead" the cost
model assumes). Batch norm sees the N/K slice in the prediction step and the micro-batch in the training step.
docs/method.md §18.
"""
from __future__ import annotations

import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from predictor.graph import Layer, ModelGraph
from predictor.runner.comm import CommClock, _timed
from predictor.runner.pipeline import StageReplica
from profiler.errors import UserError


class CooperativeReplica(StageReplica):
    def __init__(self, layers: list[Layer], modules: list[nn.Module], group, stages: int, micro_batches: int,
                 graph_starts: tuple[int, ...] = (), graph: ModelGraph | None = None):
        super().__init__(layers, modules, group, stages, micro_batches, graph_starts, graph)
        self.all_modules = modules
        self.stage_input_shapes = [layers[b].input_shape for b, _ in self.bounds]

    def local_batch(self, x, y):
        if x.shape[0] % self.stages or x.shape[0] % self.micro_batches:
            raise UserError(f"cooperative: batch {x.shape[0]} must divide into {self.stages} processes and "
                            f"{self.micro_batches} micro-batches")
        return x, y

    def _synchronise(self) -> None:
        for owner, (begin, end) in enumerate(self.bounds):
            params = [p for m in self.all_modules[begin:end] for p in m.parameters()]
            if not params:
                continue
            flat = parameters_to_vector(params).detach()
            _timed(dist.broadcast, flat, self._peer(owner), self.group)
            if owner != self.rank:
                with torch.no_grad():
                    vector_to_parameters(flat, params)

    def _predict_stage_input(self, x) -> torch.Tensor:
        """This rank's stage input for the whole batch (prediction step + exchange)."""
        mine = x.chunk(self.stages)[self.rank]
        inputs = [mine]  # inputs[k]: the input of stage k for this rank's samples
        with torch.no_grad():
            h = mine
            for begin, end in self.bounds[:-1]:
                for module in self.all_modules[begin:end]:
                    h = module(h)
                inputs.append(h)
        if self.is_first:
            received = None
        else:
            received = [inputs[self.rank] if r == self.rank else
                        torch.empty((mine.shape[0], *self.stage_input_shapes[self.rank]), dtype=x.dtype, device=x.device)
                        for r in range(self.stages)]
        requests = []
        t0 = time.perf_counter()
        for stage in range(1, self.stages):
            if stage != self.rank:
                requests.append(dist.isend(inputs[stage].contiguous(), self._peer(stage), self.group))
        if received is not None:
            for r in range(self.stages):
                if r != self.rank:
                    requests.append(dist.irecv(received[r], self._peer(r), self.group))
        for request in requests:
            request.wait()
        CommClock.seconds += time.perf_counter() - t0
        return x if self.is_first else torch.cat(received)

    def forward(self, x, y):
        """The whole step (gradients are ready on return); the mean loss on the last stage, 0 elsewhere."""
        self._synchronise()
        stage_input = self._predict_stage_input(x)
        inputs = (xm.detach().requires_grad_(not self.is_first) for xm in stage_input.chunk(self.micro_batches))
        return self._run_micro_batches(inputs, y.chunk(self.micro_batches), send_outputs=False, backward_each=True)

    def backward(self, loss) -> None:
        """Done inside forward (the backward pipeline is part of the cooperative step)."""

