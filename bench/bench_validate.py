"""Accuracy of the analytical model on the default CPU validation suite, in one command.

    python bench/bench_validate.py                 # calibrate this machine (quick, 1 thread per rank,
                                                   # 2-rank collectives), then run the suite
    python bench/bench_validate.py --model-shapes  # the same, the calibration also measuring the suite's layers
    python bench/bench_validate.py --profile P     # reuse a profile calibrated with 1 thread per rank
    python bench/bench_validate.py --profile P --layers small_cnn2d --knobs width=8,image=32 --batch 32
                                                   # per-layer forward/backward: measured (1 thread) vs
                                                   # the profile's prediction -- which term is wrong

Prints the validate table, mean accuracy per strategy, ranking agreement and the suite's wall time; the
dataset goes to out/validate-<UTC time>.jsonl and the scatter next to it. Run it on a quiet machine: the
runs and the calibration must not share the cores with other work.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", help="existing profile (default: calibrate one now)")
    parser.add_argument("--suite", default="cpu_default")
    parser.add_argument("--layers", metavar="MODEL", help="print the per-layer table for MODEL instead")
    parser.add_argument("--knobs", default="", help="zoo knobs for --layers, e.g. width=8,image=32")
    parser.add_argument("--batch", type=int, default=32, help="batch for --layers")
    parser.add_argument("--model-shapes", action="store_true",
                        help="calibrate with the suite's own layer shapes too (predictor shapes -> calibrate --shapes)")
    args = parser.parse_args()
    if args.layers:
        if not args.profile:
            parser.error("--layers needs --profile")
        knobs = {k: int(v) for k, v in (item.split("=") for item in args.knobs.split(",") if item)}
        layer_table(args.profile, args.layers, knobs, args.batch)
        return 0
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = REPO / "out"
    out.mkdir(exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}  # 2 ranks on 2 cores: 1 thread per rank, as the runs
    profile = args.profile
    if profile is None:
        profile = str(out / f"validate-profile-{stamp}.yaml")
        start = time.perf_counter()
        calibrate = [sys.executable, "-m", "profiler", "calibrate", "--device", "cpu", "--quick", "--ranks", "2",
                     "--out", profile]
        if args.model_shapes:  # also measure every compute call the suite's predictions cost
            shapes = out / f"validate-shapes-{stamp}.yaml"
            subprocess.run([sys.executable, "-m", "predictor", "shapes", "--suite", args.suite, "--out", str(shapes)],
                           check=True, env=env, cwd=REPO)
            calibrate += ["--shapes", str(shapes)]
        subprocess.run(calibrate, check=True, env=env, cwd=REPO)
        print(f"calibration: {time.perf_counter() - start:.0f} s -> {profile}")
    dataset, plot = out / f"validate-{stamp}.jsonl", out / f"validate-{stamp}.png"
    start = time.perf_counter()
    code = subprocess.run([sys.executable, "-m", "predictor", "validate", "--profile", profile, "--suite", args.suite,
                           "--out", str(dataset), "--plot", str(plot), "--threads", "1"], env=env, cwd=REPO).returncode
    print(f"suite wall time: {time.perf_counter() - start:.0f} s ({os.cpu_count()} cores); dataset {dataset}; scatter {plot}")
    return code


if __name__ == "__main__":
    sys.exit(main())
