"""Published transformer runs: read `transformer_runs.yaml` and vTrain's `vtrain_ground_truth_multi.csv`, and map
each row to a model, a plan, a dtype and a profile (docs/validation.md, "Published transformer runs").

Rows -> PublishedRun (`load_transformer_corpus`, `load_vtrain_csv`): seconds per optimizer step, with the model
shape, parallel degrees, batches and checkpointing in `extra`; a malformed row is a one-line UserError naming the
file, the row and the field. PublishedRun -> Setup (`interpret_transformer`): the zoo `gpt` or `bert` with each
framework's attention and residual code (`megatron_attention`, MEGATRON_RESIDUAL), the layout each framework runs
(Megatron's data+tensor+pipeline with what a row states of it, llm-foundry's FSDP as ZeRO data parallelism, BERT's
data parallelism, DLE's phase-2 rows on LDDL's sequence bins: `lddl_phase2_mix`), the dtype and system rules of
predictor/data/published_mapping.yaml. Nothing here sets a coefficient: the profile of the system does. Every
choice and its source: docs/validation.md; docs/decisions/2026-12-06-megatron-paper-rows.md.
"""
from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from typing import Any, Optional, Union

from predictor.published.corpus import (CORPUS_DIR, PublishedRun, _fail, _positive_float, _positive_int, _text,
                                        iteration_seconds, load_records, record_head, unique_ids)
from predictor.graph import DISPATCHERS
from predictor.plan import PIPELINE_BOUNDARIES, RECOMPUTE_GRANULARITIES, RECOMPUTE_MODULES
from predictor.published.rowmap import Setup, Skipped, _first, _system_rule
from profiler.errors import UserError

TRANSFORMER_FILE = CORPUS_DIR / "transformer_runs.yaml"
VTRAIN_FILE = CORPUS_DIR / "vtrain_ground_truth_multi.csv"
#: vTrain's 1440 single-node runs (data/ground_truth_single.csv: vTrain's columns without the parameter count), reported
#: apart from the transformer report as source VTRAIN_SINGLE_SOURCE (`predictor validate --published vtrain-single`)
VTRAIN_SINGLE_FILE = CORPUS_DIR / "vtrain_ground_truth_single.csv"
VTRAIN_SINGLE_SOURCE = "vtrain-single"
#: vocabulary sizes the sources do not restate per row
VOCAB = {"mpt": 50368, "megatron": 51200, "bert": 30522}
VTRAIN_COLUMNS = ("Parameters (billion)", "# GPUs", "global batch", "micro batch", "hidden size", "attention heads",
                  "# layers", "sequence length", "tensor parallelism", "data parallelism", "pipeline parallelism",
                  "iteration time (ms)")
VTRAIN_SYSTEM = {"name": "vTrain A100 cluster", "gpu": "A100-SXM (memory not stated)", "gpus_per_node": 8,
                 "inter_node_network": "800 Gb/s per node (vTrain config: inter_node_bandwidth 800)"}
MAX_CSV_BYTES = 1 << 20
#: the zoo residual of Megatron rows: Megatron's fused bias + dropout + residual add (predictor.zoo.transformer).
#: Megatron-DeepSpeed's megatron/model/transformer.py (ParallelTransformerLayer.forward) runs
#: bias_dropout_add_fused_train after the attention's output projection and after the MLP whenever
#: args.bias_dropout_fusion holds, which megatron/arguments.py sets unless `--no-bias-dropout-fusion` is given;
#: vTrain's src/model/gpt_modeling.py (ShardedGptTransformerLayer.forward, the model its simulator profiles in
#: place of Megatron-DeepSpeed) calls it unconditionally. DLPerf's Megatron-LM script
#: (Megatron-LM/scripts/mutil_perf_pretrain_gpt_dp_mp_pp.sh) passes no `--no-bias-dropout-fusion` to a Megatron-LM
#: with the 2.x argument set (--tensor-model-parallel-size, --micro-batch-size, --global-batch-size) that
#: Megatron-DeepSpeed forked, fusion flag and default included. No dtype or shape condition: it runs in every row.
MEGATRON_RESIDUAL = "bias-dropout-add"
#: layout settings a Megatron row may state (parallelism.<key>) and the values each may take: the pipeline boundary
#: (plan.PIPELINE_BOUNDARIES: "partitioned" = Megatron-LM's scatter/gather optimisation, on by default from
#: February 2021 (72e4230b) until its removal in 2023), and Megatron-LM's --DDP-impl (`torch`: PyTorch DDP, its
#: gradient all-reduce overlapped with the backward, regime `ddp`; `local`: Megatron's own, all-reduced after the
#: backward, `no-overlap`)
LAYOUT_CHOICES = {"pipeline_boundary": PIPELINE_BOUNDARIES, "ddp_impl": ("torch", "local"),
                  "fsdp_sharding": ("FULL_SHARD", "SHARD_GRAD_OP", "HYBRID_SHARD", "NO_SHARD")}
