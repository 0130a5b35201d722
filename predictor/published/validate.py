"""Predict every published record with the reference profile of its system, and score the predictions.

For each record that `rowmap.interpret` can represent: the zoo model at the record's image size, the plan
(serial on one GPU, data parallel over all of them, with the record's GPUs per node, dtype, optimizer and
framework regime), and the profile named by the mapping rules. The prediction is the analytical model
alone; `validate_runs` takes an optional `overrides` callable that may replace profile quantities (used
by the leave-one-source-out fit of per-system constants, `predictor.published.loso`), never per row.

Accuracy of one row: 1 - |predicted - measured| / measured on seconds per iteration (ParaDL's figure of
merit), not clipped at 0.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Optional, Sequence, Union

from calibrate.correction import accuracy
from calibrate.shipped import shipped_profiles_dir
from predictor.published.corpus import PublishedRun
from predictor.published.rowmap import Setup, Skipped, interpret
from profiler.errors import UserError

BUCKETS = ((1, 1, "1"), (2, 8, "2-8"), (9, 64, "9-64"), (65, 512, "65-512"), (513, math.inf, ">512"))


def gpu_bucket(gpus: int) -> str:
    """The GPU-count bucket a run falls in (1, 2-8, 9-64, 65-512, >512)."""
    return next(name for low, high, name in BUCKETS if low <= gpus <= high)


@dataclass
class RowResult:
    setup: Setup
    predicted_s: float
    interval_s: tuple[float, float]
    terms: dict[str, float] = field(default_factory=dict)
    fits: bool = True
    reason: str = ""  # why the plan is infeasible, when it is
    #: (low, high) multipliers the at-scale terms make alone (stragglers, cluster load, storage; predictor.at_scale)
    at_scale_range: tuple[float, float] = (1.0, 1.0)

    @property
    def run(self) -> PublishedRun:
        return self.setup.run

    @property
    def measured_s(self) -> float:
        return self.run.measured_s

    @property
    def accuracy(self) -> float:
        return accuracy(self.predicted_s, self.measured_s)

    @property
    def bucket(self) -> str:
        return gpu_bucket(self.run.num_gpus)


class Predictor:
    """Caches graphs and cost models across rows (tracing a zoo model takes seconds)."""

    def __init__(self, profiles_dir: Union[str, Path, None] = None):
        """profiles_dir: where the rows' profile files are (default: the shipped profiles)."""
        self.profiles_dir = Path(profiles_dir) if profiles_dir is not None else shipped_profiles_dir()
        self._graphs: dict = {}
        self._models: dict = {}

    def graph(self, setup: Setup):
        from predictor.api import load_model

        key = (setup.model, setup.knobs)
        if key not in self._graphs:
            self._graphs[key] = load_model(setup.model, **dict(setup.knobs))
        return self._graphs[key]

    def trace_ahead(self, setups: Sequence[Setup]) -> None:
        """Trace the rows' models (every length of a padded row) in worker processes (predictor.api.trace_ahead)."""
        from predictor.api import trace_ahead

        trace_ahead((s.model, {**dict(s.knobs), **({"seq": seq} if seq is not None else {})})
                    for s in setups for seq in ([seq for seq, _ in s.seq_mix] or [None]))

    def cost_model(self, profile: str):
        from predictor.api import load_cost_model

        if profile not in self._models:
            self._models[profile] = load_cost_model(self.profiles_dir / profile)[0]
        return self._models[profile]

    def predict(self, setup: Setup, cost_model=None) -> RowResult:
        from predictor.api import default_plans, predict
        from predictor.plan import Plan

        if setup.seq_mix:
            return self._mixed(setup, cost_model)
        from predictor.at_scale import DATASETS, with_collective_algorithms, with_data_source

        graph = self.graph(setup)
        cm = cost_model if cost_model is not None else self.cost_model(setup.profile)
        with_data_source(cm, replace(DATASETS[setup.dataset], staged=setup.staged,
                                         decode_core_s=setup.decode_core_s))
        with_collective_algorithms(cm, setup.collective_algorithms)
        gpus = setup.run.num_gpus
        if setup.plan:  # the row states its plan (predictor.published.transformer)
            plan = Plan(devices_per_node=setup.devices_per_node, dtype=setup.dtype, optimizer=setup.optimizer,
                        framework=setup.framework, synthetic_data=setup.synthetic_data, stack=setup.stack,
                        memory_format=setup.memory_format, cuda_graphs=setup.cuda_graphs, **dict(setup.plan))
            return self._result(setup, predict(graph, plan, cm))
        plan = default_plans(graph, "data" if gpus > 1 else "serial", setup.batch, gpus, setup.devices_per_node,
                             setup.dtype, setup.optimizer, framework=setup.framework,
                             synthetic_data=setup.synthetic_data, stack=setup.stack)[0]
        return self._result(setup, predict(graph, replace(plan, memory_format=setup.memory_format,
                                                          bn_group=setup.bn_group, cuda_graphs=setup.cuda_graphs), cm))

    def _mixed(self, setup: Setup, cost_model=None) -> RowResult:
        """A row whose micro-batches are padded each to its own length (Setup.seq_mix: (length L_k, share w_k)).
        An optimizer step of A micro-steps at lengths L_1..L_A costs their compute, plus the communication left
        exposed after the last one and the update; with T(L) the predicted step when every micro-step runs at L,
        its expectation over micro-steps drawn with shares w_k is sum_k w_k T(L_k) (linearity of expectation).
        Interval and terms are the same weighted sums; the row fits when every length does."""
        parts = []
        for seq, share in setup.seq_mix:
            knobs = tuple(sorted({**dict(setup.knobs), "seq": seq}.items()))
            parts.append((share, self.predict(replace(setup, knobs=knobs, seq_mix=()), cost_model)))
        total = sum(share for share, _ in parts)
        weights = [(share / total, r) for share, r in parts]
        return RowResult(setup=setup, predicted_s=sum(w * r.predicted_s for w, r in weights),
                         interval_s=(sum(w * r.interval_s[0] for w, r in weights),
                                     sum(w * r.interval_s[1] for w, r in weights)),
                         terms={k: sum(w * r.terms.get(k, 0.0) for w, r in weights) for k in weights[0][1].terms},
                         fits=all(r.fits for _, r in weights),
                         reason=next((r.reason for _, r in weights if r.reason), ""),
                         at_scale_range=(min(r.at_scale_range[0] for _, r in weights),
                                         max(r.at_scale_range[1] for _, r in weights)))

    @staticmethod
    def _result(setup: Setup, pred) -> RowResult:
        terms = {"compute_s": pred.compute_fwd_s + pred.compute_bwd_s, "update_s": pred.update_s,
                 "comm_exposed_s": pred.comm_exposed_total_s, "comm_hidden_s": pred.comm_hidden_total_s}
        if setup.plan:
            terms.update(bubble_s=pred.bubble_s, recompute_s=pred.recompute_s)
        if pred.straggler_s:
            terms["straggler_s"] = pred.straggler_s
        for kind in ("expert_alltoall", "context_ring"):  # expert and context parallelism (method.md §14b)
            if kind in pred.comm_exposed_s:
                terms[f"{kind}_s"] = pred.comm_exposed_s[kind]
        return RowResult(setup=setup, predicted_s=pred.iteration_s, interval_s=tuple(pred.interval_s), terms=terms,
                         fits=pred.fits, reason=pred.reason,
                         at_scale_range=tuple(pred.details.get("at_scale_range", (1.0, 1.0))))


