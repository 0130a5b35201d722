"""Output of predictions: the ranked rich table, JSON, and a Chrome/Perfetto trace of one iteration."""
from __future__ import annotations

import json
import math
from typing import Any, Sequence

from rich.table import Table

from predictor.extrapolation import FLAG_SHARE
from predictor.plan import Prediction

_SHORT = {"gradient": "grad", "layer_collective": "layer", "halo": "halo", "pipeline_p2p": "p2p",
          "redistribute": "a2a", "expert_alltoall": "expert a2a", "context_ring": "cp ring"}


def _t(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "-"
    if seconds >= 1:
        return f"{seconds:.3g} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} us"


def _gb(b: float) -> str:
    return f"{b / 1e9:.2f}"


def comm_text(pred: Prediction) -> str:
    parts = [f"{_SHORT.get(k, k)} {_t(v)}" for k, v in pred.comm_exposed_s.items() if v > 0]
    return ", ".join(parts) or "-"


def ranked_table(preds: Sequence[Prediction], dataset_size: int | None = None, title: str = "") -> Table:
    table = Table(title=title, show_lines=False)
    for col, just in (("#", "right"), ("strategy", "left"), ("split", "left"), ("iteration", "right"),
                      ("interval", "right"), ("compute f+b", "right"), ("exposed comm", "left"),
                      ("hidden", "right"), ("bubble", "right"), ("update", "right"), ("stragglers", "right"),
                      ("storage", "right"), ("mem GB", "right"), ("fits", "center"), ("max batch", "right"),
                      ("bottleneck", "left"), ("samples/s", "right")):
        table.add_column(col, justify=just, no_wrap=col in ("strategy", "split", "iteration"))
    extrap = any(p.extrapolated_share is not None for p in preds)
    if extrap:  # share of the compute predicted beyond the profile's measured shapes (predictor.extrapolation)
        table.add_column("extrap.", justify="right")
    if dataset_size:
        table.add_column("epoch", justify="right")
        table.add_column("GPU-h", justify="right")
    for k, p in enumerate(preds, 1):
        if not p.feasible:
            row = [str(k), p.plan.strategy, p.plan.describe(), "infeasible", "", "",
                   p.reason.removeprefix("infeasible: ")] + [""] * 10
        else:
            row = [str(k), p.plan.strategy, p.plan.describe(), _t(p.iteration_s),
                   f"{_t(p.interval_s[0])}-{_t(p.interval_s[1])}" if math.isfinite(p.interval_s[0]) else "-",
                   _t(p.compute_fwd_s + p.compute_bwd_s), comm_text(p), _t(p.comm_hidden_total_s),
                   _t(p.bubble_s) if p.bubble_s else "-", _t(p.update_s),
                   _t(p.straggler_s) if p.straggler_s else "-", storage_text(p), _gb(p.memory_bytes),
                   "yes" if p.fits else "OOM", str(p.max_batch_fits if p.max_batch_fits is not None else "-"),
                   p.bottleneck, f"{p.throughput_samples_per_s:.4g}"]
        if extrap:
            share = p.extrapolated_share
            row.append("" if share is None else f"{share:.0%}" + (" !" if share > FLAG_SHARE else ""))
        if dataset_size:
            row += ([_t(p.epoch_s(dataset_size)), f"{p.gpu_hours(dataset_size):.4g}"] if p.feasible else ["", ""])
        table.add_row(*row)
    return table


def storage_text(pred: Prediction) -> str:
    """A step's storage read time (hidden behind the device's work unless the bottleneck says so), as a range
    "low-high ?" when the profile does not know some of its storage figures ('-' when nothing is read)."""
    info = pred.details.get("storage")
    if not info:
        return "-"
    high = info.get("high_s")
    if high is not None and high > pred.storage_s:
        return f"{_t(pred.storage_s) if pred.storage_s else '0'}-{_t(high)} ?"
    return _t(pred.storage_s) if pred.storage_s else "0"


def at_scale_lines(pred: Prediction, load_times: dict[str, float] | None = None) -> list[str]:
    """What the at-scale terms make of one plan (docs/method.md §6, §19a, §25): the iteration under each cluster
    load (`load_times`: quiet/typical/busy -> seconds, when the fabric has other jobs' load), the stragglers'
    share, and the storage term with its binding resource (a range when unknown)."""
    lines = []
    if load_times and max(load_times.values()) > min(load_times.values()) * (1 + 1e-9):
        lines.append("cluster load (other jobs on the fabric's uplinks): " + ", ".join(
            f"{name} {_t(t)}" for name, t in load_times.items()))
    elif load_times:
        lines.append("cluster load: no traffic leaves a leaf switch at this size, other jobs do not change it")
    info = pred.details.get("stragglers")
    if info and pred.straggler_s > 0:
        lines.append(f"stragglers: the slowest of {info['ranks']} ranks adds {_t(pred.straggler_s)} "
                     f"({pred.straggler_s / pred.iteration_s:.0%} of the step; device {info['device_excess']:.1%}, "
                     f"step {info['step_excess']:.1%} of the compute, collectives {_t(info['collectives_s'])})")
    store = pred.details.get("storage")
    if store:
        unknown = store.get("unknown") or []
        what = f"storage: {storage_text(pred)} per step"
        if store.get("binding"):
            what += f", bound by {store['binding']}"
        what += f"; page cache holds {store.get('cache_hit', 0.0):.0%} of the dataset"
        if unknown:
            what += f"; unknown: {', '.join(u.removesuffix('_per_s').replace('_', ' ') for u in unknown)} (a range)"
        if store.get("staging_s"):
            what += f"; staging once {_t(store['staging_s'])}"
        lines.append(what)
    return lines


def time_text(seconds: float) -> str:
    """Seconds as the tables print them (s, ms or us, 3 significant digits; '-' when not finite)."""
    return _t(seconds)


def rate_text(samples_per_s: float) -> str:
    """Samples/s with thousands separators (4 significant digits below 100)."""
    return f"{samples_per_s:,.0f}" if samples_per_s >= 100 else f"{samples_per_s:.4g}"


def interval_pct(pred: Prediction) -> str:
    """The prediction interval as +-N% of the iteration time (the wider side; '' without an interval)."""
    low, high = pred.interval_s
    if not (pred.feasible and math.isfinite(low) and math.isfinite(high) and pred.iteration_s > 0):
        return ""
    return f"\u00b1{max(high - pred.iteration_s, pred.iteration_s - low) / pred.iteration_s:.0%}"


#: the widest the compact table's split column grows (a searched 3-D layout is longer), cut or, in a search's table,
#: wrapped
SPLIT_WIDTH, WRAPPED_SPLIT_WIDTH = 14, 24


def compact_table(preds: Sequence[Prediction], dataset_size: int | None = None, title: str = "",
                  devices: bool = False) -> Table:
    """`predictor run`'s default table, one line per feasible plan in at most 100 columns: rank, strategy,
    split, iteration +- interval, samples/s, memory / fits, bottleneck (and GPU-hours with a dataset size);
    devices: a GPUs column after the strategy and the split wrapped in its column rather than cut (`predictor
    search`, whose plans differ in device count and split).
    Infeasible plans are left to `infeasible_line`; `ranked_table` (--wide) has every term."""
    from rich import box

    table = Table(title=title, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1), collapse_padding=True)
    # a long split (a searched 3-D layout) is cut at SPLIT_WIDTH rather than squeezing the other columns; the
    # recommendation's line and --wide give it whole
    columns = [("#", "right"), ("strategy", "left"), ("split", "left"), ("iteration", "right"), ("\u00b1", "right"),
               ("samples/s", "right"), ("mem GB", "right"), ("bottleneck", "left")]
    if devices:
        columns.insert(2, ("GPUs", "right"))
    wrap = devices  # a search's plans differ mostly in their split: wrapped, not cut
    for col, just in columns:
        split = col == "split"
        table.add_column(col, justify=just, no_wrap=not (split and wrap), overflow="fold" if split and wrap
                         else "ellipsis", max_width=(WRAPPED_SPLIT_WIDTH if wrap else SPLIT_WIDTH) if split else None)
    if dataset_size:
        table.add_column("GPU-h", justify="right", no_wrap=True)
    for k, p in enumerate(preds, 1):
        if not p.feasible:
            continue
        row = [str(k), p.plan.strategy, p.plan.describe(), _t(p.iteration_s), interval_pct(p),
               rate_text(p.throughput_samples_per_s), _gb(p.memory_bytes),
               p.bottleneck if p.fits else "does not fit (OOM)"]
        if devices:
            row.insert(2, str(p.plan.devices))
        if dataset_size:
            row.append(f"{p.gpu_hours(dataset_size):.4g}")
        table.add_row(*row)
    return table


