"""Read a corpus of published, measured training runs (`cnn_runs.yaml` and files of its schema).

Each record states a model, precision, optimizer, framework, system, GPU count, batch and measured throughput, with
its source. The reader checks the fields the validation uses and returns one `PublishedRun` per record; a malformed
record is a one-line `UserError` naming the file, the record and the field. What a record means for the predictor
is decided later (`predictor.published.rowmap`). The measured figure becomes seconds per iteration
(`derived.seconds_per_iteration` when given, else global batch / total images per second); records that measure
something else keep `measured_s = None` and are reported as skipped with that reason.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from profiler.errors import UserError
from profiler.inputs import read_yaml

#: the corpus shipped with the package (a copy of the published ground truth, with its SOURCES.md)
CORPUS_DIR = Path(__file__).resolve().parent.parent / "data" / "groundtruth"


@dataclass(frozen=True)
class PublishedRun:
    """One published measurement, as the corpus states it (free text kept verbatim for the mapping)."""

    index: int
    id: str
    source: str                 # the id's prefix: dle, dlperf, mlperf, tfbench, ...
    model: str
    precision: str
    optimizer: str
    framework: str
    parallelism: str
    data: str
    num_gpus: int
    batch_per_gpu: Optional[int]
    system: dict[str, Any]
    measured_s: Optional[float]     # seconds per iteration, None when the record is not a throughput
    measured_note: str              # what the record measured, when it is not a throughput
    url: str = ""
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def nodes(self) -> int:
        n = self.system.get("nodes")
        return int(n) if isinstance(n, int) and n > 0 else 1

    @property
    def gpus_per_node(self) -> Optional[int]:
        n = self.system.get("gpus_per_node")
        return int(n) if isinstance(n, int) and n > 0 else None

    @property
    def images_per_s(self) -> Optional[float]:
        if self.measured_s is None or self.batch_per_gpu is None:
            return None
        return self.batch_per_gpu * self.num_gpus / self.measured_s


def _fail(path: str, index: int, rid: str, field_name: str, rule: str) -> UserError:
    return UserError(f"{path}: record {index} ({rid}): field {field_name}: {rule}")


def _text(rec: dict, key: str, path: str, index: int, rid: str, required: bool = True) -> str:
    value = rec.get(key)
    if value is None and not required:
        return ""
    if value is None and required:
        raise _fail(path, index, rid, key, "missing")
    if isinstance(value, (dict, list)):
        raise _fail(path, index, rid, key, f"must be text, got {type(value).__name__}")
    return str(value)


def _positive_int(value, path, index, rid, name, allow_none=False) -> Optional[int]:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1 or value > 10_000_000:
        raise _fail(path, index, rid, name, f"must be an integer between 1 and 1e7, got {value!r}")
    return value


def _positive_float(value, path, index, rid, name) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise _fail(path, index, rid, name, f"must be a finite positive number, got {value!r}")
    return float(value)


#: what a rate counts per iteration: samples (images, sequences) or tokens
RATE_ITEMS = {"img": "samples", "image": "samples", "images": "samples", "sample": "samples", "samples": "samples",
              "seq": "samples", "seqs": "samples", "sequence": "samples", "sequences": "samples", "token": "tokens",
              "tokens": "tokens"}
#: measured keys a record may state its rate under (transformer sources' own words), each with what it counts
RATE_KEYS = {"tokens_per_sec": "tokens", "sequences_per_sec": "samples", "samples_per_sec": "samples",
             "images_per_sec": "samples"}
_SECONDS_UNITS = {"s": 1.0, "sec": 1.0, "seconds": 1.0, "s/iteration": 1.0, "s/iter": 1.0, "s/step": 1.0,
                  "ms": 1e-3, "ms/iteration": 1e-3, "ms/iter": 1e-3, "ms/step": 1e-3}


def iteration_seconds(measured: dict, gpus: int, per_iteration: dict[str, Optional[float]], missing: dict[str, str],
                      path, index, rid) -> tuple[Optional[float], str]:
    """Seconds per iteration from what a record measured: `measured.seconds_per_iteration` or
    `iteration_time_ms`; a `value` with a `unit` of time per iteration (s, ms) or a rate of samples (img/s,
    samples/s, sequences/s) or tokens (tokens/s), in all or per GPU (".../s/gpu"); or a rate under its own key
    (tokens_per_sec, sequences_per_sec, ..., each also `_per_gpu`). `per_iteration` holds the samples and tokens of
    one iteration (None where the record does not say; `missing` then names why the row is skipped)."""
    for key, scale in (("seconds_per_iteration", 1.0), ("iteration_time_s", 1.0), ("iteration_time_ms", 1e-3)):
        if measured.get(key) is not None:
            return scale * _positive_float(measured[key], path, index, rid, f"measured.{key}"), ""

    def from_rate(value: float, counts: str, per_gpu: bool) -> tuple[Optional[float], str]:
        count = per_iteration.get(counts)
        if count is None:
            return None, missing[counts]
        return count / (value * (gpus if per_gpu else 1)), ""

    for key, counts in RATE_KEYS.items():
        for name, per_gpu in ((f"{key}_per_gpu", True), (key, False)):
            if measured.get(name) is not None:
                return from_rate(_positive_float(measured[name], path, index, rid, f"measured.{name}"), counts, per_gpu)
    unit = " ".join(str(measured.get("unit", "")).lower().split())
    if unit in _SECONDS_UNITS:
        return _SECONDS_UNITS[unit] * _positive_float(measured.get("value"), path, index, rid, "measured.value"), ""
    item, _, rest = unit.partition("/s")
    if item in RATE_ITEMS and rest in ("", "/gpu", " per gpu", "/gpu/"):
        value = _positive_float(measured.get("value"), path, index, rid, "measured.value")
        return from_rate(value, RATE_ITEMS[item], bool(rest))
    return None, f"measures {measured.get('quantity', unit)!s}, not a per-iteration throughput"


def _measured_seconds(rec: dict, batch: Optional[int], gpus: int, path, index, rid) -> tuple[Optional[float], str]:
    measured = rec.get("measured")
    if not isinstance(measured, dict):
        raise _fail(path, index, rid, "measured", "missing or not a mapping")
    derived = rec.get("derived") or {}
    if not isinstance(derived, dict):
        raise _fail(path, index, rid, "derived", "must be a mapping")
    if derived.get("seconds_per_iteration") is not None:
        return _positive_float(derived["seconds_per_iteration"], path, index, rid, "derived.seconds_per_iteration"), ""
    return iteration_seconds(measured, gpus, {"samples": batch * gpus if batch else None, "tokens": None},
                             {"samples": "batch per GPU not stated in the source",
                              "tokens": "a token rate for a model without a sequence length"}, path, index, rid)


def record_head(rec: Any, index: int, path: str) -> tuple[str, dict, int]:
    """(id, system, num_gpus) of a published record — the fields every ground-truth file shares — checked
    (UserError naming the record and field when malformed)."""
    if not isinstance(rec, dict):
        raise UserError(f"{path}: record {index}: must be a mapping, got {type(rec).__name__}")
    rid = rec.get("id")
    if not isinstance(rid, str) or not rid.strip():
        raise UserError(f"{path}: record {index}: field id: missing or not text")
    system = rec.get("system")
    if not isinstance(system, dict):
        raise _fail(path, index, rid, "system", "missing or not a mapping")
    for key in ("nodes", "gpus_per_node"):
        _positive_int(system.get(key), path, index, rid, f"system.{key}", allow_none=True)
    return rid, system, _positive_int(rec.get("num_gpus"), path, index, rid, "num_gpus")


def parse_record(rec: Any, index: int, path: str) -> PublishedRun:
    """One corpus record -> PublishedRun (UserError naming the record and field when malformed)."""
    rid, system, gpus = record_head(rec, index, path)
    batch = _positive_int(rec.get("batch_per_gpu"), path, index, rid, "batch_per_gpu", allow_none=True)
    measured_s, note = _measured_seconds(rec, batch, gpus, path, index, rid)
    source = rec.get("source") or {}
    return PublishedRun(
        index=index, id=rid, source=rid.split("-", 1)[0], model=_text(rec, "model", path, index, rid),
        precision=_text(rec, "precision", path, index, rid), optimizer=_text(rec, "optimizer", path, index, rid, False),
        framework=_text(rec, "framework", path, index, rid), parallelism=_text(rec, "parallelism", path, index, rid, False),
        data=_text(rec, "data", path, index, rid, False), num_gpus=gpus, batch_per_gpu=batch, system=system,
        measured_s=measured_s, measured_note=note, url=str(source.get("url", "")) if isinstance(source, dict) else "",
        notes=_text(rec, "notes", path, index, rid, False),
        extra={"model_details": rec.get("model_details") if isinstance(rec.get("model_details"), dict) else {},
               "memory_format": _memory_format(rec, path, index, rid),
               "bn_group": _positive_int(rec.get("bn_group"), path, index, rid, "bn_group", allow_none=True),
               "cuda_graphs": _flag(rec, "cuda_graphs", path, index, rid),
               "framework_version": _text(rec, "framework_version", path, index, rid, False)})


def _flag(rec: dict, key: str, path: str, index: int, rid: str) -> bool:
    """A yes/no setting a record states (`cuda_graphs: true`, with its evidence beside it); absent: False."""
    value = rec.get(key, False)
    if not isinstance(value, bool):
        raise _fail(path, index, rid, key, "must be true or false")
    return value


def _memory_format(rec: dict, path: str, index: int, rid: str) -> Optional[str]:
    """The convolutions' layout a record states (`memory_format`: nhwc or nchw; groundtruth/LAYOUTS.md), or None."""
    from predictor.plan import MEMORY_FORMATS

    value = rec.get("memory_format")
    if value is not None and value not in MEMORY_FORMATS:
        raise _fail(path, index, rid, "memory_format", f"must be one of {', '.join(MEMORY_FORMATS)}")
    return value


