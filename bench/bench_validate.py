"""Accuracy of the analytical model on the CPU validation suite (targets: >= 95% overall, >= 85% per strategy).

    python -m bench validate                 # calibrate this machine (quick, 1 thread per rank), run the suite
    python -m bench validate --model-shapes  # the same, the calibration also measuring the suite's layers
    python -m bench validate --profile P     # reuse a profile calibrated with 1 thread per rank
    python -m bench validate --profile P --layers small_cnn2d --knobs width=8,image=32 --batch 32
                                             # per-layer measured vs predicted: which term is wrong

Prints the validate table, accuracy per strategy, ranking agreement and wall time; the dataset goes to
out/validate-<UTC time>.jsonl, the figures to results/validate.json. Run it on a quiet machine (on the 2-core VM
the runs themselves repeat only to ~90%: `python -m bench noise-floor`).
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from bench import describe
from bench.record import REPO, Figure, add_results_flag, record
from profiler.cliutil import batch_size
from profiler.errors import UserError
from profiler.inputs import parse_json, read_text

NAME = "validate"
TARGET_OVERALL, TARGET_PER_STRATEGY = ">= 95", ">= 85"


def _median_s(fn, repeats: int = 7) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return sorted(times)[repeats // 2]


def layer_table(profile: str, model: str, knobs: dict, batch: int) -> None:
    """Per layer of the runner's chain: measured forward and backward (1 thread, median of 7) against
    the predictor's per-layer times (predictor.layercost) from the profile."""
    import torch

    from predictor.api import load_cost_model, load_model
    from predictor.layercost import LayerCoster, Split
    from predictor.runner.nets import build_serial

    from profiler.allocator import keep_freed_memory

    keep_freed_memory()  # the malloc regime of the calibration and the validation ranks
    torch.set_num_threads(1)
    graph = load_model(model, **knobs)
    cost_model, _ = load_cost_model(profile)
    coster = LayerCoster(graph, cost_model, "fp32")
    index = {layer.name: i for i, layer in enumerate(graph.layers)}
    layers, modules = build_serial(graph)
    x = torch.randn(batch, *graph.input_shape)
    totals = [0.0, 0.0, 0.0, 0.0]
    print(f"{'layer':<6}{'op':<10}{'meas fwd ms':>12}{'pred fwd ms':>12}{'meas bwd ms':>12}{'pred bwd ms':>12}")
    for layer, module in zip(layers, modules):
        xi = x.detach().requires_grad_(layer is not layers[0])
        y = module(xi)
        grad = torch.randn_like(y)
        fwd = _median_s(lambda: module(xi))
        bwd = max(_median_s(lambda: module(xi).backward(grad)) - fwd, 0.0)
        pred_fwd, pred_bwd = coster.times(index[layer.name], Split(batch))
        for i, v in enumerate((fwd, pred_fwd, bwd, pred_bwd)):
            totals[i] += v
        print(f"{layer.name:<6}{layer.op:<10}{fwd * 1e3:12.3f}{pred_fwd * 1e3:12.3f}{bwd * 1e3:12.3f}{pred_bwd * 1e3:12.3f}")
        x = y.detach()
    print(f"{'total':<16}" + "".join(f"{v * 1e3:12.3f}" for v in totals))


def dataset_rows(path: Path) -> list[dict]:
    rows = []
    for number, line in enumerate(read_text(path, "runs").splitlines(), 1):
        if line.strip():
            row = parse_json(line, str(path), line=number)
            if not isinstance(row, dict):
                raise UserError(f"{path}:{number}: expected a JSON object per line")
            rows.append(row)
    return rows