def infeasible_line(preds: Sequence[Prediction]) -> str:
    """One line naming the plans that cannot run, grouped by reason ('' when every plan can)."""
    reasons: dict[str, list[str]] = {}
    for p in preds:
        if not p.feasible:
            reasons.setdefault(p.reason.removeprefix("infeasible: "), []).append(p.plan.strategy)
    return "; ".join(f"{', '.join(names)}: {why}" for why, names in reasons.items())


def moe_context_lines(pred: Prediction) -> list[str]:
    """What expert and context parallelism add to a plan (docs/method.md §14b): the experts' share of the parameter
    state, the busiest expert rank's tokens, the all-to-alls; the sequence split and the ring's exposed part."""
    d, plan = pred.details, pred.plan
    if not pred.feasible or "expert_parallel" not in d:
        return []
    out = []
    state = pred.weights_bytes + pred.grads_bytes + pred.optimizer_bytes
    params = d.get("params_per_device") or 0.0
    if plan.p_expert > 1:
        share = d.get("expert_params_per_device", 0.0) / params if params else 0.0
        etp = plan.expert_tensor
        split = (f", each split over {etp} ranks" if etp > 1 else ", each whole") + (
            f" (folded over the {plan.p_tensor} tensor ranks)" if etp != plan.p_tensor else "")
        out.append(f"experts: 1/{plan.p_expert} of them per rank{split if plan.p_tensor > 1 else ''} "
                   f"({share:.0%} of its {params / 1e6:.4g} M parameters, "
                   f"about {share * state / 1e9:.3g} GB of weights, gradients and optimizer state); the busiest expert "
                   f"rank takes {d.get('expert_busiest_factor', 1.0):.3f}x the mean routed tokens; dispatch and combine "
                   + ("deduplicated per node (deepep) " if d.get("expert_dispatcher") == "deepep" else "")
                   + f"all-to-alls over {plan.p_expert} ranks on {d.get('nodes_expert_group', 1)} node(s): "
                   f"{_t(pred.comm_exposed_s.get('expert_alltoall', 0.0))} exposed"
                   + (f", {_t(pred.comm_hidden_s.get('expert_alltoall', 0.0))} hidden behind another micro-batch's "
                      "compute (combined 1F1B)" if plan.moe_a2a_overlapped else ""))
    if plan.p_context > 1:
        out.append(f"context: the sequence over {plan.p_context} ranks on {d.get('nodes_context_group', 1)} node(s), "
                   f"activations 1/{plan.p_context} ({pred.activations_bytes / 1e9:.3g} GB); the ring of keys and "
                   f"values beyond the attention blocks: {_t(pred.comm_exposed_s.get('context_ring', 0.0))} exposed")
    return out


