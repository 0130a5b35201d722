"""Valid inputs the fuzz cases start from: real profiles, a layer spec, a suite, a shapes file, nccl-tests
logs, measured runs and a trained correction. Loaded once per process."""
from __future__ import annotations

import copy
import functools
import hashlib
import json
from pathlib import Path

import yaml

from calibrate.shipped import shipped_profile

REPO = Path(__file__).resolve().parents[2]
V100 = shipped_profile("v100-dgx1-8gpu.published")  # links, collectives, framework, fabric
CPU_TREES = REPO / "tests" / "data" / "drift_quick_cpu_profile.yaml"  # compute fits with boosted trees
CPU_SAMPLES = REPO / "tests" / "data" / "drift_cpu_profile.yaml"  # samples, small
NCCL = REPO / "tests" / "data" / "nccl_tests"

SPEC = {"name": "tiny", "input": [3, 16, 16], "layers": [
    {"name": "conv1", "op": "conv2d", "filters": 4, "kernel": 3, "padding": 1},
    {"name": "bn1", "op": "batchnorm"}, {"name": "relu1", "op": "relu"},
    {"name": "pool1", "op": "maxpool", "kernel": 2},
    {"name": "flat", "op": "flatten"}, {"name": "fc", "op": "linear", "out": 10}]}
SUITE = {"warmup": 1, "iterations": 2, "runs": [
    {"model": "small_cnn2d", "knobs": {"width": 4, "image": 16}, "batch": 8, "ranks": 2, "strategies": ["data"]}]}
SHAPES = {"shapes": [
    {"op": "conv2d", "params": {"N": 2, "C": 4, "F": 4, "H": 8, "W": 8, "kernel": 3, "stride": 1, "padding": 1}},
    {"op": "gemm", "params": {"M": 16, "N": 10, "K": 64}, "dtype": "float32"},
    {"op": "relu", "params": {"N": 2, "C": 4, "H": 8, "W": 8}}]}

#: the arguments that make `predictor run` cheap (a tiny zoo model)
RUN_TAIL = ["--model", "small_cnn2d", "--model-arg", "width=4", "--model-arg", "image=16", "--batch", "8", "--gpus", "2"]


def dump(doc) -> str:
    """YAML without anchors (the readers refuse aliases, and a shared sub-document would make one)."""
    class NoAliases(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):
        def ignore_aliases(self, data):
            return True
    return yaml.dump(doc, Dumper=NoAliases, sort_keys=False, default_flow_style=None, width=120)


@functools.lru_cache(maxsize=None)
def _load(path: Path) -> dict:
    return yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def doc(path: Path) -> dict:
    """A fresh deep copy of a YAML document."""
    return copy.deepcopy(_load(path))


@functools.lru_cache(maxsize=None)
def text(path: Path) -> str:
    return path.read_text()


@functools.lru_cache(maxsize=None)
def _runs_text() -> str:
    from calibrate.correction_synthetic import synthetic_runs

    return "".join(json.dumps(r) + "\n" for r in synthetic_runs(models=3, overhead_per_call_s=1e-3, seed=2))


def runs_lines() -> list[str]:
    return _runs_text().splitlines()


@functools.lru_cache(maxsize=None)
def _trained() -> tuple[str, dict]:
    """(profile YAML text, correction document) trained for the V100 profile on synthetic runs."""
    from calibrate.correction import fit_correction, read_runs
    from profiler.profile import load_profile
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        runs = Path(folder) / "runs.jsonl"
        runs.write_text(_runs_text())
        records, _ = read_runs(runs)
    profile = load_profile(V100)
    spec, _ = fit_correction(records, profile, seed=0, runs_source={"path": "runs.jsonl", "sha256": "0" * 64, "rows": len(records)})
    return text(V100), spec.model_dump(mode="json")


def correction_pair(correction_text: str) -> dict[str, str]:
    """Files of a profile referencing `correction_text` by its own sha256 (so that its schema is what is tested)."""
    profile_text, _ = _trained()
    data = yaml.load(profile_text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    data["correction"] = {"path": "p.correction.json", "sha256": hashlib.sha256(correction_text.encode()).hexdigest()}
    return {"p.yaml": dump(data), "p.correction.json": correction_text}


def correction_doc() -> dict:
    return copy.deepcopy(_trained()[1])
