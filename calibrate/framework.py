"""Framework overhead per layer from the `framework` samples (profiler/bench_framework.py).

Per variant (kernel, forward, step) a relative-error line t(K) = a + b*K over the chain length K; the slopes
give the warm forward and backward overhead per layer, the `optimizer` line the optimizer step's fixed cost and
its cost per parameter tensor, and the cold-code chains (`cycled` and `grouped` orders, round by round) what a
layer pays in a training step where almost every layer follows another kernel. Each clipped at 0, with 95%
bootstrap intervals; profiles without the samples have none (0). Formulas: docs/calibration.md ("Framework
overhead and optimizer cost"); docs/decisions/2026-11-29-cold-optimizer-cost.md and
2026-12-02-cold-code-per-layer.md.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from calibrate.alphabeta import Point, bootstrap_estimate, fit_line, resample
from calibrate.coefficients import FrameworkFit, HostDispatch
from profiler.cold_chains import COLD_ORDERS, COLD_VARIANTS
from profiler.errors import UserError
from profiler.profile import Sample

VARIANTS = ("kernel", "forward", "step")
BOOTSTRAP_REPLICATES = 200


def _points(samples: Sequence[Sample], variant: str) -> list[Point]:
    points = [Point(float(s.params["layers"]), np.asarray(s.times_s, float)) for s in samples if s.variant == variant]
    if len({p.x for p in points}) < 2:
        raise UserError(f"framework {variant} has samples for fewer than 2 chain lengths; need >= 2 to fit "
                        f"a per-layer cost")
    return points


def _slopes(x: dict[str, np.ndarray], t: dict[str, np.ndarray]) -> tuple[float, float]:
    """(forward, backward) per-layer overheads from each variant's chain lengths x and times t."""
    b = {v: fit_line(x[v], t[v])[1] for v in VARIANTS}
    return max(b["forward"] - b["kernel"], 0.0), max(b["step"] - b["forward"] - b["kernel"], 0.0)


def _cold_samples(samples: Sequence[Sample]) -> Optional[dict[tuple[str, str], Sample]]:
    """{(variant, order): sample} when every cold-code variant was measured in both orders, else None."""
    found = {(s.variant, s.params.get("order")): s for s in samples if s.variant in COLD_VARIANTS}
    if not found:
        return None
    missing = [f"{v} {o}" for v in COLD_VARIANTS for o in COLD_ORDERS if (v, o) not in found]
    if missing:
        raise UserError(f"framework cold-code samples lack {', '.join(missing)}; the cold per-layer time needs "
                        f"both variants in both orders")
    return found


def _cold_per_layer(t: dict[tuple[str, str], np.ndarray], layers_apart: int) -> tuple[np.ndarray, np.ndarray]:
    """(forward, backward) cold-code seconds per layer and round from each chain's call times, aligned by round
    (module docstring)."""
    forward = {o: t[("cold_forward", o)] for o in COLD_ORDERS}
    backward = {o: t[("cold_step", o)] - forward[o] for o in COLD_ORDERS}
    return ((forward["cycled"] - forward["grouped"]) / layers_apart,
            (backward["cycled"] - backward["grouped"]) / layers_apart)


def fit_cold(samples: Sequence[Sample], rng: np.random.Generator) -> dict:
    """{"cold_forward_per_layer_s", "cold_backward_per_layer_s"} estimates, or {} without cold samples: the
    median over rounds of the per-round differences, rounds resampled for the bootstrap."""
    found = _cold_samples(samples)
    if found is None:
        return {}
    layers_apart = int(found[("cold_forward", "cycled")].params["transitions"]) - \
        int(found[("cold_forward", "grouped")].params["transitions"])
    if layers_apart <= 0:
        raise UserError("framework cold-code samples: the cycled chain must have more type changes than the "
                        "grouped one (params.transitions)")
    times = {key: np.asarray(s.times_s, float) for key, s in found.items()}
    rounds = {len(v) for v in times.values()}
    if len(rounds) != 1:
        raise UserError("framework cold-code samples hold different numbers of rounds; they are timed round-robin, "
                        "one call of each chain per round")
    n = rounds.pop()

    def estimate(draw: np.ndarray) -> list[float]:
        return [max(float(np.median(d)), 0.0)
                for d in _cold_per_layer({k: v[draw] for k, v in times.items()}, layers_apart)]

    value = estimate(np.arange(n))
    replicates = [estimate(rng.integers(0, n, n)) for _ in range(BOOTSTRAP_REPLICATES)]
    return {name: bootstrap_estimate(value[i], [r[i] for r in replicates])
            for i, name in enumerate(("cold_forward_per_layer_s", "cold_backward_per_layer_s"))}


