"""The flags the predictor's commands (and `profiler calibrate --model`) share, each declared once with its choices
and help read from the registries: models from predictor.zoo.ZOO, strategies, dtypes and optimizers from
predictor.plan, frameworks from predictor.overlap, stacks from calibrate.system_constants, profiles from
calibrate.profile_arguments (a path or a shipped name). A command takes a flag from here or does not take it;
tests/predictor/test_flags.py walks every subcommand's parser against the registries.

Light on purpose (no torch, no cost model): `--help` of every command imports it."""
from __future__ import annotations

import argparse
from pathlib import Path

from calibrate.profile_arguments import add_profile_argument
from calibrate.system_constants import DEFAULT_STACK, STACKS
from predictor.overlap import FRAMEWORKS
from predictor.plan import ALL_STRATEGIES, CROSS_ENTROPY_IMPLS, DTYPES, MEMORY_FORMATS, OPTIMIZERS
from predictor.zoo import ZOO
from profiler.cliutil import MAX_LOCAL_RANKS, device_count, float_in, int_in
from profiler.errors import UserError

#: --strategy: every strategy the plan knows, or all of them
STRATEGY_CHOICES = ("all",) + ALL_STRATEGIES
MAX_MEMORY_GB = 1e6  # device memory a plan may assume, in GB
MAX_BN_GROUP = 1 << 14  # replicas in one batch-norm statistics group
#: what each --dtype means (its choices are predictor.plan.DTYPES)
DTYPE_MEANING = {"fp32": "float32", "tf32": "float32 storage, TF32 tensor-core matrix products",
                 "fp16": "mixed precision, fp32 master weights", "bf16": "mixed precision, fp32 master weights",
                 "fp8": "bf16 with the linear layers' matrix products in FP8 (Transformer Engine; needs a profile "
                        "with float8 fits: H100)"}


def model_help(note: str = "") -> str:
    """What --model accepts, every zoo model by name."""
    return (f"zoo name ({', '.join(ZOO)}), package.module:callable, file.py[:callable] or a .yaml/.json layer "
            f"spec{note}")


def add_model_arguments(parser, *, required: bool = True, model_group=None, model_note: str = "", note: str = "",
                        unset: bool = False) -> None:
    """--model (in `model_group` when it is one of exclusive sources), --model-arg (repeatable) and
    --input-shape; `model_note` ends --model's help, `note` the others' (e.g. ' (with --model)'); unset=True:
    --model-arg is None when not given (a command that refuses model flags without --model), else []."""
    (model_group or parser).add_argument("--model", required=required, help=model_help(model_note))
    parser.add_argument("--model-arg", action="append", default=None if unset else [], metavar="KEY=VALUE",
                        help=f"zoo/callable knob, e.g. width=16, image=64 (repeatable){note}")
    parser.add_argument("--input-shape", help=f"per-sample input shape for user modules, e.g. 3,224,224{note}")


def add_dtype_argument(parser, default: str | None = "fp32", note: str = "") -> None:
    """--dtype, one of predictor.plan.DTYPES."""
    meaning = "; ".join(f"{d} = {DTYPE_MEANING.get(d, d)}" for d in DTYPES)
    parser.add_argument("--dtype", default=default, choices=DTYPES,
                        help=f"training precision: {meaning} (default {default or 'fp32'}){note}")


def add_optimizer_argument(parser, default: str | None = "sgd", note: str = "") -> None:
    """--optimizer, one of predictor.plan.OPTIMIZERS."""
    parser.add_argument("--optimizer", default=default, choices=OPTIMIZERS,
                        help=f"optimizer whose state and update are costed (default {default or 'sgd'}){note}")


def add_strategy_argument(parser, default: str | None = "all", note: str = "") -> None:
    """--strategy: one of predictor.plan.ALL_STRATEGIES, or all."""
    parser.add_argument("--strategy", default=default, choices=STRATEGY_CHOICES,
                        help=f"one strategy, or all (default all){note}")


def add_gpus_per_node_argument(parser, note: str = "") -> None:
    parser.add_argument("--gpus-per-node", type=int_in(1, MAX_LOCAL_RANKS),
                        help=f"devices per node (default: the profile's){note}")


