"""Python API of the predictor (mirrors the CLI):

    graph = load_model("resnet50")                      # zoo name, package.module:callable, file.py[:fn],
                                                        # or a .yaml/.json layer spec
    cm, path = load_cost_model("v100-dgx1-8gpu.published")  # a profile file or a shipped name (calibrate.shipped)
    pred = predict(graph, Plan("data", batch=256, devices=64, devices_per_node=4, p_data=64), cm)
    preds = predict_all(graph, batch=256, devices=64, cost_model=cm)   # ranked, fastest fitting first
    best = search(graph, cm, batch=256, max_devices=1024)

Predictions carry a (low, high) interval: the prediction at the profile's bounds, the at-scale terms at their
ends, widened by the model's own held-out error where the profile records it (docs/method.md §21).
"""
from __future__ import annotations

import contextlib

import importlib
import importlib.util
import math
import os
from dataclasses import replace
from pathlib import Path
from typing import Iterable, Sequence

from calibrate.cost_api import CostModel
from calibrate.shipped import resolve_profile, shipped_profiles, shipped_profiles_dir
from calibrate.system_constants import DEFAULT_STACK, STACKS
from predictor import zoo
from predictor.graph import ModelGraph
from predictor.graph_cache import ZOO_SOURCES, cache_key, cached_graph, is_cached
from predictor.layerspec import load_layer_spec
from predictor.overlap import FRAMEWORKS
from predictor.plan import (ADDON_STRATEGIES, ALL_STRATEGIES, DTYPES, HYBRID_3D, OPTIMIZERS, PIPELINE_RECOMPUTE,
                            SPLIT_RECOMPUTE, STRATEGIES, Plan, Prediction, ZERO_STRATEGIES)
from predictor.strategies import evaluate
from predictor.strategies.context import Context
from profiler.errors import UserError

# ---- model input -------------------------------------------------------------------------------------
def load_model(name_or_path: str, input_shape: Sequence[int] | None = None, *, allow_code: bool = True,
               **knobs) -> ModelGraph:
    """A ModelGraph from a zoo name (knobs: width, image, ...), a `package.module:callable`, a Python
    file (`file.py` or `file.py:callable`) or a `.yaml`/`.yml`/`.json` layer spec. User callables return
    an nn.Module; the input shape comes from `input_shape`, else the module's `input_shape` attribute.

    allow_code=False (a model named by a data file, e.g. a suite) accepts only zoo names and layer specs:
    importing a module or running a file is reserved for a model the user names on the command line."""
    if not isinstance(name_or_path, str):
        raise UserError(f"model must be a string, got {name_or_path!r}")
    if not allow_code and not is_data_model(name_or_path):
        raise UserError(f"model {name_or_path!r}: a data file may name only a zoo model ({', '.join(zoo.ZOO)}) "
                        "or a .yaml/.json layer spec; pass Python models with --model on the command line")
    if name_or_path in zoo.ZOO:
        check_knobs(f"model {name_or_path}", knobs)
        key = cache_key(f"zoo:{name_or_path}", knobs, input_shape, ZOO_SOURCES)
        return _check_sizes(cached_graph(key, lambda: _trace_zoo(name_or_path, input_shape, knobs)), name_or_path, knobs)
    lower = name_or_path.lower()
    if lower.endswith((".yaml", ".yml", ".json")):
        if not os.path.exists(name_or_path):
            raise UserError(f"layer spec {name_or_path} does not exist")
        return _check_sizes(load_layer_spec(name_or_path), name_or_path, {})
    if ":" in name_or_path or lower.endswith(".py"):  # user code is traced every time (it may import anything)
        return _check_sizes(_trace_callable(name_or_path, input_shape, knobs), name_or_path, knobs)
    raise UserError(f"unknown model {name_or_path!r}: not in the zoo ({', '.join(zoo.ZOO)}), "
                    "not package.module:callable, a .py file or a .yaml/.json layer spec")


