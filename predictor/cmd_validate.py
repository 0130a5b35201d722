"""`predictor validate`: run a suite of real training configurations, predict each with the same profile,
append every run (features + prediction terms + measurement) to a JSONL dataset, and report accuracy.
    predictor validate --profile P [--suite NAME|FILE] --out runs.jsonl [--plot scatter.png]
    predictor validate --profile P --suite random:N [--seed S] --out runs.jsonl
    predictor validate --published FILE|cnn|transformer|all [--json] [--plot scatter.png] [--out report.json]

`random:N` generates N random nets (predictor/suites/random_nets.py) and adds per-family accuracy, ranking
agreement and the correction's leave-one-family-out accuracy (random_report.py); `--published` measures nothing
and scores published runs with each system's reference profile (predictor.published). Each row is flushed as
measured; ranks are self-spawned (gloo on CPU, NCCL on GPU), or under torchrun/srun every rank runs the command
and rank 0 writes. docs/validation.md ("Measured runs", "Random architectures", "Published runs").
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

from calibrate.profile_arguments import add_profile_argument
from predictor.report import finite_json
from predictor.runner.config import RunConfig
from predictor.runner.suite import MAX_RANDOM_NETS, SuiteRun, load_suite, random_suite_size
from profiler.allocator import keep_freed_memory
from profiler.cliutil import int_in, seed, thread_count
from profiler.errors import UserError
from profiler.inputs import parse_json, read_text
from profiler.outputs import PLOT_SUFFIXES, check_output, check_writable, same_file
from profiler.profile import load_profile, utc_now_iso

MAX_ITERATIONS = 100_000


def check_dataset(path: str, *keep: str) -> None:
    """--out: a new file, or a JSONL dataset of earlier runs to append to (every line a JSON object, the
    last one complete); never the profile or the suite."""
    for other in keep:
        if other and same_file(path, other):
            raise UserError(f"--out {path}: is the file {other}; the dataset needs its own file")
    check_writable(path)
    if not Path(path).exists():
        return
    text = read_text(path, "runs", f"--out {path}")
    if text and not text.endswith("\n"):
        raise UserError(f"--out {path}: the last line is incomplete; refusing to append runs to it")
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip() and not isinstance(parse_json(line, f"--out {path}", line=number), dict):
            raise UserError(f"--out {path}:{number}: not a JSONL dataset of runs (expected a JSON object per line)")


def add_arguments(parser) -> None:
    parser.add_argument("--published", metavar="FILE",
                        help="score predictions of published measured runs instead of measuring (a corpus YAML of "
                             "CNN or transformer records or both, each read by its schema; a vTrain-format .csv; or "
                             "'cnn' for the shipped corpus, 'transformer' for the shipped transformer runs and vTrain's CSV, 'all' for "
                             "both, 'vtrain-single' for vTrain's 1440 single-node runs, reported apart); a row the "
                             "predictor cannot represent is skipped with its reason; each row takes its system's "
                             "reference profile, or --profile's when given (rows from another GPU skipped)")
    parser.add_argument("--json", action="store_true", help="with --published: print the report as JSON")
    add_profile_argument(parser, "profile the predictions use (calibrated on this machine)")
    parser.add_argument("--suite", default="cpu_default",
                        help=f"built-in suite name, suite YAML file, or random:N for N (1..{MAX_RANDOM_NETS}) generated "
                             "random nets (default cpu_default)")
    parser.add_argument("--seed", type=seed, default=None,
                        help="with --suite random:N: the generator's seed (default 0, at most 2^32-1); refused with "
                             "any other suite")
    parser.add_argument("--out", help="JSONL dataset; rows are appended, one per measured run (with --published: "
                                      "the JSON report)")
    parser.add_argument("--plot", help="scatter of predicted vs measured time per strategy (.png, .pdf or .svg)")
    parser.add_argument("--force", action="store_true", help="overwrite an existing --plot file")
    parser.add_argument("--threads", type=thread_count, help="threads per rank (default: the profile's calibration threads)")
    parser.add_argument("--iterations", type=int_in(1, MAX_ITERATIONS), help="timed iterations per run (default: the suite's)")
    parser.add_argument("--warmup", type=int_in(0, MAX_ITERATIONS), help="warm-up iterations per run (default: the suite's)")


def profile_threads(profile) -> int | None:
    """The thread count most of the profile's compute samples were measured with."""
    from calibrate.fit import calibration_threads

    return calibration_threads(profile.samples)