def add_framework_argument(parser) -> None:
    """--framework (predictor.overlap.FRAMEWORKS) and --synthetic-data: how the data-parallel gradients are
    reduced and whether the input pipeline runs."""
    parser.add_argument("--framework", default="ddp", choices=FRAMEWORKS,
                        help="how the gradient allreduce is scheduled: ddp (PyTorch DDP buckets, default), "
                             "horovod (tensor fusion cycles), horovod-grouped (MXNet's 16 gradient groups, "
                             "0.1 ms cycles), no-overlap (after backward)")
    parser.add_argument("--synthetic-data", action="store_true",
                        help="samples are already in memory: no host decode/augmentation (the input pipeline term)")


def add_prediction_arguments(parser: argparse.ArgumentParser) -> None:
    """What every command that predicts a model on a profile takes (run, search, scale, report): the profile, the
    model, devices per node, dtype, optimizer, framework, stack, the run's settings (the convolutions' memory
    layout, the loss's precision, batch-norm groups), a memory cap, the dataset size and --json."""
    add_profile_argument(parser, "profile whose costs predict (default: the shipped reference profile, named in "
                                 "the output)")
    add_model_arguments(parser)
    add_gpus_per_node_argument(parser)
    add_dtype_argument(parser)
    add_optimizer_argument(parser)
    add_framework_argument(parser)
    parser.add_argument("--stack", default=DEFAULT_STACK, choices=STACKS,
                        help="software stack whose kernels run (default pytorch): a published profile scales its "
                             "compute by the stack's fitted factor; a calibrated profile measured its own")
    parser.add_argument("--memory-cap", type=float_in(0.0, MAX_MEMORY_GB), metavar="GB",
                        help="device memory to plan for (default: the profile's)")
    parser.add_argument("--memory-format", choices=MEMORY_FORMATS, default="nhwc",
                        help="the convolutions' memory layout: nhwc (channels-last, default) or nchw, which cuDNN "
                             "transposes around its tensor-core kernels (fp16, bf16, tf32 on a GPU; docs/method.md §3)")
    parser.add_argument("--cross-entropy", choices=CROSS_ENTROPY_IMPLS, default="float32",
                        help="how a language model's loss reads half-precision logits: float32 (a float32 copy: "
                             "PyTorch autocast, Megatron; default), half (a half-precision model without autocast) "
                             "or fused (flash-attn's fused cross-entropy); docs/method.md §3a")
    parser.add_argument("--bn-group", type=int_in(1, MAX_BN_GROUP), default=1, metavar="G",
                        help="synchronised batch norm: statistics reduced over groups of G data-parallel replicas "
                             "every step (SyncBatchNorm, NVIDIA's bn_group; docs/method.md §9); other layouts, and "
                             "replica counts G does not divide, are infeasible; default 1, each replica its own")
    parser.add_argument("--cuda-graphs", action="store_true",
                        help="the step replays captured CUDA graphs (torch.cuda.graph, MXNet's MXNET_ENABLE_CUDA_GRAPHS): "
                             "no host issues its kernels one by one, so a GPU profile's host time per layer pass does "
                             "not floor it (docs/method.md §3d)")
    parser.add_argument("--dataset-size", type=int_in(1, 1 << 48), help="samples per epoch: adds epoch time and GPU-hours")
    parser.add_argument("--cudnn-benchmark", choices=("on", "off"), default=None,
                        help="whether the run lets cuDNN search for each convolution's fastest algorithm "
                             "(torch.backends.cudnn.benchmark = True) or takes its heuristic (PyTorch's default); "
                             "GPU kernel models only (docs/method.md §3b); default: as the profile's kernels were "
                             "measured")
    add_at_scale_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")


