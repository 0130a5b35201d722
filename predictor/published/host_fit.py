"""`python -m predictor.published.host_fit`: a published node's host time per layer pass (Coefficients.host_dispatch),
fitted to that node's own measured runs that are small enough for the host to pace them.

The published profiles take the host figures our H200 node measured (PyTorch 2.x chains of tiny layers; calibrate/
data/published/figures.yaml `host_layer_forward/backward`). vTrain's cluster (Megatron-DeepSpeed, node
`a100-40gb-4hdr-8gpu`) published 1440 single-node runs whose small steps sit on a floor its GPUs do not explain
(docs/decisions/2026-12-06-vtrain-single-node-rows.md). Here one factor on both figures (their forward/backward ratio
kept) is chosen to maximise the runs' mean accuracy, and held out by model width: fitted on the hidden-1024 runs,
scored on the hidden-2048 ones, and the other way round. The result goes into the node's entry of
calibrate/data/published/nodes.yaml by hand, with this command as its source (a fitted physical figure of one system,
like its all-reduce sweeps). Method and figures: docs/method.md §3d, docs/decisions/2026-12-07-vtrain-host-dispatch.md.
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
from typing import Callable, Sequence

#: the factors searched (log-uniform): 1 is the H200 node's figures; the bracket's top is far above any host seen
SCALE_RANGE = (1.0, 8.0)
#: golden-section steps over log(scale): the bracket shrinks to 0.618**STEPS of its width (8x -> about 1%)
STEPS = 14
#: the node fitted and the measured runs it is fitted to
NODE = "a100-40gb-4hdr-8gpu"


def best_scale(score: Callable[[float], float], low: float = SCALE_RANGE[0], high: float = SCALE_RANGE[1],
               steps: int = STEPS) -> float:
    """The factor in [low, high] that maximises score (golden-section search over log(factor); score taken as
    unimodal there: a floor too low leaves small runs fast, too high makes large ones slow)."""
    ratio = (math.sqrt(5) - 1) / 2
    a, b = math.log(low), math.log(high)
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    fc, fd = score(math.exp(c)), score(math.exp(d))
    for _ in range(steps):
        if fc >= fd:
            b, d, fd = d, c, fc
            c = b - ratio * (b - a)
            fc = score(math.exp(c))
        else:
            a, c, fc = c, d, fd
            d = a + ratio * (b - a)
            fd = score(math.exp(d))
    return math.exp((a + b) / 2)


def with_host_scale(cost_model, base, scale: float):
    """The cost model with its host figures set to `base` (forward and backward Estimates) times `scale`, in place
    (the model under any wrappers: predictor.at_scale.innermost)."""
    from calibrate.coefficients import Estimate, HostDispatch
    from predictor.at_scale import innermost

    holder = innermost(cost_model)
    fwd, bwd = (Estimate(value=f.value * scale, low=f.low * scale, high=f.high * scale) for f in base)
    old = holder.coefficients.host_dispatch
    dispatch = (old.model_copy(update={"forward_per_layer_s": fwd, "backward_per_layer_s": bwd}) if old
                else HostDispatch(forward_per_layer_s=fwd, backward_per_layer_s=bwd))
    holder.coefficients = holder.coefficients.model_copy(update={"host_dispatch": dispatch})
    return cost_model


def mean_accuracy(setups: Sequence, predictor, cost_model_at: Callable[[float], object], scale: float) -> float:
    """Mean accuracy of the rows predicted with the host figures times `scale`."""
    from predictor.published.validate import accuracy

    cm = cost_model_at(scale)
    return statistics.fmean(accuracy(predictor.predict(s, cm).predicted_s, s.run.measured_s) for s in setups)


def main(argv=None) -> int:
    """The command (module docstring); a bad profile or corpus file is a one-line error, exit 2."""
    from profiler.errors import UserError

    parser = argparse.ArgumentParser(description="fit a published node's host time per layer pass to its own runs "
                                                 "(vTrain's single-node runs), held out by model width")
    parser.parse_args(argv)
    try:
        return _fit_and_report()
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


def _fit_and_report() -> int:
    from calibrate.published import HOST_LAYER
    from predictor.api import load_cost_model
    from predictor.published.rowmap import Skipped, load_rules
    from predictor.published.transformer import (VTRAIN_SINGLE_FILE, VTRAIN_SINGLE_SOURCE, interpret_transformer,
                                                  load_vtrain_csv)
    from predictor.published.validate import Predictor, shipped_profiles_dir

    rules = load_rules()
    runs = load_vtrain_csv(VTRAIN_SINGLE_FILE, source=VTRAIN_SINGLE_SOURCE)
    setups = [s for s in (interpret_transformer(r, rules) for r in runs) if not isinstance(s, Skipped)]
    setups = [s for s in setups if s.profile == f"{NODE}.published.yaml"]
    predictor = Predictor()
    predictor.trace_ahead(setups)
    base = [f.estimate() for f in HOST_LAYER]
    cost_model = load_cost_model(shipped_profiles_dir() / f"{NODE}.published.yaml")[0]

    def cost_model_at(scale):  # the figures are set, not scaled further, at each call: one model serves every factor
        return with_host_scale(cost_model, base, scale)

    def fit(rows):
        return best_scale(lambda s: mean_accuracy(rows, predictor, cost_model_at, s))

    widths = sorted({dict(s.knobs)["hidden"] for s in setups})
    print(f"{len(setups)} runs of {NODE} ({VTRAIN_SINGLE_FILE.name}); hidden sizes {widths}")
    shared = mean_accuracy(setups, predictor, cost_model_at, 1.0)
    print(f"  the H200 node's figures (x1): mean accuracy {100 * shared:.1f}%")
    for width in widths:
        fitted_on = [s for s in setups if dict(s.knobs)["hidden"] != width]
        held = [s for s in setups if dict(s.knobs)["hidden"] == width]
        scale = fit(fitted_on)
        print(f"  fitted without hidden {width}: x{scale:.2f}; hidden {width} held out "
              f"{100 * mean_accuracy(held, predictor, cost_model_at, 1.0):.1f}% -> "
              f"{100 * mean_accuracy(held, predictor, cost_model_at, scale):.1f}%")
    scale = fit(setups)
    fitted = mean_accuracy(setups, predictor, cost_model_at, scale)
    print(f"  fitted on all: x{scale:.2f}, mean accuracy {100 * fitted:.1f}% (in-sample)")
    for name, f in zip(("host_layer_forward", "host_layer_backward"), base):
        print(f"  {name}: {{value: {f.value * scale:.3g}, low: {f.low * scale:.3g}, high: {f.high * scale:.3g}}}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
