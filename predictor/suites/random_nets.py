"""Random architectures for `predictor validate --suite random:N --seed S` (issue 18, item 4).

Every net is a layer spec (predictor/layerspec.py) of one of four families (sequential-2d, residual-2d, 3d, mlp),
widths log-uniform over 3-1024, sized so one training step is affordable on a 2-core CPU (training FLOPs within
[MIN_STEP_FLOPS, MAX_STEP_FLOPS], activations and weights capped; the batch drawn among the even batches that keep
it inside), and measured under every strategy the runner can run on it, the others left out with the reason
(RandomNet.skipped). One `random.Random(seed)` stream draws net after net, so net i does not depend on N. No I/O
but `write_specs` (and a private temporary file per candidate, read back by the real layer-spec loader so the
checked FLOPs are those `predict` will see). docs/validation.md ("Random architectures").
"""
from __future__ import annotations

import hashlib
import json
import math
import random
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from predictor.graph import Layer, ModelGraph
from predictor.layerspec import load_layer_spec
from predictor.runner.suite import Suite, SuiteRun
from profiler.opmath import window_output_size

GENERATOR_VERSION = 1

FAMILIES = ("sequential-2d", "residual-2d", "3d", "mlp")
FAMILY_WEIGHTS = (3.0, 2.0, 2.5, 2.5)

#: throughput of one CPU core running one thread of fp32 training (FLOP/s): small, odd-shaped and 3-D
#: convolutions at the slow end, large GEMM-like layers at the fast end
CORE_SLOW_FLOPS_PER_S = 10e9
CORE_FAST_FLOPS_PER_S = 50e9
#: the wanted time of one serial training step (s)
STEP_MIN_S = 0.005
STEP_MAX_S = 2.0
#: the window on a step's training FLOPs (forward + backward of the whole batch), in FLOPs:
#: 5 ms at the fast rate = 0.25 GFLOP, 2 s at the slow rate = 20 GFLOP
MIN_STEP_FLOPS = STEP_MIN_S * CORE_FAST_FLOPS_PER_S
MAX_STEP_FLOPS = STEP_MAX_S * CORE_SLOW_FLOPS_PER_S
#: every layer's output for the whole batch, fp32 (what autograd keeps for the backward), in bytes
MAX_ACTIVATION_BYTES = 2 * 1024 ** 3
#: the weights, fp32, in bytes (gradients, DDP buckets and the update add about 3x this)
MAX_PARAM_BYTES = 256 * 1024 ** 2
FP32_BYTES = 4

#: the ranks of the model- and data-parallel runs
RANKS = 2
MAX_NETS = 200
MAX_ATTEMPTS = 2000  # candidates per net before giving up (a generator bug, never expected)

#: the generator's ranges, written into every dataset row (generator.ranges)
RANGES: dict[str, Any] = {
    "families": list(FAMILIES),
    "family_weights": list(FAMILY_WEIGHTS),
    "width": [3, 1024],  # channels / features, log-uniform; even (>= 4) in 80% of the nets
    "even_width_fraction": 0.8,
    "kernel": [1, 3, 5, 7],  # odd; padding kernel // 2 in 80% of the convs, else 0
    "stride": [1, 2],
    "image_2d": [8, 128],  # input H = W, log-uniform; a multiple of 8 in 70% of the nets
    "image_3d": [4, 32],  # input D = H = W; a multiple of 4 in 70% of the nets
    "image_mlp": [4, 64],
    "input_channels": [1, 4],
    "conv_stages_2d": [1, 6],
    "conv_stages_3d": [1, 4],
    "residual_blocks": [1, 4],
    "head_hidden_linear": [0, 3],
    "mlp_linear": [2, 5],
    "pool": {"probability": 0.35, "kinds": ["maxpool", "avgpool"], "kernel": [2, 3], "stride": 2},
    "batchnorm_probability": 0.5,
    "classes": [2, 1000],  # log-uniform, even
    "batch": [2, 256],  # log-uniform among the even batches that keep the step inside the window
    "micro_batches": [1, 2, 4, 8],
    "ranks": RANKS,
    "step_flops": [MIN_STEP_FLOPS, MAX_STEP_FLOPS],
    "max_activation_bytes": MAX_ACTIVATION_BYTES,
    "max_param_bytes": MAX_PARAM_BYTES,
}