#: a sharded data-parallel row's ZeRO stage by its FSDP sharding strategy (HYBRID_SHARD: FULL_SHARD inside a node and
#: replicated across nodes, Plan.shard_group)
FSDP_STAGES = {"FULL_SHARD": 3, "HYBRID_SHARD": 3, "SHARD_GRAD_OP": 2, "NO_SHARD": 0}
#: decoder-only models the zoo GPT stands for (model_details give their blocks: mlp, norm, kv_heads, ffn), and the
#: words of a framework that shards data parallelism (FSDP, ZeRO) when a row names no sharding of its own
GPT_LIKE_MODELS = ("gpt", "llama", "mistral", "opt", "bloom", "qwen")
SHARDED_FRAMEWORKS = ("fsdp", "deepspeed", "zero", "torchtitan")
DDP_REGIMES = {"torch": "ddp", "local": "no-overlap"}
#: model settings a Megatron-Core / NeMo row may state (model_details.<key>) and the values each may take: the zoo
#: GPT's attention (zoo_attention: `attention` is the sources' own words in other rows), MLP and norm (predictor.zoo.transformer) and whether the head is tied to the embedding; with
#: kv_heads, ffn, experts, top_k, capacity_factor (0 = dropless) and dropout as numbers (docs/method.md §3c)
MODEL_CHOICES = {"zoo_attention": ("sdpa", "math", "fused-softmax"), "mlp": ("gelu", "swiglu"),
                 "norm": ("layernorm", "rmsnorm"), "tie": (True, False), "dispatcher": DISPATCHERS}
#: model_details keys passed to the zoo GPT as they are
MODEL_KNOBS = ("kv_heads", "head_dim", "ffn", "mlp", "norm", "tie", "dropout", "experts", "top_k", "capacity_factor",
               "dispatcher")
#: other names a record may give these (Hugging Face config.json's and Megatron's arguments) -> the corpus's own
DETAIL_ALIASES = {"num_hidden_layers": "layers", "num_layers": "layers", "n_layers": "layers", "n_layer": "layers",
                  "hidden_size": "hidden", "d_model": "hidden", "n_embd": "hidden",
                  "num_attention_heads": "heads", "n_heads": "heads", "n_head": "heads",
                  "num_key_value_heads": "kv_heads", "num_query_groups": "kv_heads", "n_kv_heads": "kv_heads",
                  "kv_channels": "head_dim",
                  "intermediate_size": "ffn", "ffn_hidden_size": "ffn", "ffn_hidden": "ffn",
                  "seq_length": "seq_len", "max_seq_len": "seq_len",
                  "sequence_length": "seq_len", "vocab_size": "vocab", "padded_vocab_size": "vocab",
                  "num_experts": "experts", "num_local_experts": "experts", "num_experts_per_tok": "top_k",
                  "moe_router_topk": "top_k", "tie_word_embeddings": "tie"}


def _canonical_details(details: dict, path: str, index: int, rid: str) -> dict:
    """model_details with every alias (DETAIL_ALIASES) under the corpus's own key; an alias and the key (or two
    aliases) giving different values is an error naming both."""
    out = dict(details)
    for alias, key in DETAIL_ALIASES.items():
        if alias not in details:
            continue
        if key in out and out[key] != details[alias]:
            raise _fail(path, index, rid, f"model_details.{alias}", f"says {details[alias]!r} where "
                        f"model_details.{key} (or another name of it) says {out[key]!r}")
        out[key] = details[alias]
    return out


