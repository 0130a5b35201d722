"""What a published record means for the predictor: model, dtype, optimizer, framework regime, profile, plan.

The rules live in a data file (`predictor/data/published_mapping.yaml`, `load_rules`): ordered lists of
patterns per record field, the first match winning. A record that no rule can represent (a model outside the
zoo, a parameter-server run, a GPU without a reference profile, a record that is not a throughput) becomes a
`Skipped` with the reason, never silently dropped. No rule sets a coefficient: the profile of the system
does, so a rule cannot tune a prediction.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

from calibrate.collective_model import ALGORITHMS
from calibrate.system_constants import STACKS
from predictor.plan import MIXED_PRECISIONS, OPTIMIZERS, PIPELINE_BOUNDARIES
from predictor.zoo import MODEL_CODE
from predictor.published.corpus import PublishedRun
from profiler.errors import UserError
from profiler.inputs import read_yaml

RULES_FILE = Path(__file__).resolve().parent.parent / "data" / "published_mapping.yaml"
SECTIONS = ("models", "precisions", "optimizers", "frameworks", "systems")


@dataclass(frozen=True)
class Setup:
    """Everything needed to predict one published record."""

    run: PublishedRun
    model: str                       # zoo name
    knobs: tuple[tuple[str, Any], ...]
    dtype: str
    optimizer: str
    framework: str
    profile: str                     # file name under the profiles directory
    devices_per_node: int
    synthetic_data: bool
    assumptions: tuple[str, ...] = field(default=())
    stack: str = "other"             # software stack (calibrate.system_constants.STACKS)
    plan: tuple[tuple[str, Any], ...] = ()  # Plan fields stated by the row (transformer rows); () = data parallel
    #: (padded sequence length, share of micro-steps) when each micro-batch is padded only to its own length
    #: (transformer rows: DLE BERT phase 2 on LDDL's sequence bins, predictor.published.transformer); () = every
    #: micro-batch at the model's `seq`
    seq_mix: tuple[tuple[int, float], ...] = ()
    dataset: str = "imagenet"        # predictor.at_scale.DATASETS: where the samples come from (models rule `dataset`)
    staged: bool = False             # the record says its data was staged to the nodes before the run
    memory_format: str = "nhwc"      # the convolutions' layout the record states (Plan.memory_format)
    bn_group: int = 1                # replicas per batch-norm statistics group the record states (Plan.bn_group)
    cuda_graphs: bool = False        # the record's configs capture the step as CUDA graphs (Plan.cuda_graphs)
    #: the all-reduce algorithms the record's NCCL has (rules `nccl`, calibrate.collective_model.ALGORITHMS)
    collective_algorithms: tuple[str, ...] = ALGORITHMS
    #: host core-seconds per sample of the record's loader when it decodes on the CPU (rules `input_pipelines`;
    #: DataSource.decode_core_s), None when it decodes on the GPU or is not known
    decode_core_s: Optional[float] = None

    @property
    def batch(self) -> int:
        return self.run.batch_per_gpu * self.run.num_gpus

    @property
    def system(self) -> str:
        """The profile's name as reports show it: a shipped profile's node name, a user's profile file's stem."""
        return Path(self.profile).name.removesuffix(".published.yaml").removesuffix(".yaml")


@dataclass(frozen=True)
class Skipped:
    run: PublishedRun
    reason: str


def load_rules(path: Union[str, Path] = RULES_FILE) -> dict[str, list[dict]]:
    """The mapping rules, checked (UserError naming the file, section and rule on a malformed one)."""
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise UserError(f"{path}: must be a mapping with sections {', '.join(SECTIONS)}")
    optional = tuple(s for s in ("stacks", "transformer_pipeline_boundaries", "transformer_code", "nccl") if s in data)
    for section in SECTIONS + optional:
        rules = data.get(section)
        if not isinstance(rules, list) or not all(isinstance(r, dict) for r in rules):
            raise UserError(f"{path}: section {section}: must be a list of rules")
        for i, rule in enumerate(rules):
            for key, value in rule.items():
                if isinstance(value, str) and key in ("match", "gpu", "network", "name"):
                    try:
                        re.compile(value)
                    except re.error as err:
                        raise UserError(f"{path}: {section}[{i}].{key}: bad pattern: {err}") from None
    from predictor.at_scale import DATASETS
    for i, rule in enumerate(data.get("models", [])):
        if rule.get("dataset", "imagenet") not in DATASETS:
            raise UserError(f"{path}: section models[{i}].dataset: must be one of {', '.join(DATASETS)}")
    for i, rule in enumerate(data.get("stacks", [])):
        if rule.get("stack") not in STACKS:
            raise UserError(f"{path}: section stacks[{i}]: must name a stack ({', '.join(STACKS)})")
    allowed = {"ops": MODEL_CODE, "mlm_head": ("masked", "all"), "mixed_precision": MIXED_PRECISIONS,
               "optimizer": OPTIMIZERS}
    for i, rule in enumerate(data.get("transformer_code", [])):
        for key, choices in allowed.items():
            if key in rule and rule[key] not in choices:
                raise UserError(f"{path}: section transformer_code[{i}].{key}: must be one of {', '.join(choices)}")
    for i, rule in enumerate(data.get("nccl", [])):
        algorithms = rule.get("algorithms")
        if not isinstance(algorithms, list) or not algorithms or not set(algorithms) <= set(ALGORITHMS):
            raise UserError(f"{path}: section nccl[{i}].algorithms: must be a list of {', '.join(ALGORITHMS)}")
    for i, rule in enumerate(data.get("transformer_pipeline_boundaries", [])):
        if rule.get("boundary") not in PIPELINE_BOUNDARIES:
            raise UserError(f"{path}: section transformer_pipeline_boundaries[{i}].boundary: must be one of "
                            f"{', '.join(PIPELINE_BOUNDARIES)}")
    return data


def _search(pattern: Optional[str], text: str) -> bool:
    return pattern is None or re.search(pattern, text or "", re.IGNORECASE) is not None


def _first(rules: list[dict], text: str, **exact) -> Optional[dict]:
    for rule in rules:
        if not _search(rule.get("match"), text):
            continue
        if any(key in rule and rule[key] != value for key, value in exact.items()):
            continue
        return rule
    return None


def _system_rule(rules: list[dict], run: PublishedRun) -> Optional[dict]:
    s = run.system
    for rule in rules:
        if not _search(rule.get("gpu"), str(s.get("gpu", ""))):
            continue
        if not _search(rule.get("name"), str(s.get("name", ""))):
            continue
        if not _search(rule.get("network"), str(s.get("inter_node_network", ""))):
            continue
        if "gpus_per_node" in rule and rule["gpus_per_node"] != run.gpus_per_node:
            continue
        if "multi_node" in rule and rule["multi_node"] != (run.nodes > 1):
            continue
        return rule
    return None


def interpret(run: PublishedRun, rules: dict[str, list[dict]]) -> Union[Setup, Skipped]:
    """The Setup of one record, or why it cannot be represented."""
    if run.measured_s is None:
        return Skipped(run, run.measured_note)
    model = _first(rules["models"], run.model)
    if model is None:
        return Skipped(run, f"model {run.model!r} is not in the zoo")
    precision = _first(rules["precisions"], run.precision)
    if precision is None or "skip" in precision:
        return Skipped(run, precision["skip"] if precision else f"precision {run.precision!r} not understood")
    framework = _first(rules["frameworks"], f"{run.framework} {run.parallelism}", multi_gpu=run.num_gpus > 1)
    if framework is None or "skip" in framework:
        return Skipped(run, framework["skip"] if framework else f"framework {run.framework!r} not understood")
    system = _system_rule(rules["systems"], run)
    if system is None or "skip" in system:
        return Skipped(run, system["skip"] if system else f"no reference profile for system {run.system.get('name')!r}")
    optimizer = _first(rules["optimizers"], run.optimizer)
    assumptions = []
    if optimizer.get("assumed"):
        assumptions.append(f"optimizer {run.optimizer!r} taken as {optimizer['optimizer']}")
    if framework.get("assumed"):
        assumptions.append(f"framework {run.framework!r} taken as {framework['regime']}")
    stack = _first(rules.get("stacks", []), run.framework)
    stack = stack["stack"] if stack else "other"
    details = run.extra.get("model_details") or {}
    image, kernel = details.get("image_size"), details.get("conv_kernel")
    knobs = ((("image", int(image)),) if isinstance(image, int) else ()) + (
        (("kernel", int(kernel)),) if isinstance(kernel, int) and not isinstance(kernel, bool) else ())
    per_node = run.system.get("gpus_used_per_node")
    per_node = per_node if isinstance(per_node, int) and per_node > 0 else min(run.num_gpus, run.gpus_per_node or 1)
    return Setup(run=run, model=model["zoo"], knobs=knobs, dtype=precision["dtype"], optimizer=optimizer["optimizer"],
                 framework=framework["regime"], profile=system["profile"], devices_per_node=per_node,
                 synthetic_data="synthetic" in run.data.lower(), assumptions=tuple(assumptions), stack=stack,
                 dataset=model.get("dataset", "imagenet"), staged="staged" in run.data.lower(),
                 memory_format=run.extra.get("memory_format") or "nhwc", bn_group=run.extra.get("bn_group") or 1,
                 cuda_graphs=bool(run.extra.get("cuda_graphs")), decode_core_s=decode_core_s(rules, run),
                 collective_algorithms=nccl_algorithms(rules, run))


def nccl_algorithms(rules: dict, run: PublishedRun) -> tuple[str, ...]:
    """The all-reduce algorithms of a record's NCCL (rules `nccl`, on its framework and framework_version); a record
    no rule names: NCCL 2.4 or later, ring and tree."""
    rule = _first(rules.get("nccl", []), f"{run.framework} {run.extra.get('framework_version', '')}")
    return tuple(rule["algorithms"]) if rule else ALGORITHMS


def decode_core_s(rules: dict, run: PublishedRun) -> Optional[float]:
    """The host core-seconds per sample of a real-data record's CPU loader (rules `input_pipelines`,
    predictor.at_scale.DECODERS); None for synthetic data or a loader no rule names."""
    from predictor.at_scale import DECODERS, decoder_core_s

    rule = _first(rules.get("input_pipelines", []), f"{run.framework} {run.notes}")
    if rule is None or "synthetic" in run.data.lower():
        return None
    if rule["decode"] not in DECODERS:
        raise UserError(f"{RULES_FILE}: input_pipelines: decode {rule['decode']!r}: known are {', '.join(DECODERS)}")
    return decoder_core_s(rule["decode"])