def load_records(path: str | Path, parse) -> list[PublishedRun]:
    """Every record of a corpus YAML file (a list of records), each through parse(record, index, file name), ids
    unique; read by profiler.inputs (regular files of bounded size, UTF-8, plain YAML without aliases or tags)."""
    name = str(path)
    if not os.path.isfile(path):  # the corpus's own wording; read_yaml makes the remaining checks
        raise UserError(f"{name}: not a regular file" if os.path.lexists(path) else f"{name}: does not exist")
    data = read_yaml(path, "corpus")
    if not isinstance(data, list) or not data:
        raise UserError(f"{name}: must be a non-empty list of run records")
    return unique_ids(name, [parse(rec, i, name) for i, rec in enumerate(data)])


def unique_ids(name: str, runs: list[PublishedRun]) -> list[PublishedRun]:
    """The runs, or a one-line error naming the first record whose id an earlier record has."""
    seen: dict[str, int] = {}
    for run in runs:
        if run.id in seen:
            raise _fail(name, run.index, run.id, "id", f"duplicate of record {seen[run.id]}")
        seen[run.id] = run.index
    return runs


def load_corpus(path: str | Path) -> list[PublishedRun]:
    """Every record of a CNN corpus YAML file, validated (load_records with parse_record)."""
    return load_records(path, parse_record)