def trace_ahead(models: Iterable[tuple[str, dict]], workers: int | None = None) -> int:
    """Trace the zoo models of `models` ((name, knobs) pairs) the graph cache lacks, in worker processes, so that
    load_model then reads each back in milliseconds (a report over forty transformer shapes traces them all).
    Does nothing with the cache off, one core, fewer than two misses, or torch already imported here (a fork
    would copy its threads); a model that fails is left for load_model to report. Returns how many it traced."""
    import sys
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_all_start_methods, get_context

    from profiler import disk_cache

    workers = workers or os.cpu_count() or 1
    missing = {}
    for name, knobs in models:
        if name in zoo.ZOO:
            missing.setdefault(cache_key(f"zoo:{name}", knobs, None, ZOO_SOURCES), (name, dict(knobs)))
    missing = {k: v for k, v in missing.items() if not is_cached(k)}
    if (disk_cache.cache_dir() is None or workers < 2 or len(missing) < 2 or "torch" in sys.modules
            or "fork" not in get_all_start_methods()):
        return 0
    try:
        # the deepest models first: the workers finish together instead of one tracing the last 96-layer model alone
        order = sorted(missing.values(), key=lambda model: -_layers(model[1]))
        with ProcessPoolExecutor(min(workers, len(missing)), mp_context=get_context("fork")) as pool:
            return sum(pool.map(_trace_into_cache, order))
    except Exception:  # noqa: BLE001 - a worker that died (memory, a signal): load_model traces what is missing
        return 0


def _layers(knobs: dict) -> int:
    """A zoo model's layer count from its knobs (0 when not an integer): what its trace's time grows with."""
    value = knobs.get("layers", 0)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _trace_into_cache(model: tuple[str, dict]) -> bool:
    try:
        load_model(model[0], **model[1])
        return True
    except UserError:
        return False


def _check_sizes(graph: ModelGraph, name: str, knobs: dict) -> ModelGraph:
    """The graph, when every layer's input, output and weight has at least one element along each dimension; a
    UserError naming the first empty one otherwise (a zero width, or an image too small for the windows)."""
    for layer in graph.layers:
        for what, shape in (("input", layer.input_shape), ("output", layer.output_shape), ("weight", layer.weight_shape)):
            if shape and min(shape) < 1:
                given = ", ".join(f"{k}={v}" for k, v in knobs.items())
                raise UserError(f"model {name}{f' ({given})' if given else ''}: layer {layer.name} ({layer.op}) has an "
                                f"empty {what} {tuple(shape)}: a zero width, or an input too small for its windows")
    return graph


def _trace_zoo(name: str, input_shape, knobs: dict) -> ModelGraph:
    import torch

    from predictor.trace import trace_module
    try:
        with torch.device("meta"), _no_weight_init():  # shapes only: a large knob costs no memory
            module, shape = zoo.build(name, **knobs)
    except Exception as err:  # noqa: BLE001 - the builders reject knobs with whatever torch raises
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UserError(f"model {name}: bad knob ({', '.join(map(str, knobs)) or 'none'}): {first}") from None
    return trace_module(module, tuple(input_shape or shape), name)


#: torch.nn.init's in-place initialisers, skipped while a zoo model is built on the meta device
_INITIALISERS = ("uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_", "kaiming_uniform_",
                 "kaiming_normal_", "xavier_uniform_", "xavier_normal_", "orthogonal_")


@contextlib.contextmanager
def _no_weight_init():
    """Build without initialising weights: on the meta device there are no values to fill, yet every initialiser
    still dispatches through the device context (a tenth of tracing a deep transformer). Process-wide while it
    lasts: the zoo builds one model at a time."""
    import torch.nn.init as init
    saved = {name: getattr(init, name) for name in _INITIALISERS if hasattr(init, name)}
    for name in saved:
        setattr(init, name, _keep)
    try:
        yield
    finally:
        for name, function in saved.items():
            setattr(init, name, function)