def why_lines(preds: Sequence[Prediction]) -> list[str]:
    """The recommendation (the first plan) and why, in two lines: what it costs, what it beats and by how
    much, and what fills its memory."""
    best = next((p for p in preds if p.feasible), None)
    if best is None:
        return []
    head = (f"recommended: {best.plan.strategy} ({best.plan.describe()}), {best.iteration_s:.4g} s/iteration, "
            f"bottleneck: {best.bottleneck}" + ("" if best.fits else "  (does NOT fit in memory)"))
    runner = next((p for p in preds if p is not best and p.feasible and p.fits
                   and p.plan.strategy != best.plan.strategy), None)
    if not best.fits:
        why = f"no plan fits in {_gb(best.device_memory_bytes)} GB; this one needs {_gb(best.memory_bytes)} GB"
    elif runner is not None:
        gain = runner.iteration_s / best.iteration_s - 1
        margin = "level with" if gain < 5e-4 else f"{gain:.1%} ahead of" if gain < 0.1 else f"{gain:.0%} ahead of"
        why = (f"fastest plan that fits, {margin} {runner.plan.strategy} ({runner.plan.describe()}, "
               f"{_t(runner.iteration_s)})")
    else:
        why = "the only plan that fits"
    terms = sorted(((name.replace("_", " "), getattr(best, f"{name}_bytes")) for name in
                    ("weights", "grads", "optimizer", "activations", "comm_buffers", "workspace")),
                   key=lambda kv: -kv[1])
    memory = ", ".join(f"{name} {_gb(b)}" for name, b in terms if b > 0)
    return [head, f"why: {why}; memory {_gb(best.memory_bytes)} of {_gb(best.device_memory_bytes)} GB "
                  f"per device ({memory})"]


def memory_table(pred: Prediction) -> Table:
    table = Table(title=f"memory per device: {pred.plan.strategy} {pred.plan.describe()}")
    table.add_column("term")
    table.add_column("GB", justify="right")
    for name in ("weights", "grads", "optimizer", "activations", "comm_buffers", "workspace"):
        table.add_row(name, _gb(getattr(pred, f"{name}_bytes")))
    table.add_row("total", _gb(pred.memory_bytes))
    table.add_row("device", _gb(pred.device_memory_bytes))
    return table


