"""bench/ as one toolset: `python -m bench` lists every benchmark, results records and the report generated from
them (docs/accuracy.md and the README block), one-line errors for malformed records, targets' `met`, and no
sys.path manipulation in any bench module. Nothing here measures or asserts a timing."""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench"
README_TEXT = """# project

intro

## Speed

prose above the block
<!-- bench-report:begin -->
stale content
<!-- bench-report:end -->
prose below the block

## Read more
"""


@pytest.fixture
def bench(monkeypatch):
    """The bench package, importable from the repository root as `python -m bench` sees it."""
    monkeypatch.syspath_prepend(str(REPO))
    import bench.__main__ as main
    import bench.record as record
    import bench.report as report

    return main, record, report


def _bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=REPO, capture_output=True, text=True, timeout=120)


def _record(name: str, figures: list[dict], time_utc: str = "2026-12-01T10:00:00Z") -> dict:
    return {"schema": 1, "name": name, "time_utc": time_utc,
            "machine": {"hostname": "host-a", "cpu_model": "Test CPU 9000", "cpu_cores": 4, "cpu_threads": 8,
                        "loadavg_1m": 0.1},
            "commit": "0123456789abcdef0123456789abcdef01234567", "dirty": False,
            "command": f"python -m bench {name}", "figures": figures}


def _two_results(folder: Path) -> None:
    folder.mkdir()
    (folder / "search.json").write_text(json.dumps(_record("search", [
        {"name": "plans per CPU-second", "value": 123456.0, "unit": "plans/CPU-s", "target": ">= 100000", "met": True},
        {"name": "plans evaluated", "value": 155447, "unit": "plans", "target": None, "met": None},
    ])))
    (folder / "run-latency.json").write_text(json.dumps(_record("run-latency", [
        {"name": "warm wall time (median)", "value": 1.2, "unit": "s", "target": "<= 1.5", "met": True},
        {"name": "cold wall time (median)", "value": 3.4, "unit": "s", "target": "<= 3", "met": False},
    ], time_utc="2026-12-02T11:00:00Z")))


def test_help_lists_every_benchmark_with_its_docstring_line(bench):
    main, _, _ = bench
    done = _bench("--help")
    assert done.returncode == 0, done.stderr
    listed = {line.split()[0] for line in done.stdout.splitlines() if line.startswith("    ") and line.split()}
    assert set(main.BENCHMARKS) <= listed
    for module in main.BENCHMARKS.values():
        first_line = main.summary(module)
        assert first_line, f"bench/{module}.py has no docstring"
        assert first_line.split()[0] in done.stdout
    assert {"search", "run-latency", "calibrate", "fit", "validate", "noise-floor", "report"} <= set(main.BENCHMARKS)


def test_every_listed_module_is_a_command_and_every_module_is_listed(bench):
    main, _, _ = bench
    helpers = {"__init__", "__main__", "record"}
    assert {p.stem for p in BENCH.glob("*.py")} - helpers == set(main.BENCHMARKS.values())
    for module in main.BENCHMARKS.values():
        tree = ast.parse((BENCH / f"{module}.py").read_text())
        functions = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
        assert {"add_arguments", "run"} <= functions, module
        assert not any(isinstance(node, ast.If) and "__main__" in ast.unparse(node.test) for node in tree.body), module


def test_no_bench_module_touches_sys_path():
    offenders = [p.name for p in BENCH.glob("*.py") if "sys.path" in p.read_text()]
    assert offenders == []


def test_a_bad_flag_is_one_line_and_exit_2():
    done = _bench("search", "--max-gpus", "0")
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "--max-gpus" in done.stderr


@pytest.mark.parametrize("value, target, expected", [
    (100000, ">= 100000", True), (99999.9, ">= 100000", False), (1.5, "<= 1.5", True), (1.51, "<= 1.5", False),
    (3.0, "<= 3", True), (0.2, "< 0.2", False), (0.3, "> 0.2", True), (100_000, ">= 100,000", True),
    (None, ">= 1", None), (float("nan"), "<= 1", None), (5.0, None, None),
])
def test_met_follows_the_target(bench, value, target, expected):
    _, record, _ = bench
    assert record.met(value, target) is expected
    assert record.Figure("f", value, "s", target).met is expected


@pytest.mark.parametrize("target", ["100", "about 5", ">=", ">= inf", "=> 3", "== 1"])
def test_a_malformed_target_is_refused(bench, target):
    _, record, _ = bench
    with pytest.raises(ValueError):
        record.parse_target(target)


