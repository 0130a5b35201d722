"""Golden predictions: the predicted iteration time and memory of every run of the default CPU suite (on a
synthetic machine whose ranks share 2 cores, and on the committed quick CPU profile where it can cost them) and
the top plans of a ResNet-50 search (on a shipped reference profile), recorded so that a restructuring that
changes any prediction fails tests/test_golden.py. A deliberate change of the model
regenerates the file, and its commit says why:

    python -m tests.golden --write
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

DATA = Path(__file__).parent / "data"
GOLDEN = DATA / "golden_predictions.json"
CPU_PROFILE = DATA / "drift_quick_cpu_profile.yaml"


def suite_predictions() -> dict[str, list]:
    from predictor.api import load_cost_model
    from predictor.cmd_validate import predict_suite
    from predictor.runner.suite import load_suite

    from predictor.synthetic import SyntheticCostModel

    suite = load_suite("cpu_default")
    out = {}
    for name, cm in (("synthetic", SyntheticCostModel(cores_per_node=2)), ("cpu", load_cost_model(str(CPU_PROFILE))[0])):
        for run, _graph, _plan, pred, _why in predict_suite(suite, cm):
            label = "+".join((run.strategy,) + run.addons)
            key = f"{name}:{run.line}:{run.model}:{label}:{run.ranks}"
            if pred is not None and pred.feasible:
                out[key] = [pred.iteration_s, pred.memory_bytes]
    return out


def search_predictions() -> list:
    from predictor.api import load_cost_model, load_model
    from predictor.search import search

    cm, _ = load_cost_model("v100-dgx1-8gpu.published")
    result = search(load_model("resnet50"), cm, batch=1024, max_devices=64, top=20, interval=False)
    rows = [[p.plan.strategy, p.plan.describe(), p.iteration_s, p.memory_bytes] for p in result.best]
    return sorted(rows, key=lambda r: (float(f"{r[2]:.12g}"), r[0], r[1]))  # plans tied in time: any order


def current() -> dict:
    return {"suite": suite_predictions(), "search": search_predictions()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write {GOLDEN.name}")
    args = parser.parse_args(argv)
    data = current()
    if args.write:
        GOLDEN.write_text(json.dumps(data, indent=1) + "\n")
        print(f"wrote {GOLDEN}")
    else:
        print(json.dumps(data, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
