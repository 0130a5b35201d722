"""The cost API: the only way the predictor reads a profile (data flows one way: profiler measures, calibrate
fits, predictor reads the coefficients only through this API; docs/calibration.md, opening paragraph).

`calibrate` implements `CostModel` from a profile's coefficients; predictor code and its tests depend
only on this protocol, so a hand-written synthetic cost model can stand in for a profile in tests.

Conventions (SI): seconds, bytes, FLOPs. Message sizes are nccl-tests' S for each collective:
  allreduce, broadcast, sendrecv, halo: the buffer each rank holds;
  allgather: the gathered (output) buffer, n pieces; reduce_scatter: the input buffer, n pieces;
  alltoall: each rank's whole send buffer (n pieces of S/n).
A group is described by its size and the number of distinct nodes it spans (1 = intra-node).
"""
from __future__ import annotations

from typing import Literal, Mapping, Optional, Protocol, runtime_checkable

COMPUTE_OPS = ("gemm", "conv2d", "conv3d", "batchnorm", "relu", "maxpool", "avgpool", "add", "linear", "bmm", "sdpa",
               "layernorm", "gelu", "softmax")
PASSES = ("fwd", "bwd_data", "bwd_weight")
COLLECTIVES = ("allreduce", "allgather", "reduce_scatter", "alltoall", "broadcast", "sendrecv", "halo")
Bound = Literal["low", "high"]


@runtime_checkable
class CostModel(Protocol):
    """Time and capacity figures of one machine, as the predictor needs them."""

    #: memory of one device (GPU memory, or host memory for a CPU profile), bytes
    device_memory_bytes: float
    #: devices per node the profile describes (a predictor flag may override it)
    devices_per_node: int
    #: whether the profile is `published` (datasheet-derived) rather than `calibrated`
    provenance: str
    #: True on a CPU profile: the "device" memory is the host's, so there is nothing to swap or offload to
    device_is_host: bool

    def compute_time_s(self, op: str, pass_: str, params: Mapping[str, int], dtype: str) -> float:
        """Time of one call of `op` (see COMPUTE_OPS) for `pass_` (see PASSES) at the given shape.

        params: gemm/linear {M, N, K}; bmm {B, M, N, K}; sdpa {B, S, D[, T, causal]};
        conv2d {N, C, F, H, W, kernel, stride, padding}; conv3d adds D; memory-bound ops {N, C, H, W[, D]}
        (pooling adds kernel, stride).
        Raises UserError naming the missing coefficient when the profile cannot cost this op."""

    def compute_in_domain(self, op: str, pass_: str, params: Mapping[str, int], dtype: str) -> Optional[bool]:
        """Whether compute_time_s of this call interpolates the profile's measurements (calibrate.domain):
        False when it extrapolates beyond them, None when the profile records no measured domain."""

    def stack_time_scale(self, stack: str, dtype: str) -> float:
        """Multiplier of every compute call's time when the job runs under software stack `stack` (a published
        profile's fitted factors, calibrate.system_constants.StackScales; 1 for a calibrated profile, which
        measured the stack it runs)."""

    def framework_overhead_s(self, pass_: Literal["fwd", "bwd"]) -> float:
        """Eager framework time one layer pays on top of its kernels: "fwd" its module call with autograd
        recording, "bwd" its autograd node (0 when the profile did not measure it)."""

    def optimizer_overhead_s(self, tensors: int) -> float:
        """Per-step framework time of the optimizer over `tensors` parameter tensors (step + zero_grad): a
        fixed part and a part per tensor, on top of its streaming update (0 when the profile did not measure
        it, or for no tensors)."""

    def rank_slowdown(self, ranks_on_node: int) -> float:
        """How much slower each rank computes when `ranks_on_node` ranks share one node: 1 on GPUs (a device
        each); on a CPU profile ranks x threads per rank / cores when that exceeds 1, since the cores are
        shared out (1 when the profile does not know its cores)."""

    def input_time_s(self, samples: float) -> float:
        """Host seconds for one node to decode and augment `samples` training samples with all its cores
        (0 when the profile did not measure it, and on a CPU profile, whose ranks read in-memory tensors)."""

    def model_error_bounds(self, strategy: str, framework: str) -> Optional[tuple[float, float]]:
        """(low, high) multipliers of a predicted time that bound the profile's held-out error for this strategy
        and framework regime (calibrate.coefficients.ModelError), or None when the profile has none."""

    def overlap_efficiency(self) -> float:
        """Share in (0, 1] of a communication overlapped with backward that is really hidden (1 when the profile
        does not state it): the rest slows the concurrent compute (predictor.overlap)."""

    def memory_time_s(self, bytes_moved: float, *, where: Literal["device", "host"] = "device") -> float:
        """Time of a streaming, memory-bound kernel moving `bytes_moved` (STREAM triad bandwidth)."""

    def collective_time_s(self, op: str, size_bytes: float, group_size: int, nodes: int = 1) -> float:
        """Time of one collective (see COLLECTIVES) of S = size_bytes over group_size ranks on `nodes` nodes.

        group_size 1 costs 0. Sizes and group sizes outside the measured range follow the fitted
        ring/tree formulas."""

    def host_device_time_s(self, size_bytes: float, direction: Literal["h2d", "d2h"] = "h2d", pinned: bool = True) -> float:
        """Time of one host<->device copy of size_bytes (0 on a CPU-only profile: there is no device)."""

    def at_bound(self, bound: Bound) -> "CostModel":
        """The same model with every coefficient at the low or high end of its confidence interval,
        for prediction intervals ("low" = fastest plausible machine)."""


#: The at-scale extras (docs/method.md §6, §19a, §25), optional: a cost model without them has no stragglers, no
#: other jobs on its fabric and no storage term (predictor.at_scale reads them with these neutral defaults):
#:   straggler_excess(kind, ranks) -> float   relative time `ranks` synchronised ranks add over one, for a kind of
#:                                            time ("device", "step", "collective"; calibrate.spread)
#:   cluster_load_share() -> float            share of the fabric's uplinks other jobs take now (calibrate.fabric)
#:   storage_time_s(demand) -> StorageTime    one step's shared-storage read time (calibrate.storage_model)
AT_SCALE_EXTRAS = ("straggler_excess", "cluster_load_share", "storage_time_s")


class NeutralExtras:
    """The optional parts of CostModel at their neutral values, for hand-written cost models (tests, synthetic
    machines): a device with memory of its own, perfect overlap, no held-out error record, no host input
    pipeline."""

    device_is_host = False

    def compute_in_domain(self, op: str, pass_: str, params: Mapping[str, int], dtype: str) -> Optional[bool]:
        return None

    def stack_time_scale(self, stack: str, dtype: str) -> float:
        return 1.0

    def overlap_efficiency(self) -> float:
        return 1.0

    def model_error_bounds(self, strategy: str, framework: str) -> Optional[tuple[float, float]]:
        return None

    def input_time_s(self, samples: float) -> float:
        return 0.0

    def straggler_excess(self, kind: str, ranks: int) -> float:
        return 0.0

    def cluster_load_share(self) -> float:
        return 0.0

    def storage_time_s(self, demand):
        from calibrate.storage_model import StorageTime
        return StorageTime()
