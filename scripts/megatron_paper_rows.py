"""Transformer corpus rows of Megatron's own papers (issue 41 item 1), printed as YAML records for
predictor/data/groundtruth/transformer_runs.yaml. Nothing is fitted here: each row is a published figure and the
layout its authors' scripts or execution files state.

    python scripts/megatron_paper_rows.py            # the records, appended to the corpus by hand once
    python scripts/megatron_paper_rows.py --check    # the derived figures against the corpus file

Korthikanti et al. 2022, Table 5 (seconds per iteration, layouts of its Table 3 and §6; MFU checked against
Megatron-LM's README), and Narayanan et al. 2021, Table 1 (teraFLOP/s per GPU turned into seconds by the paper's
Eq. (3); layouts from examples/sc21/run_table_1.sh). Sources, commits and formulas: SOURCES.md ("T6", "T7") and
docs/decisions/2026-12-06-megatron-paper-rows.md.
"""
from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

import yaml

SEQ, VOCAB = 2048, 51200
CORPUS = Path(__file__).resolve().parents[1] / "predictor" / "data" / "groundtruth" / "transformer_runs.yaml"
SELENE = {"name": "NVIDIA Selene (DGX SuperPOD)", "gpu": "A100-SXM4-80GB", "gpu_memory_gb": 80, "gpus_per_node": 8,
          "intra_node_link": "NVLink3 + NVSwitch",
          "inter_node_network": "8x InfiniBand HDR 200 Gb/s per node (compute fabric)"}
CALCULON = {"repo": "calculon-ai/calculon", "commit": "caa4b11f8fe1fee3ba57adaacb7590d7deabd053"}
SC21 = {"repo": "NVIDIA/Megatron-LM", "commit": "6985e58938d40ad91ac07b0fddcfad8132e1447e"}
README_IMAGE_COMMIT = "50a4b5fa0280a160cc1b03a1c15faddbc1b1da9a"
MFU_README_COMMIT = "2e90a342f5006a3e4f8cacf44002dbae0e10aa17"

#: Korthikanti et al. Table 3 / Table 5 via Calculon: name, layers, hidden, heads, t, p, interleave, batch, micro,
#: (full s, seq+sel s), README MFU of the seq+sel run
KORTHIKANTI = (
    ("22b", "megatron-22B", 48, 6144, 64, 8, 1, 1, 4, 4, (1.42, 1.10), 0.415),
    ("175b", "gpt3-175B", 96, 12288, 96, 8, 8, 3, 64, 1, (18.13, 13.75), 0.514),
    ("530b", "turing-530B", 105, 20480, 128, 8, 35, 3, 280, 1, (49.05, 37.83), 0.560),
    ("1t", "megatron-1T", 128, 25600, 160, 8, 64, 1, 512, 1, (94.42, 71.49), 0.563),
)
#: Korthikanti et al. §6.3: "if we scale the 530B model to 8-way data parallelism (2240 GPUs) while keeping batch size
#: per model instance constant ... the time per iteration increases slightly from 37.83 seconds to 39.15 seconds"
#: ("we do not use any overlapping of gradient all-reduces with back-propagation"): data degree, seconds
KORTHIKANTI_DATA_PARALLEL = (("530b", 8, 39.15),)
#: Narayanan et al. Table 1 via examples/sc21/run_table_1.sh: name, params (B), layers, hidden, heads, t, p, GPUs,
#: global batch, micro batch, DDP implementation, layers per virtual stage (None: no interleaving), TFLOP/s per GPU,
#: aggregate PFLOP/s (the table's last column, a check)
NARAYANAN = (
    ("1.7b", 1.7, 24, 2304, 24, 1, 1, 32, 512, 16, "torch", None, 137, 4.4),
    ("3.6b", 3.6, 30, 3072, 32, 2, 1, 64, 512, 16, "torch", None, 138, 8.8),
    ("7.5b", 7.5, 36, 4096, 32, 4, 1, 128, 512, 16, "torch", None, 142, 18.2),
    ("18b", 18.4, 40, 6144, 48, 8, 1, 256, 1024, 8, "torch", None, 135, 34.6),
    ("39b", 39.1, 48, 8192, 64, 8, 2, 512, 1536, 4, "local", None, 138, 70.8),
    ("76b", 76.1, 60, 10240, 80, 8, 4, 1024, 1792, 2, "local", 5, 140, 143.8),
    ("145b", 145.6, 80, 12288, 96, 8, 8, 1536, 2304, 2, "local", 5, 148, 227.1),
    ("310b", 310.1, 96, 16384, 128, 8, 16, 1920, 2160, 1, "local", 3, 155, 297.4),
    ("530b", 529.6, 105, 20480, 128, 8, 35, 2520, 2520, 1, "local", 1, 163, 410.2),
    ("1t", 1008.0, 128, 25600, 160, 8, 64, 3072, 3072, 1, "local", None, 163, 502.0),
)


