"""Framework overhead per layer from the `framework` samples (profiler/bench_framework.py).

Per variant (kernel, forward, step) a relative-error line t(K) = a + b*K over the chain length K
(calibrate.alphabeta.fit_line); the slopes give
    forward overhead  = b_forward - b_kernel          (module call + autograd recording, per layer)
    backward overhead = b_step - b_forward - b_kernel  (one autograd node; its kernel costs as the forward's)
each clipped at 0, with 95% bootstrap intervals over the samples' own per-call times
(calibrate.alphabeta.resample). The predictor adds them to every layer's forward and backward time.
The `optimizer` variant's line over K parameter tensors gives the optimizer step's fixed cost (its intercept:
Python and dispatch per step) and its cost per parameter tensor (slope), added to every weight update
(profiles measured before it existed have neither: 0).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from calibrate.alphabeta import Point, bootstrap_estimate, fit_line, resample
from calibrate.coefficients import FrameworkFit
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


def fit_framework(samples: Sequence[Sample], rng: np.random.Generator) -> FrameworkFit:
    points = {v: _points(samples, v) for v in VARIANTS}
    x = {v: np.array([p.x for p in points[v]]) for v in VARIANTS}
    forward, backward = _slopes(x, {v: np.array([p.t for p in points[v]]) for v in VARIANTS})
    replicates = []
    for _ in range(BOOTSTRAP_REPLICATES):
        drawn = {v: resample(points[v], rng) for v in VARIANTS}
        replicates.append(_slopes({v: x[v][pick] for v, (pick, _) in drawn.items()},
                                  {v: t for v, (_, t) in drawn.items()}))
    optimizer = {}
    if any(s.variant == "optimizer" for s in samples):
        step = _points(samples, "optimizer")
        tensors = np.array([p.x for p in step])
        fixed, per_tensor = fit_line(tensors, np.array([p.t for p in step]))
        lines = [fit_line(tensors[pick], t) for pick, t in (resample(step, rng) for _ in range(BOOTSTRAP_REPLICATES))]
        optimizer = {"optimizer_step_s": bootstrap_estimate(fixed, [a for a, _ in lines]),
                     "optimizer_per_tensor_s": bootstrap_estimate(per_tensor, [b for _, b in lines])}
    return FrameworkFit(forward_per_layer_s=bootstrap_estimate(forward, [r[0] for r in replicates]),
                        backward_per_layer_s=bootstrap_estimate(backward, [r[1] for r in replicates]),
                        **optimizer,
                        sources=[f"measured: {len(samples)} samples, chains of "
                                 f"{sorted({int(p.x) for p in points['step']})} layers"])
