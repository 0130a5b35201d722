"""`predictor run`: predict every (or one) strategy for one model, batch and device count, ranked."""
from __future__ import annotations

import argparse
import json
import sys

from predictor.flags import (add_context_expert_arguments, add_overlap_arguments, add_prediction_arguments,
                             add_strategy_argument, check_overlaps, context_expert_degrees, recompute_modules,
                             search_options)
from predictor.plan import (ADDON_STRATEGIES, HYBRID_3D, MIXED_PRECISIONS, PIPELINE_BOUNDARIES, ZERO_STAGES,
                            PIPELINE_SCHEDULES, RECOMPUTE_GRANULARITIES, RECOMPUTE_MODULES, STRATEGIES)
from profiler.cliutil import batch_size, device_count, int_in
from profiler.errors import UserError

MAX_INPUT_DIM = 1 << 20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_prediction_arguments(parser)
    parser.add_argument("--batch", type=batch_size, required=True, help="global mini-batch (samples per iteration)")
    parser.add_argument("--gpus", type=device_count, required=True, help="number of devices")
    add_strategy_argument(parser)
    parser.add_argument("--micro-batches", type=batch_size,
                        help="pipeline micro-batches (default: the best that divides the batch); serial, data and their "
                             "+recompute: gradient-accumulation micro-batches per replica (default 1)")
    parser.add_argument("--zero", type=int, default=0, choices=(0,) + ZERO_STAGES,
                        help="sharded data parallelism for the data strategy: ZeRO stage 1 (optimizer state), "
                             "2 (+ gradients), 3 (+ parameters, as FSDP); data+tensor+pipeline: 1, Megatron's "
                             "distributed optimizer; 0 = DDP (default)")
    parser.add_argument("--shard-group", type=device_count, metavar="G",
                        help="with --zero 3: shard over groups of G replicas and replicate across the groups "
                             "(FSDP's HYBRID_SHARD, HSDP: G = the GPUs of a node); default: shard over every replica")
    parser.add_argument("--sequence-parallel", action="store_true",
                        help="tensor strategies (data+tensor+pipeline included): Megatron's sequence parallelism "
                             "(reduce-scatter + all-gather instead of all-reduce; norms, dropout and residuals split "
                             "over tokens)")
    add_overlap_arguments(parser)
    parser.add_argument("--tensor-parallel", type=device_count, metavar="T",
                        help="data+tensor and data+tensor+pipeline: tensor-parallel degree (default: the devices of "
                             "one node, gcd(--gpus, --gpus-per-node))")
    parser.add_argument("--pipeline-stages", type=device_count, metavar="P",
                        help="data+tensor+pipeline: pipeline stages (default: --gpus / T); the other devices are "
                             "data replicas, --gpus / (T x P)")
    add_context_expert_arguments(parser)
    parser.add_argument("--recompute", action="store_true",
                        help="pipeline, data+pipeline, data+tensor+pipeline: activation recomputation (GPipe keeps "
                             "only stage-boundary activations; data+tensor+pipeline re-runs each transformer layer's "
                             "forward before its backward, Megatron's full checkpointing)")
    parser.add_argument("--recompute-granularity", default="full", choices=RECOMPUTE_GRANULARITIES,
                        help="data+tensor+pipeline with --recompute: every transformer layer (full, default) or "
                             "only the attention core between the QKV and output projections (selective, "
                             "Korthikanti et al.)")
    parser.add_argument("--recompute-modules", type=recompute_modules, metavar="MODULES",
                        help="with --recompute --recompute-granularity selective: the modules re-run, comma-separated, "
                             f"of {', '.join(RECOMPUTE_MODULES)} (Megatron-Core's --recompute-modules; default "
                             "core_attn): layernorm and moe_act drop the norms' and the experts' activation outputs "
                             "after the forward and re-make them in backward")
    parser.add_argument("--mixed-precision", default="autocast", choices=MIXED_PRECISIONS,
                        help="--dtype fp16/bf16: fp32 weights and gradients (autocast, default: PyTorch AMP; "
                             "graph-rewrite: TensorFlow's AMP, float32 islands and casts as its graph pass paints "
                             "them) or half weights and gradients with fp32 master weights (half: Megatron-LM --fp16, "
                             "DeepSpeed fp16); gradients are all-reduced in that precision")
    parser.add_argument("--pipeline-boundary", default="whole", choices=PIPELINE_BOUNDARIES,
                        help="data+tensor+pipeline: each tensor rank sends a stage's whole boundary tensor (default; "
                             "Megatron-LM today) or 1/T of it, all-gathered by the next stage (partitioned: "
                             "Megatron-LM 2021-2023, DeepSpeed's pipeline engine)")
    parser.add_argument("--schedule", default="gpipe", choices=PIPELINE_SCHEDULES,
                        help="pipeline schedule: gpipe (default), 1f1b (PipeDream-Flush, Megatron-LM), interleaved "
                             "(1F1B with --virtual-stages chunks per device)")
    parser.add_argument("--virtual-stages", type=int_in(2, 64), default=2,
                        help="model chunks per device for --schedule interleaved (default 2)")
    parser.add_argument("--trace", metavar="FILE", help="write the top prediction's iteration as a Chrome/Perfetto trace")
    parser.add_argument("--force", action="store_true", help="overwrite --trace if it exists")
    parser.add_argument("--wide", action="store_true",
                        help="every column (compute, exposed and hidden communication, bubble, update, max batch, "
                             "...), every plan's notes and the memory table; default: a table of at most 100 columns")


