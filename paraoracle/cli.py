"""Console entry points that compose stages (pyproject.toml [project.scripts]).

`profiler` is the command users run: `calibrate` (paraoracle.calibrate_model: profiler.cmd_calibrate's
measuring, fitted by calibrate.fit, plus `--model M --batch B --gpus P ...`, which records that model's own
per-device calls with predictor.cmd_shapes first), and the commands that read profiles with the later stages:
show, fit, import-nccl-tests, import-deepbench, drift (which also re-predicts a reference workload), history.
`python -m profiler` is the profiler stage alone (calibrate without fitting or --model); `python -m paraoracle.cli`
runs this one."""
from __future__ import annotations

import sys

from profiler import cli as profiler_cli
from profiler.cliutil import run_cli

PROFILER_COMMANDS = {
    "calibrate": ("paraoracle.calibrate_model", profiler_cli.COMMANDS["calibrate"][1]
                  + " (--model M: with that model's own per-device layers)"),
    "show": ("paraoracle.cmd_show", "print a readable summary of a profile"),
    "fit": ("calibrate.cmd_fit", "recompute a profile's coefficients from its samples"),
    "import-nccl-tests": ("paraoracle.cmd_import_nccl", "read nccl-tests output into a profile's samples"),
    "import-deepbench": ("paraoracle.cmd_import_deepbench", "read DeepBench results into a profile's samples"),
    "drift": ("paraoracle.cmd_drift", "compare two profiles of one machine; exit 1 when something drifted"),
    "history": ("paraoracle.cmd_history", "time series, change points and plots over many profiles"),
}


def profiler_main(argv=None) -> int:
    return run_cli("profiler", "measure a machine and keep its profiles (calibrate, fit, show, drift, history, "
                   "imports).", PROFILER_COMMANDS, argv)


if __name__ == "__main__":
    sys.exit(profiler_main())
