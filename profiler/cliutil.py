"""Shared CLI plumbing: an argparse parser whose errors are one line, a positive-integer flag type, and a
runner that turns UserError (and Ctrl-C) into a one-line message and an exit code. Used by both `profiler` and `predictor`."""
from __future__ import annotations

import argparse
import importlib
import sys
from typing import Callable, Sequence

from profiler.errors import UserError


def positive_int(text: str) -> int:
    """argparse type for a count flag (--ranks, --threads, ...): an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


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
    args = parser.parse_args(argv)
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
