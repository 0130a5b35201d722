"""Cooperative-process model parallelism vs GPipe on 4 devices: predicted vs published speed-up.

Published (Yu & Park, IEEE Access 2023, abstract only; docs/method.md §18): on four devices cooperative is faster
than GPipe by +15.3% (VGG16-bn), +34.5% (ResNet-50), +25.8% (Inception-v3). The abstract gives no batch sizes,
micro-batch counts, precision or GPipe settings: this script states its own (flags) and reports each scheme at its
fastest micro-batch count that fits the device memory, the speed-up as T_gpipe / T_cooperative - 1. Records the
predicted and published speed-ups in results/cooperative.json (no targets).

    python -m bench cooperative                        # V100 ABCI reference profile, batch 128
    python -m bench cooperative --batch 64 --profile v100-dgx1-8gpu.published
"""
from __future__ import annotations

import torch.nn as nn

from bench import describe
from bench.record import Figure, add_results_flag, record
from calibrate.cost_model import load_cost_model
from calibrate.shipped import resolve_profile
from predictor.api import load_model
from predictor.block_costs import boundary_bytes_per_sample, graph_blocks, per_layer_groups
from predictor.cooperative import best_micro_batches, cooperative, gpipe
from predictor.layercost import ACT_BYTES, OPTIMIZER_STATE_WORDS, LayerCoster
from predictor.strategies.pipeline import partition as balanced_starts
from predictor.trace import trace_module
from predictor.zoo.vgg import VGG
from profiler.cliutil import batch_size, device_count, float_in, int_in

NAME = "cooperative"

PUBLISHED_SPEEDUP = {"vgg16_bn": 0.153, "resnet50": 0.345, "inception_v3": 0.258}
ZOO_NAME = {"resnet50": "resnet50", "inception_v3": "inception_v3"}
DEFAULT_PROFILE = "v100-abci-4gpu.published"  # a shipped profile (calibrate/profiles)


def vgg16_bn() -> nn.Module:
    """The zoo's VGG16 with a BatchNorm2d after every convolution (torchvision's vgg16_bn layout)."""
    model = VGG()
    layers = []
    for layer in model.features:
        layers.append(layer)
        if isinstance(layer, nn.Conv2d):
            layers.append(nn.BatchNorm2d(layer.out_channels))
    model.features = nn.Sequential(*layers)
    return model


class WithKernelOverhead:
    """The profile's cost model plus a fixed overhead per kernel call (sensitivity knob, --kernel-overhead-us:
    the published profiles carry only the 3 us null-kernel launch floor, not PyTorch's per-operator host time)."""

    def __init__(self, cost_model, overhead_s: float):
        self._cm = cost_model
        self.overhead_s = overhead_s

    def __getattr__(self, name):
        return getattr(self._cm, name)

    def compute_time_s(self, op, pass_, params, dtype):
        return self._cm.compute_time_s(op, pass_, params, dtype) + self.overhead_s

    def memory_time_s(self, bytes_moved, *, where="device"):
        return self._cm.memory_time_s(bytes_moved, where=where) + self.overhead_s


def model_graph(model: str):
    if model == "vgg16_bn":
        return trace_module(vgg16_bn(), (3, 224, 224), "vgg16_bn")
    return load_model(ZOO_NAME[model])