def _knobs(pairs: list[str]) -> dict:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UserError(f"--model-arg {pair!r}: expected KEY=VALUE")
        try:
            out[key] = json.loads(value)
        except ValueError:
            out[key] = value
    return out


def load_inputs(args):
    """(graph, cost model, profile path) from the shared flags; validates sizes."""
    from predictor.api import load_cost_model, load_model

    for flag in ("batch", "gpus", "max_gpus", "gpus_per_node", "micro_batches", "dataset_size"):
        value = getattr(args, flag, None)
        if value is not None and value <= 0:
            raise UserError(f"--{flag.replace('_', '-')} must be positive, got {value}")
    if args.memory_cap is not None and args.memory_cap <= 0:
        raise UserError(f"--memory-cap must be positive, got {args.memory_cap}")
    gpus, per_node = getattr(args, "gpus", None), args.gpus_per_node
    if gpus and per_node and gpus > per_node and gpus % per_node:
        raise UserError(f"--gpus {gpus} is not a whole number of nodes of --gpus-per-node {per_node}")
    if getattr(args, "micro_batches", None) and getattr(args, "batch", None) and args.micro_batches > args.batch:
        raise UserError(f"--micro-batches {args.micro_batches} is larger than --batch {args.batch}")
    shape = None
    if args.input_shape:
        try:
            shape = tuple(int(d) for d in args.input_shape.split(","))
        except ValueError:
            raise UserError(f"--input-shape {args.input_shape[:40]!r}: expected integers like 3,224,224") from None
        if not 1 <= len(shape) <= 4 or not all(1 <= d <= MAX_INPUT_DIM for d in shape):
            raise UserError(f"--input-shape {args.input_shape[:40]!r}: expected 1 to 4 sizes in 1..{MAX_INPUT_DIM}")
    graph = load_model(args.model, shape, **_knobs(args.model_arg))
    if graph.unsupported:
        raise UserError(f"model {args.model} has layers the predictor cannot cost: {', '.join(graph.unsupported[:8])}"
                        + (" ..." if len(graph.unsupported) > 8 else ""))
    cost_model, path = load_cost_model(args.profile)
    from predictor.flags import apply_run_settings
    from predictor.layercost import check_dtype

    apply_run_settings(args, cost_model)  # --cudnn-benchmark, --cluster-load, --dataset, ... (predictor.flags)

    check_dtype(cost_model, args.dtype, str(path))
    return graph, cost_model, path


def _mark_extrapolation(preds, graph, cm) -> list:
    """Set each feasible prediction's extrapolated share (predictor.extrapolation); the predictions above
    FLAG_SHARE, fastest first."""
    from predictor.extrapolation import FLAG_SHARE, extrapolations

    feasible = [p for p in preds if p.feasible]
    for p, ex in zip(feasible, extrapolations(graph, [p.plan for p in feasible], cm)):
        if ex is not None:
            p.extrapolated_share, p.extrapolated_calls = ex.share, ex.calls
    return [p for p in feasible if p.extrapolated_share is not None and p.extrapolated_share > FLAG_SHARE]


#: data+tensor+pipeline on its default degrees names the searched layout when that is this much faster or more
SEARCH_HINT_GAIN = 0.95