def narayanan_flops(batch: int, layers: int, hidden: int, seq: int = SEQ, vocab: int = VOCAB) -> float:
    """Narayanan et al. 2021, Eq. (3): FLOPs of one iteration with activation recomputation."""
    return 96.0 * batch * seq * layers * hidden ** 2 * (1 + seq / (6 * hidden) + vocab / (16 * layers * hidden))


def model_flops(batch: int, layers: int, hidden: int, seq: int = SEQ, vocab: int = VOCAB) -> float:
    """Korthikanti et al. 2022, §6: model FLOPs of one iteration (no recomputation counted)."""
    return 72.0 * batch * seq * layers * hidden ** 2 * (1 + seq / (6 * hidden) + vocab / (12 * layers * hidden))


def korthikanti_rows() -> list[dict]:
    rows = []
    for name, calc, layers, hidden, heads, t, p, v, batch, micro, times, mfu in KORTHIKANTI:
        for mode, seconds in zip(("full", "seqsel"), times):
            sel = mode == "seqsel"
            parallel = {"data": 1, "tensor": t, "pipeline": p, "micro_batch": micro, "virtual_stages": v,
                        "sequence_parallel": sel, "pipeline_boundary": "partitioned", "ddp_impl": "local",
                        "pipeline_schedule": "interleaved 1F1B" if v > 1 else "1F1B"}
            rows.append({
                "id": f"korthikanti2022-{name}-{'full' if not sel else 'seq-sel'}",
                "model": "gpt", "model_details": {"layers": layers, "hidden": hidden, "heads": heads, "seq_len": SEQ,
                                                  "vocab": VOCAB, "calculon_model": f"models/{calc}.json"},
                "framework": "Megatron-LM (NVIDIA), 2022 (sequence parallelism and selective recomputation)",
                "parallelism": parallel, "precision": "fp16 (mixed precision, paper §6; Calculon's execution files: float16)",
                "optimizer": "Adam (Megatron default)", "activation_checkpointing": True,
                "recompute_granularity": "selective" if sel else "full",
                "system": dict(SELENE, nodes=max(1, t * p // 8), gpus_used_per_node=8),
                "num_gpus": t * p, "global_batch": batch,
                "measured": {"iteration_time_s": seconds},
                "derived": {"seconds_per_iteration": seconds},
                "source": dict(CALCULON, path=f"calculon/llm/validation.py (seqsel_tab5 kProfile); "
                               f"validation/seqsel/tab5/{calc}_{mode}.json (layout)",
                               url=f"https://github.com/calculon-ai/calculon/blob/{CALCULON['commit']}/calculon/llm/"
                                   "validation.py", paper="Korthikanti et al. 2022, arXiv 2205.05198, Tables 3 and 5",
                               table="Table 5 (end-to-end iteration time)", marker="[verified-table]"),
                "notes": ("Layout from Calculon's execution file (the paper's Table 3). Pipeline boundary partitioned: "
                          "Megatron-LM's scatter/gather optimisation, on by default 2021-2023 (with sequence "
                          "parallelism the boundary is already 1/t)."
                          + (f" Megatron-LM README (@{MFU_README_COMMIT[:8]}) gives this run's model FLOPs "
                             f"utilisation as {mfu * 100:.1f}%." if sel else "")),
            })
    by_name = {r[0]: r for r in KORTHIKANTI}
    for name, d, seconds in KORTHIKANTI_DATA_PARALLEL:
        _, calc, layers, hidden, heads, t, p, v, batch, micro, _, _ = by_name[name]
        row = next(r for r in rows if r["id"] == f"korthikanti2022-{name}-seq-sel")
        gpus = t * p * d
        rows.append(dict(copy.deepcopy(row), id=f"korthikanti2022-{name}-seq-sel-{gpus}gpu",
                         parallelism=dict(row["parallelism"], data=d),
                         system=dict(SELENE, nodes=gpus // 8, gpus_used_per_node=8), num_gpus=gpus,
                         global_batch=batch * d, measured={"iteration_time_s": seconds},
                         derived={"seconds_per_iteration": seconds},
                         source=dict(row["source"], table="§6.3 (text): 8-way data parallelism, batch per model "
                                     "instance kept", marker="[verified-text]"),
                         notes=f"The Table 5 run with {d}-way data parallelism (global batch {batch} x {d}); gradient "
                               "all-reduces not overlapped with the backward (§6.3), Megatron's local DDP."))
    return rows


def narayanan_rows() -> list[dict]:
    rows = []
    for name, params, layers, hidden, heads, t, p, gpus, batch, micro, ddp, per_virtual, tflops, pflops in NARAYANAN:
        d = gpus // (t * p)
        v = (layers // p) // per_virtual if per_virtual else 1
        flops = narayanan_flops(batch, layers, hidden)
        seconds = flops / (tflops * 1e12 * gpus)
        parallel = {"data": d, "tensor": t, "pipeline": p, "micro_batch": micro, "virtual_stages": v,
                    "sequence_parallel": False, "pipeline_boundary": "partitioned", "ddp_impl": ddp,
                    "pipeline_schedule": "interleaved 1F1B" if v > 1 else "1F1B"}
        rows.append({
            "id": f"narayanan2021-{name}-{gpus}gpu",
            "model": "gpt", "model_details": {"layers": layers, "hidden": hidden, "heads": heads, "seq_len": SEQ,
                                              "vocab": VOCAB, "params_billion": params},
            "framework": "Megatron-LM (NVIDIA), SC21 scripts, NGC pytorch:20.12-py3",
            "parallelism": parallel, "precision": "fp16 (--fp16, loss scale 8192)",
            "optimizer": "Adam (Megatron default)", "activation_checkpointing": True,
            "recompute_granularity": "full",
            "system": dict(SELENE, nodes=gpus // 8, gpus_used_per_node=8),
            "num_gpus": gpus, "global_batch": batch,
            "measured": {"achieved_tflops_per_gpu": tflops, "aggregate_pflops": pflops},
            "derived": {"seconds_per_iteration": round(seconds, 4),
                        "formula": "F / (TFLOP/s per GPU x GPUs), F = 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) "
                                   f"(Narayanan et al. Eq. 3, s=2048, V=51200) = {flops:.4e}"},
            "source": {"repo": "NVIDIA/Megatron-LM", "commit": README_IMAGE_COMMIT,
                       "path": "images/cases_april2021.png (Table 1); examples/sc21/run_table_1.sh "
                               f"@{SC21['commit'][:10]} (layout)",
                       "url": f"https://github.com/NVIDIA/Megatron-LM/blob/{SC21['commit']}/examples/sc21/run_table_1.sh",
                       "paper": "Narayanan et al. 2021, arXiv 2104.04473, Table 1",
                       "table": "Table 1 (weak scaling, achieved teraFLOP/s per GPU)", "marker": "[derived]"},
            "notes": (f"run_table_1.sh MODEL_SIZE={name.upper() if name != '1t' else '1T'}: TP={t} PP={p} MBS={micro} "
                      f"GBS={batch} NLS={layers} HS={hidden} NAH={heads} DDP={ddp}"
                      + (f" --num-layers-per-virtual-pipeline-stage {per_virtual}" if per_virtual else "")
                      + "; --activations-checkpoint-method uniform. Pipeline boundary partitioned: the scatter/gather "
                        "optimisation (default on since Megatron-LM 72e4230b, Feb 2021)."),
        })
    return rows


def check() -> int:
    """The derived figures against their cross-checks and the corpus file."""
    bad = 0
    for name, params, layers, hidden, heads, t, p, gpus, batch, micro, ddp, per_virtual, tflops, pflops in NARAYANAN:
        if abs(tflops * gpus / 1e3 - pflops) / pflops > 0.01:
            print(f"narayanan {name}: {tflops} x {gpus} = {tflops * gpus / 1e3:.1f} PFLOP/s, table {pflops}")
            bad += 1
    for name, _, layers, hidden, heads, t, p, v, batch, micro, times, mfu in KORTHIKANTI:
        got = model_flops(batch, layers, hidden) / (times[1] * t * p * 312e12)
        print(f"korthikanti {name} seq+sel: model FLOPs utilisation {got * 100:.1f}% (README {mfu * 100:.1f}%)")
        bad += abs(got - mfu) / mfu > 0.005 + 0.005 / times[1]  # the README's 0.1% and the time's 0.01 s
    corpus = {r["id"]: r for r in yaml.safe_load(CORPUS.read_text())}
    for row in korthikanti_rows() + narayanan_rows():
        if corpus.get(row["id"]) != row:
            print(f"{row['id']}: differs from {CORPUS.name}")
            bad += 1
    return 1 if bad else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="check the derived figures and the corpus file")
    args = parser.parse_args(argv)
    if args.check:
        return check()
    yaml.safe_dump(korthikanti_rows() + narayanan_rows(), sys.stdout, sort_keys=False, width=120, allow_unicode=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