def add_context_expert_arguments(parser: argparse.ArgumentParser, search: bool = False) -> None:
    """--context-parallel and --expert-parallel: data+tensor+pipeline's context-parallel degree (the sequence split
    over CP ranks, keys and values passed around a ring) and expert-parallel degree (a mixture of experts' experts
    over EP of the data x context ranks; --model-arg experts=E); docs/method.md §14b. search=True: the search keeps
    them fixed (unset: context 1, expert every degree the model takes)."""
    what = "the degree the search keeps (default 1)" if search else "default 1"
    parser.add_argument("--context-parallel", type=device_count, metavar="CP",
                        help=f"data+tensor+pipeline: context parallelism, the sequence split over CP ranks with a ring "
                             f"of keys and values under attention ({what}); devices = T x CP x P x data")
    parser.add_argument("--expert-parallel", type=device_count, metavar="EP",
                        help="data+tensor+pipeline on a mixture of experts (--model-arg experts=E,top_k=k): the "
                             "experts spread over EP of the data x context ranks, tokens exchanged by all-to-all ("
                             + ("the degree the search keeps; default: every EP dividing E" if search
                                else "default 1") + ")")
    parser.add_argument("--expert-tensor-parallel", type=device_count, metavar="ETP",
                        help="with --expert-parallel: each expert's linears split over ETP ranks, a divisor of the "
                             "tensor degree (Megatron-Core's --expert-tensor-parallel-size); below it the expert ranks "
                             "fold over the tensor ranks, EP x ETP dividing tensor x data x context ("
                             + ("the degree the search keeps; default: the tensor degree and 1" if search
                                else "default: the tensor degree") + ")")


def add_overlap_arguments(parser: argparse.ArgumentParser, search: bool = False) -> None:
    """--tp-comm-overlap and --overlap-param-gather: the overlaps Megatron-Core runs inside data+tensor+pipeline
    (docs/method.md §14a). search=True: the stack runs them, so every candidate that allows them has them."""
    where = "every candidate with" if search else "data+tensor+pipeline with"
    parser.add_argument("--tp-comm-overlap", action="store_true",
                        help=f"{where} sequence parallelism: tensor-parallel all-gathers and reduce-scatters "
                             "overlapped with their GEMMs (Megatron-Core's --tp-comm-overlap)")
    parser.add_argument("--overlap-param-gather", action="store_true",
                        help=f"{where} the distributed optimizer (--zero 1): the updated parameters' all-gather "
                             "overlapped with the next step's forward passes (Megatron-Core's --overlap-param-gather)")
    parser.add_argument("--moe-a2a-overlap", action="store_true",
                        help=f"{where} expert parallelism on one stage or interleaved, without full recomputation: "
                             "each micro-batch's expert all-to-alls hidden behind another's compute (Megatron-Core's "
                             "--overlap-moe-expert-parallel-comm, the combined 1F1B schedule)")


def search_options(args: argparse.Namespace) -> dict:
    """The search's settings (predictor.search.search keywords) from a command's prediction flags; the overlap flags
    only where the command has them (False otherwise)."""
    return dict(devices_per_node=args.gpus_per_node, dtype=args.dtype, optimizer=args.optimizer,
                framework=args.framework, synthetic_data=args.synthetic_data,
                tp_comm_overlap=getattr(args, "tp_comm_overlap", False),
                overlap_param_gather=getattr(args, "overlap_param_gather", False),
                moe_a2a_overlap=getattr(args, "moe_a2a_overlap", False), memory_format=args.memory_format,
                cross_entropy=args.cross_entropy, bn_group=args.bn_group, cuda_graphs=args.cuda_graphs)


def check_overlaps(args: argparse.Namespace) -> None:
    """UserError when `predictor run` asks for an overlap its layout cannot have (or modules to recompute without
    selective recomputation)."""
    modules = getattr(args, "recompute_modules", None)
    if modules and not (args.recompute and args.recompute_granularity == "selective"):
        raise UserError(f"--recompute-modules {','.join(modules)}: needs --recompute --recompute-granularity "
                        "selective (Megatron-Core recomputes modules only at selective granularity)")
    if args.tp_comm_overlap and not args.sequence_parallel:
        raise UserError("--tp-comm-overlap needs --sequence-parallel (Megatron-Core overlaps the tensor-parallel "
                        "all-gathers and reduce-scatters of sequence parallelism)")
    if args.overlap_param_gather and args.zero != 1:
        raise UserError(f"--overlap-param-gather needs --zero 1 (the distributed optimizer's all-gather), not "
                        f"--zero {args.zero}")
    if getattr(args, "moe_a2a_overlap", False):
        if (getattr(args, "expert_parallel", None) or 1) <= 1:
            raise UserError("--moe-a2a-overlap needs --expert-parallel above 1 (it hides the expert all-to-alls)")
        if (args.pipeline_stages or 1) > 1 and args.schedule != "interleaved":
            raise UserError("--moe-a2a-overlap with --pipeline-stages above 1 needs --schedule interleaved "
                            "(Megatron-Core combines passes in the interleaved schedule only)")
        from predictor.layercost import MIXED_DTYPES
        if args.dtype not in MIXED_DTYPES:
            raise UserError(f"--moe-a2a-overlap: not with --dtype {args.dtype} (Megatron-Core runs the combined 1F1B on "
                            "bf16 or fp16 models only)")
        if args.recompute and args.recompute_granularity == "full":
            raise UserError("--moe-a2a-overlap: not with full recomputation (Megatron-Core runs the combined 1F1B "
                            "with selective recomputation or none); use --recompute-granularity selective")


