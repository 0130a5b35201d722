"""`profiler`: measure a machine and keep its profiles (calibrate, fit, show, drift, history, imports)."""
from __future__ import annotations

import sys

from profiler.cliutil import run_cli

COMMANDS = {
    "calibrate": ("profiler.cmd_calibrate", "run microbenchmarks on this machine and write a profile"),
    "show": ("profiler.cmd_show", "print a readable summary of a profile"),
    "fit": ("calibrate.cmd_fit", "recompute a profile's coefficients from its samples"),
    "import-nccl-tests": ("profiler.cmd_import_nccl", "read nccl-tests output into a profile's samples"),
    "drift": ("profiler.cmd_drift", "compare two profiles of one machine; exit 1 when something drifted"),
    "history": ("profiler.cmd_history", "time series, change points and plots over many profiles"),
}


def main(argv=None) -> int:
    return run_cli("profiler", __doc__.split(":")[1].strip(), COMMANDS, argv)


if __name__ == "__main__":
    sys.exit(main())
