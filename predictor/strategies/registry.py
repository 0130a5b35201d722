"""The strategy registry: strategy name -> evaluator fn(ctx, plan, pred), which fills `pred` or raises
Infeasible. The built-in strategies are listed here; add-on strategies (predictor.outofcore_strategies: out-of-core,
recompute, cooperative) add themselves with `register(name, fn)`, and `predictor.strategies.evaluate` loads them
when a plan first names one."""
from __future__ import annotations

from typing import Callable

from predictor.plan import Plan, Prediction
from predictor.strategies.channel import evaluate as channel
from predictor.strategies.context import Context
from predictor.strategies.data import evaluate as data
from predictor.strategies.filter import evaluate as filter_
from predictor.strategies.hybrid3d import evaluate as hybrid3d
from predictor.strategies.pipeline import evaluate as pipeline
from predictor.strategies.spatial import evaluate as spatial
from predictor.strategies.tensor import evaluate as tensor

Evaluator = Callable[[Context, Plan, Prediction], None]

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


def register(name: str, fn: Evaluator) -> None:
    EVALUATORS[name] = fn
