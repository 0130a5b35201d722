"""The records that leave the predictor: `Plan` (what to run) and `Prediction` (what it will cost).

A Plan is one parallelization of one training iteration: the degrees of each kind of parallelism and the device
layout. Strategies are named: serial, data, spatial, filter, channel, pipeline (GPipe, 1F1B, interleaved), tensor
(Megatron-LM, with `sequence_parallel`), the data+X hybrids (p_data x inner degree = devices: inner groups
contiguous, data groups strided across nodes, docs/method.md §7), data+tensor+pipeline in Megatron-LM's rank order,
spatial-then-data, and the out-of-core / cooperative strategies (through `swap`, `recompute` and `extra`). Every
time is seconds per training iteration (one global mini-batch); every memory figure is bytes on the busiest
device. docs/method.md §9-§18.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

STRATEGIES = (
    "serial", "data", "spatial", "filter", "channel", "pipeline",
    "data+spatial", "data+filter", "data+channel", "data+pipeline", "spatial-then-data", "tensor", "data+tensor",
)
#: strategies built on a base one (predictor.outofcore_strategies registers their evaluators)
ADDON_STRATEGIES = ("serial+recompute", "data+recompute", "serial+offload", "data+offload", "outofcore",
                    "cooperative")
#: model-parallel strategies with checkpointing (pipeline has its own re-materialisation flag)
SPLIT_RECOMPUTE = tuple(f"{name}+recompute" for name in ("spatial", "filter", "channel", "data+spatial",
                                                           "data+filter", "data+channel"))
#: three-way hybrids: evaluated when named (with their degrees); `predictor run --strategy all` and `report` take the
#: layout the search finds fastest at their device count (predictor.api.searched_layouts)
HYBRID_3D = ("data+tensor+pipeline",)
#: every strategy name `predictor run --strategy` accepts
ALL_STRATEGIES = STRATEGIES + ADDON_STRATEGIES + SPLIT_RECOMPUTE + HYBRID_3D
#: the pipelines whose Plan.recompute `predictor run --recompute` sets: GPipe keeps only stage-boundary activations
#: and recomputes inside a stage; data+tensor+pipeline re-runs the transformer layers (Megatron's full checkpointing)
PIPELINE_RECOMPUTE = ("pipeline", "data+pipeline") + HYBRID_3D
#: the ZeRO stages sharded data parallelism takes: optimizer state (1), + gradients (2), + parameters (3, FSDP's
#: FULL_SHARD); `predictor search` tries each beside DDP (sharding_choices)
ZERO_STAGES = (1, 2, 3)


def sharding_choices(devices: int, devices_per_node: int) -> tuple[tuple[int, int], ...]:
    """(ZeRO stage, HSDP shard group; 0 = every replica) of each sharded data-parallel layout the search tries over
    `devices` replicas: every one of ZERO_STAGES and, where the devices span whole nodes, ZeRO 3 inside each node
    (HSDP, replicated across the nodes); none on one device."""
    if devices <= 1:
        return ()
    hsdp = devices > devices_per_node and devices % devices_per_node == 0
    return tuple((zero, 0) for zero in ZERO_STAGES) + (((max(ZERO_STAGES), devices_per_node),) if hsdp else ())
#: pipeline schedules (predictor.strategies.pipeline): GPipe (all forwards, then all backwards), 1F1B
#: (PipeDream-Flush as Megatron-LM runs it) and interleaved 1F1B with virtual stages
PIPELINE_SCHEDULES = ("gpipe", "1f1b", "interleaved")
#: how data+tensor+pipeline sends a stage's boundary tensor (predictor.strategies.hybrid3d): every tensor rank
#: sends all of it ("whole": Megatron-LM before 2021 and after 2023), or each sends 1/t and the next stage's tensor
#: group all-gathers it ("partitioned": Megatron-LM's scatter/gather of 2021-2023, DeepSpeed's pipeline engine)
PIPELINE_BOUNDARIES = ("whole", "partitioned")
#: what data+tensor+pipeline recomputes with plan.recompute (Korthikanti et al., "Reducing Activation Recomputation
#: in Large Transformer Models", 2022, §5): "full" re-runs every transformer layer's forward; "selective" only the
#: attention core between the QKV and output projections (scores, softmax, dropout, context), whose saved tensors
#: (5·a·s² bytes per sample and layer in fp16) are not kept
RECOMPUTE_GRANULARITIES = ("full", "selective")
#: what "selective" recomputes, Megatron-Core's --recompute-modules: core_attn (the attention core, the default),
#: layernorm and moe_act (output-discarding: the norms' outputs and the experts' activations dropped after the
#: forward and re-made from their inputs in backward; docs/method.md §15)
RECOMPUTE_MODULES = ("core_attn", "layernorm", "moe_act")
#: adamw-ops: Adam with decoupled weight decay written in element-wise framework ops, one kernel per op and variable
#: (BERT's TensorFlow AdamWeightDecayOptimizer; predictor.layercost.PER_OP_UPDATES); the others one streaming pass
OPTIMIZERS = ("sgd", "momentum", "adam", "adamw-ops")
#: how mixed precision (dtype fp16/bf16) runs: "autocast" (PyTorch AMP: fp32 weights and gradients, gradients
#: all-reduced in fp32), "graph-rewrite" (TensorFlow's AMP: the same parameters; its graph pass runs the layers between
#: matrix products in half, those after a denied op in float32, with casts between: predictor.graph_rewrite) or "half"
#: (Megatron-LM --fp16/--bf16 and DeepSpeed's fp16 engine: half-precision weights and gradients, gradients all-reduced
#: in half precision, fp32 master weights in the optimizer: 2 + 2 + 4 bytes per parameter plus the optimizer state,
#: ZeRO paper §3) (predictor.memory)
MIXED_PRECISIONS = ("autocast", "graph-rewrite", "half")
#: fp16/bf16 = mixed precision (fp32 master weights and optimizer state); fp8 = bf16 mixed precision whose linear
#: layers' matrix products run in FP8 (Transformer Engine; the profile needs "float8" GEMM fits: H100, H200)
DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8")
#: the memory layout the run's convolutions take: channels-last (NHWC), or NCHW, which cuDNN transposes around its
#: tensor-core kernels (docs/method.md §3)
MEMORY_FORMATS = ("nhwc", "nchw")
#: how a language model's cross-entropy reads its half-precision logits (profiler.opmath.cross_entropy_bytes):
#: "float32" casts them to a float32 copy first (PyTorch autocast's F.cross_entropy, Megatron's .float(), TensorFlow
#: AMP); "half" runs log-softmax at the logits' precision (a model.half() or apex O2 run without autocast); "fused"
#: reads them once in a fused kernel (flash-attn's CrossEntropyLoss, as llm-foundry's MPT uses)
CROSS_ENTROPY_IMPLS = ("float32", "half", "fused")
#: the Plan fields that are settings of the run, not of the layout: every plan a command evaluates takes them as
#: given (predictor run/search/scale/report put them on each candidate; default_plans does not take them)
RUN_SETTINGS = ("memory_format", "cross_entropy", "bn_group", "cuda_graphs")

# Communication kinds reported separately (exposed and hidden) in Prediction.comm_*.
COMM_KINDS = ("gradient", "layer_collective", "halo", "pipeline_p2p", "redistribute", "expert_alltoall",
              "context_ring")


#: the strategies that shard data parallelism (Plan.zero_stage, Plan.shard_group): data parallelism and its add-ons
ZERO_STRATEGIES = ("data", "data+recompute", "data+offload")
#: the strategies whose micro_batches are gradient accumulation (each replica's batch in that many sequential
#: micro-batches; predictor.strategies.data), not pipeline micro-batches
GRADIENT_ACCUMULATION = ("serial", "serial+recompute", "serial+offload") + ZERO_STRATEGIES


@dataclass(frozen=True)
class Plan:
    """One way to run one training iteration. `batch` is the global mini-batch (samples per iteration)."""

    strategy: str
    batch: int
    devices: int
    devices_per_node: int
    p_data: int = 1
    p_spatial: int = 1
    spatial_split: tuple[int, ...] = ()  # split factor per spatial dim, in shape order (D,)H,W; product = p_spatial
    p_filter: int = 1
    p_channel: int = 1
    p_tensor: int = 1  # Megatron-LM tensor parallelism: column/row-parallel linear pairs split over p_tensor ranks
    sequence_parallel: bool = False  # tensor: Korthikanti et al.'s sequence parallelism (RS + AG, split norms)
    tp_comm_overlap: bool = False  # data+tensor+pipeline, where SP is on: Megatron-Core's --tp-comm-overlap (§14a)
    p_context: int = 1  # data+tensor+pipeline: context parallelism, the sequence split over this many ranks (ring)
    p_expert: int = 1  # data+tensor+pipeline on a MoE: expert parallelism, the experts over this many ranks (of the
    # data x context ranks, or of tensor x data x context where the expert tensor degree folds them: p_expert_tensor)
    # expert tensor parallelism: each expert's linears split over this many ranks (Megatron-Core's
    # --expert-tensor-parallel-size); 0: the tensor degree (its default). Below it, the expert ranks fold over the
    # tensor ranks ("parallel folding": ETP x EP x expert-data = T x CP x data, docs/method.md §14b)
    p_expert_tensor: int = 0
    # data+tensor+pipeline with p_expert > 1: the expert all-to-alls of one micro-batch hidden behind another's compute
    # (Megatron-Core's --overlap-moe-expert-parallel-comm, the combined 1F1B schedule; docs/method.md §14c); applied
    # where Megatron-Core runs it: one stage or interleaved, no full recomputation, bf16/fp16 (moe_a2a_overlapped)
    moe_a2a_overlap: bool = False
    stages: int = 1
    micro_batches: int = 1
    spatial_layers: Optional[int] = None  # spatial-then-data: layers [0, k) spatial; None = as many as can split
    dtype: str = "fp32"
    optimizer: str = "sgd"
    recompute: bool = False  # pipeline: keep only stage-boundary activations, recompute inside (GPipe);
    # data+tensor+pipeline: Megatron's full recomputation of the transformer layers
    zero_stage: int = 0  # data parallelism: 0 = DDP; ZeRO 1 (optimizer state), 2 (+ gradients), 3 (+ parameters: FSDP)
    # ZeRO 3 sharded over groups of this many replicas and replicated across the groups (FSDP's HYBRID_SHARD, HSDP);
    # 0: over every replica
    shard_group: int = 0
    overlap_param_gather: bool = False  # data+tensor+pipeline, where ZeRO 1: the parameter gather beside the forward
    schedule: str = "gpipe"  # pipeline schedule (PIPELINE_SCHEDULES): gpipe, 1f1b, interleaved
    virtual_stages: int = 1  # interleaved 1F1B: model chunks per device (v)
    pipeline_boundary: str = "whole"  # data+tensor+pipeline: boundary sent whole or partitioned (PIPELINE_BOUNDARIES)
    recompute_granularity: str = "full"  # data+tensor+pipeline with recompute: RECOMPUTE_GRANULARITIES
    recompute_modules: tuple[str, ...] = ()  # with "selective": RECOMPUTE_MODULES it re-runs; () = ("core_attn",)
    mixed_precision: str = "autocast"  # fp16/bf16: per-op casts, TF's graph rewrite or a half model (MIXED_PRECISIONS)
    bucket_bytes: float = 25e6  # DDP gradient bucket size
    framework: str = "ddp"  # how the gradient allreduce is scheduled (predictor.overlap.FRAMEWORKS)
    synthetic_data: bool = False  # True: samples already in memory, no host decode/augment (input pipeline)
    stack: str = "pytorch"  # software stack whose kernels run (calibrate.system_constants.STACKS; published profiles)
    memory_format: str = "nhwc"  # the convolutions' layout (MEMORY_FORMATS): nchw costs cuDNN's transposes
    bn_group: int = 1  # data parallelism: batch norm's statistics reduced over groups of this many replicas (1: local)
    cross_entropy: str = "float32"  # how the loss reads half-precision logits (CROSS_ENTROPY_IMPLS)
    # the step replays captured CUDA graphs: no host issues its kernels one by one, so a GPU profile's host time per
    # layer pass (Coefficients.host_dispatch) does not floor it (docs/method.md §3d)
    cuda_graphs: bool = False
    extra: tuple[tuple[str, Any], ...] = ()  # strategy-specific knobs of add-on strategies (sorted pairs)

    @property
    def inner(self) -> int:
        """Devices in one model-parallel group (1 for pure data parallelism)."""
        return self.p_spatial * self.p_filter * self.p_channel * self.p_tensor * self.stages * self.p_context

    @property
    def expert_tensor(self) -> int:
        """The expert layers' tensor-parallel degree: p_expert_tensor, or the tensor degree when unset."""
        return self.p_expert_tensor or self.p_tensor

    @property
    def moe_a2a_overlapped(self) -> bool:
        """Whether the expert all-to-alls run hidden (moe_a2a_overlap, where the layout has it: expert parallelism, one
        stage or interleaving, no full recomputation, a half-precision model; Megatron-Core's combined 1F1B)."""
        from predictor.layercost import MIXED_DTYPES  # Megatron-Core runs it on bf16 or fp16 models only
        return (self.moe_a2a_overlap and self.p_expert > 1 and self.strategy in HYBRID_3D
                and (self.stages == 1 or self.schedule == "interleaved")
                and not (self.recompute and self.recompute_granularity == "full") and self.dtype in MIXED_DTYPES)

    @property
    def selective_modules(self) -> tuple[str, ...]:
        """What recomputation re-runs module by module: recompute_modules, ("core_attn",) when none are named; ()
        without selective recomputation."""
        if not (self.recompute and self.recompute_granularity == "selective"):
            return ()
        return self.recompute_modules or ("core_attn",)

    @property
    def samples_per_group(self) -> float:
        return self.batch / self.p_data

    def describe(self) -> str:
        parts = []
        if self.p_data > 1:
            parts.append(f"d{self.p_data}" + (f"/zero{self.zero_stage}" if self.zero_stage else "")
                         + (f"/hsdp{self.shard_group}" if self.shard_group else "")
                         + (f"/bn{self.bn_group}" if self.bn_group > 1 else "")
                         + ("/overlap-gather" if self.overlap_param_gather and self.zero_stage == 1
                            and self.strategy in HYBRID_3D else ""))
        if self.p_spatial > 1:
            parts.append("s" + "x".join(map(str, self.spatial_split)))
        if self.p_filter > 1:
            parts.append(f"f{self.p_filter}")
        if self.p_channel > 1:
            parts.append(f"c{self.p_channel}")
        if self.p_tensor > 1 or self.sequence_parallel:
            parts.append(f"t{self.p_tensor}" + ("/sp" if self.sequence_parallel else "")
                         + ("/overlap" if self.tp_comm_overlap and self.sequence_parallel
                            and self.strategy in HYBRID_3D else ""))
        if self.p_context > 1:
            parts.append(f"cp{self.p_context}")
        if self.p_expert > 1:
            parts.append(f"ep{self.p_expert}" + (f"/etp{self.expert_tensor}" if self.expert_tensor != self.p_tensor
                                                 else "") + ("/a2a-overlap" if self.moe_a2a_overlapped else ""))
        if self.stages > 1:
            parts.append(f"p{self.stages}/S{self.micro_batches}" + (
                "" if self.schedule == "gpipe" else f"/{self.schedule}" + (
                    f"x{self.virtual_stages}" if self.schedule == "interleaved" else "")) + (
                "/partitioned" if self.pipeline_boundary == "partitioned" else ""))
        if self.micro_batches > 1 and self.strategy in GRADIENT_ACCUMULATION:
            parts.append(f"ga{self.micro_batches}")
        if self.strategy == "spatial-then-data" and self.spatial_layers is not None:
            parts.append(f"k{self.spatial_layers}")
        if self.recompute and self.strategy in HYBRID_3D:
            modules = self.selective_modules
            parts.append("recompute" + ("/selective" if modules else "") + (
                "/" + "+".join(modules) if modules not in ((), ("core_attn",)) else ""))
        return " ".join(parts) or "1 device"


