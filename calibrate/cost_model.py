"""`load_cost_model`: the `calibrate.cost_api.CostModel` of a calibrated or published profile.

Formulas: compute (calibrate.compute), alpha-beta segments (calibrate.alphabeta), collective steps and bus
factors (calibrate.collective_model). Lookups that the profile cannot answer raise UserError naming the
missing coefficient. Where a profile lacks a family, the call is costed by a stated substitution (linear layers
and GEMM backward passes as forward GEMMs, grouped convolutions by the convolution's fit, avgpool as maxpool,
the transformer families by FALLBACK's formulas), each use recorded in `substitutions` for the report:
docs/method.md §3 ("Substitutions") and §3a ("Costing").
"""
from __future__ import annotations

from pathlib import Path
from typing import Literal, Mapping, Optional, Union


from calibrate import backends, shapes
from calibrate.alphabeta import segment_for, segment_time_s
from calibrate.coefficients import CollectiveFit, Coefficients, opposite, parse_coefficients
from calibrate.collective_model import ALGORITHMS, bus_factor, latency_steps, tree_latency_steps
from calibrate.compute import predict_time
from calibrate.domain import in_domain
from calibrate.fabric import LOAD_PERCENTILES, contention, load_at
from calibrate.spread import excess
from calibrate.storage_model import StorageDemand, StorageTime, storage_time
from calibrate.system_constants import precision_class
from calibrate.cost_api import COLLECTIVES
from profiler.errors import UserError
from profiler.profile import Profile, load_profile

#: ops costed with another op's fit when their own is missing (module docstring)
SAME_KERNEL = {"linear": "gemm", "avgpool": "maxpool"}
#: ops with an explicit cost when their family is missing (module docstring): op -> how, for the report
FALLBACK = {"bmm": "gemm of the same FLOPs", "sdpa": "gemm scaled to its FLOPs",
            "layernorm": "memory bandwidth", "gelu": "memory bandwidth", "softmax": "memory bandwidth"}


def gemm_backward_as_forward(pass_: str, params: Mapping[str, int]) -> dict:
    """The forward-GEMM shape of a GEMM backward pass (module docstring)."""
    m, n, k = params["M"], params["N"], params["K"]
    return {"bwd_data": {"M": m, "N": k, "K": n}, "bwd_weight": {"M": k, "N": n, "K": m}}[pass_]