#: the longest key sequence Megatron's fused scale-mask-softmax kernel takes (FusedScaleMaskSoftmax.forward)
FUSED_SOFTMAX_MAX_SEQ = 2048
#: DLE PyTorch BERT's phase 2 (seq 512) reads LDDL's binned data: README @729963dd, changelog January 2022 "Binned
#: pretraining for phase2 with LDDL using a bin size of 64" (the rows' 21.11 tables come from that code);
#: run_pretraining.py "if args.phase2: #we use 8 bins with phase2". LDDL (NVIDIA/LDDL README, "sequence binning";
#: lddl/torch/bert.py _to_encoded_inputs) draws each iteration's bin by the dataset's sequence distribution,
#: feeds every rank samples of that bin only, and pads a mini-batch to its longest sequence (rounded up to 8), so
#: a micro-step runs at about its bin's upper length, not 512. Phase 1 (seq 128) is not binned: its batches of
#: 126-256 sequences pad to 128.
LDDL_PHASE2_SEQ = 512
LDDL_BIN = 64
#: sequences per 64-token length bin (1-64, 65-128, ..., 449-512) of the Wikipedia seq-512 BERT pretraining set
#: (Google's create_pretraining_data algorithm, max 512, short_seq_prob 0.1, which LDDL's preprocessor
#: lddl/dask/bert/pretrain.py create_pairs_from_document reimplements): the sums of `wikipedia_histogram`
#: (graphcore/tutorials blogs_code/packedBERT/histograms.py @e9dbe482, Krell et al. 2021 "Efficient sequence
#: packing without cross-contamination": 16,279,552 sequences, padding over 50% of tokens at 512). LDDL's own
#: Wikipedia dump's histogram is not published; this one is the same preprocessing of the same corpus.
WIKIPEDIA_SEQ512_BIN_COUNTS = (2863079, 3150804, 1855542, 1349565, 1050206, 859509, 722518, 4428329)


def lddl_phase2_mix() -> tuple[tuple[int, float], ...]:
    """(padded length, share of micro-steps) of DLE BERT's phase 2 on LDDL's bins: each bin at its upper length
    (the longest of a micro-batch of 4-32 sequences drawn from a 64-token bin of this histogram is within 2.5%
    of it on average), weighted by the bin's share of the sequences."""
    total = sum(WIKIPEDIA_SEQ512_BIN_COUNTS)
    return tuple((LDDL_BIN * (k + 1), n / total) for k, n in enumerate(WIKIPEDIA_SEQ512_BIN_COUNTS))


def _measured(rec: dict, path: str, index: int, rid: str, gpus: int, global_batch: int,
              seq: Optional[int]) -> tuple[Optional[float], str]:
    derived = rec.get("derived") or {}
    measured = rec.get("measured") or {}
    if not isinstance(derived, dict) or not isinstance(measured, dict):
        raise _fail(path, index, rid, "derived" if not isinstance(derived, dict) else "measured", "must be a mapping")
    for key in ("seconds_per_iteration", "seconds_per_optimizer_step"):
        if derived.get(key) is not None:
            return _positive_float(derived[key], path, index, rid, f"derived.{key}"), ""
    if not measured:
        return None, "no per-iteration time in the record"
    return iteration_seconds(measured, gpus, {"samples": global_batch, "tokens": global_batch * seq if seq else None},
                             {"samples": "", "tokens": "a token rate without model_details.seq_len"},
                             path, index, rid)