@dataclass
class Prediction:
    """Predicted cost of one Plan. Times are seconds per iteration on the critical path:

    iteration_s = compute_fwd_s + compute_bwd_s + update_s + sum(comm_exposed_s) + bubble_s + swap_s
                  + recompute_s + straggler_s + input_s
    comm_hidden_s is overlapped with compute (DDP buckets) and therefore not in iteration_s.
    Memory terms are bytes on the busiest device; fits = memory_bytes <= device_memory_bytes.
    """

    plan: Plan
    feasible: bool = True
    reason: str = ""  # why infeasible ("infeasible: ..."), empty when feasible
    compute_fwd_s: float = 0.0
    compute_bwd_s: float = 0.0
    update_s: float = 0.0
    comm_exposed_s: dict[str, float] = field(default_factory=dict)
    comm_hidden_s: dict[str, float] = field(default_factory=dict)
    bubble_s: float = 0.0
    swap_s: float = 0.0
    recompute_s: float = 0.0
    input_s: float = 0.0  # host input pipeline time not hidden behind the device's work (predictor.input_pipeline)
    #: the slowest of the synchronised ranks over a mean one: device speed, step jitter, collective latency
    #: (predictor.at_scale, docs/method.md §25)
    straggler_s: float = 0.0
    #: one step's shared-storage read time, hidden behind the device's work like the host's decoding (its exposed
    #: part is in input_s; predictor.input_pipeline, docs/method.md §19a)
    storage_s: float = 0.0
    iteration_s: float = math.inf
    interval_s: tuple[float, float] = (math.nan, math.nan)  # (low, high) from the profile's CIs
    weights_bytes: float = 0.0
    grads_bytes: float = 0.0
    optimizer_bytes: float = 0.0
    activations_bytes: float = 0.0
    comm_buffers_bytes: float = 0.0  # halo rows, gathered activations, DDP buckets
    workspace_bytes: float = 0.0
    memory_bytes: float = 0.0
    device_memory_bytes: float = math.inf
    fits: bool = True
    max_batch_fits: Optional[int] = None  # largest global batch that fits (same plan otherwise)
    bottleneck: str = ""
    throughput_samples_per_s: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)  # per-stage / per-layer extras (trace, reports)
    #: share of the compute predicted from calls outside the profile's calibrated domain (predictor.extrapolation;
    #: None: not computed, or the profile records no measured domain) and how many distinct calls those are
    extrapolated_share: Optional[float] = None
    extrapolated_calls: int = 0

    @property
    def comm_exposed_total_s(self) -> float:
        return sum(self.comm_exposed_s.values())

    @property
    def comm_hidden_total_s(self) -> float:
        return sum(self.comm_hidden_s.values())

    def finish(self) -> "Prediction":
        """Fill the derived fields (iteration time, memory total, fits, throughput, bottleneck)."""
        if not self.feasible:
            self.iteration_s = math.inf
            self.fits = False
            self.bottleneck = "infeasible"
            return self
        self.iteration_s = (self.compute_fwd_s + self.compute_bwd_s + self.update_s + self.comm_exposed_total_s
                            + self.bubble_s + self.swap_s + self.recompute_s + self.straggler_s + self.input_s)
        self.memory_bytes = (self.weights_bytes + self.grads_bytes + self.optimizer_bytes + self.activations_bytes
                             + self.comm_buffers_bytes + self.workspace_bytes)
        self.fits = self.memory_bytes <= self.device_memory_bytes
        self.throughput_samples_per_s = self.plan.batch / self.iteration_s if self.iteration_s > 0 else math.inf
        self.bottleneck = bottleneck_label(self)
        return self

    def epoch_s(self, dataset_size: int) -> float:
        return math.ceil(dataset_size / self.plan.batch) * self.iteration_s

    def gpu_hours(self, dataset_size: int, epochs: float = 1.0) -> float:
        return self.epoch_s(dataset_size) * epochs * self.plan.devices / 3600.0

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["plan"] = asdict(self.plan)
        out["comm_exposed_total_s"] = self.comm_exposed_total_s
        out["comm_hidden_total_s"] = self.comm_hidden_total_s
        return out


