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
            check_row(row, f"dataset {path}:{number}")
            key = (row["label"], row["scenario"])
            records.setdefault(key, {**row, "dataset_row": f"dataset {path}:{number}"})
            times[key].append(row["measured_time_s"])
    return {key: {**row, "measured_time_s": statistics.median(times[key]), "measured_times_s": times[key],
                  "repeats": len(times[key])}
            for key, row in records.items()}


#: the JSON types a Plan field may hold in a dataset row, by its annotation (dataclasses.fields(Plan))
_PLAN_TYPES = {"str": (str,), "int": (int,), "Optional[int]": (int, type(None)), "bool": (bool,),
               "float": (int, float), "tuple[int, ...]": (list,), "tuple[str, ...]": (list,),
               "tuple[tuple[str, Any], ...]": (list,)}


def check_row(row: dict, where: str) -> None:
    """A measured row the predictor can re-predict, or a one-line UserError naming the row and field: a data model
    (a zoo name or layer spec, never code), knobs, a positive measured time and a plan of the right types."""
    from predictor.api import check_knobs, is_data_model

    for field in ("label", "scenario", "model"):
        if not isinstance(row.get(field), str) or not row[field]:
            raise UserError(f"{where}: field {field!r} must be a non-empty string, got {str(row.get(field))[:40]}")
    if not is_data_model(row["model"]):
        raise UserError(f"{where}: field 'model' {row['model'][:60]!r} is not a zoo model or a .yaml/.json layer spec "
                        "(a dataset is data: it cannot name Python code)")
    if not isinstance(row.get("knobs"), dict):
        raise UserError(f"{where}: field 'knobs' must be a mapping")
    check_knobs(f"{where}: model {row['model']}", row["knobs"])
    measured = row["measured_time_s"]
    if isinstance(measured, bool) or not isinstance(measured, (int, float)) or measured <= 0:
        raise UserError(f"{where}: field 'measured_time_s' must be a positive number of seconds, got {str(measured)[:40]}")
    plan = row["prediction"].get("plan") if isinstance(row["prediction"], dict) else None
    if not isinstance(plan, dict):
        raise UserError(f"{where}: field 'prediction.plan' must be a mapping")
    for field in dataclasses.fields(Plan):
        value = plan.get(field.name)
        if field.name not in plan and field.default is not dataclasses.MISSING:
            continue
        if (not isinstance(value, _PLAN_TYPES[field.type]) or (isinstance(value, bool) and field.type != "bool")
                or (isinstance(value, int) and not isinstance(value, bool) and not 0 <= value <= MAX_PLAN_INT)):
            raise UserError(f"{where}: field 'prediction.plan.{field.name}' must be {field.type} "
                            f"(integers in 0..{MAX_PLAN_INT}), got {str(value)[:40]}")
    if not all(isinstance(d, int) and not isinstance(d, bool) and 1 <= d <= MAX_PLAN_INT
               for d in plan.get("spatial_split") or ()):
        raise UserError(f"{where}: field 'prediction.plan.spatial_split' must list integers in 1..{MAX_PLAN_INT}")
    if not all(isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str) for pair in plan.get("extra") or ()):
        raise UserError(f"{where}: field 'prediction.plan.extra' must list [name, value] pairs")
    if not all(isinstance(name, str) for name in plan.get("recompute_modules") or ()):
        raise UserError(f"{where}: field 'prediction.plan.recompute_modules' must list module names")


#: the largest integer a dataset's plan may hold (devices, batch, micro-batches, ...: profiler.cliutil.MAX_BATCH)
MAX_PLAN_INT = 1 << 24


def plan_of(row: dict) -> Plan:
    """The Plan a dataset row was predicted for (check_row has checked its fields' types)."""
    names = {f.name for f in dataclasses.fields(Plan)}
    fields = {k: v for k, v in row["prediction"]["plan"].items() if k in names}
    fields["spatial_split"] = tuple(fields.get("spatial_split") or ())
    fields["extra"] = tuple(tuple(pair) for pair in fields.get("extra") or ())
    fields["recompute_modules"] = tuple(fields.get("recompute_modules") or ())
    return Plan(**fields)


def repredicted(paths: list[str], cost_model) -> Iterator[tuple[str, str, dict, object]]:
    """(label, scenario, pooled row, Prediction) of every pooled run predicted again with `cost_model`, in
    (scenario, label) order, infeasible predictions left out; each model is loaded once."""
    from predictor.api import load_model, predict
    from predictor.stacks import with_conv_search

    graphs = {}
    for (label, scenario), row in sorted(pooled_runs(paths).items(), key=lambda kv: kv[0][::-1]):
        key = (row["model"], json.dumps(row["knobs"], sort_keys=True))
        if key not in graphs:
            try:
                graphs[key] = load_model(row["model"], allow_code=False, **row["knobs"])
            except UserError as err:
                raise UserError(f"{row['dataset_row']}: {err}") from None
        with_conv_search(cost_model, row.get("cudnn_benchmark") is True)  # the run's (PyTorch's default: off)
        prediction = predict(graphs[key], plan_of(row), cost_model, interval=False)
        if prediction.feasible:
            yield label, scenario, row, prediction
