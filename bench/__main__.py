"""`python -m bench NAME [flags]`: run one benchmark (figures printed, headline figures to results/NAME.json);
`python -m bench report` regenerates docs/accuracy.md and the README's figures table from results/."""
from __future__ import annotations

import ast
import sys
from pathlib import Path

from profiler.cliutil import run_cli

HERE = Path(__file__).resolve().parent
#: command -> module of this package. Each module has add_arguments(parser) and run(args) -> int; its help line
#: is the first line of its docstring (read without importing it, so `--help` stays fast).
BENCHMARKS = {
    "search": "bench_search",
    "run-latency": "run_latency",
    "report-latency": "report_latency",
    "llm-latency": "llm_latency",
    "llm-search": "llm_search",
    "scale": "bench_scale",
    "calibrate": "bench_calibrate",
    "fit": "bench_fit",
    "collectives": "bench_collectives",
    "validate": "bench_validate",
    "noise-floor": "noise_floor",
    "repredict": "repredict",
    "correction": "bench_correction",
    "cooperative": "bench_cooperative",
    "measure-cooperative": "measure_cooperative",
    "outofcore": "bench_outofcore",
    "drift-resampling": "drift_resampling",
    "drift-e2e": "drift_e2e",
    "drift-testdata": "drift_testdata",
    "deepbench": "deepbench",
    "xla-gemm": "xla_gemm",
    "gpu-soak": "gpu_soak",
    "report": "report",
}


def summary(module: str) -> str:
    """The first line of bench/<module>.py's docstring."""
    doc = ast.get_docstring(ast.parse((HERE / f"{module}.py").read_text()))
    return doc.splitlines()[0].strip() if doc else ""


def commands() -> dict[str, tuple[str, str]]:
    # argparse %-formats help lines: a literal % is written %% there (bench.describe sets each full description)
    return {name: (f"bench.{module}", summary(module).replace("%", "%%")) for name, module in BENCHMARKS.items()}


def main(argv=None) -> int:
    return run_cli("python -m bench", " ".join(__doc__.split()), commands(), argv)


if __name__ == "__main__":
    sys.exit(main())
