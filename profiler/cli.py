"""`python -m profiler`: measure this machine (the profiler stage alone; its samples are not fitted).

The `profiler` command users run (paraoracle.cli) adds what composes later stages: fitting after calibrate,
show, fit, import-nccl-tests, drift, history. Asked for one of those, this one says so in one line, exit 2."""
from __future__ import annotations

import sys

from profiler.cliutil import run_cli

COMMANDS = {
    "calibrate": ("profiler.cmd_calibrate", "run microbenchmarks on this machine and write a profile"),
}
#: the `profiler` command's subcommands that need later stages (paraoracle.cli.PROFILER_COMMANDS)
COMPOSED = ("show", "fit", "import-nccl-tests", "import-deepbench", "drift", "history")


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    wanted = next((a for a in argv if not a.startswith("-")), None)
    if wanted in COMPOSED:
        print(f"python -m profiler: '{wanted}' is not part of the profiler stage alone; run `profiler {wanted} ...` "
              f"(or `python -m paraoracle.cli {wanted} ...`)", file=sys.stderr)
        return 2
    return run_cli("profiler", "measure this machine (the profiler stage alone: samples, not fitted)", COMMANDS, argv)


if __name__ == "__main__":
    sys.exit(main())