def parse_transformer_record(rec: Any, index: int, path: str) -> PublishedRun:
    """One transformer_runs.yaml record -> PublishedRun (UserError naming the record and field when malformed)."""
    rid, system, gpus = record_head(rec, index, path)
    global_batch = _positive_int(rec.get("global_batch"), path, index, rid, "global_batch")
    details = rec.get("model_details") or {}
    parallel = rec.get("parallelism") or {}
    for name, value in (("model_details", details), ("parallelism", parallel)):
        if not isinstance(value, dict):
            raise _fail(path, index, rid, name, "must be a mapping")
    details = _canonical_details(details, path, index, rid)
    for key in ("layers", "hidden", "heads", "seq_len", "kv_heads", "head_dim", "ffn", "experts", "top_k"):
        _positive_int(details.get(key), path, index, rid, f"model_details.{key}", allow_none=True)
    for key, known in MODEL_CHOICES.items():
        if key in details and details[key] not in known:
            raise _fail(path, index, rid, f"model_details.{key}", f"must be one of {', '.join(map(str, known))}, "
                        f"got {details[key]!r}")
    for key, top in (("capacity_factor", 1e6), ("dropout", 1.0)):
        value = details.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not 0 <= value < top):
            raise _fail(path, index, rid, f"model_details.{key}", f"must be a number in [0, {top:g}), got {value!r}")
    for key in ("data", "tensor", "pipeline", "micro_batch", "grad_accum", "micro_batch_per_gpu", "virtual_stages",
                "context", "expert", "expert_tensor"):
        _positive_int(parallel.get(key), path, index, rid, f"parallelism.{key}", allow_none=True)
    zero = parallel.get("zero_stage")
    if zero is not None and (isinstance(zero, bool) or zero not in (0, 1, 2, 3)):
        raise _fail(path, index, rid, "parallelism.zero_stage", f"must be 0, 1, 2 or 3, got {zero!r}")
    for key in ("sequence_parallel", "distributed_optimizer", "tp_comm_overlap", "overlap_param_gather",
                "moe_a2a_overlap"):
        if not isinstance(parallel.get(key, False), bool):
            raise _fail(path, index, rid, f"parallelism.{key}", f"must be true or false, got {parallel[key]!r}")
    for key, known in LAYOUT_CHOICES.items():
        if key in parallel and parallel[key] not in known:
            raise _fail(path, index, rid, f"parallelism.{key}", f"must be one of {', '.join(known)}, "
                        f"got {parallel[key]!r}")
    ckpt = rec.get("activation_checkpointing", False)
    if not isinstance(ckpt, bool):
        raise _fail(path, index, rid, "activation_checkpointing", f"must be true or false, got {ckpt!r}")
    granularity = rec.get("recompute_granularity", "full")
    if granularity not in RECOMPUTE_GRANULARITIES:
        raise _fail(path, index, rid, "recompute_granularity", f"must be one of "
                    f"{', '.join(RECOMPUTE_GRANULARITIES)}, got {granularity!r}")
    modules = rec.get("recompute_modules", [])
    if not isinstance(modules, list) or any(m not in RECOMPUTE_MODULES for m in modules):
        raise _fail(path, index, rid, "recompute_modules", f"must be a list of {', '.join(RECOMPUTE_MODULES)}, "
                    f"got {modules!r}")
    measured_s, note = _measured(rec, path, index, rid, gpus, global_batch, details.get("seq_len"))
    source = rec.get("source") or {}
    degrees = " ".join(f"{k}={parallel[k]}" for k in ("data", "tensor", "pipeline", "micro_batch", "grad_accum",
                                                       "fsdp_sharding") if k in parallel)
    return PublishedRun(
        index=index, id=rid, source=rid.split("-", 1)[0], model=_text(rec, "model", path, index, rid),
        precision=_text(rec, "precision", path, index, rid), optimizer=_text(rec, "optimizer", path, index, rid, False),
        framework=_text(rec, "framework", path, index, rid), parallelism=degrees, data="", num_gpus=gpus,
        batch_per_gpu=None, system=system, measured_s=measured_s, measured_note=note,
        url=str(source.get("url", "")) if isinstance(source, dict) else "", notes=_text(rec, "notes", path, index, rid, False),
        extra={"model_details": details, "parallel": parallel, "global_batch": global_batch, "checkpointing": ckpt,
               "granularity": granularity, "recompute_modules": tuple(modules)})


def load_transformer_corpus(path: Union[str, Path] = TRANSFORMER_FILE) -> list[PublishedRun]:
    """Every record of a transformer corpus YAML file, validated (corpus.load_records)."""
    return load_records(path, parse_transformer_record)


