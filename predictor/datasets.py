"""Validation datasets (`predictor validate --out`, JSONL): the measured runs read back, pooled over repeats.

A run is keyed by (label, scenario): the strategy label and the model/batch/devices/dtype it ran. Datasets of
repeated suite runs give the same key several measured times; the pooled record keeps the first row and the
median time (`measured_times_s` keeps each one)."""
from __future__ import annotations

import dataclasses
import json
import statistics
from collections import defaultdict
from typing import Iterator

from predictor.plan import Plan
from profiler.errors import UserError
from profiler.inputs import parse_json, read_text


def pooled_runs(paths: list[str]) -> dict[tuple[str, str], dict]:
    """(label, scenario) -> the first record, with measured_time_s the median over every dataset (and each
    dataset's time in measured_times_s). Rows without a measured time or a prediction are left out."""
    records, times = {}, defaultdict(list)
    for path in paths:
        lines = read_text(path, "runs", f"dataset {path}").splitlines()
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            row = parse_json(line, f"dataset {path}", line=number)
            if not isinstance(row, dict):
                raise UserError(f"dataset {path}:{number}: expected a JSON object per line")
            if not row.get("measured_time_s") or not row.get("prediction"):
                continue
            for field in ("label", "scenario", "model", "knobs"):
                if field not in row:
                    raise UserError(f"dataset {path}:{number}: field {field!r} missing")
            key = (row["label"], row["scenario"])
            records.setdefault(key, row)
            times[key].append(row["measured_time_s"])
    return {key: {**row, "measured_time_s": statistics.median(times[key]), "measured_times_s": times[key],
                  "repeats": len(times[key])}
            for key, row in records.items()}


def plan_of(row: dict) -> Plan:
    """The Plan a dataset row was predicted for."""
    names = {f.name for f in dataclasses.fields(Plan)}
    fields = {k: v for k, v in row["prediction"]["plan"].items() if k in names}
    fields["spatial_split"] = tuple(fields.get("spatial_split") or ())
    fields["extra"] = tuple(tuple(pair) for pair in fields.get("extra") or ())
    return Plan(**fields)


def repredicted(paths: list[str], cost_model) -> Iterator[tuple[str, str, dict, object]]:
    """(label, scenario, pooled row, Prediction) of every pooled run predicted again with `cost_model`, in
    (scenario, label) order, infeasible predictions left out; each model is loaded once."""
    from predictor.api import load_model, predict

    graphs = {}
    for (label, scenario), row in sorted(pooled_runs(paths).items(), key=lambda kv: kv[0][::-1]):
        key = (row["model"], json.dumps(row["knobs"], sort_keys=True))
        if key not in graphs:
            graphs[key] = load_model(row["model"], **row["knobs"])
        prediction = predict(graphs[key], plan_of(row), cost_model, interval=False)
        if prediction.feasible:
            yield label, scenario, row, prediction
