"""`predictor`: predict time and memory of parallel training per strategy (run, search, validate)."""
from __future__ import annotations

import sys

from profiler.cliutil import run_cli

COMMANDS = {
    "run": ("predictor.cmd_run", "predict every strategy for one model, batch and device count"),
    "search": ("predictor.cmd_search", "search strategies, hybrid splits, device and micro-batch counts"),
    "scale": ("predictor.cmd_scale", "how a model scales over device counts: curves, efficiency, crossovers"),
    "report": ("predictor.cmd_report", "one self-contained HTML page to share: scaling, strategies, breakdown, "
                                       "provenance, known accuracy"),
    "validate": ("predictor.cmd_validate", "run real training under each strategy and compare with predictions"),
    "train-correction": ("predictor.cmd_train_correction", "fit the residual correction from measured runs"),
    "model-error": ("predictor.cmd_model_error", "prediction intervals from measured runs, and how often they hold"),
    "shapes": ("predictor.cmd_shapes", "write the compute shapes a model's predictions cost (for calibrate --shapes)"),
}


def main(argv=None) -> int:
    return run_cli("predictor", __doc__.split(":")[1].strip(), COMMANDS, argv)


if __name__ == "__main__":
    sys.exit(main())