class ProfileCostModel:
    """CostModel over validated coefficients; `bound` None = fitted values, "low"/"high" = CI ends."""

    def __init__(self, coefficients: Coefficients, *, name: str, device_memory_bytes: float, devices_per_node: int,
                 provenance: str, bound: Optional[str] = None, cpu_cores: Optional[int] = None):
        self.coefficients = coefficients
        self.device_is_host = coefficients.device_is_host
        #: whether TF32 fits were measured or published (else a tf32 call costs as float32)
        self._has_tf32 = any(key.endswith("/tf32") for key in coefficients.compute)
        self.cpu_cores = cpu_cores
        #: the threads of a CPU profile's calls (its ranks share the cores: rank_slowdown); None on GPUs
        self.host_threads = coefficients.host_threads if coefficients.device_is_host else None
        #: what the profile's device adds to the generic compute path (calibrate.backends)
        self.backend = backends.for_coefficients(coefficients)
        self.name = name
        self.device_memory_bytes = float(device_memory_bytes)
        self.devices_per_node = int(devices_per_node)
        self.provenance = provenance
        self.bound = bound
        self._measured = {(f.op, f.group_size, f.nodes): f for f in coefficients.collectives}
        self._measured_shapes = {(m.family, shapes.shape_key(m.params)): m.time_s for m in coefficients.measured_shapes}
        #: "op pass dtype" -> how it was costed, for each call costed by FALLBACK since this model was made
        self.substitutions: dict[str, str] = {}
        #: whether convolutions run the library's fastest algorithm or its heuristic's (PyTorch's default): a
        #: setting of the run (calibrate.gpu_kernels.algorithms); default: as the profile's kernels were measured
        self.conv_algorithm_search = coefficients.gpu_kernels.search if coefficients.gpu_kernels else True
        self._kernel_cache: dict[tuple, float] = {}
        #: the job's surroundings (docs/method.md §6, §19a, §25): the cluster load as a percentile of the fabric's
        #: background load (None: typical, with quiet..busy as the interval's ends) and the node's memory (page cache)
        self.cluster_load: Optional[float] = None
        self.host_memory_bytes: Optional[float] = None
        #: the job's data source (predictor.at_scale.DataSource; None: ImageNet's), which the storage term reads
        self.data_source = None
        #: the bound the at-scale terms alone take ("low" / "high"; None: this model's bound), so a prediction can
        #: show the range they make by themselves (predictor.at_scale.at_scale_only)
        self.at_scale_bound: Optional[str] = None
        #: the all-reduce algorithms the job's NCCL may choose among (calibrate.collective_model.ALGORITHMS): a
        #: setting of the run (its NCCL version, NCCL_ALGO)
        self.collective_algorithms: tuple[str, ...] = ALGORITHMS

    def at_bound(self, bound: Literal["low", "high"]) -> "ProfileCostModel":
        if bound not in ("low", "high"):
            raise UserError(f"bound must be 'low' or 'high', got {bound!r}")
        other = ProfileCostModel(self.coefficients, name=self.name, device_memory_bytes=self.device_memory_bytes,
                                 devices_per_node=self.devices_per_node, provenance=self.provenance, bound=bound,
                                 cpu_cores=self.cpu_cores)
        other.conv_algorithm_search = self.conv_algorithm_search
        other.cluster_load, other.host_memory_bytes, other.data_source = (self.cluster_load, self.host_memory_bytes,
                                                                           self.data_source)
        other.collective_algorithms = self.collective_algorithms
        return other

    # ------------------------------------------------------------------------------------------ compute
    def compute_time_s(self, op: str, pass_: str, params: Mapping[str, int], dtype: str) -> float:
        if (op, pass_) in shapes.ZERO_COST:
            return 0.0
        dtype = shapes.canonical_dtype(dtype)
        backend, c = self.backend, self.coefficients
        measured = self._measured_time_s(op, pass_, params, dtype)
        if measured is not None:  # + what training allocates afresh and the benchmark did not (backend)
            return measured + backend.first_touch_s(c, op, pass_, params, dtype)
        kernel_s = self._gpu_kernel_time_s(op, pass_, params, dtype)
        if kernel_s is not None:
            return kernel_s
        if op in FALLBACK and not self._has_family(op, pass_, dtype):
            return self._fallback_time_s(op, pass_, params, dtype)
        return self._family_time_s(op, pass_, params, dtype)

    def _family_time_s(self, op: str, pass_: str, params: Mapping[str, int], dtype: str) -> float:
        """A call's time from the profile's compute family (compute_time_s without a measured shape or kernel
        model)."""
        backend, c = self.backend, self.coefficients
        fit, *fitted_as = self._family_fit(op, pass_, params, dtype)
        f_op, f_pass, f_params, f_dtype = fitted_as
        w = backend.work(f_op, f_pass, f_params, f_dtype)
        row = backends.feature_row(backend.feature_names(f_op), w["features"], fit.efficiency.features)
        time_s = max(predict_time(fit, w["work"], w["bytes"], row, self.bound),
                     backend.floor_s(c, f_op, f_pass, f_params, f_dtype))
        return time_s + backend.first_touch_s(c, op, pass_, params, dtype, fit, tuple(fitted_as))

    def _gpu_kernel_time_s(self, op: str, pass_: str, params: Mapping[str, int], dtype: str) -> Optional[float]:
        """A call's time from the backend's kernel model (calibrate.backends.gpu: calibrate.gpu_kernels), where the
        profile has one for this op and dtype; None otherwise (the family fits cost it)."""
        return self.backend.kernel_time_s(self.coefficients, op, pass_, params, dtype, self.conv_algorithm_search,
                                          self._kernel_cache)

    def _tf32_as(self, op: str, pass_: str, dtype: str) -> str:
        """The dtype a tf32 call is costed in: float32 where the profile has no TF32 fits at all (frameworks then run
        plain FP32), and for a memory-bound op without a tf32 family of its own (TF32 changes only matrix products'
        and convolutions' math: a GPU calibration measures memory-bound ops once, in float32)."""
        if dtype != "tf32":
            return dtype
        if not self._has_tf32 or (op in shapes.MEMORY_OPS and f"{op}/{pass_}/tf32" not in self.coefficients.compute):
            return "float32"
        return dtype

    def _has_family(self, op: str, pass_: str, dtype: str) -> bool:
        return f"{op}/{pass_}/{self._tf32_as(op, pass_, dtype)}" in self.coefficients.compute

    def _fallback_time_s(self, op: str, pass_: str, params: Mapping[str, int], dtype: str) -> float:
        """A transformer op's explicit cost where its family is missing (module docstring, FALLBACK)."""
        self.substitutions[f"{op} {pass_} {dtype}"] = FALLBACK[op]
        if op == "bmm":
            return self.compute_time_s("gemm", pass_, {"M": int(params["B"]) * int(params["M"]), "N": int(params["N"]),
                                                       "K": int(params["K"])}, dtype)
        if op == "sdpa":
            heads, seq, dim = int(params["B"]), int(params["S"]), int(params["D"])
            seq_kv = int(params.get("T", seq))
            gemm = {"M": heads * seq, "N": seq_kv, "K": dim}
            ratio = shapes.work(op, pass_, params, dtype)["flops"] / shapes.gemm_flops(heads * seq, seq_kv, dim)
            # the GEMM family's roofline, never a kernel model: that one would write the score matrix a fused
            # attention kernel never stores (docs/decisions/2026-12-06-flash-attention-share.md)
            return ratio * self._family_time_s("gemm", "fwd", gemm, shapes.canonical_dtype(dtype))
        return self._memory_bound_scale(pass_, dtype) * self.memory_time_s(shapes.work(op, pass_, params, dtype)["bytes"])

    def _memory_bound_scale(self, pass_: str, dtype: str) -> float:
        """The time scale the profile gives its memory-bound families (ReLU's fit, which batch norm and add share:
        a published profile's fitted family scale, 1 on a calibrated one), so that a layer norm, GELU or softmax
        costed by its bytes is scaled as every other memory-bound kernel of the step (the published fit's
        decomposition scales them alike: predictor.published.constants_fit)."""
        dtype, compute = shapes.canonical_dtype(dtype), self.coefficients.compute
        fit = compute.get(f"relu/{pass_}/{dtype}") or compute.get(f"relu/fwd/{dtype}")
        return fit.time_scale.at(self.bound) if fit is not None else 1.0

    def _family_fit(self, op: str, pass_: str, params: Mapping[str, int], dtype: str):
        """(fit, op, pass, params, dtype) a call is costed with: its grouped family when it has groups, a family
        the backend names first where the profile has it (calibrate.backends.gpu), its own,
        a kernel it shares (SAME_KERNEL), or for a GEMM backward pass the forward GEMM of its shape."""
        compute = self.coefficients.compute
        dtype = self._tf32_as(op, pass_, dtype)
        grouped = shapes.family_op(op, params)
        first = (grouped,) if grouped != op else self.backend.family_candidates(op, params, dtype)
        for candidate in first + (op, SAME_KERNEL.get(op)):
            if candidate and f"{candidate}/{pass_}/{dtype}" in compute:
                return compute[f"{candidate}/{pass_}/{dtype}"], op, pass_, params, dtype
        if op in ("gemm", "linear") and pass_ != "fwd" and f"gemm/fwd/{dtype}" in compute:
            return compute[f"gemm/fwd/{dtype}"], "gemm", "fwd", gemm_backward_as_forward(pass_, params), dtype
        raise UserError(f"profile {self.name} has no coefficient for {op} {pass_} {dtype}")

    def compute_in_domain(self, op: str, pass_: str, params: Mapping[str, int], dtype: str) -> Optional[bool]:
        """Whether this call lies in the calibrated domain of the family that costs it (calibrate.domain): True
        for a shape measured as it is or zero-cost, None when the family records no domain (a published profile)."""
        if (op, pass_) in shapes.ZERO_COST:
            return True
        dtype = shapes.canonical_dtype(dtype)
        if self._measured_time_s(op, pass_, params, dtype) is not None:
            return True
        if op in FALLBACK and not self._has_family(op, pass_, dtype):
            return False  # an explicit formula stands in for a family never measured: outside what was measured
        fit, op, pass_, params, dtype = self._family_fit(op, pass_, params, dtype)
        if fit.domain is None:
            return None
        w = self.backend.work(op, pass_, params, dtype)
        return in_domain(fit.domain, self.backend.feature_names(op), w["features"])

    def _measured_time_s(self, op: str, pass_: str, params: Mapping[str, int], dtype: str) -> Optional[float]:
        """The measured time of exactly this call, if the profile has one (a GEMM backward pass is the forward
        GEMM of gemm_backward_as_forward's shape, as in the fitted path, unless the profile has the linear
        family of that pass: a forward GEMM's time must not stand in for it). The same at every bound."""
        if not self._measured_shapes:
            return None
        candidates = [(f"{shapes.family_op(op, params)}/{pass_}/{dtype}", params)]
        if op == "gemm" or (op == "linear" and f"linear/{pass_}/{dtype}" not in self.coefficients.compute):
            candidates.append((f"gemm/{pass_}/{dtype}", params))
            if pass_ != "fwd":
                candidates.append((f"gemm/fwd/{dtype}", gemm_backward_as_forward(pass_, params)))
        for family, shape in candidates:
            time_s = self._measured_shapes.get((family, shapes.shape_key(shape)))
            if time_s is not None:
                return time_s
        return None

    def stack_time_scale(self, stack: str, dtype: str) -> float:
        table = self.coefficients.software_stacks
        if not table:
            return 1.0
        return table.get(stack, {}).get(precision_class(shapes.canonical_dtype(dtype)), 1.0)

    def framework_overhead_s(self, pass_: Literal["fwd", "bwd"]) -> float:
        fit = self.coefficients.framework
        if fit is None:
            return 0.0
        warm, cold = ((fit.forward_per_layer_s, fit.cold_forward_per_layer_s) if pass_ == "fwd"
                      else (fit.backward_per_layer_s, fit.cold_backward_per_layer_s))
        return warm.at(self.bound) + (cold.at(self.bound) if cold is not None else 0.0)

    def host_dispatch_s(self, pass_: Literal["fwd", "bwd"]) -> float:
        """Host seconds to issue one layer's pass on a GPU (Coefficients.host_dispatch): the least a layer pass takes;
        0 without the figure or on a CPU profile, where the host runs the kernels and framework_overhead_s adds."""
        fit = self.coefficients.host_dispatch
        if fit is None or self.coefficients.device_is_host:
            return 0.0
        return (fit.forward_per_layer_s if pass_ == "fwd" else fit.backward_per_layer_s).at(self.bound)

    def expert_gemm_dispatch_s(self, fp8: bool = False) -> float:
        """Seconds each expert GEMM of a grouped expert linear adds on a GPU beyond its kernel (an FP8 plan's: fp8;
        Coefficients.host_dispatch.per_expert_gemm_s, per_expert_gemm_fp8_s; docs/method.md §3c); 0 without the
        figure or on a CPU profile."""
        fit = self.coefficients.host_dispatch
        if fit is None or self.coefficients.device_is_host:
            return 0.0
        figure = (fit.per_expert_gemm_fp8_s if fp8 and fit.per_expert_gemm_fp8_s is not None
                  else fit.per_expert_gemm_s)
        return figure.at(self.bound) if figure is not None else 0.0

    def optimizer_overhead_s(self, tensors: int) -> float:
        fit = self.coefficients.framework
        if fit is None or fit.optimizer_per_tensor_s is None or not tensors:
            return 0.0
        return fit.optimizer_step_s.at(self.bound) + tensors * fit.optimizer_per_tensor_s.at(self.bound)

    def input_time_s(self, samples: float) -> float:
        fit = self.coefficients.input_pipeline
        if fit is None or self.coefficients.device_is_host or not self.cpu_cores or samples <= 0:
            return 0.0
        return samples * fit.per_sample_core_s.at(self.bound) / self.cpu_cores

    def straggler_excess(self, kind: str, ranks: int) -> float:
        """How much longer `ranks` synchronised ranks take than one, relative (calibrate.spread.excess): the expected
        maximum for the fitted values, the max's 10% / 90% quantiles at the "low" / "high" bound; 0 without a
        spread of that kind."""
        spread = self.coefficients.spread or {}
        return excess(spread.get(kind), ranks, self.at_scale_bound or self.bound)

    def cluster_load_share(self) -> float:
        """The share of the uplinks other jobs take now: the fabric's background load at the cluster-load
        percentile (typical, or quiet / busy at the interval's ends when the load was not set; 0 without one)."""
        fabric = self.coefficients.fabric
        if fabric is None or fabric.background_load is None:
            return 0.0
        percentile = self.cluster_load if self.cluster_load is not None else {
            None: LOAD_PERCENTILES["typical"], "low": LOAD_PERCENTILES["quiet"],
            "high": LOAD_PERCENTILES["busy"]}[self.at_scale_bound or self.bound]
        return load_at(fabric.background_load, percentile)

    def storage_time_s(self, demand: StorageDemand) -> StorageTime:
        """One step's storage read time at this bound (calibrate.storage_model); nothing on a CPU profile, whose
        ranks read in-memory tensors."""
        if self.coefficients.device_is_host:
            return StorageTime()
        bound = self.at_scale_bound or self.bound
        out = storage_time(self.coefficients.storage, self.host_memory_bytes, demand, bound)
        if out.unknown and bound != "high":  # the slow end of a term the profile cannot pin down: reported as a range
            out.high_s = storage_time(self.coefficients.storage, self.host_memory_bytes, demand, "high").seconds
        return out

    def model_error_bounds(self, strategy: str, framework: str) -> Optional[tuple[float, float]]:
        me = self.coefficients.model_error
        return me.ratio_bounds(strategy, framework) if me is not None else None

    def overlap_efficiency(self) -> float:
        ex = self.coefficients.execution
        # the fastest plausible machine ("low" times) hides the most
        return ex.overlap_efficiency.at(opposite(self.bound)) if ex else 1.0

    def rank_slowdown(self, ranks_on_node: int) -> float:
        if not self.coefficients.device_is_host or not self.cpu_cores:
            return 1.0
        return max(1.0, ranks_on_node * (self.host_threads or 1) / self.cpu_cores)

    # ------------------------------------------------------------------------------------------ memory
    def memory_time_s(self, bytes_moved: float, *, where: Literal["device", "host"] = "device") -> float:
        side = "host" if self.coefficients.device_is_host else where
        key = f"{side}/triad"
        fit = self.coefficients.memory.get(key)
        if fit is None:
            raise UserError(f"profile {self.name} has no coefficient for memory {key} (STREAM triad)")
        return segment_time_s(segment_for(fit, bytes_moved), bytes_moved, self.bound)

    def host_device_time_s(self, size_bytes: float, direction: Literal["h2d", "d2h"] = "h2d", pinned: bool = True) -> float:
        if self.coefficients.device_is_host:
            return 0.0
        key = f"{direction}_{'pinned' if pinned else 'pageable'}"
        fit = self.coefficients.host_device.get(key)
        if fit is None:
            raise UserError(f"profile {self.name} has no coefficient for host_device {key}")
        return segment_time_s(segment_for(fit, size_bytes), size_bytes, self.bound)

    # ------------------------------------------------------------------------------------------ collectives
    def collective_source(self, op: str, group_size: int, nodes: int = 1) -> str:
        """"measured" when this exact (op, group size, nodes) was fitted, else "extrapolated" (link model)."""
        return "measured" if (op, group_size, nodes) in self._measured else "extrapolated"

    def collective_time_s(self, op: str, size_bytes: float, group_size: int, nodes: int = 1) -> float:
        if op not in COLLECTIVES:
            raise UserError(f"unknown collective {op!r}; known: {', '.join(COLLECTIVES)}")
        if group_size <= 1:
            return 0.0
        if nodes < 1 or nodes > group_size:
            raise UserError(f"{op}: nodes must be between 1 and the group size {group_size}, got {nodes}")
        x = size_bytes * bus_factor(op, group_size)
        fit: Optional[CollectiveFit] = self._measured.get((op, group_size, nodes))
        if fit is not None:
            return segment_time_s(segment_for(fit, x), x, self.bound)
        level = "inter" if nodes > 1 else "intra"
        link = self.coefficients.links.get(op, {}).get(level)
        if link is None:
            hint = "; calibrate with ranks on >= 2 nodes to measure it" if level == "inter" else ""
            raise UserError(f"profile {self.name} has no {level}-node coefficient for {op} "
                            f"(needed for a group of {group_size} on {nodes} node(s)){hint}")
        b = self.bound
        step_s, inter_step_s = link.step_latency_s.at(b), link.inter_step_latency_s.at(b) if link.inter_step_latency_s else 0.0
        ring, tree = latency_steps(op, group_size, nodes), tree_latency_steps(op, group_size, nodes)
        algorithms = [steps for name, steps in zip(ALGORITHMS, (ring, tree)) if name in self.collective_algorithms]
        algorithms = algorithms if any(algorithms) else [ring]  # no tree for this op: the ring, as NCCL runs it
        alpha = link.base_latency_s.at(b) + min(n_intra * step_s + n_inter * inter_step_s
                                                for n_intra, n_inter in filter(None, algorithms))
        other = opposite(b)
        fabric = self.coefficients.fabric
        slowdown = (contention(nodes, fabric.nodes_per_leaf, fabric.oversubscription, self.cluster_load_share())
                    if fabric and nodes > 1 else 1.0)
        bandwidth = link.bandwidth_for(group_size) if nodes == 1 else link.bus_bandwidth_bytes_per_s
        bus_bytes_per_s = bandwidth.at(other)
        if op == "alltoall" and nodes > 1:
            bus_bytes_per_s = min(bus_bytes_per_s, self._alltoall_nic_bus_bytes_per_s(group_size, nodes, other))
        bandwidth_s = x * slowdown / bus_bytes_per_s
        fill_s = link.fill_latency_s.at(b) if link.fill_latency_s is not None and nodes > 1 else 0.0
        return alpha + bandwidth_s + min(bandwidth_s, fill_s)

    def _alltoall_nic_bus_bytes_per_s(self, group_size: int, nodes: int, bound: str) -> float:
        """The bus bandwidth an all-to-all over `nodes` nodes cannot beat: every rank sends the share
        (g - g/N)/g of its buffer to ranks on other nodes through its own NIC (the profile's inter-node send/recv
        rate, a GPU's share of the node's line rate), which no reduction inside the node shrinks as it does an
        all-reduce's, so busbw <= NIC x (g - 1)/(g - g/N) (docs/method.md §6); unbounded without that link."""
        nic = self.coefficients.links.get("sendrecv", {}).get("inter")
        if nic is None:
            return float("inf")
        remote = group_size - group_size / nodes
        return nic.bus_bandwidth_bytes_per_s.at(bound) * (group_size - 1) / remote