def validate_runs(runs: Sequence[PublishedRun], rules: dict, predictor: Predictor,
                  cost_model_for: Optional[Callable[[Setup], object]] = None,
                  interpret_row: Callable[[PublishedRun, dict], Union[Setup, Skipped]] = interpret
                  ) -> tuple[list[RowResult], list[Skipped]]:
    """(results, skipped) for every record; cost_model_for(setup) may supply the cost model of a row's system
    (default: the profile file the mapping names); interpret_row maps a record to its Setup (default: the CNN
    rules, rowmap.interpret)."""
    results: list[RowResult] = []
    skipped: list[Skipped] = []
    setups = [interpret_row(run, rules) for run in runs]
    predictor.trace_ahead([s for s in setups if not isinstance(s, Skipped)])
    for run, setup in zip(runs, setups):
        if isinstance(setup, Skipped):
            skipped.append(setup)
            continue
        try:  # a row the predictor cannot represent (a knob, a dtype the profile cannot run) is skipped, not fatal
            cm = cost_model_for(setup) if cost_model_for else None
            result = predictor.predict(setup, cm)
        except UserError as err:
            skipped.append(Skipped(run, f"the predictor cannot represent it: {err}"))
            continue
        if not math.isfinite(result.predicted_s):
            skipped.append(Skipped(run, "the plan is infeasible for the predictor"
                                   + (f" ({result.reason})" if result.reason else "")))
            continue
        results.append(result)
    return results, skipped
