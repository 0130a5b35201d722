"""Collective fits: one piecewise alpha-beta line per (operation, group size, node count), then per-link
parameters (latency per step, bus bandwidth per level) so unmeasured group sizes follow ring formulas.

x of every line is S * bus_factor(op, p) (calibrate.collective_model), so each segment's bandwidth is the
nccl-tests bus bandwidth (nccl-tests doc/PERFORMANCE.md) and lines for different p compare directly.
Per-link derivation (docs/method.md §6; ring step counts after Thakur, Rabenseifner & Gropp, IJHPCA 2005, and
alpha rising with the step count as fitted to nccl-tests issue #123): the small-message alpha of each
measured group is regressed on its step count, alpha(p) = a0 + a1 * intra_steps (+ a2 * inter_steps), with
the relative-error loss of calibrate.alphabeta; the bus bandwidth of a level is the large-message bandwidth
of its largest measured group. With one group size only, a0 = 0 and a1 = alpha / steps (stated in notes).
"""
from __future__ import annotations

from collections import defaultdict
from typing import Sequence

import numpy as np

from calibrate.alphabeta import Point, fit_alpha_beta, fit_line
from calibrate.coefficients import CollectiveFit, Estimate, LinkModel
from calibrate.collective_model import bus_factor, latency_steps, tree_latency_steps
from profiler.errors import UserError
from profiler.profile import Sample

COLLECTIVE_BENCHMARKS = ("allreduce", "allgather", "reduce_scatter", "alltoall", "broadcast", "sendrecv", "halo")
#: which timing regime the cost model uses when several exist: each op after compute, as a training step
#: issues them (profiler.comm.harness), else back-to-back ops (nccl-tests imports), else isolated ops
PREFERRED_VARIANTS = ("interleaved", "throughput", "latency")
#: a training step pays the sum of its collective calls, i.e. their mean, and gloo's per-call times have a heavy
#: tail: fitted to medians, the validation runs' communication came out 2-3x too cheap
#: (docs/decisions/2026-11-30-interleaved-collectives.md)
MEAN_TIMES = "mean"


def group_of(sample: Sample) -> tuple[int, int]:
    """(group size, node count) of a collective sample; UserError names what is missing."""
    group = sample.params.get("group")
    if not isinstance(group, dict) or "size" not in group:
        raise UserError(f"{sample.benchmark} sample has no params.group.size (group size)")
    nodes = group.get("nodes") or (len(set(group["hosts"])) if group.get("hosts") else 1)
    return int(group["size"]), int(nodes)


def size_of(sample: Sample) -> float:
    if "size_bytes" not in sample.params:
        raise UserError(f"{sample.benchmark} sample has no params.size_bytes (message size S)")
    return float(sample.params["size_bytes"])


def _describe(op: str, p: int, nodes: int) -> str:
    return f"{op} (group of {p}, {nodes} node{'s' if nodes > 1 else ''})"


def fit_collectives(samples: Sequence[Sample], rng: np.random.Generator) -> list[CollectiveFit]:
    """One CollectiveFit per measured (op, group size, nodes), from its preferred timing variant."""
    by_key: dict[tuple, list[Sample]] = defaultdict(list)
    for s in samples:
        p, nodes = group_of(s)
        if p >= 2:
            by_key[(s.benchmark, p, nodes, s.variant)].append(s)
    fits = []
    for op, p, nodes in sorted({k[:3] for k in by_key}):
        variant = next(v for v in PREFERRED_VARIANTS + tuple(sorted(k[3] for k in by_key))
                       if (op, p, nodes, v) in by_key)
        chosen = by_key[(op, p, nodes, variant)]
        sizes = sorted({size_of(s) for s in chosen})
        if len(sizes) < 2:
            raise UserError(f"{_describe(op, p, nodes)} has {variant} samples for only one message size "
                            f"({sizes[0]:.0f} bytes); need >= 2 to fit latency and bandwidth")
        factor = bus_factor(op, p)
        points = [Point(size_of(s) * factor, np.asarray(s.times_s, float), MEAN_TIMES) for s in chosen]
        fit = fit_alpha_beta(points, rng)
        fits.append(CollectiveFit(op=op, group_size=p, nodes=nodes, variant=variant,
                                  **fit.model_dump(exclude={"sources"}), sources=[f"measured: {len(chosen)} samples"]))
    return fits


def _scaled(est: Estimate, f) -> Estimate:
    values = sorted([f(est.value), f(est.low), f(est.high)])
    return Estimate(value=f(est.value), low=values[0], high=values[2])