def layout_flags(plan) -> str:
    """The `predictor run` flags that pin a data+tensor+pipeline plan's layout."""
    flags = [f"--tensor-parallel {plan.p_tensor}", f"--pipeline-stages {plan.stages}",
             f"--micro-batches {plan.micro_batches}", f"--schedule {plan.schedule}"]
    if plan.schedule == "interleaved":
        flags.append(f"--virtual-stages {plan.virtual_stages}")
    if plan.zero_stage:
        flags.append(f"--zero {plan.zero_stage}")
    if plan.sequence_parallel:
        flags.append("--sequence-parallel")
    if plan.recompute:
        flags.append(f"--recompute --recompute-granularity {plan.recompute_granularity}" + (
            f" --recompute-modules {','.join(plan.recompute_modules)}" if plan.recompute_modules else ""))
    if plan.pipeline_boundary != "whole":
        flags.append(f"--pipeline-boundary {plan.pipeline_boundary}")
    if plan.p_expert > 1:
        flags.append(f"--expert-parallel {plan.p_expert}" + (
            f" --expert-tensor-parallel {plan.expert_tensor}" if plan.expert_tensor != plan.p_tensor else ""))
    return " ".join(flags)


def searched_line(searched, default) -> str:
    """One line: the searched layout, how much faster than the default degrees' plan, and the flags that pin it."""
    return (f"search: {searched.plan.describe()} takes {searched.iteration_s:.4g} s, "
            f"{default.iteration_s / searched.iteration_s:.2f}x faster than the default degrees "
            f"({default.plan.describe()}); pin it with {layout_flags(searched.plan)}")


def _searched(graph, cm, args, cap, cp, ep, known=(), families=None) -> list:
    """predictor.api.searched_layouts at --gpus with the run's flags (families: SEARCHED_FAMILIES by default)."""
    from predictor.api import SEARCHED_FAMILIES, searched_layouts

    return searched_layouts(graph, cm, batch=args.batch, devices=args.gpus, device_memory_bytes=cap,
                            stack=args.stack, mixed_precision=args.mixed_precision, known=known,
                            families=families or SEARCHED_FAMILIES, context_parallel=cp if cp > 1 else None,
                            expert_parallel=ep if ep > 1 else None,
                            expert_tensor_parallel=getattr(args, "expert_tensor_parallel", None),
                            **search_options(args))


