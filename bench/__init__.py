"""Benchmarks that measure the figures quoted in README.md and docs/: `python -m bench NAME [flags]`.

`python -m bench --help` lists them. Benchmarks print their figures and assert nothing (speed and accuracy
are properties of the machine and its load); those with headline figures also write results/NAME.json
(bench/record.py), and `python -m bench report` regenerates docs/accuracy.md and the README's figures table
from those records (bench/report.py). Run from the repository root with the project installed (`.venv`).
"""


def describe(parser, doc: str | None) -> None:
    """Show a benchmark module's whole docstring (its usage examples included) as its `--help` description."""
    import argparse

    parser.description = doc
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