def _keep(tensor, *args, **kwargs):
    return tensor


def _trace_callable(ref: str, input_shape, knobs: dict) -> ModelGraph:
    from predictor.trace import trace_module
    module = _import_callable(ref, knobs)
    shape = input_shape or getattr(module, "input_shape", None)
    if shape is None:
        raise UserError(f"model {ref}: give --input-shape (per-sample, e.g. 3,224,224)")
    try:
        return trace_module(module, tuple(int(d) for d in shape), ref)
    except SystemExit as stop:  # its forward ended the process
        raise UserError(f"model {ref}: its forward called sys.exit({stop.code!r}) while being traced") from None


MAX_KNOB = 1 << 16  # largest magnitude of a numeric zoo knob (width, image, depth, classes, ...)
#: knobs real models take beyond MAX_KNOB (traced on the meta device, so a size costs no memory): vocabularies
#: (LLaMA-3 128,256; BLOOM 250,880; Gemma 256,000) and sequence lengths (LLaMA-3.1's 131,072 context)
KNOB_LIMITS = {"vocab": 1 << 20, "seq": 1 << 20}


def check_knobs(label: str, knobs: dict) -> None:
    """Zoo knobs are plain scalars (or short lists of them) of a sane size; anything else is a UserError starting
    with `label` (`model resnet50`, `suite s.yaml:4: model small_cnn2d`)."""
    for key, value in knobs.items():
        values = value if isinstance(value, (list, tuple)) and len(value) <= 64 else [value]
        limit = KNOB_LIMITS.get(key, MAX_KNOB)
        for v in values:
            if isinstance(v, bool) or v is None or isinstance(v, str):
                continue
            if not isinstance(v, (int, float)) or not math.isfinite(v) or abs(v) > limit:
                raise UserError(f"{label}: knob {key}={str(value)[:40]} must be a finite number of magnitude <= "
                                f"{limit} (or a list of at most 64 of them)")


def is_data_model(name: str) -> bool:
    """True for the models a data file may name: a zoo name or a .yaml/.yml/.json layer spec (never code)."""
    return name in zoo.ZOO or name.lower().endswith((".yaml", ".yml", ".json"))


def _import_callable(ref: str, knobs: dict):
    """The torch.nn.Module a `package.module:callable` or `file.py[:callable]` reference builds."""
    import torch.nn as nn

    target, _, attr = ref.rpartition(":") if ":" in ref else (ref, "", "")
    try:
        if target.endswith(".py"):
            if not os.path.exists(target):
                raise UserError(f"model file {target} does not exist")
            spec = importlib.util.spec_from_file_location(Path(target).stem, target)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            attr = attr or next((a for a in ("model", "build_model", "Model") if hasattr(mod, a)), "")
        else:
            mod = importlib.import_module(target)
    except UserError:
        raise
    except SystemExit as stop:  # the file ended the process (sys.exit at import): not a model
        raise UserError(f"cannot import model {ref}: it called sys.exit({stop.code!r}) while being imported") from None
    except Exception as err:  # noqa: BLE001 - the user's code failed to import
        raise UserError(f"cannot import model {ref}: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}") from None
    obj = getattr(mod, attr, None) if attr else None
    if obj is None:
        raise UserError(f"model {ref}: no callable {attr or '(model/build_model/Model)'} in {target}")
    try:
        built = obj if isinstance(obj, nn.Module) else obj(**knobs)
    except SystemExit as stop:
        raise UserError(f"model {ref}: calling {attr} called sys.exit({stop.code!r})") from None
    except Exception as err:  # noqa: BLE001
        raise UserError(f"model {ref}: calling {attr} failed: {type(err).__name__}: {err}") from None
    if not isinstance(built, nn.Module):
        raise UserError(f"model {ref}: {attr} returned {type(built).__name__}, not a torch.nn.Module")
    return built


