"""One benchmark's figures: printed beside their targets and written to results/NAME.json.

A record holds the benchmark's name, the UTC time, the machine (hostname, CPU model, cores, load average),
the git commit, the command line and `figures`: a list of {name, value, unit, target, met}. A target is
">= x", "> x", "<= x" or "< x" in the figure's unit (or absent); `met` is whether the value satisfies it
(None without a target or a value). `python -m bench report` turns every results/*.json into
docs/accuracy.md and the README's figures table.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from profiler.errors import UserError
from profiler.outputs import write_atomic

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "results"
SCHEMA = 1
OPERATORS = (">=", "<=", ">", "<")  # two-character operators first: ">= 5" must not parse as "> = 5"


def parse_target(target: str) -> tuple[str, float]:
    """'>= 100000' -> ('>=', 100000.0); ValueError for anything else."""
    text = str(target).strip()
    for op in OPERATORS:
        if text.startswith(op):
            threshold = float(text[len(op):].replace(",", "").replace("_", ""))
            if not math.isfinite(threshold):
                raise ValueError(f"target threshold must be finite, got {target!r}")
            return op, threshold
    raise ValueError(f"target must be '>= x', '> x', '<= x' or '< x', got {target!r}")


def met(value: float | None, target: str | None) -> bool | None:
    """Whether value satisfies target; None when there is no target or no (finite) value."""
    if target is None or value is None or not math.isfinite(value):
        return None
    op, threshold = parse_target(target)
    return {">=": value >= threshold, "<=": value <= threshold, ">": value > threshold, "<": value < threshold}[op]


@dataclass(frozen=True)
class Figure:
    """One measured figure. value None (or NaN) = not measured this time (e.g. a profile without collectives)."""

    name: str
    value: float | None
    unit: str
    target: str | None = None

    def __post_init__(self):
        if self.target is not None:
            parse_target(self.target)  # a malformed target is a bug in the benchmark: fail before measuring more

    @property
    def clean_value(self) -> float | int | None:
        """The value as JSON can hold it: None for a missing or non-finite value, an int kept an int."""
        if self.value is None or not math.isfinite(self.value):
            return None
        return self.value if isinstance(self.value, int) and not isinstance(self.value, bool) else float(self.value)

    @property
    def met(self) -> bool | None:
        return met(self.clean_value, self.target)

    def as_dict(self) -> dict:
        return {"name": self.name, "value": self.clean_value, "unit": self.unit, "target": self.target,
                "met": self.met}


def format_value(value: float | None) -> str:
    if value is None:
        return "-"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 10 or value == int(value):
        return f"{value:.1f}".removesuffix(".0")
    return f"{value:.3g}"


def met_word(flag: bool | None) -> str:
    return {True: "yes", False: "NO", None: "-"}[flag]


def machine() -> dict:
    """Where the figures were taken: the profiler's CPU-model reader, physical cores as a profile counts them."""
    import psutil

    from profiler.metadata import cpu_model

    try:
        load = round(os.getloadavg()[0], 2)
    except OSError:
        load = None
    return {"hostname": socket.gethostname(), "cpu_model": cpu_model() or "unknown",
            "cpu_cores": psutil.cpu_count(logical=False) or os.cpu_count(), "cpu_threads": os.cpu_count(),
            "loadavg_1m": load}


def git_commit() -> tuple[str, bool | None]:
    """(HEAD's hash or 'unknown', whether tracked files differ from it or None when unknown)."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return "unknown", None
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                                capture_output=True, text=True, timeout=10)
        return head.stdout.strip(), (bool(status.stdout.strip()) if status.returncode == 0 else None)
    except (OSError, subprocess.SubprocessError):
        return "unknown", None


def command_line(argv: list[str] | None = None) -> str:
    return shlex.join(["python", "-m", "bench", *(sys.argv[1:] if argv is None else argv)])


def add_results_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--results", type=Path, default=RESULTS, metavar="DIR",
                        help="write the figures to DIR/NAME.json (default: results/ in the repository)")


def figure_lines(figures: list[Figure]) -> list[str]:
    width = max((len(f.name) for f in figures), default=0)
    lines = []
    for f in figures:
        target = f"target {f.target}: {'met' if f.met else 'MISSED' if f.met is False else 'not measured'}" \
            if f.target else ""
        lines.append(f"  {f.name:<{width}}  {format_value(f.clean_value):>10} {f.unit:<14} {target}".rstrip())
    return lines


def record(name: str, figures: list[Figure], results_dir: Path | str = RESULTS, argv: list[str] | None = None) -> Path:
    """Print the figures beside their targets and write results_dir/name.json atomically; returns the path."""
    commit, dirty = git_commit()
    data = {"schema": SCHEMA, "name": name, "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "machine": machine(), "commit": commit, "dirty": dirty, "command": command_line(argv),
            "figures": [f.as_dict() for f in figures]}
    folder = Path(results_dir)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UserError(f"{folder}: cannot create the results folder ({err.strerror})") from None
    path = folder / f"{name}.json"
    write_atomic(path, json.dumps(data, indent=2) + "\n")
    print(f"\nfigures ({path}):")
    print("\n".join(figure_lines(figures)))
    return path