_LABELS = {
    "gradient": "gradient exchange",
    "layer_collective": "layer-wise collectives",
    "halo": "halo p2p",
    "pipeline_p2p": "pipeline p2p",
    "redistribute": "layer-wise collectives",
    "expert_alltoall": "expert all-to-all",
    "context_ring": "context-parallel ring",
}


def bottleneck_label(pred: Prediction) -> str:
    """The largest term of the iteration, 'memory capacity' when the plan does not fit, or 'input pipeline' /
    'shared storage' when the device waits for the host's loaders or for the storage they read from; 'host
    dispatch' where the host floor's share of the step (details["host_dispatch_s"], predictor.host_bound, taken
    out of the compute) is the largest."""
    if not pred.fits:
        return "memory capacity"
    if pred.input_s > 0:  # the device waits for the host (or the storage): the step takes the input's time
        host_s = pred.details.get("input_host_s", 0.0)
        return "shared storage" if pred.storage_s > host_s else "input pipeline"
    host = pred.details.get("host_dispatch_s", 0.0)  # the host floor's share of the step (predictor.host_bound)
    terms = {"compute": max(0.0, pred.compute_fwd_s + pred.compute_bwd_s - host), "weight update": pred.update_s,
             "pipeline bubble": pred.bubble_s, "swap": pred.swap_s, "recompute": pred.recompute_s,
             "stragglers": pred.straggler_s, "host dispatch": host}
    for kind, t in pred.comm_exposed_s.items():
        label = _LABELS.get(kind, kind)
        terms[label] = terms.get(label, 0.0) + t
    return max(terms.items(), key=lambda kv: kv[1])[0]