SERIAL_STRATEGIES = ("serial", "serial+recompute")
PARALLEL_STRATEGIES = ("data", "pipeline", "filter", "channel", "spatial")
STRATEGIES = SERIAL_STRATEGIES + PARALLEL_STRATEGIES


@dataclass(frozen=True)
class RandomNet:
    """One generated net, its batch and the strategies it is measured under."""

    index: int
    family: str
    spec: dict[str, Any]  # the layer spec (JSON-ready)
    batch: int
    micro_batches: int  # the pipeline's S
    strategies: tuple[str, ...]  # requested, in STRATEGIES order
    skipped: dict[str, str]  # strategy -> why the generator left it out
    runner_note: str  # "" or why the validation runner refuses the whole net (e.g. not a plain chain)
    step_flops: float  # training FLOPs of one serial step (forward + backward, whole batch)
    activation_bytes: float  # every layer's output for the batch, fp32
    param_bytes: float
    widths: tuple[int, ...] = field(default=())  # output channels / features of the conv and linear layers
    kernels: tuple[int, ...] = field(default=())  # conv kernel sizes

    @property
    def text(self) -> str:
        """The spec file's exact content."""
        return spec_text(self.spec)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    @property
    def file_name(self) -> str:
        """net-<index>-<sha256 prefix>.json: a file never changes content under its name."""
        return f"net-{self.index:03d}-{self.sha256[:10]}.json"


def spec_text(spec: dict[str, Any]) -> str:
    return json.dumps(spec, indent=1) + "\n"


# ---- drawing ----------------------------------------------------------------------------------------
def _log_int(rng: random.Random, low: int, high: int) -> int:
    """An integer log-uniform in [low, high]."""
    return min(high, max(low, int(round(math.exp(rng.uniform(math.log(low), math.log(high)))))))


def _even(value: int) -> int:
    return value + value % 2


