"""The published reports' series of rows that differ only in batch size (predictor.batch_series: per-sample and
per-step cost, measured and predicted). docs/validation.md ("Per sample and per step")."""
from __future__ import annotations

from typing import Optional, Sequence

from predictor import batch_series as core
from predictor.published.validate import RowResult

#: plan fields that follow from the batch (the number of micro-batches stays in the key: a series varies the samples
#: each micro-batch holds, never how a step is split)
BATCH_PLAN_FIELDS = ("batch",)


def samples_per_gpu(r: RowResult) -> Optional[float]:
    """Samples per GPU per optimizer step: the row's stated per-GPU batch, else its global batch over its GPUs."""
    if r.run.batch_per_gpu:
        return float(r.run.batch_per_gpu)
    batch = r.run.extra.get("global_batch")
    return batch / r.run.num_gpus if isinstance(batch, (int, float)) and batch > 0 else None


def series_key(r: RowResult) -> tuple:
    """Everything of a row but its batch (the rows of one series share it)."""
    s = r.setup
    plan = tuple((k, v) for k, v in s.plan if k not in BATCH_PLAN_FIELDS)
    system = tuple(sorted((k, str(v)) for k, v in r.run.system.items()))  # one machine (a submission's name)
    return (r.run.source, s.model, s.knobs, s.dtype, s.optimizer, s.framework, s.stack, r.run.framework, r.run.data,
            system, s.profile, r.run.num_gpus, s.devices_per_node, plan, s.synthetic_data, s.seq_mix,
            s.memory_format, s.cuda_graphs)


def _labels(r: RowResult) -> dict:
    s = r.setup
    system = s.system
    framework = r.run.framework.split(" (")[0][:40]
    synthetic = "synthetic" in r.run.data.lower()  # as the row states it (a transformer row's Setup assumes it)
    return {"group": f"{system} {s.dtype}",
            "name": f"{r.run.source} {s.model} {s.dtype} {system} x{r.run.num_gpus} {framework}"
                    + (" synthetic" if synthetic else ""),
            "source": r.run.source, "model": s.model, "dtype": s.dtype, "system": system, "gpus": r.run.num_gpus,
            "framework": r.run.framework, "synthetic_data": synthetic}


def batch_series(results: Sequence[RowResult]) -> list[dict]:
    """predictor.batch_series.fit over the report's rows (those whose samples per GPU are known)."""
    return core.fit(core.Point(series_key(r), _labels(r), n, r.measured_s, r.predicted_s, r.run.id)
                    for r in results if (n := samples_per_gpu(r)) is not None)


def render_text(report: dict) -> list[str]:
    """The report's lines on its batch series (none when it has none)."""
    return core.render(report.get("batch_series") or [])
