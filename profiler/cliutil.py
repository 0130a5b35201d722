"""Shared CLI plumbing: an argparse parser whose errors are one line, bounded flag types, and a
runner that turns UserError (and Ctrl-C) into a one-line message and an exit code. Used by both `profiler` and `predictor`."""
from __future__ import annotations

import argparse
import importlib
import math
import os
import sys
from typing import Callable, Sequence

from profiler.errors import UserError


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text[:40]!r}") from None


def positive_int(text: str) -> int:
    """argparse type for a count flag (--ranks, --threads, ...): an integer >= 1."""
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def int_in(low: int, high: int, why: str = "") -> Callable[[str], int]:
    """argparse type: an integer in low..high (`why` says where the upper bound comes from)."""
    def parse(text: str) -> int:
        value = _integer(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be in {low}..{high}{why}, got {value}")
        return value
    return parse


def float_in(low: float, high: float, low_open: bool = True) -> Callable[[str], float]:
    """argparse type: a finite number in (low, high] (or [low, high] with low_open=False)."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text[:40]!r}") from None
        if not (math.isfinite(value) and (value > low if low_open else value >= low) and value <= high):
            raise argparse.ArgumentTypeError(f"must be a finite number in {'(' if low_open else '['}{low:g}, {high:g}], got {text[:40]}")
        return value
    return parse


CPUS = os.cpu_count() or 1
#: threads one process may ask for: a few per core at most (more cannot run, and starting them can fail)
thread_count = int_in(1, 4 * CPUS, f" (4 x the {CPUS} CPUs)")
#: ranks started on this machine
MAX_LOCAL_RANKS = 1024
rank_count = int_in(1, MAX_LOCAL_RANKS, " (local ranks)")
port = int_in(1, 65535)
seed = int_in(0, 2 ** 32 - 1)
#: devices a prediction may span, and a global mini-batch
MAX_DEVICES = 1 << 20
MAX_BATCH = 1 << 24
device_count = int_in(1, MAX_DEVICES)
batch_size = int_in(1, MAX_BATCH)


class OneLineParser(argparse.ArgumentParser):
    """argparse prints usage + error on bad flags; we print one line naming the flag and exit 2."""

    def error(self, message: str):  # noqa: D401 - argparse API
        self.exit(2, f"{self.prog}: error: {message}\n")


def run_cli(prog: str, description: str, commands: dict[str, tuple[str, str]], argv: Sequence[str] | None) -> int:
    """commands: name -> (module path, one-line help). Each module has add_arguments(parser) and run(args) -> int.

    Modules are imported lazily so `--help` and light commands stay fast and one broken module does not
    take the others down."""
    parser = OneLineParser(prog=prog, description=description)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    modules = {}
    argv = list(sys.argv[1:] if argv is None else argv)
    wanted = next((a for a in argv if not a.startswith("-")), None)
    for name, (module_path, help_text) in commands.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name == wanted:  # only the chosen command's module is imported
            modules[name] = importlib.import_module(module_path)
            modules[name].add_arguments(p)
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # a bad flag (one line printed, code 2) or --help (code 0)
        return stop.code if isinstance(stop.code, int) else 2
    if args.command is None:
        parser.print_help()
        return 0
    run: Callable = modules[args.command].run
    try:
        return int(run(args) or 0)
    except UserError as err:
        print(f"{prog} {args.command}: error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print(f"{prog} {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`| head`): stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing left to flush at exit
        return 141
