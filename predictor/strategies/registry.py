"""The strategy registry: strategy name -> evaluator fn(ctx, plan, pred), which fills `pred` or raises
Infeasible, and -> the search's lower bound beside it (predictor.strategies.bounds; GROUP_BOUNDS: the bounds of the
candidates the search takes together). The built-in strategies are listed here; add-on strategies
(predictor.outofcore_strategies: out-of-core, recompute, cooperative) add themselves with `register(name, fn,
bound)`, and `predictor.strategies.evaluate` loads them when a plan first names one."""
from __future__ import annotations

from typing import Callable

from predictor.plan import Plan, Prediction
from predictor.strategies import channel as _channel, data as _data, filter as _filter, hybrid3d as _hybrid3d
from predictor.strategies import pipeline as _pipeline, spatial as _spatial, tensor as _tensor
from predictor.strategies.channel import evaluate as channel
from predictor.strategies.context import Context
from predictor.strategies.data import evaluate as data
from predictor.strategies.filter import evaluate as filter_
from predictor.strategies.hybrid3d import evaluate as hybrid3d
from predictor.strategies.pipeline import evaluate as pipeline
from predictor.strategies.spatial import evaluate as spatial
from predictor.strategies.tensor import evaluate as tensor

Evaluator = Callable[[Context, Plan, Prediction], None]
#: lower_bound(b, strategy, p, p_data, inner, knob) -> None | (time_s, memory_bytes, refinement)
LowerBound = Callable[..., "tuple | None"]

EVALUATORS: dict[str, Evaluator] = {
    "serial": data,
    "data": data,
    "spatial": spatial,
    "filter": filter_,
    "channel": channel,
    "pipeline": pipeline,
    "data+spatial": spatial,
    "data+filter": filter_,
    "data+channel": channel,
    "data+pipeline": pipeline,
    "spatial-then-data": spatial,
    "tensor": tensor,
    "data+tensor": tensor,
    "data+tensor+pipeline": hybrid3d,
}


BOUNDS: dict[str, LowerBound] = {
    "serial": _data.lower_bound,
    "data": _data.lower_bound,
    "spatial": _spatial.lower_bound,
    "filter": _filter.lower_bound,
    "channel": _channel.lower_bound,
    "pipeline": _pipeline.lower_bound,
    "data+spatial": _spatial.lower_bound,
    "data+filter": _filter.lower_bound,
    "data+channel": _channel.lower_bound,
    "data+pipeline": _pipeline.lower_bound,
    "spatial-then-data": _spatial.lower_bound,
    "tensor": _tensor.lower_bound,
    "data+tensor": _tensor.lower_bound,
    "data+tensor+pipeline": _hybrid3d.lower_bound,
}

#: the bounds of the candidate groups the search walks together (search_space.candidate_specs, grouped=True): a
#: (devices, inner)'s spatial splits, a data+tensor+pipeline layout's variants
GROUP_BOUNDS: dict[str, Callable] = {
    "spatial": _spatial.group_bounds,
    "data+spatial": _spatial.group_bounds,
    "data+tensor+pipeline": _hybrid3d.layout_bound,
}


def register(name: str, fn: Evaluator, bound: LowerBound | None = None) -> None:
    """Add a strategy: its evaluator and, for the search, its lower bound (None: not bounded)."""
    EVALUATORS[name] = fn
    if bound is not None:
        BOUNDS[name] = bound
