"""Suite files: which configurations `predictor validate` runs.

    warmup: 2            # untimed iterations per run (optional)
    iterations: 8        # timed iterations per run (optional)
    runs:
      - model: small_cnn2d            # zoo name or .yaml/.json layer spec (never Python code)
        knobs: {width: 8, image: 32}  # zoo builder knobs (optional)
        batch: 16                     # global mini-batch
        ranks: 2                      # devices
        strategies: [data, spatial, filter, channel, pipeline]   # or `strategy: data`
        micro_batches: 4              # pipeline S (optional, default 1)
        p_model: 2                    # model-parallel degree of data+spatial / data+filter (optional)
        recompute_segments: 2         # for serial+recompute / data+recompute (optional, default sqrt(layers))
        dtype: fp32                   # optional

Strategy names: serial, data, spatial, filter, channel, pipeline, data+spatial, data+filter, and the
add-ons serial+recompute, data+recompute, serial+offload (GPU). Every error names the file and line.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import yaml

from predictor.api import is_data_model
from predictor.runner.config import STRATEGIES
from profiler.cliutil import MAX_BATCH, MAX_LOCAL_RANKS
from profiler.errors import UserError
from profiler.inputs import compose_yaml, construct_yaml, read_text

ADDONS = ("recompute", "offload")
ENTRY_KEYS = {"model", "knobs", "batch", "ranks", "strategy", "strategies", "micro_batches", "p_model",
              "recompute_segments", "dtype"}
TOP_KEYS = {"warmup", "iterations", "runs", "description"}


@dataclass(frozen=True)
class SuiteRun:
    """One run as the suite asks for it; cmd_validate resolves the model and turns it into a RunConfig."""

    line: int
    model: str
    knobs: tuple[tuple[str, object], ...]
    strategy: str  # base strategy (see config.STRATEGIES)
    addons: tuple[str, ...]  # "recompute", "offload"
    batch: int
    ranks: int
    micro_batches: int = 1
    p_model: int = 0
    recompute_segments: int = 0  # 0 = sqrt of the chain length (as the predictor's default)
    dtype: str = "fp32"


@dataclass
class Suite:
    path: str
    warmup: int = 2
    iterations: int = 8
    runs: list[SuiteRun] = field(default_factory=list)


def builtin_suites() -> list[str]:
    return sorted(p.name[:-5] for p in resources.files("predictor.suites").iterdir() if p.name.endswith(".yaml"))


def resolve_suite_path(name_or_file: str) -> Path:
    path = Path(name_or_file)
    if path.suffix in (".yaml", ".yml") or path.exists():
        if not path.exists():
            raise UserError(f"suite file {name_or_file} does not exist")
        return path
    candidate = resources.files("predictor.suites") / f"{name_or_file}.yaml"
    if not candidate.is_file():
        raise UserError(f"unknown suite {name_or_file!r}: not a file and not a built-in suite ({', '.join(builtin_suites())})")
    return Path(str(candidate))


MAXIMUM = {"warmup": 100_000, "iterations": 100_000, "batch": MAX_BATCH, "ranks": MAX_LOCAL_RANKS,
           "micro_batches": MAX_BATCH, "p_model": MAX_LOCAL_RANKS, "recompute_segments": 1 << 16}


def _int(value, where: str, key: str, minimum: int) -> int:
    maximum = MAXIMUM[key]
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise UserError(f"{where}: {key} must be an integer in {minimum}..{maximum}, got {value!r}")
    return value


def parse_strategy(name: object, where: str) -> tuple[str, tuple[str, ...]]:
    if not isinstance(name, str):
        raise UserError(f"{where}: strategy must be a string, got {name!r}")
    parts = name.split("+")
    addons = tuple(p for p in parts if p in ADDONS)
    base = "+".join(p for p in parts if p not in ADDONS) or "serial"
    if base not in STRATEGIES:
        raise UserError(f"{where}: unknown strategy {name!r} (known: {', '.join(STRATEGIES)}, "
                        "with +recompute for serial/data and +offload for serial/data on GPU)")
    if addons and base not in ("serial", "data"):
        raise UserError(f"{where}: {'+'.join(addons)} runs are implemented for serial and data only, not {base}")
    return base, addons


def load_suite(name_or_file: str) -> Suite:
    """Parse and check a suite; UserError naming file and line on any problem."""
    path = resolve_suite_path(name_or_file)
    label = f"suite {path}"
    root = compose_yaml(read_text(path, "suite", label), label)
    if not isinstance(root, yaml.MappingNode):
        raise UserError(f"suite {path}:1: expected a mapping with a `runs` list")
    data = construct_yaml(root, label)
    suite = Suite(str(path))
    for key_node, value_node in root.value:
        where = f"suite {path}:{key_node.start_mark.line + 1}"
        if key_node.value not in TOP_KEYS:
            raise UserError(f"{where}: unknown key {key_node.value!r} (known: {', '.join(sorted(TOP_KEYS))})")
        if key_node.value in ("warmup", "iterations"):
            setattr(suite, key_node.value, _int(data[key_node.value], where, key_node.value, 0 if key_node.value == "warmup" else 1))
        if key_node.value == "runs":
            if not isinstance(value_node, yaml.SequenceNode) or not value_node.value:
                raise UserError(f"{where}: runs must be a non-empty list")
            for node, entry in zip(value_node.value, data["runs"]):
                suite.runs.extend(_entry(entry, f"suite {path}:{node.start_mark.line + 1}", node.start_mark.line + 1))
    if not suite.runs:
        raise UserError(f"suite {path}: no runs")
    return suite


def _entry(entry, where: str, line: int) -> list[SuiteRun]:
    if not isinstance(entry, dict):
        raise UserError(f"{where}: a run must be a mapping (model, batch, ranks, strategies, ...)")
    unknown = set(entry) - ENTRY_KEYS
    if unknown:
        raise UserError(f"{where}: unknown key(s) {', '.join(sorted(map(str, unknown)))} (known: {', '.join(sorted(ENTRY_KEYS))})")
    for key in ("model", "batch", "ranks"):
        if key not in entry:
            raise UserError(f"{where}: missing {key}")
    if ("strategy" in entry) == ("strategies" in entry):
        raise UserError(f"{where}: give exactly one of strategy or strategies")
    names = entry.get("strategies", [entry.get("strategy")])
    if not isinstance(names, list) or not names:
        raise UserError(f"{where}: strategies must be a non-empty list")
    if not isinstance(entry["model"], str):
        raise UserError(f"{where}: model must be a string")
    if not is_data_model(entry["model"]):
        raise UserError(f"{where}: model {entry['model']!r} is not a zoo model or a .yaml/.json layer spec "
                        "(a suite is data: it cannot name Python code)")
    knobs = entry.get("knobs") or {}
    if not isinstance(knobs, dict):
        raise UserError(f"{where}: knobs must be a mapping")
    dtype = entry.get("dtype", "fp32")
    if dtype not in ("fp32", "bf16", "fp16"):
        raise UserError(f"{where}: dtype must be fp32, bf16 or fp16, got {dtype!r}")
    common = dict(line=line, model=entry["model"], knobs=tuple(sorted(knobs.items())),
                  batch=_int(entry["batch"], where, "batch", 1), ranks=_int(entry["ranks"], where, "ranks", 1),
                  micro_batches=_int(entry.get("micro_batches", 1), where, "micro_batches", 1),
                  p_model=_int(entry.get("p_model", 0), where, "p_model", 0),
                  recompute_segments=_int(entry.get("recompute_segments", 0), where, "recompute_segments", 0), dtype=dtype)
    runs = []
    for name in names:
        base, addons = parse_strategy(name, where)
        ranks = 1 if base == "serial" else common["ranks"]
        runs.append(SuiteRun(strategy=base, addons=addons, **{**common, "ranks": ranks}))
    return runs