def file_sha256(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _sqrt_segments(graph) -> int:
    from predictor.recompute import sqrt_segment_count

    return sqrt_segment_count(sum(1 for l in graph.layers if l.op not in ("dropout", "softmax_loss")))


def plan_for(run: SuiteRun, graph, devices_per_node: int, segments: int):
    """The predictor's Plan describing exactly what the runner executes."""
    from predictor.plan import Plan

    dims = len(graph.input_shape) - 1
    split = lambda p: (p,) + (1,) * (dims - 1)  # the runner splits the first spatial dimension only
    base = dict(batch=run.batch, devices=run.ranks, devices_per_node=devices_per_node, dtype=run.plan_dtype,
                optimizer="sgd")
    p_model = run.p_model or 2
    name = run.strategy
    if run.addons:
        name = f"{run.strategy}+{'+'.join(run.addons)}"
    table = {
        "serial": dict(),
        "data": dict(p_data=run.ranks),
        "spatial": dict(p_spatial=run.ranks, spatial_split=split(run.ranks)),
        "filter": dict(p_filter=run.ranks),
        "channel": dict(p_channel=run.ranks),
        "pipeline": dict(stages=run.ranks, micro_batches=run.micro_batches),
        "data+spatial": dict(p_data=run.ranks // p_model, p_spatial=p_model, spatial_split=split(p_model)),
        "data+filter": dict(p_data=run.ranks // p_model, p_filter=p_model),
        "tensor": dict(p_tensor=run.ranks),
        "data+tensor": dict(p_data=run.ranks // p_model, p_tensor=p_model),
    }
    extra = (("checkpoint_segments", segments),) if "recompute" in run.addons else ()
    return Plan(name, **base, **table[run.strategy], extra=extra)


def model_summary(graph) -> dict:
    from predictor.graph import dtype_bytes

    return {"layers": len(graph.layers), "flops_per_sample": graph.flops_per_sample,
            "param_bytes": graph.params * dtype_bytes("fp32"), "params": graph.params,
            "input_shape": list(graph.input_shape)}


def _predict(graph, plan, cost_model):
    from predictor.api import predict

    try:
        return predict(graph, plan, cost_model, interval=False), ""
    except UserError as err:
        return None, str(err)


def predict_suite(suite, cost_model) -> list[tuple]:
    """(run, graph, plan, prediction or None, why not) for every run of a suite, planned exactly as the
    runner executes it, every rank on one node."""
    from predictor.api import load_model
    from predictor.stacks import with_conv_search

    dpn = max(r.ranks for r in suite.runs)
    graphs, out = {}, []
    for run_ in suite.runs:
        key = (run_.model, run_.knobs)
        if key not in graphs:
            try:
                graphs[key] = load_model(run_.model, allow_code=False, **dict(run_.knobs))
            except UserError as err:
                raise UserError(f"suite {suite.path}:{run_.line}: {err}") from None
        graph = graphs[key]
        segments = (run_.recompute_segments or _sqrt_segments(graph)) if "recompute" in run_.addons else 0
        plan = plan_for(run_, graph, dpn, segments)
        with_conv_search(cost_model, run_.cudnn_benchmark)  # the run's cudnn.benchmark
        out.append((run_, graph, plan, *_predict(graph, plan, cost_model)))
    return out


def random_suite(n: int, seed_: int, out: str):
    """The suite of n random nets drawn with seed_, their specs written (atomically) to
    <out>.random-nets/seed-<seed_>/ with a manifest; returns (suite, nets, {model path: row fields})."""
    from predictor.suites import random_nets
    from profiler.outputs import write_atomic

    folder = Path(f"{out}.random-nets") / f"seed-{seed_}"
    if (folder.exists() and not folder.is_dir()) or (folder.parent.exists() and not folder.parent.is_dir()):
        raise UserError(f"--out {out}: {folder} is needed for the random nets' specs but is not a folder")
    nets = random_nets.random_nets(n, seed_)
    suite = random_nets.suite_of(nets, seed_, folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UserError(f"--out {out}: cannot create {folder} for the random nets' specs ({err.strerror})") from None
    paths = random_nets.write_specs(nets, folder)
    base = Path(out).parent
    records = [random_nets.generator_record(net, seed_, n, os.path.relpath(path, base)) for net, path in zip(nets, paths)]
    manifest = {"suite": suite.path, "generator_version": random_nets.GENERATOR_VERSION, "seed": seed_, "n": n,
                "ranges": random_nets.RANGES,
                "nets": [{k: v for k, v in record.items() if k != "ranges"} for record in records]}
    write_atomic(folder / f"random-{n}.json", json.dumps(manifest, indent=1) + "\n")
    extras = {str(path): {"generator": record} for path, record in zip(paths, records)}
    return suite, nets, extras


def _row(run: SuiteRun, cfg: RunConfig, graph, plan, prediction, why, measured, context) -> dict:
    from calibrate.correction_features import record_from_prediction

    pred_dict = prediction.to_dict() if prediction is not None else None
    predicted_s = pred_dict["iteration_s"] if pred_dict and prediction.feasible else None
    if pred_dict and prediction.feasible:
        row = record_from_prediction(pred_dict)
    else:
        row = {"strategy": plan.strategy, "predicted_time_s": None, "terms": {}}
    row.update(
        label=cfg.label, base_strategy=cfg.strategy, model=run.model, knobs=dict(run.knobs), scenario=cfg.scenario,
        model_summary=model_summary(graph), devices=cfg.ranks, batch=cfg.batch,
        flops_per_device=graph.flops_per_sample * cfg.batch / cfg.ranks,  # model FLOPs, evenly shared
        batch_per_device=cfg.batch / cfg.degrees[0], dtype=cfg.dtype, amp=cfg.amp, cudnn_benchmark=cfg.cudnn_benchmark,
        micro_batches=cfg.micro_batches,
        recompute_segments=cfg.recompute_segments, offload=cfg.offload, predicted_time_s=predicted_s,
        prediction_error=why or (prediction.reason if prediction is not None and not prediction.feasible else ""),
        predicted_memory_bytes=pred_dict["memory_bytes"] if predicted_s else None,
        predicted_bottleneck=prediction.bottleneck if predicted_s else None,
        prediction=pred_dict, measured=measured, measured_time_s=measured["measured_time_s"],
        measured_iqr_s=measured["measured_iqr_s"], measured_peak_memory_bytes=measured["peak_memory_bytes"],
        breakdown_s=measured["breakdown_s"], threads=measured["threads"], suite_line=run.line, **context)
    if predicted_s:
        row["accuracy"] = 1 - abs(predicted_s - row["measured_time_s"]) / row["measured_time_s"]
    return row


def run(args) -> int:
    if args.published:  # predictions only: no torch
        from predictor.published.command import run_published
        return run_published(args)
    from calibrate.shipped import resolve_profile
    from predictor.api import load_cost_model
    from predictor.runner.launch import external_launch, init_process_group, spawn_ranks
    from predictor.runner.worker import run_jobs
    from predictor import validate_report
    from predictor.kernel_breakdown import predicted_kinds

    for flag in ("profile", "out"):
        if not getattr(args, flag):
            raise UserError(f"--{flag} is required (unless --published is given)")
    args.profile = str(resolve_profile(args.profile))  # a path, or a shipped profile's name
    random_n = random_suite_size(args.suite)
    nets, extras = [], {}
    if random_n is None:
        if args.seed is not None:
            raise UserError(f"--seed applies to --suite random:N only (the suite is {args.suite})")
        suite = load_suite(args.suite)
        check_dataset(args.out, args.profile, suite.path)
    else:
        check_dataset(args.out, args.profile)
    if args.plot:
        check_output(args.plot, "--plot", args.force, PLOT_SUFFIXES)
    profile = load_profile(args.profile)
    cost_model, profile_path = load_cost_model(args.profile)
    if random_n is not None:  # after every check of the flags and the profile: nothing is written before
        suite, nets, extras = random_suite(random_n, 0 if args.seed is None else args.seed, args.out)
    calibrated_threads = profile_threads(profile)
    threads = args.threads or calibrated_threads or 1
    warmup = suite.warmup if args.warmup is None else args.warmup
    iterations = suite.iterations if args.iterations is None else args.iterations
    if not (1 <= iterations <= MAX_ITERATIONS and 0 <= warmup <= MAX_ITERATIONS):
        raise UserError(f"--iterations must be in 1..{MAX_ITERATIONS} and --warmup in 0..{MAX_ITERATIONS}")
    jobs, kinds = [], {}
    for run_, graph, plan, prediction, why in predict_suite(suite, cost_model):
        if run_.ranks == 1 and not run_.addons:  # a serial run's prediction by kind of kernel, beside its trace
            kinds[len(jobs)] = predicted_kinds(graph, plan, prediction, cost_model)
        bounds = (prediction.details.get("stage_bounds") if prediction is not None else None) or []
        segments = dict(plan.extra).get("checkpoint_segments", 0)
        cfg = RunConfig(run_.model, run_.strategy, run_.ranks, run_.batch, run_.micro_batches, run_.dtype, run_.p_model,
                        segments, "offload" in run_.addons, tuple(int(b[0]) for b in bounds), run_.knobs,
                        amp=run_.amp, cudnn_benchmark=run_.cudnn_benchmark)
        jobs.append((run_, cfg, graph, plan, prediction, why))
    context = {
        "profile": str(profile_path), "profile_sha256": file_sha256(args.profile), "profile_threads": calibrated_threads,
        "threads_match": calibrated_threads == threads, "cpu_count": os.cpu_count(), "suite": suite.path,
        "host": profile.machine.hostname, "profile_kind": profile.provenance.kind,
        "allocator": keep_freed_memory(), "profile_allocator": profile.settings.get("allocator", "unrecorded"),
    }
    rows = []
    start = time.perf_counter()
    launched = external_launch()
    leader = launched is None or launched[0] == 0
    if leader:
        print(f"validate: {len(jobs)} runs from {suite.path}, {threads} thread(s) per rank "
              f"(profile calibrated with {calibrated_threads}), {warmup} warm-up + {iterations} timed iterations", flush=True)
        if nets:
            from predictor.suites.random_nets import describe

            print(f"random nets (specs and manifest in {Path(next(iter(extras))).parent}):", flush=True)
            for net in nets:
                print(describe(net), flush=True)
    with open(args.out, "a") if leader else open(os.devnull, "w") as out:
        def record(message, world: int) -> None:
            kind, index, payload = message
            run_, cfg, graph, plan, prediction, why = jobs[index]
            if kind == "skipped":
                print(f"  skipped {cfg.label} {cfg.scenario}: {payload}", flush=True)
                return
            row = _row(run_, cfg, graph, plan, prediction, why, payload,
                       {**context, "oversubscribed": world * threads > (os.cpu_count() or 1), "timestamp": utc_now_iso(),
                        **extras.get(run_.model, {})})
            if payload.get("kernel_breakdown_s") and kinds.get(index):
                row.update(kernel_breakdown_s=payload["kernel_breakdown_s"], predicted_breakdown_s=kinds[index],
                           kernel_top=payload.get("kernel_top", []))
            out.write(json.dumps(finite_json(row), default=str) + "\n")
            out.flush()
            rows.append(row)
            print(validate_report.progress_line(row), flush=True)

        if launched is None:  # self-spawned local ranks, one launch per world size
            for world in sorted({cfg.ranks for _, cfg, *_ in jobs}):
                batch = [(i, job[1], job[2]) for i, job in enumerate(jobs) if job[1].ranks == world]
                for message in spawn_ranks(world, run_jobs, (batch, warmup, iterations), threads=threads):
                    record(message, world)
        else:  # under torchrun/srun: run the suite's runs of this world size; rank 0 writes
            rank, world, _ = launched
            batch = [(i, job[1], job[2]) for i, job in enumerate(jobs) if job[1].ranks == world]
            if leader and len(batch) < len(jobs):
                print(f"validate: world size {world}: running the {len(batch)} runs with ranks: {world}, "
                      f"skipping {len(jobs) - len(batch)} others", flush=True)
            run_jobs(rank, world, init_process_group(rank, world, threads), lambda m: record(m, world), batch, warmup, iterations)
            torch_dist_shutdown()
    if not leader:
        return 0
    print(f"validate: {len(rows)} runs measured in {time.perf_counter() - start:.0f} s; appended to {args.out}")
    print(validate_report.render(rows))
    if nets:
        from predictor import random_report

        lofo = random_report.leave_one_family_out([json.loads(json.dumps(finite_json(r), default=str)) for r in rows], profile)
        print()
        print(random_report.render(rows, lofo))
    if args.plot and rows:
        validate_report.scatter(rows, args.plot)
        print(f"scatter: {args.plot}")
    return 0


def torch_dist_shutdown() -> None:
    import torch.distributed as dist

    dist.barrier()
    dist.destroy_process_group()