class _Builder:
    """Appends layer-spec entries and tracks each layer's output shape (the loader recomputes them)."""

    def __init__(self, input_shape: tuple[int, ...], even_widths: bool):
        self.input = list(input_shape)
        self.layers: list[dict[str, Any]] = []
        self.shapes: dict[str, tuple[int, ...]] = {"": tuple(input_shape)}
        self.last = ""
        self.even_widths = even_widths
        self.counts: dict[str, int] = {}

    @property
    def shape(self) -> tuple[int, ...]:
        return self.shapes[self.last]

    def width(self, value: float) -> int:
        w = min(1024, max(3, int(round(value))))
        return min(1024, _even(w)) if self.even_widths else w

    def add(self, op: str, shape: tuple[int, ...], inputs: list[str] | None = None, **fields: Any) -> str:
        self.counts[op] = self.counts.get(op, 0) + 1
        name = f"{op}{self.counts[op]}"
        entry: dict[str, Any] = {"name": name, "op": op, **fields}
        if inputs is not None:
            entry["inputs"] = inputs
        self.layers.append(entry)
        self.shapes[name] = shape
        self.last = name
        return name

    def conv(self, filters: int, kernel: int, stride: int, padding: int, source: str | None = None) -> str:
        x = self.shapes[self.last if source is None else source]
        nd = len(x) - 1
        out = tuple(window_output_size(s, kernel, stride, padding) for s in x[1:])
        op = "conv2d" if nd == 2 else "conv3d"
        return self.add(op, (filters, *out), None if source is None else [source],
                        filters=filters, kernel=kernel, stride=stride, padding=padding)

    def pool(self, kind: str, kernel: int | list[int], stride: int | list[int]) -> str:
        x = self.shape
        ks = kernel if isinstance(kernel, list) else [kernel] * (len(x) - 1)
        ss = stride if isinstance(stride, list) else [stride] * (len(x) - 1)
        out = tuple((s - k) // st + 1 for s, k, st in zip(x[1:], ks, ss))
        return self.add(kind, (x[0], *out), kernel=kernel, stride=stride)

    def simple(self, op: str) -> str:
        return self.add(op, self.shape)

    def flatten(self) -> str:
        return self.add("flatten", (math.prod(self.shape),))

    def linear(self, out: int) -> str:
        return self.add("linear", (out,), out=out)

    def add_branches(self, a: str, b: str) -> str:
        return self.add("add", self.shapes[a], inputs=[a, b])

    def spec(self, name: str) -> dict[str, Any]:
        return {"name": name, "input": self.input, "layers": self.layers}


def _conv_stage(rng: random.Random, b: _Builder, width: int) -> None:
    """conv (odd kernel 1-7, stride 1-2) [+ batch norm] + relu [+ pool]."""
    size = min(b.shape[1:])
    kernel = rng.choice((1, 3, 3, 5, 7))
    padding = kernel // 2 if rng.random() < 0.8 else 0
    if size + 2 * padding < kernel:
        padding = kernel // 2
    stride = 2 if size >= 4 and rng.random() < 0.25 else 1
    b.conv(width, kernel, stride, padding)
    if rng.random() < RANGES["batchnorm_probability"]:
        b.simple("batchnorm")
    b.simple("relu")
    if min(b.shape[1:]) >= 4 and rng.random() < RANGES["pool"]["probability"]:
        b.pool(rng.choice(RANGES["pool"]["kinds"]), 2 if rng.random() < 0.8 else 3, 2)


def _head(rng: random.Random, b: _Builder, classes: int) -> None:
    """[global average pool] + flatten + 0-3 hidden linear layers (+ relu, optional batch norm, dropout) + classifier."""
    if len(b.shape) > 1:
        if max(b.shape[1:]) > 1 and rng.random() < 0.3:
            b.pool("avgpool", list(b.shape[1:]), list(b.shape[1:]))
        b.flatten()
    low, high = RANGES["head_hidden_linear"]
    for _ in range(rng.randint(low, high)):
        _hidden_linear(rng, b, batchnorm_p=0.2, dropout_p=0.2)
    b.linear(classes)


def _hidden_linear(rng: random.Random, b: _Builder, batchnorm_p: float, dropout_p: float) -> None:
    """A hidden linear layer of random width, [batch norm], relu, [dropout]."""
    b.linear(b.width(_log_int(rng, *RANGES["width"])))
    if rng.random() < batchnorm_p:
        b.simple("batchnorm")
    b.simple("relu")
    if rng.random() < dropout_p:
        b.add("dropout", b.shape, p=0.1)


def _image(rng: random.Random, key: str, multiple: int) -> int:
    low, high = RANGES[key]
    size = _log_int(rng, low, high)
    if rng.random() < 0.7:
        size = min(high, max(multiple, int(round(size / multiple)) * multiple))
    return size


def _sequential(rng: random.Random, nd: int, even: bool, classes: int) -> _Builder:
    size = _image(rng, "image_2d" if nd == 2 else "image_3d", 8 if nd == 2 else 4)
    b = _Builder((rng.randint(*RANGES["input_channels"]), *([size] * nd)), even)
    width = _log_int(rng, *RANGES["width"])
    for stage in range(rng.randint(*RANGES["conv_stages_2d" if nd == 2 else "conv_stages_3d"])):
        if stage:
            width = width * rng.choice((0.5, 1.0, 1.0, 2.0))
        _conv_stage(rng, b, b.width(width))
    _head(rng, b, classes)
    return b


def _residual(rng: random.Random, even: bool, classes: int) -> _Builder:
    size = _image(rng, "image_2d", 8)
    b = _Builder((rng.randint(*RANGES["input_channels"]), size, size), even)
    width = b.width(_log_int(rng, *RANGES["width"]))
    kernel = rng.choice((3, 5, 7))
    b.conv(width, kernel, 2 if size >= 16 and rng.random() < 0.5 else 1, kernel // 2)
    b.simple("batchnorm")
    b.simple("relu")
    if min(b.shape[1:]) >= 8 and rng.random() < 0.3:
        b.pool("maxpool", 2, 2)
    for _ in range(rng.randint(*RANGES["residual_blocks"])):
        x = b.last
        new = b.width(width * rng.choice((1.0, 1.0, 2.0)))
        stride = 2 if min(b.shape[1:]) >= 4 and rng.random() < 0.4 else 1
        kernel = rng.choice((1, 3, 3, 5))
        b.conv(new, kernel, stride, kernel // 2)
        b.simple("batchnorm")
        b.simple("relu")
        b.conv(new, kernel, 1, kernel // 2)
        y = b.simple("batchnorm")
        shortcut = x
        if new != width or stride != 1:  # the shortcut must match the block's output shape
            shortcut = b.conv(new, 1, stride, 0, source=x)
            if rng.random() < 0.5:
                shortcut = b.simple("batchnorm")
        b.add_branches(y, shortcut)
        b.simple("relu")
        width = new
    _head(rng, b, classes)
    return b


def _mlp(rng: random.Random, even: bool, classes: int) -> _Builder:
    size = _log_int(rng, *RANGES["image_mlp"])
    b = _Builder((rng.randint(*RANGES["input_channels"]), size, size), even)
    b.flatten()
    layers = rng.randint(*RANGES["mlp_linear"])
    for _ in range(layers - 1):
        _hidden_linear(rng, b, batchnorm_p=0.3, dropout_p=0.15)
    b.linear(classes)
    return b


def _candidate(rng: random.Random, family: str, name: str) -> dict[str, Any]:
    even = rng.random() < RANGES["even_width_fraction"]
    classes = min(RANGES["classes"][1], _even(_log_int(rng, *RANGES["classes"])))
    if family == "sequential-2d":
        b = _sequential(rng, 2, even, classes)
    elif family == "3d":
        b = _sequential(rng, 3, even, classes)
    elif family == "residual-2d":
        b = _residual(rng, even, classes)
    else:
        b = _mlp(rng, even, classes)
    return b.spec(name)


# ---- checking ---------------------------------------------------------------------------------------
def spec_graph(spec: dict[str, Any]) -> ModelGraph:
    """The ModelGraph the layer-spec loader builds from `spec` (written to a private temporary file)."""
    with tempfile.TemporaryDirectory(prefix="paraoracle-random-net-") as folder:
        path = Path(folder) / f"{spec.get('name', 'net')}.json"
        path.write_text(spec_text(spec))
        return load_layer_spec(path)


def activation_bytes_per_sample(graph: ModelGraph) -> float:
    return float(FP32_BYTES * sum(math.prod(layer.output_shape) for layer in graph.layers))


def _computing(graph: ModelGraph) -> list[Layer]:
    """The layers the runner builds modules for (runner/nets.build_layer: dropout and the loss build none)."""
    return [layer for layer in graph.layers if layer.op not in ("dropout", "softmax_loss")]


def min_batchnorm_values(graph: ModelGraph) -> int:
    """Fewest values per channel a batch norm sees per sample (1 for a norm over features or 1x1 maps)."""
    return min((math.prod(layer.input_shape[1:]) for layer in graph.layers if layer.op == "batchnorm"), default=0)


def filter_problem(graph: ModelGraph, p: int = RANKS) -> str:
    """Why the runner's filter split (runner/filter.py) cannot run the net on p ranks, or ""."""
    for layer in _computing(graph):
        if layer.op in ("conv2d", "conv3d", "linear", "batchnorm") and layer.channels_out % p:
            return f"layer {layer.name} has {layer.channels_out} output channels, not divisible by {p}"
    return ""


def channel_problem(graph: ModelGraph, p: int = RANKS) -> str:
    """Why the runner's channel split (runner/channel.py) cannot run the net on p ranks, or ""."""
    weights = [layer for layer in _computing(graph) if layer.op in ("conv2d", "conv3d", "linear")]
    if len(weights) < 2:
        return "one weight layer only: no layer past the input to split by channels"
    for layer in weights[:-1]:
        if layer.channels_out % p:
            return f"layer {layer.name} has {layer.channels_out} output channels, not divisible by {p}"
    return ""


def spatial_problem(graph: ModelGraph, p: int = RANKS) -> str:
    """Why the runner's spatial split (runner/spatial.py: first spatial dimension over p ranks, halo
    exchange, all-gather at the first flatten/linear) cannot run the net, or "". SpatialReplica._check's
    rules (tests/predictor/test_random_suite.py compares the two on generated nets), plus one it lacks: each conv's
    local output must be its share of the serial output, which the runner's halos give only for 'same'
    padding along the split dim (an unpadded conv passes _check and then crashes the run)."""
    from predictor.runner.spatial import halo_rows

    if len(graph.input_shape) < 2:
        return "no spatial dimensions"
    layers = _computing(graph)
    end = next((i for i, layer in enumerate(layers) if layer.op in ("flatten", "linear")), len(layers))
    if end == 0:
        return "no spatial dimensions (the net flattens its input first)"
    if end == len(layers):
        return "no flatten or linear layer to end the split part of the net"
    for layer in layers[:end]:
        length_in, length_out = layer.input_shape[1], layer.output_shape[1]
        if length_in % p or length_out % p:
            return f"layer {layer.name} has split-dim size {length_in} -> {length_out}, not divisible by {p}"
        before, after = halo_rows(layer)
        local = length_in // p
        if layer.op in ("maxpool", "avgpool") and (before or after):
            return f"pooling layer {layer.name} needs kernel == stride and no padding along the split dim"
        if max(before, after) > local:
            return f"layer {layer.name} needs a halo of {max(before, after)} rows but holds only {local}"
        if layer.stride and local % layer.stride[0]:
            return f"layer {layer.name}'s local slab {local} is not a multiple of its stride {layer.stride[0]}"
        if layer.kernel:  # the runner's slab: `before` rows from the left, `after` from the right (zeros at the ends)
            rows = (local + before + after - layer.kernel[0]) // layer.stride[0] + 1
            if rows * p != length_out:
                # SpatialReplica._check lets this through and the run then crashes at the flatten: the
                # runner's halo scheme assumes 'same' padding along the split dim
                return (f"layer {layer.name} (kernel {layer.kernel[0]}, padding {layer.padding[0]}) would give {rows} "
                        f"rows per rank where the serial net has {length_out // p}: the runner's halos assume "
                        "'same' padding along the split dim")
    return ""


def runner_note(graph: ModelGraph) -> str:
    """Why the validation runner refuses the whole net (its own check), or ""."""
    from predictor.runner.nets import check_runnable
    from profiler.errors import UserError

    try:
        check_runnable(graph)
    except UserError as err:
        return str(err)
    return ""


def plan_runs(graph: ModelGraph, family: str, batch: int) -> tuple[tuple[str, ...], dict[str, str]]:
    """(strategies requested, {strategy: why left out}) for a net at a batch, by the runner's rules."""
    skipped = {}
    if batch % RANKS:
        skipped["data"] = f"batch {batch} is not divisible by {RANKS} data-parallel replicas"
    bn = min_batchnorm_values(graph)
    if bn and (batch // RANKS) * bn < 2 and "data" not in skipped:
        skipped["data"] = "batch norm would see 1 value per channel on a replica"
    if len(_computing(graph)) < RANKS:
        skipped["pipeline"] = f"fewer than {RANKS} layers to cut into stages"
    from predictor.runner.nets import BRANCHED_STRATEGIES, is_chain

    branched = not is_chain(graph)
    for name in ("pipeline", "filter", "channel", "spatial"):
        if branched and name not in BRANCHED_STRATEGIES:
            skipped[name] = "the runner runs nets with branches (residual adds) serially or data-parallel only"
    for name, rule in (("filter", filter_problem), ("channel", channel_problem), ("spatial", spatial_problem)):
        if name in skipped:
            continue
        why = "no spatial dimensions (MLP)" if name == "spatial" and family == "mlp" else rule(graph)
        if why:
            skipped[name] = why
    return tuple(s for s in STRATEGIES if s not in skipped), skipped


def _widths_kernels(graph: ModelGraph) -> tuple[tuple[int, ...], tuple[int, ...]]:
    widths = tuple(l.channels_out for l in graph.layers if l.op in ("conv2d", "conv3d", "linear"))
    kernels = tuple(l.kernel[0] for l in graph.layers if l.op in ("conv2d", "conv3d"))
    return widths, kernels


def _batch(rng: random.Random, graph: ModelGraph) -> int | None:
    """An even batch, log-uniform among those that keep the step inside the FLOPs and memory window."""
    per_sample = graph.flops_per_sample
    low = max(RANGES["batch"][0], math.ceil(MIN_STEP_FLOPS / per_sample))
    high = min(RANGES["batch"][1], math.floor(MAX_STEP_FLOPS / per_sample),
               math.floor(MAX_ACTIVATION_BYTES / activation_bytes_per_sample(graph)))
    if min_batchnorm_values(graph) == 1:
        low = max(low, 2 * RANKS)  # batch norm over single values needs >= 2 samples on every replica
    low, high = _even(low), high - high % 2
    if low > high:
        return None
    return min(high, max(low, _even(_log_int(rng, low, high)) if low < high else low))


def _micro_batches(rng: random.Random, graph: ModelGraph, batch: int) -> int:
    single = min_batchnorm_values(graph) == 1
    choices = [s for s in RANGES["micro_batches"] if batch % s == 0 and (not single or batch // s >= 2)]
    return rng.choice(choices)


def generate_net(rng: random.Random, index: int, seed: int) -> RandomNet:
    """Draw one net (family, architecture, batch, micro-batches) from `rng`, redrawing the architecture
    until its step fits the FLOPs and memory window."""
    family = rng.choices(FAMILIES, weights=FAMILY_WEIGHTS)[0]
    name = f"random-s{seed}-{index:03d}-{family}"
    for _ in range(MAX_ATTEMPTS):
        spec = _candidate(rng, family, name)
        graph = spec_graph(spec)
        if graph.params * FP32_BYTES > MAX_PARAM_BYTES:
            continue
        batch = _batch(rng, graph)
        if batch is None:
            continue
        strategies, skipped = plan_runs(graph, family, batch)
        widths, kernels = _widths_kernels(graph)
        return RandomNet(index=index, family=family, spec=spec, batch=batch,
                         micro_batches=_micro_batches(rng, graph, batch), strategies=strategies, skipped=skipped,
                         runner_note=runner_note(graph), step_flops=graph.flops_per_sample * batch,
                         activation_bytes=activation_bytes_per_sample(graph) * batch,
                         param_bytes=float(graph.params * FP32_BYTES), widths=widths, kernels=kernels)
    raise RuntimeError(f"random net {index} ({family}): no candidate inside the window after {MAX_ATTEMPTS} draws")


def random_nets(n: int, seed: int) -> list[RandomNet]:
    """n nets drawn from random.Random(seed), one after another."""
    if not 1 <= n <= MAX_NETS:
        raise ValueError(f"n must be in 1..{MAX_NETS}, got {n}")
    rng = random.Random(seed)
    return [generate_net(rng, index, seed) for index in range(n)]


# ---- suite ------------------------------------------------------------------------------------------
def suite_name(n: int, seed: int) -> str:
    return f"random:{n}/seed={seed}"


def suite_of(nets: list[RandomNet], seed: int, spec_dir: str | Path, warmup: int = 2, iterations: int = 10) -> Suite:
    """The validation suite of `nets`, each net's model the path of its spec file in spec_dir. A run's
    `line` is the net's number (index + 1)."""
    suite = Suite(suite_name(len(nets), seed), warmup=warmup, iterations=iterations)
    for net in nets:
        model = str(Path(spec_dir) / net.file_name)
        for strategy in net.strategies:
            base, _, addon = strategy.partition("+")
            suite.runs.append(SuiteRun(
                line=net.index + 1, model=model, knobs=(), strategy=base, addons=(addon,) if addon else (),
                batch=net.batch, ranks=1 if base == "serial" else RANKS,
                micro_batches=net.micro_batches if base == "pipeline" else 1))
    return suite


def random_suite(n: int, seed: int, spec_dir: str | Path = ".") -> tuple[Suite, list[dict[str, Any]]]:
    """(the suite, the layer specs) of n random nets; the suite names the specs as files in spec_dir
    (write them there with write_specs before validating)."""
    nets = random_nets(n, seed)
    return suite_of(nets, seed, spec_dir), [net.spec for net in nets]


def write_specs(nets: list[RandomNet], folder: str | Path) -> list[Path]:
    """Each net's spec as <folder>/<net.file_name>, written atomically (the folder must exist)."""
    from profiler.outputs import write_atomic

    paths = []
    for net in nets:
        path = Path(folder) / net.file_name
        write_atomic(path, net.text)
        paths.append(path)
    return paths


def generator_record(net: RandomNet, seed: int, n: int, spec_path: str) -> dict[str, Any]:
    """What a dataset row records about the net it measured (the `generator` field)."""
    return {"name": "random", "version": GENERATOR_VERSION, "seed": seed, "n": n, "index": net.index,
            "family": net.family, "spec": spec_path, "spec_sha256": net.sha256, "batch": net.batch,
            "micro_batches": net.micro_batches, "step_flops": net.step_flops,
            "activation_bytes": net.activation_bytes, "param_bytes": net.param_bytes,
            "strategies": list(net.strategies), "skipped": dict(net.skipped), "runner_note": net.runner_note,
            "ranges": RANGES}


def describe(net: RandomNet) -> str:
    """One line per net for the validate log."""
    layers = len(net.spec["layers"])
    line = (f"  net {net.index:03d} {net.family:<13} B={net.batch:<3} {layers:>2} layers, widths "
            f"{min(net.widths)}-{max(net.widths)}, {net.step_flops / 1e9:6.2f} GFLOP/step, "
            f"{net.activation_bytes / 1e6:7.1f} MB activations")
    if net.skipped:
        line += "; left out: " + "; ".join(f"{s} ({why})" for s, why in net.skipped.items())
    if net.runner_note:
        line += f"; the runner will refuse it: {net.runner_note}"
    return line