def to_json(preds: Sequence[Prediction], meta: dict[str, Any], dataset_size: int | None = None) -> str:
    rows = []
    for p in preds:
        d = p.to_dict()
        if dataset_size and p.feasible:
            d["epoch_s"] = p.epoch_s(dataset_size)
            d["gpu_hours"] = p.gpu_hours(dataset_size)
        rows.append(d)
    return json.dumps(finite_json({**meta, "predictions": rows}), indent=1, default=str, allow_nan=False)


def finite_json(value):
    """Strict JSON: infinite/NaN floats (an infeasible plan's time) become null, in nested dicts and lists."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(v) for v in value]
    return value


def chrome_trace(pred: Prediction) -> dict[str, Any]:
    """The predicted iteration as Chrome trace events (open in chrome://tracing or ui.perfetto.dev).

    Pipelines get one compute lane per stage with the GPipe schedule; other plans one device's compute
    lane and a communication lane (hidden gradient buckets drawn inside backward, exposed after it)."""
    events: list[dict[str, Any]] = []
    us = 1e6

    def span(name, tid, start_s, dur_s, cat):
        if dur_s > 0:
            events.append({"name": name, "ph": "X", "pid": 0, "tid": tid, "ts": start_s * us, "dur": dur_s * us,
                           "cat": cat})

    plan = pred.plan
    if plan.stages > 1 and "stage_fwd_s" in pred.details and plan.schedule != "interleaved":
        K, S = plan.stages, plan.micro_batches
        f, b = pred.details["stage_fwd_s"], pred.details["stage_bwd_s"]
        # GPipe as a flow shop (predictor.strategies.pipeline): a micro-batch enters a stage when the stage is
        # free and the previous stage has passed it on; backward runs from the last stage to the first
        done = [[0.0] * K for _ in range(S)]
        for j in range(S):
            for k in range(K):
                start = max(done[j - 1][k] if j else 0.0, done[j][k - 1] if k else 0.0)
                span(f"fwd mb{j}", k, start, f[k], "compute")
                done[j][k] = start + f[k]
        forward_end = done[S - 1][K - 1]
        back = [[0.0] * K for _ in range(S)]
        for j in range(S):
            for k in reversed(range(K)):
                start = max(back[j - 1][k] if j else forward_end, back[j][k + 1] if k < K - 1 else forward_end)
                span(f"bwd mb{j}", k, start, b[k], "compute")
                back[j][k] = start + b[k]
        end = back[S - 1][0]
        span("pipeline p2p (exposed)", K, end, pred.comm_exposed_s.get("pipeline_p2p", 0), "comm")
        end += pred.comm_exposed_s.get("pipeline_p2p", 0)
        span("gradient allreduce (exposed)", K, end, pred.comm_exposed_s.get("gradient", 0), "comm")
        end += pred.comm_exposed_s.get("gradient", 0)
        for k in range(K):
            span("update", k, end, pred.update_s, "compute")
        names = {k: f"stage {k}" for k in range(K)} | {K: "communication"}
    else:
        t = 0.0
        span("forward", 0, t, pred.compute_fwd_s, "compute")
        t += pred.compute_fwd_s
        for kind in ("halo", "layer_collective", "redistribute"):  # blocking, on the critical path
            span(f"{kind} (exposed)", 1, t, pred.comm_exposed_s.get(kind, 0), "comm")
            t += pred.comm_exposed_s.get(kind, 0)
        span("backward", 0, t, pred.compute_bwd_s, "compute")
        span("gradient allreduce (hidden)", 1, t, pred.comm_hidden_s.get("gradient", 0), "comm")
        t += pred.compute_bwd_s
        span("gradient allreduce (exposed)", 1, t, pred.comm_exposed_s.get("gradient", 0), "comm")
        t += pred.comm_exposed_s.get("gradient", 0)
        span("recompute", 0, t, pred.recompute_s, "compute")
        t += pred.recompute_s
        span("swap", 1, t, pred.swap_s, "comm")
        t += pred.swap_s
        span("update", 0, t, pred.update_s, "compute")
        names = {0: "device 0 compute", 1: "device 0 communication"}
    for tid, name in names.items():
        events.append({"name": "thread_name", "ph": "M", "pid": 0, "tid": tid, "args": {"name": name}})
    events.append({"name": "process_name", "ph": "M", "pid": 0, "args": {"name": f"{plan.strategy} {plan.describe()}"}})
    return {"traceEvents": events, "displayTimeUnit": "ms"}