def compare(model: str, cost_model, batch: int, devices: int, dtype: str, optimizer: str,
            gpipe_micro_batches: int | None) -> dict:
    graph = model_graph(model)
    coster = LayerCoster(graph, cost_model, dtype)
    cache = {}

    def blocks_at(samples):
        if samples not in cache:
            cache[samples] = graph_blocks(graph, coster, samples, per_layer_groups(graph))
        return cache[samples]

    # one stage cut for both schemes: balanced on compute at N/K samples (the pipeline strategy's partition)
    reference = blocks_at(max(1, batch // devices))
    starts = balanced_starts([b.fwd_s + b.bwd_s for b in reference], devices)
    partition = list(zip(starts, starts[1:] + [len(reference)]))
    boundary = boundary_bytes_per_sample(graph, [s for s, _ in partition], ACT_BYTES[dtype])
    state = OPTIMIZER_STATE_WORDS[optimizer]

    def p2p(size):
        return cost_model.collective_time_s("sendrecv", size, 2, 1)

    def collective(op, size, group):
        return cost_model.collective_time_s(op, size, group, 1)

    cap = cost_model.device_memory_bytes
    gpipe_counts = {"min_micro_batches": gpipe_micro_batches, "max_micro_batches": gpipe_micro_batches} \
        if gpipe_micro_batches else {}
    results = {
        "gpipe": best_micro_batches(lambda m: gpipe(blocks_at, batch, partition, boundary, m, p2p,
                                                    optimizer_state_per_param=state), batch, cap, **gpipe_counts),
        "gpipe-no-remat": best_micro_batches(lambda m: gpipe(blocks_at, batch, partition, boundary, m, p2p, remat=False,
                                                             optimizer_state_per_param=state), batch, cap,
                                             **gpipe_counts),
        "cooperative": best_micro_batches(lambda m: cooperative(blocks_at, batch, partition, boundary, m, p2p, collective,
                                                                optimizer_state_per_param=state), batch, cap),
    }
    return results


def add_arguments(parser) -> None:
    describe(parser, __doc__)
    parser.add_argument("--profile", default=DEFAULT_PROFILE, help="profile YAML or a shipped profile's name")
    parser.add_argument("--batch", type=batch_size, default=128, help="global mini-batch (default 128)")
    parser.add_argument("--devices", type=device_count, default=4)
    parser.add_argument("--dtype", default="fp32", choices=sorted(ACT_BYTES))
    parser.add_argument("--optimizer", default="sgd", choices=sorted(OPTIMIZER_STATE_WORDS))
    parser.add_argument("--gpipe-micro-batches", type=int_in(1, 1 << 20), default=None,
                        help="fix GPipe's micro-batch count (e.g. 4K = 16, GPipe's guideline); default: its fastest")
    parser.add_argument("--kernel-overhead-us", type=float_in(0.0, 1e6, low_open=False), default=0.0,
                        help="add this fixed time to every kernel call, on top of the profile's launch term (sensitivity; default 0)")
    add_results_flag(parser)


def run(args) -> int:
    cm = load_cost_model(resolve_profile(args.profile))
    if args.kernel_overhead_us:
        cm = WithKernelOverhead(cm, args.kernel_overhead_us * 1e-6)
    print(f"profile {args.profile}; batch {args.batch}; {args.devices} devices; {args.dtype}; {args.optimizer}; "
          f"GPipe micro-batches {args.gpipe_micro_batches or 'fastest'}; kernel overhead {args.kernel_overhead_us} us")
    print(f"{'model':13} {'scheme':15} {'M':>4} {'iter ms':>9} {'fwd':>7} {'bwd':>7} {'recomp':>7} {'bubble':>7} "
          f"{'comm':>6} {'mem GB':>7} {'act GB':>7}")
    summary, figures = [], []
    for model, published in PUBLISHED_SPEEDUP.items():
        results = compare(model, cm, args.batch, args.devices, args.dtype, args.optimizer, args.gpipe_micro_batches)
        for scheme, c in results.items():
            if c is None:
                print(f"{model:13} {scheme:15} does not fit at any micro-batch count")
                continue
            print(f"{model:13} {scheme:15} {c.micro_batches:>4} {c.iteration_s * 1e3:9.1f} {c.forward_s * 1e3:7.1f} "
                  f"{c.backward_s * 1e3:7.1f} {c.recompute_s * 1e3:7.1f} {c.bubble_s * 1e3:7.1f} "
                  f"{(c.p2p_s + c.collectives_s) * 1e3:6.1f} {c.memory_bytes / 1e9:7.2f} {c.activation_bytes / 1e9:7.2f}")
        g, n, c = results["gpipe"], results["gpipe-no-remat"], results["cooperative"]
        if g and c:
            no_remat = f"{c.memory_bytes / n.memory_bytes - 1:+.1%}" if n else "(does not fit)"
            summary.append(f"{model:13} speed-up predicted {g.iteration_s / c.iteration_s - 1:+.1%}, published "
                           f"{published:+.1%}; cooperative memory vs GPipe: {c.memory_bytes / g.memory_bytes - 1:+.1%} "
                           f"(remat), {no_remat} (no remat; published: up to -75.0%)")
            figures += [Figure(f"{model}: predicted speed-up over GPipe", (g.iteration_s / c.iteration_s - 1) * 100, "%"),
                        Figure(f"{model}: published speed-up over GPipe", published * 100, "%"),
                        Figure(f"{model}: cooperative memory vs GPipe (remat)",
                               (c.memory_bytes / g.memory_bytes - 1) * 100, "%")]
    print("\ncooperative vs GPipe with re-materialisation (speed) and without (memory):")
    print("\n".join(summary))
    record(NAME, figures, args.results)
    return 0
