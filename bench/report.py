"""Regenerate docs/accuracy.md and the README's figures table from every results/*.json.

docs/accuracy.md is a generated file: one table per benchmark (figure, value, unit, target, met, date,
machine, commit). The README holds a compact table of the headline figures (those with a target) between the
lines `<!-- bench-report:begin -->` and `<!-- bench-report:end -->`; only what lies between them is replaced.
A malformed results file is a one-line error naming it (exit 2), and nothing is written.
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path

from bench import describe
from bench.record import REPO, RESULTS, format_value, met, met_word, parse_target
from profiler.errors import UserError
from profiler.inputs import read_json, read_text
from profiler.outputs import write_atomic

DOCS = REPO / "docs" / "accuracy.md"
README = REPO / "README.md"
BEGIN, END = "<!-- bench-report:begin -->", "<!-- bench-report:end -->"
NO_RESULTS = "no benchmark results recorded yet: run `python -m bench <name>` then `python -m bench report`"
MAX_RESULTS = 200  # results files read at most (one per benchmark: a handful)
MAX_README_ROWS = 24  # headline rows in the README block (README.md stays under 200 lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    describe(parser, __doc__)
    parser.add_argument("--results", type=Path, default=RESULTS, metavar="DIR", help="folder of NAME.json records")
    parser.add_argument("--docs", type=Path, default=DOCS, metavar="PATH", help="the generated accuracy page")
    parser.add_argument("--readme", type=Path, default=README, metavar="PATH",
                        help="the README whose bench-report block is replaced")


def run(args) -> int:
    results = report(args.results, args.docs, args.readme)
    print(f"{len(results)} results file(s) from {args.results} -> {args.docs}, {args.readme} (bench-report block)")
    return 0


# --- reading ------------------------------------------------------------------------------------------------

_KIND_NAMES = {str: "a string", dict: "a mapping", list: "a list"}

def _field(data: dict, key: str, kinds, label: str, optional: bool = False):
    value = data.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, kinds):
        raise UserError(f"{label}: field '{key}' missing or not {_KIND_NAMES[kinds]}")
    return value


def _check_figure(figure, label: str) -> dict:
    if not isinstance(figure, dict):
        raise UserError(f"{label}: a figure is not a mapping")
    name = _field(figure, "name", str, label)
    where = f"{label}: figure {name[:60]!r}"
    value = figure.get("value")
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)):
        raise UserError(f"{where}: value is not a finite number or null")
    _field(figure, "unit", str, where)
    target = _field(figure, "target", str, where, optional=True)
    if target is not None:
        try:
            parse_target(target)
        except ValueError as err:
            raise UserError(f"{where}: {err}") from None
    if figure.get("met") is not None and not isinstance(figure["met"], bool):
        raise UserError(f"{where}: met is not true, false or null")
    return {"name": name, "value": value, "unit": figure["unit"], "target": target,
            "met": met(value, target)}  # recomputed: the record cannot claim a target it missed


def load_result(path: Path) -> dict:
    label = str(path)
    data = read_json(path, label=label)
    if not isinstance(data, dict):
        raise UserError(f"{label}: not a JSON object")
    for key in ("name", "time_utc", "commit", "command"):
        _field(data, key, str, label)
    machine = _field(data, "machine", dict, label)
    figures = _field(data, "figures", list, label)
    return {**data, "machine": machine, "figures": [_check_figure(f, label) for f in figures]}


def load_results(results_dir: Path | str) -> list[dict]:
    """Every results_dir/*.json, checked, ordered by benchmark name; a missing folder is no results."""
    folder = Path(results_dir)
    if not folder.exists():
        return []
    if not folder.is_dir():
        raise UserError(f"{folder}: not a folder")
    paths = sorted(folder.glob("*.json"))
    if len(paths) > MAX_RESULTS:
        raise UserError(f"{folder}: {len(paths)} results files (at most {MAX_RESULTS} read)")
    return sorted((load_result(p) for p in paths), key=lambda r: r["name"])


# --- rendering ----------------------------------------------------------------------------------------------

def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _date(result: dict) -> str:
    return result["time_utc"][:10]


def _machine(result: dict, host: bool = True) -> str:
    m = result["machine"]
    cores = f"{m.get('cpu_cores')} cores" if m.get("cpu_cores") else ""
    parts = [m.get("hostname") if host else None, m.get("cpu_model"), cores]
    return ", ".join(str(p) for p in parts if p)


def _commit(result: dict) -> str:
    commit = result["commit"]
    short = commit[:10] if commit != "unknown" else commit
    return short + (" (uncommitted changes)" if result.get("dirty") else "")


def render_accuracy(results: list[dict]) -> str:
    lines = ["<!-- generated by `python -m bench report` from results/*.json: do not edit by hand -->", "",
             "# Benchmark figures", "",
             "Generated by `python -m bench report` from the records in `results/` that `python -m bench NAME` writes;",
             "edit nothing here by hand. Each table is one benchmark's latest run; a target is in the figure's unit",
             "and `met` says whether the value satisfies it. Speed figures are properties of the machine and of its",
             "load at the time: compare them only on the same quiet machine.", ""]
    if not results:
        lines += [NO_RESULTS[0].upper() + NO_RESULTS[1:] + ".", ""]
    for r in results:
        load = r["machine"].get("loadavg_1m")
        load = f", 1-minute load average {load:.1f}" if isinstance(load, (int, float)) and not isinstance(load, bool) else ""
        lines += [f"## {_cell(r['name'])}", "", f"`{_cell(r['command'])}`, {_cell(r['time_utc'])}{load}", "",
                  "| figure | value | unit | target | met | date | machine | commit |",
                  "|---|---:|---|---|---|---|---|---|"]
        for f in r["figures"]:
            lines.append(f"| {_cell(f['name'])} | {format_value(f['value'])} | {_cell(f['unit'])} | "
                         f"{_cell(f['target'] or '-')} | {met_word(f['met'])} | {_date(r)} | {_cell(_machine(r))} | "
                         f"{_commit(r)} |")
        lines.append("")
    return "\n".join(lines)


def render_readme_block(results: list[dict]) -> str:
    """The lines between the README's markers: the headline figures (those with a target and a value) of every
    benchmark, at most MAX_README_ROWS of them (the README stays short; docs/accuracy.md has everything)."""
    rows = [(r, f) for r in results for f in r["figures"] if f["target"] and f["value"] is not None]
    if not rows:
        return NO_RESULTS
    lines = ["Benchmark figures with a target, generated by `python -m bench report` from `results/` (every figure,",
             "command and commit: [docs/accuracy.md](docs/accuracy.md)):", "",
             "| benchmark: figure | value | target | met | date | machine |", "|---|---:|---|---|---|---|"]
    for r, f in rows[:MAX_README_ROWS]:
        lines.append(f"| {_cell(r['name'])}: {_cell(f['name'])} | {format_value(f['value'])} {_cell(f['unit'])} | "
                     f"{_cell(f['target'])} | {met_word(f['met'])} | {_date(r)} | {_cell(_machine(r, host=False))} |")
    if len(rows) > MAX_README_ROWS:
        lines += ["", f"{len(rows) - MAX_README_ROWS} more in [docs/accuracy.md](docs/accuracy.md)."]
    return "\n".join(lines)


def replace_block(text: str, block: str, label: str) -> str:
    """text with the lines between BEGIN and END replaced by block (each marker exactly once, in order)."""
    lines = text.split("\n")
    starts = [i for i, line in enumerate(lines) if line.strip() == BEGIN]
    ends = [i for i, line in enumerate(lines) if line.strip() == END]
    if len(starts) != 1 or len(ends) != 1 or starts[0] > ends[0]:
        raise UserError(f"{label}: needs one line '{BEGIN}' followed by one line '{END}' "
                        f"(found {len(starts)} and {len(ends)})")
    return "\n".join(lines[:starts[0] + 1] + [""] + block.split("\n") + [""] + lines[ends[0]:])


def report(results_dir: Path | str = RESULTS, docs_path: Path | str = DOCS, readme_path: Path | str = README) -> list[dict]:
    """Read every record, then write docs_path and the README block; nothing is written when a record or the
    README is malformed. Returns the records."""
    results = load_results(results_dir)
    readme = replace_block(read_text(readme_path, label=str(readme_path)), render_readme_block(results), str(readme_path))
    write_atomic(docs_path, render_accuracy(results) + "\n")
    write_atomic(readme_path, readme)
    return results
