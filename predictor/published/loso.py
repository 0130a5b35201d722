"""Leave-one-source-out: the published validation of constants fitted without the rows they predict.

Three predictions per record, reported side by side by `predictor validate --published`:
  datasheet  the reference profile from published hardware figures only (no constant fitted to the corpus);
  shipped    the shipped profile, whose family constants were fitted to every source (in-sample);
  loso       the datasheet profile with family constants refitted on every *other* source of the corpus
             (predictor.published.constants_fit); a family or dtype with no rows outside the held-out source takes
             the fleet's constants (calibrate.system_constants.fleet_constants: the other families' mean).
The loso figure is the one that says how well an unseen cluster is predicted.
"""
from __future__ import annotations

from typing import Optional, Sequence

from calibrate.cost_model import load_cost_model
from calibrate.deepbench_kernels import kernels_for
from calibrate.published import NODES, build_profile
from calibrate.system_constants import for_family, gpu_family
from predictor.model_error import Residual, held_out_coverage
from predictor.published.constants_fit import Decompositions, with_constants
from predictor.published.rowmap import Setup


def base_cost_models() -> dict[str, tuple[object, str]]:
    """Profile file -> (datasheet-only cost model, GPU family) for every published node."""
    out = {}
    for node in NODES:
        profile = build_profile(node, None)
        out[node.file] = (load_cost_model(profile), gpu_family(node.gpu.name) or "")
    return out


def deepbench_cost_models() -> dict[str, object]:
    """Profile file -> the datasheet-only cost model whose GEMMs and convolutions the GPU's DeepBench kernel model
    costs (calibrate.deepbench_kernels), for every published node whose GPU DeepBench timed: nothing in it is
    fitted to training runs."""
    out = {}
    for node in NODES:
        kernels = kernels_for(node.gpu.name, node.gpu.peak_flops["float32"].value)
        if kernels is not None:
            out[node.file] = load_cost_model(build_profile(node, None, kernels=kernels))
    return out


def loso_predictions(setups: Sequence[Setup], predictor, base: dict, decompositions: Decompositions
                     ) -> tuple[dict[str, float], dict[str, float], dict[str, dict]]:
    """(datasheet, loso) predicted seconds per record id, and the constants fitted without each source."""
    datasheet: dict[str, float] = {}
    loso: dict[str, float] = {}
    fitted: dict[str, dict] = {}
    for source in sorted({s.run.source for s in setups}):
        constants, stacks = decompositions.fit(exclude_source=source)
        fitted[source] = {family: c.to_dict() | {"row_ids": len(c.row_ids)} for family, c in constants.items()}
        fitted[source]["software_stacks"] = stacks.to_dict()
        for setup in (s for s in setups if s.run.source == source and s.profile in base):
            cm, family = base[setup.profile]
            datasheet[setup.run.id] = predictor.predict(setup, cm).predicted_s
            loso[setup.run.id] = predictor.predict(setup, with_constants(cm, for_family(constants, family), stacks)).predicted_s
    return datasheet, loso, fitted


def strategy_of(setup: Setup) -> str:
    return "data" if setup.run.num_gpus > 1 else "serial"


def interval_coverage(setups: Sequence[Setup], predicted: dict[str, float], coverage: float = 0.8,
                      widen: Optional[dict[str, tuple[float, float]]] = None) -> dict:
    """Leave-one-source-out coverage of the prediction interval: for each source, the model-error quantiles from the
    held-out residuals of the *other* sources (predictor.model_error, the source as the group), applied to this
    source's held-out predictions and widened by each row's at-scale range (`widen`: run id -> the (low, high)
    multipliers of stragglers, cluster load and storage alone, predictor.at_scale.at_scale_range), as
    predictor.api.predict widens a prediction's interval. share_inside is the widened interval's;
    model_error_share_inside the model error's alone."""
    import math

    from predictor.model_error import bounds_for, error_quantiles

    residuals = [Residual(strategy_of(s), s.framework, s.run.source, math.log(s.run.measured_s / predicted[s.run.id]))
                 for s in setups if s.run.id in predicted]
    ids = [s.run.id for s in setups if s.run.id in predicted]
    held = held_out_coverage(residuals, coverage)
    widen = widen or {}
    inside, by_source = [], {}
    for source in sorted({r.group for r in residuals}):
        others = [r for r in residuals if r.group != source]
        if not others:
            continue
        q = error_quantiles(others, coverage)
        hits = []
        for run_id, r in zip(ids, residuals):
            if r.group != source:
                continue
            low, high = bounds_for(q, r.strategy, r.framework)
            lo, hi = widen.get(run_id, (1.0, 1.0))
            hits.append(low + math.log(lo) <= r.log_ratio <= high + math.log(hi))
        inside += hits
        by_source[source] = {"rows": len(hits), "share_inside": sum(hits) / len(hits),
                             "model_error_share_inside": held["by_group"].get(source, {}).get("share_inside")}
    return {"nominal": coverage, "rows": len(inside), "share_inside": sum(inside) / len(inside) if inside else None,
            "model_error_share_inside": held["share_inside"], "widened_by": "at-scale terms (predictor.at_scale)",
            "by_source": by_source}
