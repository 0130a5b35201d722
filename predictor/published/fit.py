"""`python -m predictor.published.fit`: fit the per-GPU-family constants and software-stack factors
(predictor.published.constants_fit, where the formula is) to the single-node rows of the published corpus and
write predictor/data/system_constants.yaml, with the model-error quantiles of the leave-one-source-out refits
(predictor.published.loso)."""
from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Optional, Sequence

import yaml

from calibrate.system_constants import StackScales, SystemConstants
from predictor.published.constants_fit import Decompositions
from predictor.published.loso import loso_predictions, strategy_of
from predictor.published.rowmap import Setup

#: the fitted constants: predictor data, an input of `python -m calibrate.published --constants` (no stage writes
#: into an earlier stage's package: tests/test_layers.py)
CONSTANTS_FILE = Path(__file__).resolve().parent.parent / "data" / "system_constants.yaml"
_ROOT = Path(__file__).resolve().parent.parent.parent


def _where(path: Path) -> str:
    """The path as the profiles' sources name it: relative to the repository (or install) root when under it."""
    try:
        return str(path.resolve().relative_to(_ROOT))
    except ValueError:
        return str(path)


def write_constants(constants: dict[str, SystemConstants], path: Path, corpus: str,
                    model_error: Optional[dict] = None, stacks: Optional[StackScales] = None) -> None:
    from profiler.profile import write_atomic

    header = ("# Per-GPU-family constants fitted to single-node published runs (calibrate.system_constants).\n"
              f"# Written by `python -m predictor.published.fit` from {corpus}; do not edit by hand. Read by\n"
              f"# `python -m calibrate.published --constants {_where(path)}`.\n")
    body = {"origin": f"predictor.published.fit; ids in {_where(path)}",
            "families": {f: c.to_dict() for f, c in sorted(constants.items())}}
    if stacks is not None and stacks.scales:
        body["software_stacks"] = stacks.to_dict()
    if model_error:
        body["model_error"] = model_error
    write_atomic(path, header + yaml.safe_dump(body, sort_keys=False, width=120))


def model_error_section(setups: Sequence[Setup], predictor, base: dict, decompositions: Decompositions,
                        coverage: float = 0.8) -> dict:
    """The ModelError record of the published validation: quantiles of the leave-one-source-out residuals."""
    from predictor.model_error import error_quantiles

    _, loso, _ = loso_predictions(setups, predictor, base, decompositions)
    residuals = [(strategy_of(s), s.framework, math.log(s.run.measured_s / loso[s.run.id]))
                 for s in setups if s.run.id in loso]
    sources = sorted({s.run.source for s in setups if s.run.id in loso})
    quantiles = {k: [round(lo, 4), round(hi, 4)] for k, (lo, hi) in error_quantiles(residuals, coverage).items()}
    return {"coverage": coverage, "quantiles": quantiles, "rows": len(residuals),
            "sources": [f"leave-one-source-out residuals of {len(residuals)} published rows of sources "
                        f"{', '.join(sources)} (predictor.published.fit)"]}


def main(argv=None) -> int:
    from predictor.published.corpus import CORPUS_DIR, load_corpus
    from predictor.published.loso import base_cost_models
    from predictor.published.rowmap import Skipped, interpret, load_rules
    from predictor.published.validate import Predictor

    parser = argparse.ArgumentParser(description="fit per-GPU-family constants to single-node published runs")
    parser.add_argument("--corpus", default=str(CORPUS_DIR / "cnn_runs.yaml"))
    parser.add_argument("--out", default=str(CONSTANTS_FILE))
    args = parser.parse_args(argv)
    rules = load_rules()
    setups = [s for s in (interpret(r, rules) for r in load_corpus(args.corpus)) if not isinstance(s, Skipped)]
    predictor = Predictor()  # the shipped profiles
    base = base_cost_models()
    decompositions = Decompositions(setups, predictor, base)
    constants, stacks = decompositions.fit()
    write_constants(constants, Path(args.out), Path(args.corpus).name,
                    model_error_section(setups, predictor, base, decompositions), stacks)
    for family, c in constants.items():
        print(f"{family}: time scale {c.flops_time_scale}, grouped convolutions {c.grouped_time_scale} ({c.rows} rows)")
    print(f"software stacks: {stacks.scales} ({stacks.rows} rows)")
    print(f"wrote {args.out}; now run `python -m calibrate.published --constants {args.out}`")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
