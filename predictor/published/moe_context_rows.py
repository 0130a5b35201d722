"""The mixture-of-experts and context-parallel runs, reported apart (issue 41 item 4): Megatron-Core's Mixtral 8x7B
(`mcoremoe`), NeMo's long-sequence and LLaMA-3 context-parallel rows (`nemocp`) and any other row whose plan has
expert or context parallelism (Megatron-Bridge's Qwen3 MoE, `mbridge`) of the transformer report, one line each with
their layout and the exposed all-to-all and ring. Sources and assumptions: docs/method.md §14b,
docs/decisions/2026-12-06-moe-and-context-rows.md."""
from __future__ import annotations

import statistics

from predictor.published.formatting import pct

SOURCES = ("mcoremoe", "nemocp")


def rows(report: dict) -> list[dict]:
    """The report's rows of these sources or with expert or context parallelism: layout (EP, CP), measured and
    predicted seconds, accuracy, fits, and the expert all-to-all and context ring the prediction exposes."""
    out = []
    for r in report["rows"]:
        plan, terms = r.get("plan") or {}, r.get("terms") or {}
        if r["source"] not in SOURCES and plan.get("p_expert", 1) == 1 and plan.get("p_context", 1) == 1:
            continue
        out.append({"id": r["id"], "source": r["source"], "gpus": r["gpus"], "expert": plan.get("p_expert", 1),
                    "context": plan.get("p_context", 1), "measured_s": r["measured_s"],
                    "predicted_s": r["predicted_s"], "accuracy": r["accuracy"], "fits": r["fits_in_memory"],
                    "expert_alltoall_s": terms.get("expert_alltoall_s", 0.0),
                    "context_ring_s": terms.get("context_ring_s", 0.0)})
    return out



def render_text(report: dict) -> list[str]:
    """Lines for `predictor validate --published` (nothing when the report has none of these rows)."""
    found = rows(report)
    if not found:
        return []
    lines = ["\nmixture-of-experts and context-parallel runs (reported apart):",
             f"  {'id':<42} {'GPUs':>5} {'EP':>3} {'CP':>3} {'measured s':>11} {'predicted s':>12} {'accuracy':>9}"
             f" {'fits':>5} {'a2a s':>7} {'ring s':>7}"]
    for r in found:
        lines.append(f"  {r['id']:<42} {r['gpus']:>5} {r['expert']:>3} {r['context']:>3} {r['measured_s']:>11.3f} "
                     f"{r['predicted_s']:>12.3f} {pct(r['accuracy']):>9} {'yes' if r['fits'] else 'NO':>5} "
                     f"{r['expert_alltoall_s']:>7.3f} {r['context_ring_s']:>7.3f}")
    for source in dict.fromkeys(r["source"] for r in found):
        acc = [r["accuracy"] for r in found if r["source"] == source]
        if acc:
            lines.append(f"  {source}: {len(acc)} rows, mean {pct(statistics.fmean(acc))}, least {pct(min(acc))}")
    return lines