def _csv_number(row: dict, column: str, path: str, line: int, integer: bool):
    text = (row.get(column) or "").strip()
    try:
        value = int(text) if integer else float(text)
    except ValueError:
        raise UserError(f"{path}: row {line}: field {column!r}: must be {'an integer' if integer else 'a number'}, "
                        f"got {text!r}") from None
    if not value > 0 or (not integer and value == float("inf")):
        raise UserError(f"{path}: row {line}: field {column!r}: must be positive, got {text!r}")
    return value


def load_vtrain_csv(path: Union[str, Path] = VTRAIN_FILE, source: str = "vtrain") -> list[PublishedRun]:
    """A vTrain ground-truth CSV (columns VTRAIN_COLUMNS: data/ground_truth_multi.csv; or the same without the
    parameter count, as data/ground_truth_single.csv has them) -> one PublishedRun per row, of `source`, checked: every
    column present, positive numbers, GPUs = tensor · data · pipeline."""
    name = str(path)
    if not os.path.isfile(path):
        raise UserError(f"{name}: not a regular file" if os.path.lexists(path) else f"{name}: does not exist")
    if os.path.getsize(path) > MAX_CSV_BYTES:
        raise UserError(f"{name}: larger than {MAX_CSV_BYTES} bytes")
    try:
        text = Path(path).read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise UserError(f"{name}: not UTF-8 text ({err.reason})") from None
    reader = csv.DictReader(io.StringIO(text))
    with_params = VTRAIN_COLUMNS[0] in (reader.fieldnames or [])
    missing = [c for c in VTRAIN_COLUMNS[1:] if c not in (reader.fieldnames or [])]
    if missing:
        raise UserError(f"{name}: header: missing column {missing[0]!r}")
    upstream = Path(path).name.removeprefix("vtrain_")  # the shipped copies' names in vTrain's data/ folder
    runs = []
    for i, row in enumerate(reader):
        line = i + 2  # the header is line 1
        ints = {c: _csv_number(row, c, name, line, True) for c in VTRAIN_COLUMNS[1:11]}
        ms = _csv_number(row, VTRAIN_COLUMNS[11], name, line, False)
        t, d, p = ints["tensor parallelism"], ints["data parallelism"], ints["pipeline parallelism"]
        if t * d * p != ints["# GPUs"]:
            raise UserError(f"{name}: row {line}: field '# GPUs': {ints['# GPUs']} != tensor {t} x data {d} x "
                            f"pipeline {p}")
        size = (f"{_csv_number(row, VTRAIN_COLUMNS[0], name, line, False):g}b" if with_params else
                f"l{ints['# layers']}h{ints['hidden size']}")
        rid = (f"{source}-r{line}-{size}-{ints['# GPUs']}gpu-t{t}d{d}p{p}-mb{ints['micro batch']}"
               f"-gb{ints['global batch']}")
        details = {"layers": ints["# layers"], "hidden": ints["hidden size"], "heads": ints["attention heads"],
                   "seq_len": ints["sequence length"]}
        parallel = {"data": d, "tensor": t, "pipeline": p, "micro_batch": ints["micro batch"]}
        runs.append(PublishedRun(
            index=line, id=rid, source=source, model="gpt", precision="fp16 mixed (Megatron-DeepSpeed)",
            optimizer="Adam", framework="Megatron-DeepSpeed", parallelism=f"data={d} tensor={t} pipeline={p} "
            f"micro_batch={ints['micro batch']}", data="", num_gpus=ints["# GPUs"], batch_per_gpu=None,
            system=dict(VTRAIN_SYSTEM, nodes=-(-ints["# GPUs"] // 8)), measured_s=ms / 1e3, measured_note="",
            url=f"https://github.com/VIA-Research/vTrain/blob/f8dda847/data/{upstream}",
            extra={"model_details": details, "parallel": parallel, "global_batch": ints["global batch"],
                   "checkpointing": True}))
    return unique_ids(name, runs)


def _rule(rules: dict, section: str, text: str) -> Optional[dict]:
    return _first(rules.get(f"transformer_{section}", []), text) or _first(rules[section], text)


def _family(run: PublishedRun) -> Optional[str]:
    model, framework = run.model.lower(), run.framework.lower()
    if model.startswith("mpt"):
        return "mpt"
    if model.startswith("bert"):
        return "bert"
    gpt_like = "gpt" in model or model.startswith(GPT_LIKE_MODELS + ("mixtral",))
    if gpt_like and ("megatron" in framework or "nemo" in framework):
        return "megatron"  # Megatron's GPT, or Megatron-Core's with LLaMA's or Mixtral's blocks (model_details)
    parallel = run.extra.get("parallel", {})
    three_d = parallel.get("tensor", 1) > 1 or parallel.get("pipeline", 1) > 1
    if gpt_like and three_d and parallel.get("zero_stage", 0) <= 1 and "fsdp_sharding" not in parallel:
        return "megatron"  # a Megatron-style 3-D layout (GPT-NeoX, DeepSpeed's pipelines), ZeRO 1 at most
    sharded = "fsdp_sharding" in parallel or "zero_stage" in parallel or any(w in framework for w in SHARDED_FRAMEWORKS)
    if model.startswith(GPT_LIKE_MODELS) and sharded:
        return "sharded"  # FSDP or DeepSpeed ZeRO data parallelism of a decoder-only model
    return None


def megatron_attention(dtype: str, seq: int, heads: int, tensor: int, micro_batch: int) -> str:
    """The zoo attention of a Megatron row: "fused-softmax" when Megatron's FusedScaleMaskSoftmax runs its CUDA
    kernel, else "math". Megatron-DeepSpeed's megatron/model/fused_softmax.py (FusedScaleMaskSoftmax.forward; vTrain's
    src/model/fused_softmax.py is the same) calls it when the scores are fp16 or bf16, a mask is given (GPT's causal
    mask), masked-softmax fusion is on (Megatron's default; `--no-masked-softmax-fusion` turns it off) and

        16 < sk <= 2048,   sq % 4 == 0,   (b · np) % 4 == 0

    with sk = sq = the sequence length, b the micro batch and np = heads / tensor the heads on one tensor-parallel
    rank. Otherwise it casts the scores to float32, scales them, masks them in place and runs torch's softmax: the
    separate passes of `math` (their float32 width not modelled)."""
    heads_per_rank = heads // tensor if heads % tensor == 0 else 0
    fused = (dtype in ("fp16", "bf16") and 16 < seq <= FUSED_SOFTMAX_MAX_SEQ and seq % 4 == 0
             and heads_per_rank > 0 and (micro_batch * heads_per_rank) % 4 == 0)
    return "fused-softmax" if fused else "math"


#: how each family's loss reads its half-precision logits (Plan.cross_entropy; docs/decisions/2026-12-06-loss-
#: precision.md): llm-foundry's MPT takes flash-attn's fused CrossEntropyLoss; NVIDIA's PyTorch BERT runs a half
#: model without autocast (DeepLearningExamples 21.11: model.half(), autocast off; DLPerf's 20.03: apex O2), so
#: its loss is half precision; TensorFlow's AMP and OneFlow keep the loss in float32, Megatron copies the logits
#: to float32 (.float()): the default, as for any other sharded (FSDP, ZeRO) decoder's loss
LOSS = {"mpt": "fused", "bert-pytorch": "half", "bert": "float32", "sharded": "float32"}


def interpret_transformer(run: PublishedRun, rules: dict) -> Union[Setup, Skipped]:
    """The Setup of one transformer row (module docstring), or why it cannot be represented."""
    if run.measured_s is None:
        return Skipped(run, run.measured_note)
    family = _family(run)
    if family is None:
        return Skipped(run, f"model {run.model!r} is not mapped to the zoo's GPT or BERT")
    details, parallel = run.extra["model_details"], run.extra["parallel"]
    shape = [details.get(k) for k in ("layers", "hidden", "heads", "seq_len")]
    if not all(isinstance(x, int) for x in shape):
        return Skipped(run, "layers, hidden, heads or sequence length not stated in the source")
    precision = _rule(rules, "precisions", run.precision)
    if precision is None or "skip" in precision:
        return Skipped(run, precision["skip"] if precision else f"precision {run.precision!r} not understood")
    system = _system_rule(rules.get("transformer_systems", []), run) or _system_rule(rules["systems"], run)
    if system is None or "skip" in system:
        return Skipped(run, system["skip"] if system else f"no reference profile for system {run.system.get('name')!r}")
    optimizer = _rule(rules, "optimizers", run.optimizer)
    stack = _rule(rules, "stacks", run.framework)
    layers, hidden, heads, seq = shape
    # a source's own vocabulary when it states none (Megatron's padded GPT-2 one for GPT models only)
    default_vocab = VOCAB.get(family) if family != "megatron" or "gpt" in run.model.lower() else None
    vocab = details["vocab"] if isinstance(details.get("vocab"), int) else default_vocab
    if vocab is None:
        return Skipped(run, "vocabulary not stated in the source (model_details.vocab)")
    default_attention = {"mpt": "sdpa", "sharded": "sdpa", "bert": "math"}.get(family)
    attention = details.get("zoo_attention") or default_attention or megatron_attention(
        precision["dtype"], seq, heads, parallel.get("tensor", 1), parallel.get("micro_batch", 1))
    knobs = dict(layers=layers, hidden=hidden, heads=heads, seq=seq, vocab=vocab, attention=attention)
    knobs.update({k: details[k] for k in MODEL_KNOBS if details.get(k) is not None})
    if family == "mpt":
        knobs["dropout"] = 0.0
    if family == "sharded" and details.get("dropout") is None:
        knobs["dropout"] = 0.0  # decoder-only LMs train without dropout unless the row says otherwise
    if family == "megatron":
        knobs["residual"] = MEGATRON_RESIDUAL
    code = (_first(rules.get("transformer_code", []), run.framework) if family == "bert" else None) or {}
    if code.get("ops"):
        knobs["ops"] = code["ops"]
    if code.get("mlm_head") == "masked" and isinstance(details.get("max_predictions_per_seq"), int):
        knobs["mlm_positions"] = details["max_predictions_per_seq"]
    assumptions = []
    if family == "mpt":
        assumptions.append("MPT as GPT: ALiBi as a learned position embedding, linears and norms with biases")
    seq_mix = ()
    if family == "bert" and run.source == "dle" and seq == LDDL_PHASE2_SEQ:
        seq_mix = lddl_phase2_mix()
        assumptions.append("phase 2 on LDDL's 64-token bins: Wikipedia seq-512 length histogram (Krell et al.)")
    if optimizer.get("assumed") or "lamb" in run.optimizer.lower():
        assumptions.append(f"optimizer {run.optimizer!r} costed as {optimizer['optimizer']}")
    if run.source == "vtrain":
        assumptions.append("A100 memory size not stated: 40 GB assumed")
    gpus, batch = run.num_gpus, run.extra["global_batch"]
    ckpt = run.extra["checkpointing"]
    framework = "ddp"
    per_node = run.system.get("gpus_used_per_node")
    per_node = per_node if isinstance(per_node, int) and per_node > 0 else min(gpus, run.gpus_per_node or 8)
    if family == "megatron":
        t, p = parallel.get("tensor", 1), parallel.get("pipeline", 1)
        cp, ep = parallel.get("context", 1), parallel.get("expert", 1)
        d = parallel.get("data", gpus // (t * p * cp))
        mb = parallel.get("micro_batch", 1)
        if batch % (d * mb):
            return Skipped(run, f"global batch {batch} is not a multiple of data {d} x micro batch {mb}")
        boundary = _first(rules.get("transformer_pipeline_boundaries", []), run.framework)
        boundary = parallel.get("pipeline_boundary", boundary["boundary"] if boundary else "whole")
        v = parallel.get("virtual_stages", 1)
        plan = dict(strategy="data+tensor+pipeline", p_data=d, p_tensor=t, stages=p, micro_batches=batch // (d * mb),
                    recompute=ckpt, schedule="interleaved" if v > 1 else "1f1b", virtual_stages=v,
                    pipeline_boundary=boundary, mixed_precision="half",
                    sequence_parallel=parallel.get("sequence_parallel", False),
                    tp_comm_overlap=parallel.get("tp_comm_overlap", False),
                    overlap_param_gather=parallel.get("overlap_param_gather", False),
                    moe_a2a_overlap=parallel.get("moe_a2a_overlap", False),
                    zero_stage=1 if parallel.get("distributed_optimizer", False) or parallel.get("zero_stage") == 1
                    else 0, p_context=cp, p_expert=ep,
                    p_expert_tensor=0 if parallel.get("expert_tensor", t) == t else parallel["expert_tensor"])
        if ckpt:
            plan["recompute_granularity"] = run.extra.get("granularity", "full")
            plan["recompute_modules"] = run.extra.get("recompute_modules", ())
        framework = DDP_REGIMES[parallel.get("ddp_impl", "local")]
    elif family in ("mpt", "sharded"):
        t = parallel.get("tensor", 1)
        hybrid = parallel.get("fsdp_sharding") == "HYBRID_SHARD"
        if parallel.get("pipeline", 1) > 1 or (t > 1 and (family == "mpt" or hybrid)):
            return Skipped(run, "sharded data parallelism with pipeline parallelism, or hybrid sharding with tensor "
                                "parallelism, is not modelled")
        if parallel.get("context", 1) > 1 or parallel.get("expert", 1) > 1:
            return Skipped(run, "sharded data parallelism with context or expert parallelism is not modelled")
        zero = parallel.get("zero_stage", FSDP_STAGES[parallel.get("fsdp_sharding", "FULL_SHARD")])
        accumulate = parallel.get("grad_accum")
        replicas = gpus // t
        if accumulate is None and parallel.get("micro_batch") and batch % (replicas * parallel["micro_batch"]) == 0:
            accumulate = batch // (replicas * parallel["micro_batch"])
        if t > 1:  # FSDP x tensor parallelism (torchtitan's 2-D): the 3-D strategy on one stage, ZeRO 3 over the rest
            if gpus % t:
                return Skipped(run, f"tensor degree {t} does not divide {gpus} GPUs")
            plan = dict(strategy="data+tensor+pipeline", p_data=replicas, p_tensor=t, stages=1,
                        micro_batches=int(accumulate or 1), zero_stage=zero, recompute=ckpt, schedule="1f1b",
                        sequence_parallel=parallel.get("sequence_parallel", False),
                        tp_comm_overlap=parallel.get("tp_comm_overlap", False), cross_entropy=LOSS[family])
            if ckpt:
                plan["recompute_granularity"] = run.extra.get("granularity", "full")
        else:
            plan = dict(strategy="data+recompute" if ckpt else "data", p_data=gpus, zero_stage=zero,
                        micro_batches=int(accumulate or 1),
                        extra=(("checkpoint_segments", layers),) if ckpt else (),
                        cross_entropy=LOSS[family])
        if hybrid and gpus > per_node and gpus % per_node == 0:
            plan["shard_group"] = per_node  # FSDP's HYBRID_SHARD: FULL_SHARD inside a node, replicated across nodes
        if family == "sharded" and not any(w in run.precision.lower() for w in ("amp", "autocast")):
            plan["mixed_precision"] = "half"  # FSDP's param_dtype, DeepSpeed's fp16/bf16 engine: a half model
        if gpus == 1:
            return Skipped(run, "single-GPU FSDP run")
    else:
        plan = dict(strategy="data" if gpus > 1 else "serial", p_data=gpus,
                    cross_entropy=LOSS["bert-pytorch" if "pytorch" in run.framework.lower() else "bert"])
        if code.get("mixed_precision") and precision["dtype"] in ("fp16", "bf16"):
            plan["mixed_precision"] = code["mixed_precision"]
        if run.source == "dlperf":
            rule = _first(rules["frameworks"], f"{run.framework} {run.parallelism}", multi_gpu=gpus > 1)
            framework = rule["regime"] if rule and "regime" in rule else "ddp"
    if batch % gpus and family != "megatron":
        return Skipped(run, f"global batch {batch} not divisible by {gpus} GPUs")
    plan.update(batch=batch, devices=gpus)
    model = "gpt" if family in ("mpt", "megatron", "sharded") else "bert"
    return Setup(run=run, model=model, knobs=tuple(sorted(knobs.items())),
                 dtype=precision["dtype"], optimizer=code.get("optimizer", optimizer["optimizer"]), framework=framework,
                 profile=system["profile"], devices_per_node=per_node, synthetic_data=True,
                 assumptions=tuple(assumptions), stack=stack["stack"] if stack else "other",
                 plan=tuple(sorted(plan.items())), seq_mix=seq_mix)