def figures(rows: list[dict], suite_s: float, calibration_s: float | None) -> list[Figure]:
    """Overall and worst-strategy mean accuracy against the targets, ranking agreement, each strategy, wall times."""
    from predictor.validate_report import overall_accuracy, per_strategy_accuracy, ranking

    overall = overall_accuracy(rows)
    per_strategy = per_strategy_accuracy(rows)
    ranks = ranking(rows)
    worst = min(per_strategy.items(), key=lambda kv: kv[1][0], default=None)
    out = [Figure("overall mean accuracy", overall * 100 if overall is not None else None, "%", TARGET_OVERALL),
           Figure(f"worst strategy mean accuracy ({worst[0] if worst else '-'})",
                  worst[1][0] * 100 if worst else None, "%", TARGET_PER_STRATEGY),
           Figure("ranking agreement", 100 * sum(r["agree"] for r in ranks) / len(ranks) if ranks else None,
                  f"% of {len(ranks)} scenarios")]
    out += [Figure(f"{label} mean accuracy ({n} runs)", mean * 100, "%") for label, (mean, n) in per_strategy.items()]
    out.append(Figure("suite wall time", suite_s, "s"))
    if calibration_s is not None:
        out.append(Figure("calibration wall time", calibration_s, "s"))
    return out


def add_arguments(parser) -> None:
    describe(parser, __doc__)
    parser.add_argument("--profile", help="existing profile (default: calibrate one now)")
    parser.add_argument("--suite", default="cpu_default")
    parser.add_argument("--layers", metavar="MODEL", help="print the per-layer table for MODEL instead")
    parser.add_argument("--knobs", default="", help="zoo knobs for --layers, e.g. width=8,image=32")
    parser.add_argument("--batch", type=batch_size, default=32, help="batch for --layers")
    parser.add_argument("--model-shapes", action="store_true",
                        help="calibrate with the suite's own layer shapes too (predictor shapes -> calibrate --shapes)")
    add_results_flag(parser)


def _knobs(text: str) -> dict:
    knobs = {}
    for item in (i for i in text.split(",") if i):
        key, sep, value = item.partition("=")
        if not sep or not value.lstrip("-").isdigit():
            raise UserError(f"--knobs: expected KEY=INTEGER items separated by commas, got {item[:40]!r}")
        knobs[key] = int(value)
    return knobs


def _check_run(command: list[str], env: dict) -> None:
    code = subprocess.run(command, env=env, cwd=REPO).returncode
    if code != 0:
        raise UserError(f"`{' '.join(command[1:4])} ...` failed (exit {code})")


def run(args) -> int:
    if args.layers:
        if not args.profile:
            raise UserError("--layers needs --profile")
        layer_table(args.profile, args.layers, _knobs(args.knobs), args.batch)
        return 0
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = REPO / "out"
    out.mkdir(exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}  # 2 ranks on 2 cores: 1 thread per rank, as the runs
    profile = args.profile
    calibration_s = None
    if profile is None:
        profile = str(out / f"validate-profile-{stamp}.yaml")
        start = time.perf_counter()
        calibrate = [sys.executable, "-m", "profiler", "calibrate", "--device", "cpu", "--quick", "--ranks", "2",
                     "--out", profile]
        if args.model_shapes:  # also measure every compute call the suite's predictions cost
            shapes = out / f"validate-shapes-{stamp}.yaml"
            _check_run([sys.executable, "-m", "predictor", "shapes", "--suite", args.suite, "--out", str(shapes)], env)
            calibrate += ["--shapes", str(shapes)]
        _check_run(calibrate, env)
        calibration_s = time.perf_counter() - start
        print(f"calibration: {calibration_s:.0f} s -> {profile}")
    dataset, plot = out / f"validate-{stamp}.jsonl", out / f"validate-{stamp}.png"
    start = time.perf_counter()
    code = subprocess.run([sys.executable, "-m", "predictor", "validate", "--profile", profile, "--suite", args.suite,
                           "--out", str(dataset), "--plot", str(plot), "--threads", "1"], env=env, cwd=REPO).returncode
    suite_s = time.perf_counter() - start
    print(f"suite wall time: {suite_s:.0f} s ({os.cpu_count()} cores); dataset {dataset}; scatter {plot}")
    if code == 0 and dataset.is_file():
        record(NAME, figures(dataset_rows(dataset), suite_s, calibration_s), args.results)
    return code