def run(args) -> int:
    from rich.console import Console

    from predictor.api import predict_all, rank
    from predictor.extrapolation import FLAG_SHARE, measure_command
    from predictor.host_bound import host_line, mark_host_bound
    from predictor.report import at_scale_lines, chrome_trace, memory_table, moe_context_lines, ranked_table, to_json

    if args.trace:
        from profiler.outputs import check_output
        check_output(args.trace, "--trace", args.force)
    cp, ep = context_expert_degrees(args, args.strategy)
    check_overlaps(args)
    graph, cm, path = load_inputs(args)
    strategies = STRATEGIES + ADDON_STRATEGIES if args.strategy == "all" else (args.strategy,)
    cap = args.memory_cap * 1e9 if args.memory_cap else None
    preds = predict_all(graph, args.batch, args.gpus, cm, strategies=strategies, devices_per_node=args.gpus_per_node,
                        dtype=args.dtype, optimizer=args.optimizer, micro_batches=args.micro_batches,
                        device_memory_bytes=cap, framework=args.framework, synthetic_data=args.synthetic_data,
                        stack=args.stack, schedule=args.schedule, virtual_stages=args.virtual_stages,
                        zero_stage=args.zero, sequence_parallel=args.sequence_parallel,
                        tensor_parallel=args.tensor_parallel, pipeline_stages=args.pipeline_stages,
                        pipeline_boundary=args.pipeline_boundary, mixed_precision=args.mixed_precision,
                        recompute=args.recompute, recompute_granularity=args.recompute_granularity,
                        context_parallel=cp, expert_parallel=ep, tp_comm_overlap=args.tp_comm_overlap,
                        overlap_param_gather=args.overlap_param_gather, memory_format=args.memory_format,
                        bn_group=args.bn_group, cross_entropy=args.cross_entropy,
                        cuda_graphs=args.cuda_graphs, shard_group=args.shard_group or 0,
                        expert_tensor_parallel=getattr(args, "expert_tensor_parallel", None) or 0,
                        recompute_modules=getattr(args, "recompute_modules", None) or (),
                        moe_a2a_overlap=getattr(args, "moe_a2a_overlap", False))
    if args.strategy == "all":
        preds = rank(preds + _searched(graph, cm, args, cap, cp, ep, known=preds))
    searched = None  # data+tensor+pipeline on its default degrees: the layout the search finds, when much faster
    default_degrees = args.tensor_parallel is None or args.pipeline_stages is None
    if args.strategy in HYBRID_3D and default_degrees and preds[0].feasible:
        searched = next(iter(_searched(graph, cm, args, cap, cp, ep, families=(HYBRID_3D,))), None)
        faster = searched is not None and searched.iteration_s < SEARCH_HINT_GAIN * preds[0].iteration_s
        searched = searched if faster and searched.fits else None
    if args.strategy != "all" and not preds[0].feasible:
        raise UserError(f"{args.strategy} on {args.gpus} devices with batch {args.batch}: {preds[0].reason}")
    meta = {"profile": str(path), "profile_provenance": cm.provenance, "model": graph.name, "batch": args.batch,
            "gpus": args.gpus, "params": graph.params}
    if searched is not None:
        meta["searched_layout"] = {"split": searched.plan.describe(), "iteration_s": searched.iteration_s,
                                   "flags": layout_flags(searched.plan), "line": searched_line(searched, preds[0])}
    flagged = _mark_extrapolation(preds, graph, cm)
    mark_host_bound(preds, graph, cm)  # the step time the host's dispatch adds; 'host dispatch' where it binds
    if flagged:
        meta["extrapolation"] = {"flag_share": FLAG_SHARE, "strategies": [p.plan.strategy for p in flagged],
                                 "measure_command": measure_command(args.model, args.model_arg or [], args.batch,
                                                                    args.gpus, flagged[0].plan.strategy,
                                                                    cm.device_is_host)}
    substituted = dict(getattr(cm, "substitutions", {}))  # families the profile lacks (calibrate.cost_model.FALLBACK)
    if substituted:
        meta["substitutions"] = substituted
    # --- residual correction (issue 7: calibrate/correction.py via predictor/corrected.py) ---
    from predictor.corrected import corrected_times, correction_rows, correction_table
    from profiler.profile import load_profile
    corrected = corrected_times(preds, graph, load_profile(path), path)
    if corrected is not None:
        meta["correction"] = correction_rows(preds, corrected)
    # --- end residual correction ---
    if args.trace:
        from profiler.profile import write_atomic
        write_atomic(args.trace, json.dumps(chrome_trace(preds[0])))
    if args.json:
        print(to_json(preds, meta, args.dataset_size))
        return 0
    if not args.wide:  # the compact answer first (issue 39): a table of at most 100 columns, the why
        return _print_compact(args, preds, meta, path, cm, graph, flagged, substituted, corrected)
    console = Console(width=max(Console().width, 240), file=sys.stdout)
    console.print(f"profile: {path} ({cm.provenance})   model: {graph.name} ({graph.params / 1e6:.2f} M params, "
                  f"{len(graph.layers)} layers)   batch {args.batch} on {args.gpus} devices")
    console.print(ranked_table(preds, args.dataset_size, title="predicted training iteration, ranked"))
    if flagged:
        console.print(f"! {len(flagged)} strategies predict more than {FLAG_SHARE:.0%} of their compute from calls "
                      f"outside the shapes this profile measured (column 'extrap.'); to measure them:\n  "
                      f"{meta['extrapolation']['measure_command']}")
    if substituted:
        ops = sorted({key.split()[0] for key in substituted})
        console.print(f"! profile has no calibrated family for {', '.join(ops)}; costed by explicit formulas ("
                      + "; ".join(sorted({f'{key.split()[0]}: {how}' for key, how in substituted.items()}))
                      + "); calibrate this machine (profiler calibrate) to measure them")
    if corrected is not None:  # residual correction (issue 7): analytical vs corrected, out-of-domain flagged
        console.print(correction_table(meta["correction"]))
    from predictor.outofcore_strategies import breakdown  # swap / recompute / planner choices (out-of-core)
    for line in filter(None, map(breakdown, preds)):
        console.print(line)
    for pred in preds:  # which linears tensor parallelism splits and which it leaves replicated
        if pred.feasible and "tensor_notes" in pred.details:
            console.print(f"{pred.plan.strategy} ({pred.plan.describe()}): {pred.details['tensor_notes']}")
    best = next((p for p in preds if p.feasible), None)
    if best is not None:
        console.print(memory_table(best))
        for line in moe_context_lines(best):
            console.print(line)
        console.print(f"recommended: {best.plan.strategy} ({best.plan.describe()}), {best.iteration_s:.4g} s/iteration, "
                      f"bottleneck: {best.bottleneck}" + ("" if best.fits else "  (does NOT fit in memory)"))
        if line := host_line(best):
            console.print(line)
        for line in at_scale_lines(best, cluster_load_times(graph, best, cm, args)):
            console.print(line)
    if "searched_layout" in meta:
        console.print(meta["searched_layout"]["line"])
    if args.trace:
        console.print(f"trace of the top row written to {args.trace}")
    return 0