def context_expert_degrees(args: argparse.Namespace, strategy: str | None) -> tuple[int, int]:
    """(context, expert) degrees from --context-parallel and --expert-parallel (1 when not given); UserError when one
    above 1 is given with a strategy other than data+tensor+pipeline, or --expert-tensor-parallel without
    --expert-parallel above 1."""
    from predictor.plan import HYBRID_3D
    cp, ep = getattr(args, "context_parallel", None) or 1, getattr(args, "expert_parallel", None) or 1
    etp = getattr(args, "expert_tensor_parallel", None)
    if etp and ep <= 1:
        raise UserError(f"--expert-tensor-parallel {etp}: needs --expert-parallel above 1 (it folds the expert ranks "
                        "over the tensor ranks)")
    if (cp > 1 or ep > 1) and strategy is not None and strategy not in HYBRID_3D:
        flag = "--context-parallel" if cp > 1 else "--expert-parallel"
        raise UserError(f"{flag} {cp if cp > 1 else ep}: runs in --strategy {HYBRID_3D[0]} (Megatron-Core's layout; "
                        f"--tensor-parallel 1 --pipeline-stages 1 for data x {'context' if cp > 1 else 'expert'} "
                        f"alone), not {strategy}")
    return cp, ep


def recompute_modules(text: str) -> tuple[str, ...]:
    """argparse type of --recompute-modules: comma-separated names of plan.RECOMPUTE_MODULES, each once."""
    from predictor.plan import RECOMPUTE_MODULES
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    bad = [n for n in names if n not in RECOMPUTE_MODULES]
    if not names or bad or len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"{text!r}: expected comma-separated modules of "
                                         f"{', '.join(RECOMPUTE_MODULES)}, each once")
    return names