def _bootstrapped_pair(points: dict[str, list[Point]], slopes, rng: np.random.Generator) -> tuple:
    """Two per-layer estimates from chains of each variant in `points`: slopes(x, t) -> (a, b) on the samples, and
    its 95% bootstrap over resampled calls."""
    x = {v: np.array([p.x for p in points[v]]) for v in points}
    a, b = slopes(x, {v: np.array([p.t for p in points[v]]) for v in points})
    replicates = []
    for _ in range(BOOTSTRAP_REPLICATES):
        drawn = {v: resample(points[v], rng) for v in points}
        replicates.append(slopes({v: x[v][pick] for v, (pick, _) in drawn.items()},
                                 {v: t for v, (_, t) in drawn.items()}))
    return bootstrap_estimate(a, [r[0] for r in replicates]), bootstrap_estimate(b, [r[1] for r in replicates])


def _host_slopes(x: dict[str, np.ndarray], t: dict[str, np.ndarray]) -> tuple[float, float]:
    """(forward, backward) host seconds per layer: the forward chain's slope, and the training step's less it."""
    forward, step = fit_line(x["forward"], t["forward"])[1], fit_line(x["step"], t["step"])[1]
    return max(forward, 0.0), max(step - forward, 0.0)


def fit_host_dispatch(samples: Sequence[Sample], rng: np.random.Generator) -> HostDispatch:
    """A GPU's host time per layer pass (Coefficients.host_dispatch, docs/method.md §3d) from the same chains: their
    layers' kernels are too small to hide the host, so a chain's time per layer is the host's (95% bootstrap). Each
    expert GEMM's launch (per_expert_gemm_s, §3c) is not measured here: the published figure, said so."""
    from calibrate.systems import load_figures

    points = {v: _points(samples, v) for v in ("forward", "step")}
    forward, backward = _bootstrapped_pair(points, _host_slopes, rng)
    figures = load_figures()
    expert, expert_fp8 = figures["expert_gemm_dispatch"], figures["expert_gemm_dispatch_fp8"]
    return HostDispatch(forward_per_layer_s=forward, backward_per_layer_s=backward,
                        per_expert_gemm_s=expert.estimate(), per_expert_gemm_fp8_s=expert_fp8.estimate(),
                        sources=[f"measured: framework chains of {sorted({int(p.x) for p in points['step']})} layers",
                                 f"per expert GEMM: the published figure (not measured here): {expert.source}"])


def fit_framework(samples: Sequence[Sample], rng: np.random.Generator) -> FrameworkFit:
    points = {v: _points(samples, v) for v in VARIANTS}
    forward, backward = _bootstrapped_pair(points, _slopes, rng)
    optimizer = {}
    if any(s.variant == "optimizer" for s in samples):
        step = _points(samples, "optimizer")
        tensors = np.array([p.x for p in step])
        fixed, per_tensor = fit_line(tensors, np.array([p.t for p in step]))
        lines = [fit_line(tensors[pick], t) for pick, t in (resample(step, rng) for _ in range(BOOTSTRAP_REPLICATES))]
        optimizer = {"optimizer_step_s": bootstrap_estimate(fixed, [a for a, _ in lines]),
                     "optimizer_per_tensor_s": bootstrap_estimate(per_tensor, [b for _, b in lines])}
    return FrameworkFit(forward_per_layer_s=forward, backward_per_layer_s=backward,
                        **optimizer, **fit_cold(samples, rng),
                        sources=[f"measured: {len(samples)} samples, chains of "
                                 f"{sorted({int(p.x) for p in points['step']})} layers"])