def derive_links(fits: Sequence[CollectiveFit]) -> tuple[dict[str, dict[str, LinkModel]], list[str]]:
    """Per op: an intra-node LinkModel from single-node fits, an inter-node one from multi-node fits."""
    links: dict[str, dict[str, LinkModel]] = {}
    notes: list[str] = []
    for op in sorted({f.op for f in fits}):
        intra = [f for f in fits if f.op == op and f.nodes == 1]
        inter = [f for f in fits if f.op == op and f.nodes > 1]
        levels = {}
        if intra:
            levels["intra"], note = _intra_link(op, intra)
            notes += note
        if inter:
            levels["inter"], note = _inter_link(op, inter, levels.get("intra"))
            notes += note
        links[op] = levels
    return links, notes


def _alpha_regression(steps: np.ndarray, alphas: list[Estimate]) -> tuple[Estimate, Estimate]:
    """(a0, a1) of alpha = a0 + a1 * steps at the value and at each end of the alpha intervals."""
    def solve(vals):
        if len(np.unique(steps)) >= 2:
            return fit_line(steps.astype(float), np.maximum(np.array(vals), 1e-12))
        return 0.0, float(np.mean(np.array(vals) / steps))

    mid, lo, hi = (solve([getattr(a, k) for a in alphas]) for k in ("value", "low", "high"))
    return (Estimate(value=mid[0], low=min(lo[0], mid[0]), high=max(hi[0], mid[0])),
            Estimate(value=mid[1], low=min(lo[1], mid[1]), high=max(hi[1], mid[1])))


def _intra_link(op: str, fits: list[CollectiveFit]) -> tuple[LinkModel, list[str]]:
    steps = np.array([sum(latency_steps(op, f.group_size, 1)) for f in fits])
    a0, a1 = _alpha_regression(steps, [f.segments[0].alpha_s for f in fits])
    largest = max(fits, key=lambda f: f.group_size)
    notes = []
    if len(np.unique(steps)) < 2:
        notes.append(f"{op}: one intra-node group size measured ({largest.group_size}); latency per step = "
                     f"alpha / steps with no base latency")
    return LinkModel(base_latency_s=a0, step_latency_s=a1,
                     bus_bandwidth_bytes_per_s=largest.segments[-1].bandwidth_bytes_per_s,
                     measured_group_sizes=sorted({f.group_size for f in fits}),
                     sources=[f"fitted from {len(fits)} measured intra-node group size(s)"]), notes


def _inter_step_latency(op: str, fits: list[CollectiveFit], a0: float, a1: float, bound: str) -> float:
    """Latency per inter-node step a2 that makes alpha(p, N) = a0 + min over NCCL's algorithms (ring, tree) of
    intra_steps * a1 + inter_steps * a2 match the measured small-message alphas (relative least squares), as
    the cost model will use it; `bound` picks the value or an end of each alpha's interval."""
    from scipy.optimize import minimize_scalar

    targets = [(getattr(f.segments[0].alpha_s, bound), [s for s in (latency_steps(op, f.group_size, f.nodes),
                                                                    tree_latency_steps(op, f.group_size, f.nodes)) if s])
               for f in fits]

    def loss(a2: float) -> float:
        return sum(((a0 + min(i * a1 + j * a2 for i, j in steps)) / max(alpha, 1e-12) - 1.0) ** 2
                   for alpha, steps in targets)

    upper = max(max(alpha for alpha, _ in targets), 1e-9)
    return float(minimize_scalar(loss, bounds=(0.0, upper), method="bounded", options={"xatol": upper * 1e-6}).x)


def _inter_link(op: str, fits: list[CollectiveFit], intra: LinkModel | None) -> tuple[LinkModel, list[str]]:
    a0 = intra.base_latency_s if intra else Estimate.exact(0.0)
    a1 = intra.step_latency_s if intra else Estimate.exact(0.0)
    a2 = Estimate(**{k: _inter_step_latency(op, fits, a0.value, a1.value, k) for k in ("value", "low", "high")})
    largest = max(fits, key=lambda f: (f.nodes, f.group_size))
    notes = [] if intra else [f"{op}: no single-node fit; inter-node steps carry all the latency"]
    return LinkModel(base_latency_s=a0, step_latency_s=a1, inter_step_latency_s=a2,
                     bus_bandwidth_bytes_per_s=largest.segments[-1].bandwidth_bytes_per_s,
                     measured_group_sizes=sorted({f.group_size for f in fits}),
                     sources=[f"fitted from {len(fits)} measured multi-node group(s)"]), notes