def cluster_load(text: str) -> float:
    """argparse type of --cluster-load: quiet, typical, busy or a percentile 0-100 (calibrate.fabric)."""
    from calibrate.fabric import parse_cluster_load
    try:
        return parse_cluster_load(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected quiet, typical, busy or a percentile 0-100, got {text[:40]!r}") from None


def decoder(text: str) -> float:
    """--decode: a CPU loader of predictor.at_scale.DECODERS, or the milliseconds of one core per sample -> seconds."""
    from predictor.at_scale import DECODERS, decoder_core_s

    if text in DECODERS:
        return decoder_core_s(text)
    try:
        ms = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected {', '.join(DECODERS)} or milliseconds per sample, got {text[:40]!r}") from None
    if not 0.0 < ms <= 1e4:
        raise argparse.ArgumentTypeError(f"milliseconds per sample must be in (0, 10000], got {text[:40]!r}")
    return ms / 1e3


#: --nccl-algo's choices
NCCL_ALGOS = ("auto", "ring", "tree")


def nccl_algorithms(choice: str) -> tuple[str, ...]:
    """The all-reduce algorithms (calibrate.collective_model.ALGORITHMS) a --nccl-algo choice leaves NCCL."""
    from calibrate.collective_model import ALGORITHMS
    return ALGORITHMS if choice == "auto" else (choice,)


def add_at_scale_arguments(parser: argparse.ArgumentParser) -> None:
    """What a job meets on a shared cluster (predictor.at_scale, docs/method.md §6, §19a): the load other jobs put on
    the fabric, and where the samples are read from (dataset, bytes and files per sample, node-local staging)."""
    from predictor.at_scale import DATASETS, DECODERS
    parser.add_argument("--cluster-load", type=cluster_load, default=None, metavar="LOAD",
                        help="share of the fabric's uplinks other jobs take, from the profile's distribution: quiet, "
                             "typical, busy or a percentile 0-100 (default: typical, the interval spanning quiet..busy); "
                             "only traffic between leaf switches feels it")
    parser.add_argument("--nccl-algo", default="auto", choices=NCCL_ALGOS,
                        help="the all-reduce algorithms NCCL may use, as NCCL_ALGO sets them: auto (the faster of ring "
                             "and tree per call, NCCL 2.4 on), ring (NCCL before 2.4, or NCCL_ALGO=Ring), tree (where "
                             "it applies; the ring elsewhere)")
    parser.add_argument("--dataset", default="imagenet", choices=tuple(DATASETS),
                        help="where the samples come from: bytes and files per sample, samples per epoch (default "
                             "imagenet: ILSVRC2012 JPEGs, 115 KB each); with --synthetic-data nothing is read")
    parser.add_argument("--sample-bytes", type=float_in(0.0, 1e12), metavar="BYTES",
                        help="bytes read per sample (default: the dataset's)")
    parser.add_argument("--files-per-sample", type=float_in(0.0, 1e6, low_open=False), metavar="N",
                        help="files opened per sample (default: the dataset's; 1/1024 for shards of 1024 samples)")
    parser.add_argument("--staging", action="store_true",
                        help="every node reads a node-local copy of the dataset (staged once) instead of the shared "
                             "file system")
    parser.add_argument("--decode", type=decoder, default=None, metavar="LOADER",
                        help="the loader decodes and augments the samples on the host CPU, for a profile without a "
                             "calibrated input pipeline: " + ", ".join(DECODERS) + " (published loader benchmarks, "
                             "calibrate/data/published/figures.yaml) or the milliseconds of one core a sample takes; "
                             "default: decoded on the GPU (DALI) or the profile's own figure")


def apply_at_scale_arguments(args: argparse.Namespace, cost_model) -> None:
    """Set --cluster-load and the data source (--dataset, --sample-bytes, --files-per-sample, --staging, --decode,
    --dataset-size) on the cost model (predictor.at_scale); a command without these flags leaves the defaults."""
    from dataclasses import replace

    from predictor.at_scale import DATASETS, with_cluster_load, with_collective_algorithms, with_data_source
    with_cluster_load(cost_model, getattr(args, "cluster_load", None))
    with_collective_algorithms(cost_model, nccl_algorithms(getattr(args, "nccl_algo", "auto")))
    source = DATASETS[getattr(args, "dataset", None) or "imagenet"]
    changes = {k: v for k, v in (("sample_bytes", getattr(args, "sample_bytes", None)),
                                 ("files_per_sample", getattr(args, "files_per_sample", None)),
                                 ("samples", getattr(args, "dataset_size", None))) if v is not None}
    if getattr(args, "staging", False):
        changes["staged"] = True
    if getattr(args, "decode", None) is not None:
        changes["decode_core_s"] = args.decode
    with_data_source(cost_model, replace(source, **changes) if changes else source)


def apply_run_settings(args: argparse.Namespace, cost_model) -> None:
    """The settings of the run that change a cost model's answers: --cudnn-benchmark (the GPU kernel model's
    convolution algorithms) and the at-scale flags (apply_at_scale_arguments)."""
    from predictor.stacks import with_conv_search

    setting = getattr(args, "cudnn_benchmark", None)
    if setting is not None:
        with_conv_search(cost_model, setting == "on")
    apply_at_scale_arguments(args, cost_model)


def add_runs_argument(parser, what: str, *, many: bool) -> None:
    """Measured runs (JSONL), given positionally or with --runs, in either form (`many`: one or more files)."""
    parser.add_argument("runs_positional", nargs="*", metavar="RUNS", type=Path,
                        help=f"{what} (or --runs){'' if many else '; one file'}")
    parser.add_argument("--runs", action="extend", nargs="+", type=Path, default=None, metavar="RUNS",
                        help=f"the same as RUNS{' (repeatable)' if many else ''}")


def runs_of(args: argparse.Namespace, *, many: bool) -> list[Path]:
    """The runs files given positionally and with --runs; at least one, and exactly one unless `many`."""
    runs = list(getattr(args, "runs_positional", None) or []) + list(getattr(args, "runs", None) or [])
    if not runs:
        raise UserError("RUNS: give the measured runs (JSONL), positionally or with --runs")
    if not many and len(runs) > 1:
        raise UserError(f"RUNS: one runs file, got {len(runs)} ({', '.join(map(str, runs[:3]))})")
    return runs
