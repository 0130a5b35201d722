"""Glue between predictor records and calibrate's residual correction (calibrate/correction.py).

The same record feeds training and use, so the features match: `predictor validate` writes each run as
`prediction_record(...)` plus `measured_time_s`, `model`, `scenario`; `predictor run` applies the
profile's correction to `prediction_record(...)` of each prediction and shows both figures.
"""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Optional, Sequence

from calibrate.correction import CorrectedTime, Correction, load_correction
from calibrate.correction_features import record_from_prediction
from predictor.cmd_validate import profile_threads
from predictor.graph import ModelGraph, dtype_bytes
from predictor.plan import Prediction
from profiler.profile import Profile


def model_summary(graph: ModelGraph) -> dict[str, float]:
    """Model-shape features as `predictor validate` records them: layer count, FLOPs per sample (fwd +
    bwd), parameter bytes in fp32 (master weights, whatever the compute dtype), per-sample input shape."""
    return {"layers": len(graph.layers), "flops_per_sample": graph.flops_per_sample,
            "param_bytes": graph.params * dtype_bytes("fp32"), "input_shape": list(graph.input_shape)}


def prediction_record(prediction: Prediction, graph: ModelGraph, **context: Any) -> dict[str, Any]:
    """The correction's feature record of one prediction, with the fields `predictor validate` writes for
    a run (model, model_summary). context: threads, cpu_count, scenario, ... (calibrate/correction_features.py)."""
    context.setdefault("model", graph.name)
    context.setdefault("model_summary", model_summary(graph))
    return record_from_prediction(prediction.to_dict(), **context)


def corrected_times(predictions: Sequence[Prediction], graph: ModelGraph, profile: Profile,
                    profile_path: Optional[Path | str] = None, **context: Any) -> Optional[list[Optional[CorrectedTime]]]:
    """The corrected figure of each prediction (None for an infeasible one), or None when the profile has
    no correction. Raises UserError when the profile's correction is refused (see load_correction)."""
    correction: Optional[Correction] = load_correction(profile, profile_path)
    if correction is None:
        return None
    # as `predictor validate` records its runs: ranks share this machine's cores with the calibration threads
    context.setdefault("threads", profile_threads(profile) or 1)
    context.setdefault("cpu_count", os.cpu_count())
    return [correction.apply(prediction_record(p, graph, **context))
            if p.feasible and math.isfinite(p.iteration_s) and p.iteration_s > 0 else None
            for p in predictions]


def correction_rows(predictions: Sequence[Prediction], results: Sequence[Optional[CorrectedTime]]) -> list[dict[str, Any]]:
    """Plain rows (for JSON and the table): strategy, split, analytical and corrected seconds, whether the
    correction applied, whether the prediction lies inside the training domain, and why not."""
    return [{"strategy": p.plan.strategy, "split": p.plan.describe(), "analytical_s": r.analytical_s,
             "corrected_s": r.corrected_s, "applied": r.applied, "in_domain": r.in_domain, "notes": list(r.reasons)}
            for p, r in zip(predictions, results) if r is not None]


def correction_table(rows: Sequence[dict[str, Any]], title: str = "residual correction (trained on measured runs)"):
    """Analytical and corrected iteration time side by side, out-of-domain predictions flagged."""
    from rich.table import Table

    from predictor.report import _t

    table = Table(title=title)
    for col, just in (("strategy", "left"), ("split", "left"), ("analytical", "right"), ("corrected", "right"),
                      ("domain", "center"), ("notes", "left")):
        table.add_column(col, justify=just)
    for row in rows:
        corrected = _t(row["corrected_s"]) if row["applied"] else f"{_t(row['corrected_s'])} (not applied)"
        notes = "; ".join(row["notes"][:1]) + (f"; +{len(row['notes']) - 1} more" if len(row["notes"]) > 1 else "")
        table.add_row(row["strategy"], row["split"], _t(row["analytical_s"]), corrected,
                      "in" if row["in_domain"] else "OUT", notes)
    return table
