"""What a job meets at scale on a shared cluster and a single-node benchmark does not show (docs/method.md §6,
§19a, §25): stragglers, other jobs on the fabric and the shared storage its samples come from.

Stragglers (`straggler_s`): the step's compute parts (not the pipeline bubble) times the expected excess of the
slowest of P device draws and N node draws (the jitter a calibration measures is shared by a node's ranks), plus
each exposed communication kind times its group's excess, from the cost model's `straggler_excess`
(calibrate.spread). Other jobs on the fabric enter through the cost model's collective times
(calibrate.fabric.contention with the cluster load; `with_cluster_load`). The storage term is the input
pipeline's (predictor.input_pipeline) with the data source of `data_source`: the dataset's bytes and files per
sample.
"""
from __future__ import annotations

import functools
import math
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Optional

from predictor.plan import Plan, Prediction


@dataclass(frozen=True)
class DataSource:
    """Where a job's samples come from: a dataset's bytes and files per sample and its size, and whether each
    node reads a node-local copy (staging) instead of the shared file system."""

    name: str
    sample_bytes: float
    files_per_sample: float
    samples: int
    staged: bool = False
    source: str = ""
    #: host CPU core-seconds to decode and augment one sample (a loader that decodes on the CPU); None: decoded on the
    #: GPU or not known. Used when the profile has no calibrated input pipeline (predictor.input_pipeline)
    decode_core_s: Optional[float] = None

    @property
    def dataset_bytes(self) -> float:
        return self.sample_bytes * self.samples


#: ILSVRC 2012's training set: 1,281,167 JPEGs (TFDS imagenet2012 catalogue) in a 147.8 GB tar
#: (ILSVRC2012_img_train.tar in parts of 41.9, 41.9, 41.9 and 22.1 GB, huggingface.co/datasets/presencesw/ILSVRC2012;
#: tar headers are < 1%): 115 KB per file, the "~110 KB" usually quoted within 5%
IMAGENET = DataSource("imagenet", sample_bytes=147.8e9 / 1_281_167, files_per_sample=1.0, samples=1_281_167,
                      source="ILSVRC2012 train: 1,281,167 JPEGs (TFDS catalogue), train tar 147.8 GB "
                             "(41.9 x 3 + 22.1 GB parts, huggingface.co/datasets/presencesw/ILSVRC2012): 115 KB each")
#: MLPerf HPC CosmoFlow (v1.0 on): 524,288 training samples, each a (128, 128, 128, 4) int16 crop, which NVIDIA's
#: implementation stores as a <id>_data.npy and a <id>_label.npy file (mlcommons/hpc_results_v1.0 @d77db2c
#: NVIDIA/benchmarks/cosmoflow/implementations/mxnet: README.md, tool/convert_tfrecord_to_numpy.py)
COSMOFLOW = DataSource("cosmoflow", sample_bytes=128 ** 3 * 4 * 2, files_per_sample=2.0, samples=524_288,
                       source="MLPerf HPC CosmoFlow: 524,288 training samples of 4 x 128^3 int16 (16 MiB), one data and "
                              "one label .npy file each (NVIDIA's implementation, mlcommons/hpc_results_v1.0)")
#: MLPerf HPC DeepCAM: 121,266 training and 15,158 validation samples (the logs' train_samples and eval_samples,
#: mlcommons/hpc_results_v1.0 @2ba081f NVIDIA/results/dgxa100_n64_ngc21.09_pytorch) in 8.8 TB ("8.8 TB in the case
#: of DeepCAM", mlcommons.org/en/news/mlperf-hpc-v07): 64.5 MB a sample, a data and a label .npy file each
#: (NVIDIA's src/utils/convert_hdf52npy.py)
DEEPCAM = DataSource("deepcam", sample_bytes=8.8e12 / (121_266 + 15_158), files_per_sample=2.0, samples=121_266,
                     source="MLPerf HPC DeepCAM: 121,266 training samples of 16 x 768 x 1152, 8.8 TB with the 15,158 "
                            "validation ones (mlcommons.org MLPerf HPC v0.7 news), one data and one label .npy file each")
DATASETS = {"imagenet": IMAGENET, "cosmoflow": COSMOFLOW, "deepcam": DEEPCAM}
#: loaders that decode on the host CPU with a published cost: name -> figure of
#: calibrate/data/published/figures.yaml (core-seconds per ImageNet sample; docs/method.md §19)
DECODERS = {"opencv": "decode_opencv", "tf.data": "decode_tfdata"}


@functools.cache
def decoder_core_s(name: str) -> float:
    """Host core-seconds per sample of a CPU loader, `name` a DECODERS key (callers check it, naming their input)."""
    from calibrate.systems import load_figures

    return float(load_figures()[DECODERS[name]].value)


def data_source(cost_model) -> DataSource:
    """The data source set on the cost model (`with_data_source`), else ImageNet's."""
    return getattr(cost_model, "data_source", None) or IMAGENET


def with_data_source(cost_model, source: DataSource):
    """Set the job's data source on a cost model (it rides along its at_bound copies)."""
    cost_model.data_source = source
    return cost_model