def cluster_load_times(graph, pred, cost_model, args) -> dict[str, float] | None:
    """The plan's iteration time under each named cluster load (quiet, typical, busy; calibrate.fabric), or None
    when the profile's fabric has no background load or --cluster-load pinned one."""
    from calibrate.fabric import LOAD_PERCENTILES
    from predictor.at_scale import with_cluster_load
    from predictor.strategies import evaluate
    from predictor.strategies.context import Context

    fabric = getattr(getattr(cost_model, "coefficients", None), "fabric", None)
    if fabric is None or fabric.background_load is None or args.cluster_load is not None:
        return None
    cap = args.memory_cap * 1e9 if args.memory_cap else None
    times = {}
    try:
        for name, percentile in LOAD_PERCENTILES.items():
            with_cluster_load(cost_model, percentile)
            times[name] = evaluate(Context(graph, cost_model), pred.plan, cap).iteration_s
    finally:
        with_cluster_load(cost_model, None)
    return times


def console_width(default: int = 100) -> int:
    """The width compact output is laid out for: $COLUMNS when set, else the terminal's, else `default`
    (logs and pipes)."""
    import os
    import shutil

    text = os.environ.get("COLUMNS", "")
    if text.isdigit() and 20 <= int(text) <= 1000:
        return int(text)
    if sys.stdout.isatty():
        return max(20, shutil.get_terminal_size((default, 24)).columns)
    return default


def shell_lines(command: str, width: int, indent: str = "  ") -> str:
    """A shell command broken before its flags into lines of at most `width` columns (backslash continued), so
    it stays copyable; a flag with its value is never split, and one longer than a line stays whole."""
    groups: list[str] = []
    for word in command.split(" "):
        if word.startswith("--") or not groups:
            groups.append(word)
        else:
            groups[-1] += " " + word
    lines, line = [], indent + groups[0]
    for group in groups[1:]:
        if len(line) + 1 + len(group) > width - 2:
            lines.append(line + " \\")
            line = indent + "  " + group
        else:
            line += " " + group
    return "\n".join(lines + [line])


def _print_compact(args, preds, meta, path, cm, graph, flagged, substituted, corrected) -> int:
    """`predictor run`'s default output: what was asked, the compact ranked table, the plans that cannot run in
    one line, the recommendation and its why, then any warning (extrapolation, substituted families, the
    residual correction)."""
    from rich.console import Console

    from predictor.extrapolation import FLAG_SHARE
    from predictor.host_bound import host_line
    from predictor.report import at_scale_lines, compact_table, infeasible_line, moe_context_lines, why_lines

    console = Console(width=console_width(), file=sys.stdout, highlight=False)
    console.print(f"{graph.name} ({graph.params / 1e6:.2f} M params, {len(graph.layers)} layers), batch {args.batch} "
                  f"on {args.gpus} devices; profile {path.name} ({cm.provenance})")
    console.print(compact_table(preds, args.dataset_size, title="predicted training iteration, ranked"))
    cannot = infeasible_line(preds)
    if cannot:
        console.print(f"cannot run: {cannot}", overflow="ellipsis", no_wrap=True)
    for line in why_lines(preds):
        console.print(line)
    best = next((p for p in preds if p.feasible), None)
    if best is not None and (line := host_line(best)):
        console.print(line)
    for line in moe_context_lines(best) if best is not None else ():
        console.print(line)
    if best is not None:
        for line in at_scale_lines(best, cluster_load_times(graph, best, cm, args)):
            console.print(line)
    if flagged:
        console.print(f"! {len(flagged)} strategies predict more than {FLAG_SHARE:.0%} of their compute from calls "
                      f"outside the shapes this profile measured (column 'extrap.' with --wide); to measure them:")
        console.print(shell_lines(meta["extrapolation"]["measure_command"], console.width), soft_wrap=True)
    if substituted:
        ops = sorted({key.split()[0] for key in substituted})
        console.print(f"! profile has no calibrated family for {', '.join(ops)}; costed by explicit formulas "
                      f"(--wide says how); calibrate this machine (profiler calibrate) to measure them")
    if corrected is not None:
        from predictor.corrected import correction_table
        console.print(correction_table(meta["correction"]))
    if "searched_layout" in meta:
        console.print(meta["searched_layout"]["line"])
    console.print("--wide: every term of every plan and the memory table; --json: every field")
    if args.trace:
        console.print(f"trace of the top row written to {args.trace}")
    return 0