# ---- cost model -------------------------------------------------------------------------------------
def default_profile() -> Path:
    """The shipped reference profile used when --profile is not given (a published V100 one if present)."""
    found = shipped_profiles("*v100*.published.yaml") or shipped_profiles("*.published.yaml")
    if not found:
        raise UserError(f"no --profile given and no reference profile (*.published.yaml) in {shipped_profiles_dir()}")
    return Path(found[0])


def load_cost_model(path: str | os.PathLike | None) -> tuple[CostModel, Path]:
    """calibrate's CostModel for a profile file or a shipped profile's name (default: the shipped reference
    profile)."""
    chosen = resolve_profile(path) if path else default_profile()
    try:
        from calibrate.cost_model import load_cost_model as _load
    except ImportError as err:
        raise UserError(f"cannot read profiles: calibrate.cost_model is not available ({err})") from None
    return _load(str(chosen)), chosen


# ---- plans ------------------------------------------------------------------------------------------
def balanced_split(p: int, ndim: int) -> tuple[int, ...]:
    """Factors of p over ndim spatial dims, as even as possible, larger factors on the last dims."""
    factors = []
    rest = p
    for k in range(ndim, 0, -1):
        f = max(d for d in range(1, rest + 1) if rest % d == 0 and d <= round(rest ** (1.0 / k) + 1e-9)) if k > 1 else rest
        factors.append(f)
        rest //= f
    return tuple(sorted(factors))


