"""Console entry points that compose stages (pyproject.toml [project.scripts]).

`profiler` is profiler.cli's command table with one command swapped: `calibrate` runs
paraoracle.calibrate_model, which takes every flag of profiler.cmd_calibrate plus `--model M --batch B --gpus P
...` and records that model's own per-device calls (predictor.cmd_shapes) before calibrating. Everything else
is profiler.cli unchanged. `python -m profiler` stays the profiler stage alone (it knows no --model);
`python -m paraoracle.cli` runs this entry point."""
from __future__ import annotations

import sys

from profiler import cli as profiler_cli
from profiler.cliutil import run_cli

PROFILER_COMMANDS = {**profiler_cli.COMMANDS,
                     "calibrate": ("paraoracle.calibrate_model", profiler_cli.COMMANDS["calibrate"][1]
                                   + " (--model M: with that model's own per-device layers)")}


def profiler_main(argv=None) -> int:
    return run_cli("profiler", profiler_cli.__doc__.split(":")[1].strip(), PROFILER_COMMANDS, argv)


if __name__ == "__main__":
    sys.exit(profiler_main())
