"""Megatron's own runs, reported apart (issue 41 item 1): the rows of Korthikanti et al. 2022 (`korthikanti2022`,
Table 5 and §6.3) and Narayanan et al. 2021 (`narayanan2021`, Table 1) in the transformer report, one line each, with
Calculon's prediction beside Korthikanti's Table 5 rows.

Calculon's figures are what its own validation prints (calculon-ai/calculon @caa4b11f, `calculon llm-validation`,
seqsel_tab5: its a100_80g system and the execution files of validation/seqsel/tab5), run unchanged on this machine;
its A100 efficiency tables were set on this paper (Isaev et al., SC'23), so they are not held out as ours are.
"""
from __future__ import annotations

import statistics

from predictor.published.formatting import pct

SOURCES = ("korthikanti2022", "narayanan2021")
CALCULON_COMMIT = "caa4b11f8fe1fee3ba57adaacb7590d7deabd053"
#: Calculon's predicted seconds per iteration for Korthikanti et al.'s Table 5 rows (its llm-validation output)
CALCULON_S = {"korthikanti2022-22b-full": 1.396, "korthikanti2022-22b-seq-sel": 1.137,
              "korthikanti2022-175b-full": 18.029, "korthikanti2022-175b-seq-sel": 13.638,
              "korthikanti2022-530b-full": 49.893, "korthikanti2022-530b-seq-sel": 34.473,
              "korthikanti2022-1t-full": 90.081, "korthikanti2022-1t-seq-sel": 66.041}


def _accuracy(predicted: float, measured: float) -> float:
    return 1 - abs(predicted - measured) / measured


def rows(report: dict) -> list[dict]:
    """The report's rows of Megatron's papers, with Calculon's prediction where it has one."""
    out = []
    for r in report["rows"]:
        if r["source"] not in SOURCES:
            continue
        calc = CALCULON_S.get(r["id"])
        straggler = (r.get("terms") or {}).get("straggler_s", 0.0)
        out.append({"id": r["id"], "source": r["source"], "gpus": r["gpus"], "measured_s": r["measured_s"],
                    "predicted_s": r["predicted_s"], "accuracy": r["accuracy"], "fits": r["fits_in_memory"],
                    "straggler_s": straggler,
                    "accuracy_without_stragglers": _accuracy(r["predicted_s"] - straggler, r["measured_s"]),
                    "calculon_s": calc, "calculon_accuracy": None if calc is None else _accuracy(calc, r["measured_s"])})
    return out


def table5(report: dict) -> dict:
    """Mean and least accuracy over Korthikanti's Table 5 rows (the eight Calculon validates), ours and Calculon's."""
    mine = [r for r in rows(report) if r["id"] in CALCULON_S]
    if not mine:
        return {}
    out = {"rows": len(mine), "does_not_fit": [r["id"] for r in mine if not r["fits"]]}
    for key in ("accuracy", "accuracy_without_stragglers", "calculon_accuracy"):
        values = [r[key] for r in mine]
        out[key] = {"mean": statistics.fmean(values), "min": min(values)}
    return out



def render_text(report: dict) -> list[str]:
    """Lines for `predictor validate --published` (nothing when the report has none of these rows)."""
    found = rows(report)
    if not found:
        return []
    lines = ["\nMegatron's own runs (reported apart; Calculon beside Korthikanti et al.'s Table 5):",
             f"  {'id':<38} {'GPUs':>5} {'measured s':>11} {'predicted s':>12} {'accuracy':>9} {'fits':>5}"
             f" {'Calculon s':>11} {'Calculon':>9}"]
    for r in found:
        calc = "" if r["calculon_s"] is None else f"{r['calculon_s']:>11.2f} {pct(r['calculon_accuracy']):>9}"
        lines.append(f"  {r['id']:<38} {r['gpus']:>5} {r['measured_s']:>11.2f} {r['predicted_s']:>12.2f} "
                     f"{pct(r['accuracy']):>9} {'yes' if r['fits'] else 'NO':>5} {calc}")
    t5 = table5(report)
    if t5:
        lines.append(f"  Table 5 ({t5['rows']} rows): mean {pct(t5['accuracy']['mean'])}, least "
                     f"{pct(t5['accuracy']['min'])}; without the straggler term {pct(t5['accuracy_without_stragglers']['mean'])}"
                     f" / {pct(t5['accuracy_without_stragglers']['min'])}; Calculon {pct(t5['calculon_accuracy']['mean'])}"
                     f" / {pct(t5['calculon_accuracy']['min'])}; not fitting: {', '.join(t5['does_not_fit']) or 'none'}")
    return lines


def render_markdown(report: dict) -> list[str]:
    """The table docs/validation.md shows (rewritten by predictor.published.transformer_markdown)."""
    found = rows(report)
    if not found:
        return []
    lines = ["| run | GPUs | measured s | predicted s | accuracy | without stragglers | fits | Calculon s | Calculon |",
             "|---|---:|---:|---:|---:|---:|---|---:|---:|"]
    for r in found:
        calc = ("", "") if r["calculon_s"] is None else (f"{r['calculon_s']:.2f}", pct(r["calculon_accuracy"]))
        lines.append(f"| {r['id']} | {r['gpus']} | {r['measured_s']:.2f} | {r['predicted_s']:.2f} | "
                     f"{pct(r['accuracy'])} | {pct(r['accuracy_without_stragglers'])} | {'yes' if r['fits'] else 'no'}"
                     f" | {calc[0]} | {calc[1]} |")
    t5 = table5(report)
    if t5:
        lines += ["", f"Korthikanti et al.'s Table 5 ({t5['rows']} rows): mean {pct(t5['accuracy']['mean'])}, least "
                  f"{pct(t5['accuracy']['min'])} (target: mean >= 97%, each >= 93%); without the at-scale straggler term "
                  f"{pct(t5['accuracy_without_stragglers']['mean'])} / {pct(t5['accuracy_without_stragglers']['min'])}; "
                  f"Calculon {pct(t5['calculon_accuracy']['mean'])} / {pct(t5['calculon_accuracy']['min'])}; rows "
                  f"that do not fit: {', '.join(t5['does_not_fit']) or 'none'}."]
    for source in SOURCES:
        acc = [r["accuracy"] for r in found if r["source"] == source]
        bare = [r["accuracy_without_stragglers"] for r in found if r["source"] == source]
        if acc:
            lines.append(f"{source}: {len(acc)} rows, mean {pct(statistics.fmean(acc))}, least {pct(min(acc))} "
                         f"(without the straggler term {pct(statistics.fmean(bare))}, least {pct(min(bare))}).")
    return lines