def default_plans(graph: ModelGraph, strategy: str, batch: int, devices: int, devices_per_node: int,
                  dtype: str = "fp32", optimizer: str = "sgd", micro_batches: int | None = None,
                  inner: int | None = None, framework: str = "ddp", synthetic_data: bool = False,
                  stack: str = DEFAULT_STACK, schedule: str = "gpipe", virtual_stages: int = 1,
                  zero_stage: int = 0, sequence_parallel: bool = False,
                  pipeline_stages: int | None = None, pipeline_boundary: str = "whole",
                  mixed_precision: str = "autocast", recompute: bool = False,
                  recompute_granularity: str = "full", context_parallel: int = 1,
                  expert_parallel: int = 1, tp_comm_overlap: bool = False,
                  overlap_param_gather: bool = False, shard_group: int = 0,
                  moe_a2a_overlap: bool = False) -> list[Plan]:
    """The plans `predictor run` evaluates for one strategy name: the pure strategy over all devices;
    hybrids with the model-parallel group = one node (`inner`, ParaDL's df/ds mapping; for data+tensor and
    data+tensor+pipeline, the tensor-parallel degree); pipeline with every micro-batch count that divides the
    per-pipeline batch (or just `micro_batches`; serial and data run that many gradient-accumulation micro-batches,
    default 1); data+tensor+pipeline with `pipeline_stages` stages (default:
    every device outside the tensor group) and the rest of the devices as data replicas; context_parallel and
    expert_parallel set data+tensor+pipeline's context and expert degrees (devices = T x CP x P x data);
    tp_comm_overlap its tensor-parallel collectives overlapped with their GEMMs (with sequence parallelism),
    overlap_param_gather its ZeRO-1 parameter all-gather with the next step's forward passes, moe_a2a_overlap its
    expert all-to-alls with another micro-batch's compute (Plan.moe_a2a_overlap); zero_stage and
    shard_group (HSDP) the sharding of data parallelism and its add-ons."""
    from predictor.outofcore_strategies import addon_plans
    if (framework != "ddp" or synthetic_data or stack != DEFAULT_STACK or schedule != "gpipe" or zero_stage
            or sequence_parallel or pipeline_boundary != "whole" or mixed_precision != "autocast" or recompute
            or recompute_granularity != "full" or tp_comm_overlap or overlap_param_gather or shard_group
            or moe_a2a_overlap):
        # the schedule flag's default (gpipe) leaves data+tensor+pipeline on its own default, Megatron's 1f1b
        keep = schedule == "gpipe"
        return [replace(p, framework=framework, synthetic_data=synthetic_data, stack=stack,
                        mixed_precision=mixed_precision, **(
            dict(schedule=p.schedule if keep and p.strategy in HYBRID_3D else schedule,
                 virtual_stages=virtual_stages if schedule == "interleaved" else 1,
                 pipeline_boundary=pipeline_boundary) if p.stages > 1 else {}),
            **(dict(zero_stage=zero_stage) if p.strategy in ZERO_STRATEGIES or p.strategy in HYBRID_3D else {}),
            **(dict(shard_group=shard_group) if shard_group and p.strategy in ZERO_STRATEGIES else {}),
            **(dict(recompute=True) if recompute and p.strategy in PIPELINE_RECOMPUTE else {}),
            **(dict(recompute_granularity=recompute_granularity) if p.strategy in HYBRID_3D else {}),
            **(dict(sequence_parallel=True) if sequence_parallel and p.p_tensor > 1 else {}),
            **(dict(tp_comm_overlap=True) if tp_comm_overlap and p.strategy in HYBRID_3D else {}),
            **(dict(overlap_param_gather=True) if overlap_param_gather and p.strategy in HYBRID_3D else {}),
            **(dict(moe_a2a_overlap=True) if moe_a2a_overlap and p.strategy in HYBRID_3D else {}))
            for p in default_plans(
            graph, strategy, batch, devices, devices_per_node, dtype, optimizer, micro_batches, inner,
            pipeline_stages=pipeline_stages, context_parallel=context_parallel, expert_parallel=expert_parallel)]
    if strategy in ADDON_STRATEGIES:  # out-of-core, recompute, cooperative (predictor/outofcore_strategies.py)
        return addon_plans(strategy, batch, devices, devices_per_node, dtype, optimizer, micro_batches)
    if strategy in SPLIT_RECOMPUTE:  # the base strategy's plans, with checkpointing
        return [replace(p, strategy=strategy) for p in default_plans(
            graph, strategy.removesuffix("+recompute"), batch, devices, devices_per_node, dtype, optimizer,
            micro_batches, inner)]
    nd = len(graph.input_shape) - 1
    base = dict(batch=batch, devices_per_node=devices_per_node, dtype=dtype, optimizer=optimizer)
    g = inner or math.gcd(devices, devices_per_node)
    if strategy == "serial":
        return [Plan("serial", devices=1, micro_batches=micro_batches or 1, **base)]
    if strategy == "data":  # micro-batches: gradient accumulation
        return [Plan("data", devices=devices, p_data=devices, micro_batches=micro_batches or 1, **base)]
    if strategy == "spatial":
        return [Plan("spatial", devices=devices, p_spatial=devices, spatial_split=balanced_split(devices, nd), **base)]
    if strategy == "filter":
        return [Plan("filter", devices=devices, p_filter=devices, **base)]
    if strategy == "channel":
        return [Plan("channel", devices=devices, p_channel=devices, **base)]
    if strategy == "tensor":
        return [Plan("tensor", devices=devices, p_tensor=devices, **base)]
    if strategy in ("pipeline", "data+pipeline"):
        stages = devices if strategy == "pipeline" else g
        p_data = devices // stages
        per_pipe = batch // p_data if batch % p_data == 0 else batch
        counts = [micro_batches] if micro_batches else [s for s in range(1, per_pipe + 1) if per_pipe % s == 0] or [1]
        return [Plan(strategy, devices=devices, p_data=p_data, stages=stages, micro_batches=s, **base) for s in counts]
    if strategy == "data+tensor+pipeline":  # tensor inside a node, pipeline stages over the nodes, 1F1B
        cp, ep = context_parallel, expert_parallel
        if cp > 1 and not inner:  # the context ranks share the node with the tensor ranks
            g = math.gcd(devices // cp if devices % cp == 0 else devices, max(devices_per_node // cp, 1))
        if devices % (g * cp):
            raise UserError(f"data+tensor+pipeline: tensor degree {g} x context degree {cp} does not divide "
                            f"{devices} devices (--tensor-parallel, --context-parallel, --gpus)")
        stages = pipeline_stages or devices // (g * cp)
        if devices % (g * stages * cp):
            raise UserError(f"data+tensor+pipeline: tensor degree {g} x {stages} pipeline stages"
                            + (f" x context degree {cp}" if cp > 1 else "") + f" does not divide {devices} devices "
                            "(--tensor-parallel, --pipeline-stages, --context-parallel, --gpus)")
        p_data = devices // (g * stages * cp)
        per_pipe = batch // p_data if batch % p_data == 0 else batch
        counts = [micro_batches] if micro_batches else [s for s in range(1, per_pipe + 1) if per_pipe % s == 0] or [1]
        return [Plan(strategy, devices=devices, p_data=p_data, p_tensor=g, stages=stages, micro_batches=s,
                     schedule="1f1b", p_context=cp, p_expert=ep, **base) for s in counts]
    if devices % g:
        return [Plan(strategy, devices=devices, p_data=devices, **base)]  # reported infeasible by evaluate
    if strategy == "data+spatial":
        return [Plan(strategy, devices=devices, p_data=devices // g, p_spatial=g, spatial_split=balanced_split(g, nd), **base)]
    if strategy == "spatial-then-data":
        return [Plan(strategy, devices=devices, p_data=devices // g, p_spatial=g, spatial_split=balanced_split(g, nd), **base)]
    if strategy == "data+filter":
        return [Plan(strategy, devices=devices, p_data=devices // g, p_filter=g, **base)]
    if strategy == "data+channel":
        return [Plan(strategy, devices=devices, p_data=devices // g, p_channel=g, **base)]
    if strategy == "data+tensor":
        return [Plan(strategy, devices=devices, p_data=devices // g, p_tensor=g, **base)]
    raise UserError(f"unknown strategy {strategy!r}; known: all, {', '.join(ALL_STRATEGIES)}")


# ---- prediction -------------------------------------------------------------------------------------
#: the strategies whose tensor-parallel degree `predict_all(tensor_parallel=...)` sets
TENSOR_GROUP_STRATEGIES = ("data+tensor", "data+tensor+pipeline")

def _check_options(dtype: str, optimizer: str, framework: str = "ddp", stack: str = DEFAULT_STACK) -> None:
    if stack not in STACKS:
        raise UserError(f"unknown stack {stack!r}; known: {', '.join(STACKS)}")
    if framework not in FRAMEWORKS:
        raise UserError(f"unknown framework {framework!r}; known: {', '.join(FRAMEWORKS)}")
    if dtype not in DTYPES:
        raise UserError(f"unknown dtype {dtype!r}; known: {', '.join(DTYPES)}")
    if optimizer not in OPTIMIZERS:
        raise UserError(f"unknown optimizer {optimizer!r}; known: {', '.join(OPTIMIZERS)}")


def predict(graph: ModelGraph, plan: Plan, cost_model: CostModel, *, interval: bool = True,
            device_memory_bytes: float | None = None, context: Context | None = None) -> Prediction:
    """Predict one plan. interval=True also evaluates it at the profile's low/high coefficient bounds."""
    _check_options(plan.dtype, plan.optimizer, plan.framework, plan.stack)
    ctx = context or Context(graph, cost_model)
    pred = evaluate(ctx, plan, device_memory_bytes)
    if interval and pred.feasible:
        lows = evaluate(Context(graph, cost_model.at_bound("low")), plan, device_memory_bytes).iteration_s
        highs = evaluate(Context(graph, cost_model.at_bound("high")), plan, device_memory_bytes).iteration_s
        low, high = min(lows, pred.iteration_s), max(highs, pred.iteration_s)
        bounds = cost_model.model_error_bounds(plan.strategy, plan.framework)
        if bounds is not None:  # the model's own held-out error (calibrate.coefficients.ModelError), widened by
            # the range the at-scale terms make by themselves (stragglers, cluster load, storage; predictor.at_scale)
            from predictor.at_scale import at_scale_range
            lo, hi = at_scale_range(graph, plan, cost_model, pred.iteration_s, device_memory_bytes)
            pred.details["at_scale_range"] = (lo, hi)
            low, high = min(low, pred.iteration_s * bounds[0] * lo), max(high, pred.iteration_s * bounds[1] * hi)
        pred.interval_s = (low, high)
    return pred


def rank(predictions: Iterable[Prediction]) -> list[Prediction]:
    """Feasible and fitting first (fastest first), then feasible but out of memory, then infeasible."""
    return sorted(predictions, key=lambda p: (not p.feasible, not p.fits, p.iteration_s))


def predict_all(graph: ModelGraph, batch: int, devices: int, cost_model: CostModel, *,
                strategies: Sequence[str] = STRATEGIES, devices_per_node: int | None = None, dtype: str = "fp32",
                optimizer: str = "sgd", micro_batches: int | None = None, interval: bool = True,
                device_memory_bytes: float | None = None, framework: str = "ddp",
                synthetic_data: bool = False, stack: str = DEFAULT_STACK, schedule: str = "gpipe",
                virtual_stages: int = 1, zero_stage: int = 0, sequence_parallel: bool = False,
                tensor_parallel: int | None = None, pipeline_stages: int | None = None,
                pipeline_boundary: str = "whole", mixed_precision: str = "autocast",
                recompute: bool = False, recompute_granularity: str = "full", context_parallel: int = 1,
                expert_parallel: int = 1, tp_comm_overlap: bool = False,
                overlap_param_gather: bool = False, memory_format: str = "nhwc",
                bn_group: int = 1, cross_entropy: str = "float32", cuda_graphs: bool = False,
                shard_group: int = 0, expert_tensor_parallel: int = 0,
                recompute_modules: tuple[str, ...] = (), moe_a2a_overlap: bool = False) -> list[Prediction]:
    """One prediction per strategy (for pipelines, the best micro-batch count), ranked. A strategy the
    profile cannot cost (missing coefficient) comes back infeasible with the message; if none can be
    costed, that UserError is raised. expert_tensor_parallel: data+tensor+pipeline's expert tensor degree
    (Plan.p_expert_tensor; 0: the tensor degree); recompute_modules: what its selective recomputation re-runs
    (Plan.recompute_modules); moe_a2a_overlap: its expert all-to-alls hidden behind another micro-batch's compute
    where the layout has it (Plan.moe_a2a_overlap)."""
    _check_options(dtype, optimizer, framework, stack)
    if batch <= 0 or devices <= 0:
        raise UserError(f"batch ({batch}) and devices ({devices}) must be positive")
    dpn = devices_per_node or cost_model.devices_per_node
    if dpn <= 0:
        raise UserError(f"devices per node must be positive, got {dpn}")
    ctx = Context(graph, cost_model)
    settings = dict(memory_format=memory_format, cross_entropy=cross_entropy, bn_group=bn_group,  # RUN_SETTINGS
                    cuda_graphs=cuda_graphs)
    out = []
    missing: list[UserError] = []
    for name in strategies:
        plans = default_plans(graph, name, batch, devices, dpn, dtype, optimizer, micro_batches,
                              inner=tensor_parallel if name in TENSOR_GROUP_STRATEGIES else None, framework=framework,
                              synthetic_data=synthetic_data, stack=stack, schedule=schedule,
                              virtual_stages=virtual_stages, zero_stage=zero_stage,
                              sequence_parallel=sequence_parallel, pipeline_stages=pipeline_stages,
                              pipeline_boundary=pipeline_boundary, mixed_precision=mixed_precision,
                              recompute=recompute, recompute_granularity=recompute_granularity,
                              tp_comm_overlap=tp_comm_overlap, overlap_param_gather=overlap_param_gather,
                              shard_group=shard_group, moe_a2a_overlap=moe_a2a_overlap,
                              **(dict(context_parallel=context_parallel, expert_parallel=expert_parallel)
                                 if name in HYBRID_3D else {}))
        plans = [replace(p, **settings) for p in plans]  # the run's settings, on every plan
        if expert_tensor_parallel and name in HYBRID_3D:
            plans = [replace(p, p_expert_tensor=expert_tensor_parallel) for p in plans]
        if recompute_modules and name in HYBRID_3D:
            plans = [replace(p, recompute_modules=tuple(recompute_modules)) for p in plans]
        try:
            preds = [evaluate(ctx, p, device_memory_bytes) for p in plans]
            best = rank(preds)[0]
            if interval and best.feasible:
                best = predict(graph, best.plan, cost_model, device_memory_bytes=device_memory_bytes, context=ctx)
        except UserError as err:  # the profile cannot cost this strategy (a missing coefficient)
            missing.append(err)
            best = Prediction(plan=plans[0], feasible=False, reason=f"infeasible: {err}").finish()
        out.append(best)
    if len(missing) == len(out):
        raise missing[0]
    return rank(out)


#: the families whose best plan `searched_layouts` adds to an every-strategy table: the 3-D hybrid (no default
#: layout) and data parallelism, whose sharded variants (ZeRO 1-3, HSDP) fit where DDP does not
SEARCHED_FAMILIES = (HYBRID_3D, ("data",))


def searched_layouts(graph: ModelGraph, cost_model: CostModel, *, batch: int, devices: int,
                     device_memory_bytes: float | None = None, stack: str = DEFAULT_STACK,
                     mixed_precision: str = "autocast", known: Sequence[Prediction] = (),
                     families: Sequence[tuple[str, ...]] = SEARCHED_FAMILIES, **options) -> list[Prediction]:
    """Per family (default SEARCHED_FAMILIES), the fastest plan that fits at exactly `devices` as `predictor search`
    finds it (the 3-D hybrid's degrees, schedule, ZeRO 1 and micro-batches; data parallelism as DDP, ZeRO 1-3 or
    HSDP), re-predicted as predict_all predicts each strategy's best (the same interval terms) under the run's stack
    and mixed precision, which the search's candidates leave at their defaults; a family the model cannot run (no
    transformer blocks), the profile cannot cost, or whose best is a plan in `known` adds nothing. `predictor run
    --strategy all` and `report` add these to their tables (docs/planning.md). options: search's (devices_per_node,
    dtype, optimizer, framework, overlaps, settings)."""
    seen = {(p.plan.strategy, p.plan.describe()) for p in known if p.feasible}
    out = []
    for family in families:
        try:
            result = search(graph, cost_model, batch=batch, max_devices=devices, min_devices=devices, interval=False,
                            memory_cap_bytes=device_memory_bytes, top=1, strategies=family, **options)
        except UserError:
            continue
        for p in result.best[:1]:
            plan = replace(p.plan, stack=stack, mixed_precision=mixed_precision)
            if p.feasible and (plan.strategy, plan.describe()) not in seen:
                out.append(predict(graph, plan, cost_model, device_memory_bytes=device_memory_bytes))
    return out


def search(graph: ModelGraph, cost_model: CostModel, *, batch: int, max_devices: int, **options):
    """Best configurations over strategies, splits, device counts and micro-batch counts (search.py)."""
    from predictor.search import search as _search
    return _search(graph, cost_model, batch=batch, max_devices=max_devices, **options)