def test_record_writes_the_figures_and_prints_them_beside_their_targets(bench, tmp_path, capsys):
    _, record, report = bench
    path = record.record("demo", [record.Figure("speed", 2.0, "s", "<= 1.5"), record.Figure("count", 7, "items"),
                                  record.Figure("missing", float("nan"), "s", ">= 1")],
                         tmp_path / "results", argv=["demo", "--flag"])
    data = json.loads(path.read_text())
    assert path == tmp_path / "results" / "demo.json"
    assert data["name"] == "demo" and data["command"] == "python -m bench demo --flag"
    assert data["time_utc"].endswith("Z") and data["commit"]
    assert {"hostname", "cpu_model", "cpu_cores"} <= set(data["machine"])
    assert data["figures"] == [
        {"name": "speed", "value": 2.0, "unit": "s", "target": "<= 1.5", "met": False},
        {"name": "count", "value": 7, "unit": "items", "target": None, "met": None},
        {"name": "missing", "value": None, "unit": "s", "target": ">= 1", "met": None},
    ]
    out = capsys.readouterr().out
    assert "target <= 1.5: MISSED" in out and "target >= 1: not measured" in out
    report.load_result(path)  # what the writer writes, the report reads


def test_report_renders_the_docs_and_replaces_only_the_readme_block(bench, tmp_path):
    _, _, report = bench
    _two_results(tmp_path / "results")
    docs, readme = tmp_path / "accuracy.md", tmp_path / "README.md"
    readme.write_text(README_TEXT)
    results = report.report(tmp_path / "results", docs, readme)
    assert [r["name"] for r in results] == ["run-latency", "search"]

    page = docs.read_text()
    assert page.splitlines()[0].startswith("<!-- generated by `python -m bench report`")
    assert "## search" in page and "## run-latency" in page
    assert "| figure | value | unit | target | met | date | machine | commit |" in page
    assert "| plans per CPU-second | 123,456 | plans/CPU-s | >= 100000 | yes | 2026-12-01 | host-a, Test CPU 9000, 4 cores |" in page
    assert "| cold wall time (median) | 3.4 | s | <= 3 | NO | 2026-12-02 |" in page
    assert "| plans evaluated | 155,447 | plans | - | - |" in page

    text = readme.read_text()
    before, rest = text.split("<!-- bench-report:begin -->\n")
    block, after = rest.split("<!-- bench-report:end -->\n")
    assert before == README_TEXT.split("<!-- bench-report:begin -->\n")[0]
    assert after == README_TEXT.split("<!-- bench-report:end -->\n")[1]
    assert "stale content" not in block
    assert "| search: plans per CPU-second | 123,456 plans/CPU-s | >= 100000 | yes | 2026-12-01 | Test CPU 9000, 4 cores |" in block
    assert "| run-latency: cold wall time (median) | 3.4 s | <= 3 | NO | 2026-12-02 |" in block
    assert "plans evaluated" not in block  # no target: docs/accuracy.md only

    report.report(tmp_path / "results", docs, readme)
    assert readme.read_text() == text  # regenerating changes nothing


def test_report_without_results_says_how_to_make_them(bench, tmp_path):
    _, _, report = bench
    docs, readme = tmp_path / "accuracy.md", tmp_path / "README.md"
    readme.write_text(README_TEXT)
    report.report(tmp_path / "absent", docs, readme)
    assert ("no benchmark results recorded yet: run `python -m bench <name>` then `python -m bench report`"
            in readme.read_text())
    assert "No benchmark results recorded yet" in docs.read_text()


@pytest.mark.parametrize("content, says", [
    ("{not json", "not valid JSON"),
    ("[]", "not a JSON object"),
    (json.dumps({"name": "x"}), "field 'time_utc'"),
    (json.dumps(_record("x", [{"name": "f", "value": "fast", "unit": "s"}])), "value is not a finite number"),
    (json.dumps(_record("x", [{"name": "f", "value": 1, "unit": "s", "target": "about 1"}])), "target must be"),
    (json.dumps(_record("x", "none")), "field 'figures'"),
])
def test_a_malformed_results_file_is_one_line_naming_it_and_exit_2(tmp_path, content, says):
    _two_results(tmp_path / "results")
    bad = tmp_path / "results" / "broken.json"
    bad.write_text(content)
    readme = tmp_path / "README.md"
    readme.write_text(README_TEXT)
    done = _bench("report", "--results", str(tmp_path / "results"), "--docs", str(tmp_path / "accuracy.md"),
                  "--readme", str(readme))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0] and says in lines[0], done.stderr
    assert not (tmp_path / "accuracy.md").exists() and readme.read_text() == README_TEXT  # nothing written


def test_a_readme_without_the_markers_is_refused(bench, tmp_path):
    _, _, report = bench
    from profiler.errors import UserError

    readme = tmp_path / "README.md"
    readme.write_text("# no markers\n")
    with pytest.raises(UserError, match="bench-report:begin"):
        report.report(tmp_path / "absent", tmp_path / "accuracy.md", readme)
    assert readme.read_text() == "# no markers\n"
