"""One validation run's configuration, and the strategy names the runner knows."""
from __future__ import annotations

from dataclasses import asdict, dataclass

#: strategy -> (needs a model-parallel group, has a data-parallel part)
STRATEGIES = {
    "serial": (False, False),
    "data": (False, True),
    "spatial": (True, False),
    "filter": (True, False),
    "channel": (True, False),
    "pipeline": (True, False),
    "data+spatial": (True, True),
    "data+filter": (True, True),
    "tensor": (True, False),
    "data+tensor": (True, True),
}


@dataclass(frozen=True)
class RunConfig:
    """model: a zoo/runner model name; ranks: devices used; batch: global mini-batch; micro_batches: the
    pipeline's S; p_model: model-parallel degree of a hybrid (ranks / p_model data replicas);
    recompute_segments: checkpoint segments (0 = keep all activations); offload: save activations on the
    host (GPU only)."""


    model: str
    strategy: str
    ranks: int
    batch: int
    micro_batches: int = 1
    dtype: str = "fp32"
    p_model: int = 0
    recompute_segments: int = 0
    offload: bool = False
    stage_starts: tuple[int, ...] = ()  # pipeline cut as graph layer indices (the predictor's); () = by FLOPs
    knobs: tuple[tuple[str, object], ...] = ()  # zoo builder knobs (width, image, ...), sorted pairs
    amp: str = ""  # autocast dtype ("bf16"): fp32 weights, the forward under torch.autocast
    cudnn_benchmark: bool = False  # torch.backends.cudnn.benchmark for this run

    @property
    def degrees(self) -> tuple[int, int]:
        """(p_data, p_model)."""
        model_parallel, data_parallel = STRATEGIES[self.strategy]
        if self.strategy == "serial":
            return 1, 1
        if not model_parallel:
            return self.ranks, 1
        if not data_parallel:
            return 1, self.ranks
        p_model = self.p_model or 2
        return self.ranks // p_model, p_model

    @property
    def label(self) -> str:
        """Strategy label used in tables and per-strategy accuracy: e.g. data+recompute, serial+offload."""
        extras = (["recompute"] if self.recompute_segments else []) + (["offload"] if self.offload else [])
        return "+".join([self.strategy, *extras])

    @property
    def scenario(self) -> str:
        """Runs that compete for the same job (same model, global batch, devices, dtype and its settings)."""
        knobs = ",".join(f"{k}={v}" for k, v in self.knobs)
        precision = f"amp-{self.amp}" if self.amp else self.dtype
        return (f"{self.model}({knobs})/B{self.batch}/p{self.ranks}/{precision}"
                + ("/cudnn-benchmark" if self.cudnn_benchmark else ""))

    def as_dict(self) -> dict:
        return asdict(self)