def _device_memory_bytes(profile: Profile, name: str) -> float:
    m = profile.machine
    for value in (m.device_memory_bytes, m.gpus[0].memory_bytes if m.gpus else None, m.memory_bytes):
        if value:
            return float(value)
    raise UserError(f"profile {name} has no machine.device_memory_bytes (nor GPU or host memory size)")


def _devices_per_node(profile: Profile) -> int:
    """GPUs per node; on a CPU profile a "device" is a rank, so the most ranks the collectives ran on one host."""
    m = profile.machine
    if m.gpus:
        return int(m.gpus_per_node or len(m.gpus))
    ranks_per_host = (profile.settings.get("collectives") or {}).get("ranks_per_host") or {}
    return max([int(n) for n in ranks_per_host.values()] + [int(m.gpus_per_node or 1)])


def cost_model_from_profile(profile: Profile, name: str = "<profile>") -> ProfileCostModel:
    coefficients = parse_coefficients(profile.coefficients, name)
    devices = _devices_per_node(profile)
    model = ProfileCostModel(coefficients, name=name, device_memory_bytes=_device_memory_bytes(profile, name),
                             devices_per_node=devices, provenance=profile.provenance.kind,
                             cpu_cores=profile.machine.cpu_cores)
    model.host_memory_bytes = profile.machine.memory_bytes
    return model


def load_cost_model(profile_or_path: Union[Profile, str, Path]) -> ProfileCostModel:
    """CostModel of a Profile object or a profile file (UserError on anything missing or malformed)."""
    if isinstance(profile_or_path, Profile):
        return cost_model_from_profile(profile_or_path, f"of {profile_or_path.machine.hostname}")
    return cost_model_from_profile(load_profile(profile_or_path), str(profile_or_path))