def with_cluster_load(cost_model, percentile: Optional[float]):
    """Set the cluster load (a percentile of the fabric's background load; None: typical, the interval spanning
    quiet..busy) on a cost model that models one (calibrate.cost_model.ProfileCostModel); others are unchanged."""
    if hasattr(cost_model, "cluster_load"):
        cost_model.cluster_load = percentile
    return cost_model


def with_collective_algorithms(cost_model, algorithms: tuple[str, ...]):
    """Set the all-reduce algorithms the job's NCCL may choose among (calibrate.collective_model.ALGORITHMS; --nccl-algo,
    a published row's NCCL version) on a cost model that models them; others are unchanged."""
    inner = innermost(cost_model)
    if hasattr(inner, "collective_algorithms"):
        inner.collective_algorithms = tuple(algorithms)
    return cost_model


def _excess(cost_model, kind: str, ranks: int) -> float:
    fn = getattr(cost_model, "straggler_excess", None)
    return fn(kind, ranks) if fn is not None and ranks > 1 else 0.0


def _group_nodes(plan: Plan, kind: str) -> int:
    """Nodes spanned by the group a communication kind synchronises (predictor.layout's mapping: model-parallel
    groups of consecutive ranks, data-parallel groups strided across the nodes)."""
    nodes = nodes_of(plan)
    if kind == "gradient":
        return min(plan.p_data, nodes)
    if kind == "pipeline_p2p":
        return 2 if plan.stages > 1 and nodes > 1 else 1
    return min(nodes, max(1, math.ceil(max(plan.inner, 1) / max(plan.devices_per_node, 1))))


def straggler_s(cost_model, plan: Plan, pred: Prediction) -> float:
    """The module docstring's straggler term (0 on one device or without a spread); its parts in
    pred.details["stragglers"]."""
    if plan.devices <= 1:
        return 0.0
    device, step = _excess(cost_model, "device", plan.devices), _excess(cost_model, "step", nodes_of(plan))
    # not the bubble: a pipeline's fill and drain pass each stage once, so a slow stage delays its step by its excess
    # over the micro-batches it runs, and the other stages' ramps are mean draws (method.md §25)
    work = pred.compute_fwd_s + pred.compute_bwd_s + pred.update_s + pred.recompute_s
    compute_part = work * (device + step)
    collective_part = sum(t * _excess(cost_model, "collective", _group_nodes(plan, kind))
                          for kind, t in pred.comm_exposed_s.items())
    total = compute_part + collective_part
    if total > 0:
        pred.details["stragglers"] = {"ranks": plan.devices, "nodes": nodes_of(plan), "device_excess": device,
                                      "step_excess": step,
                                      "compute_s": compute_part, "collectives_s": collective_part}
    return total


def least_excess(cost_model, plan: Plan, kinds) -> float:
    """The least relative excess `straggler_s` puts on the plan's compute parts or on any of the exposed
    communication `kinds`: a factor a lower bound made of those terms may take (the search's)."""
    if plan.devices <= 1:
        return 0.0
    compute = _excess(cost_model, "device", plan.devices) + _excess(cost_model, "step", nodes_of(plan))
    return max(0.0, min([compute] + [_excess(cost_model, "collective", _group_nodes(plan, kind)) for kind in kinds]))


def nodes_of(plan: Plan) -> int:
    return max(1, math.ceil(plan.devices / max(plan.devices_per_node, 1)))


def innermost(cost_model):
    """The cost model under any wrappers (predictor.stacks, predictor.shared_cores, the published constants' scaling:
    each keeps the model it wraps as `_cm`)."""
    while "_cm" in vars(cost_model):
        cost_model = vars(cost_model)["_cm"]
    return cost_model


@contextmanager
def at_scale_only(cost_model, bound: str):
    """Within the block, the at-scale terms of `cost_model` (stragglers, cluster load, storage) sit at `bound`
    ("low": quiet fabric, the max's 10% quantile, known storage only; "high": busy, its 90% quantile, unknown storage
    at its floor) while every coefficient keeps its fitted value. A model without the knob is left as it is."""
    inner = innermost(cost_model)
    if not hasattr(inner, "at_scale_bound"):
        yield cost_model
        return
    before = inner.at_scale_bound
    inner.at_scale_bound = bound
    try:
        yield cost_model
    finally:
        inner.at_scale_bound = before


def at_scale_range(graph, plan: Plan, cost_model, point_s: float, device_memory_bytes=None) -> tuple[float, float]:
    """(low, high) multipliers of a prediction (`point_s`, its fitted iteration time) from the at-scale terms alone
    (at_scale_only): each end's iteration time over the fitted one (1, 1 for a model without them)."""
    from predictor.strategies import evaluate
    from predictor.strategies.context import Context

    point = point_s
    if not (point > 0 and math.isfinite(point)) or not hasattr(innermost(cost_model), "at_scale_bound"):
        return 1.0, 1.0
    ends = []
    for bound in ("low", "high"):
        with at_scale_only(cost_model, bound):
            ends.append(evaluate(Context(graph, cost_model), plan, device_memory_bytes).iteration_s / point)
    return min(ends[0], 1.0), max(ends[1], 1.0)
