"""One transformer layer against its published timings (docs/validation.md, "One layer against its published timings").

The predictor's training time of one encoder layer (forward + backward: the zoo model with two layers minus the
same model with one, so embeddings, head and loss cancel) on the record's reference profile, as the kernel model
costs it (software stack "other": factor 1) and with the PyTorch stack's mixed-precision factor, beside each
measured implementation of the same layer on the same GPU (predictor/data/groundtruth/layer_timings.yaml). Nothing
is fitted to these records.

    python -m predictor.published.layer_timings [--json] [FILE]
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from predictor.api import load_cost_model, load_model
from predictor.layercost import LayerCoster, Split
from predictor.plan import DTYPES
from predictor.stacks import stack_scaled
from profiler.errors import UserError
from profiler.inputs import read_yaml

FILE = Path(__file__).resolve().parent.parent / "data" / "groundtruth" / "layer_timings.yaml"
#: the software stacks each layer is predicted with: the kernel model alone, and PyTorch's (its mixed factor)
STACKS = ("other", "pytorch")


@dataclass(frozen=True)
class LayerRecord:
    """One published layer: the zoo model and knobs, samples, dtype, reference profile, and the measured seconds
    of one layer's forward + backward per implementation."""

    id: str
    model: str
    knobs: dict
    batch: int
    dtype: str
    profile: str
    measured_s: dict[str, float]
    source: str


def _field(entry: dict, name: str, kind, where: str):
    value = entry.get(name)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise UserError(f"{where}: field {name}: expected {getattr(kind, '__name__', kind)}, got {value!r}")
    return value


def load_records(path: Path = FILE) -> list[LayerRecord]:
    """The records of a layer-timings file; a malformed one is a one-line error naming the file and field."""
    data = read_yaml(path, "layer timings")
    if not isinstance(data, list):
        raise UserError(f"{path}: expected a list of layer records")
    out = []
    for i, entry in enumerate(data):
        where = f"{path}: record {i + 1}"
        if not isinstance(entry, dict):
            raise UserError(f"{where}: expected a mapping")
        measured = _field(entry, "measured_s", dict, where)
        if not measured or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0
                                   for v in measured.values()):
            raise UserError(f"{where}: field measured_s: expected positive seconds per implementation")
        dtype = _field(entry, "dtype", str, where)
        if dtype not in DTYPES:
            raise UserError(f"{where}: field dtype: {dtype!r} is not one of {', '.join(DTYPES)}")
        batch = _field(entry, "batch", int, where)
        if batch < 1:
            raise UserError(f"{where}: field batch: must be at least 1")
        source = entry.get("source") or {}
        out.append(LayerRecord(id=_field(entry, "id", str, where), model=_field(entry, "model", str, where),
                               knobs=_field(entry, "knobs", dict, where), batch=batch, dtype=dtype,
                               profile=_field(entry, "profile", str, where),
                               measured_s={str(k): float(v) for k, v in measured.items()},
                               source=f"{source.get('repo', '')} {source.get('path', '')}".strip()))
    return out


def layer_seconds(record: LayerRecord, stack: str, cost_model=None) -> tuple[float, float]:
    """(forward_s, backward_s) the predictor gives one layer of `record` on `stack` (module docstring)."""
    cm = stack_scaled(cost_model if cost_model is not None else load_cost_model(record.profile)[0], stack)

    def step(layers: int) -> tuple[float, float]:
        graph = load_model(record.model, **dict(record.knobs, layers=layers))
        coster = LayerCoster(graph, cm, record.dtype)
        times = [coster.times(i, Split(record.batch)) for i in range(len(graph.layers))]
        return sum(f for f, _ in times), sum(b for _, b in times)

    (f1, b1), (f2, b2) = step(1), step(2)
    return f2 - f1, b2 - b1


def report(records: list[LayerRecord]) -> list[dict]:
    """Per record: the predicted seconds per stack and, per measured implementation, measured / predicted."""
    out = []
    for record in records:
        cm = load_cost_model(record.profile)[0]
        predicted = {stack: sum(layer_seconds(record, stack, cm)) for stack in STACKS}
        out.append({"id": record.id, "predicted_s": predicted, "measured_s": record.measured_s,
                    "measured_over_predicted": {impl: {stack: t / p for stack, p in predicted.items()}
                                                for impl, t in record.measured_s.items()},
                    "source": record.source})
    return out


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m predictor.published.layer_timings",
                                     description="one transformer layer's predicted training time beside its "
                                                 "published timings")
    parser.add_argument("file", nargs="?", type=Path, default=FILE,
                        help="layer-timings YAML (default: the shipped one)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    try:
        rows = report(load_records(args.file))
    except UserError as err:
        print(f"layer_timings: error: {err}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for row in rows:
        pred = row["predicted_s"]
        print(f"{row['id']}: predicted {pred['other'] * 1e3:.2f} ms (kernel model), "
              f"{pred['pytorch'] * 1e3:.2f} ms (PyTorch stack)")
        for impl, t in row["measured_s"].items():
            ratio = row["measured_over_predicted"][impl]
            print(f"  {impl:16s} measured {t * 1e3:6.2f} ms  measured / predicted {ratio['other']:.2f} "
                  f"(kernel model), {ratio['pytorch']:.2f} (PyTorch stack)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
