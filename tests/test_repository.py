"""The repository reads on its own: no file refers to the notes folder beside it, the README stays a short user's
guide, the tests mirror the packages and can fail, docstrings say what and why in a few lines, and dated figures
live in docs/ (docs/decisions/README.md)."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("kernels", "profiler", "calibrate", "predictor", "paraoracle", "bench")


#: what a tree without git metadata (an unpacked archive) holds that a checkout does not track
UNTRACKED_PARTS = {".git", ".venv", "__pycache__", "out", ".pytest_cache"}


def _tracked() -> list[Path]:
    """The checkout's tracked files; outside a git checkout, every file below the root but the environment,
    caches and outputs."""
    try:
        out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return [p for p in ROOT.rglob("*") if p.is_file() and not UNTRACKED_PARTS & set(p.relative_to(ROOT).parts)
                and not any(part.endswith(".egg-info") for part in p.relative_to(ROOT).parts)]
    return [ROOT / line for line in out.splitlines()]


def test_no_file_refers_to_the_shared_folder():
    needle = "../" + "shared"  # split so this file does not match itself
    hits = [str(p.relative_to(ROOT)) for p in _tracked()
            if p.suffix in (".py", ".md", ".sh", ".yaml", ".yml", ".toml", ".cu", ".txt") and p.is_file()
            and needle in p.read_text(errors="replace")]
    assert hits == []


def test_readme_is_at_most_200_lines():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200


def test_tests_mirror_the_packages():
    loose = [p.name for p in (ROOT / "tests").glob("test_*.py")]
    assert set(loose) <= {"test_layers.py", "test_install.py", "test_golden.py", "test_no_code_from_data.py",
                          "test_repository.py"}, "put a package's tests under tests/<package>/"
    assert {p.name for p in (ROOT / "tests").iterdir() if p.is_dir() and p.name in PACKAGES} == set(PACKAGES)


#: test functions that may pass without an assert of their own (path::name -> why); keep it short
NO_ASSERT_ALLOWED: dict[str, str] = {}
MAX_NO_ASSERT_ALLOWED = 5


def _asserts(function) -> bool:
    """Whether a test function's body can fail on its own: an assert, pytest.raises/warns, or a call to a helper
    whose name starts with assert_ or check_."""
    import ast

    for node in ast.walk(function):
        if isinstance(node, ast.Assert):
            return True
        if isinstance(node, ast.Call):
            name = getattr(node.func, "attr", None) or getattr(node.func, "id", "")
            if name in ("raises", "warns") or name.startswith(("assert_", "check_")):
                return True
    return False


def test_every_test_function_can_fail():
    import ast

    found = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test")
                    and not _asserts(node)):
                found.append(f"{path.relative_to(ROOT)}::{node.name}")
    assert len(NO_ASSERT_ALLOWED) <= MAX_NO_ASSERT_ALLOWED, "the allow-list must stay short: make those tests assert"
    assert sorted(set(found) - set(NO_ASSERT_ALLOWED)) == [], \
        "tests without an assert, pytest.raises/warns or a call to an assert_/check_ helper"
    assert sorted(set(NO_ASSERT_ALLOWED) - set(found)) == [], "allow-listed tests assert now: drop them from the list"


def test_the_no_assert_check_flags_a_test_without_one():
    import ast

    silent, loud = ast.parse("def test_a():\n    run()\n").body[0], ast.parse("def test_b():\n    check_it()\n").body[0]
    assert not _asserts(silent) and _asserts(loud)


# ---- docstrings say what and why; dated figures live in docs/ (issue 42 item 5) ---------------------------------
#: the most lines a docstring may run (quotes included): what and why, and a pointer to docs/method.md or a record
MAX_DOCSTRING_LINES = 12
#: docstrings that may run longer ("path:name" -> why); keep it short
LONG_DOCSTRING_ALLOWED: dict[str, str] = {}
MAX_LONG_DOCSTRING_ALLOWED = 5
#: a date (an experiment's), except in a pointer to a decision record (docs/decisions/2026-11-30-....md)
DATED = re.compile(r"(?<!decisions/)(?<![\w-])20\d\d-\d\d-\d\d(?![\w-]*\.md)")
#: comment or docstring lines that may carry a date ("path:line text" -> why); keep it short
DATED_ALLOWED: dict[str, str] = {}
MAX_DATED_ALLOWED = 3


def _code() -> list[Path]:
    """The tracked Python files outside docs/ and tests/."""
    return [p for p in _tracked() if p.suffix == ".py" and p.is_file()
            and p.relative_to(ROOT).parts[0] not in ("docs", "tests")]


def _docstrings(source: str) -> list[tuple[str, int, int]]:
    """(name, first line, lines) of every module, class and function docstring in a source text."""
    import ast

    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and \
                ast.get_docstring(node, clean=False) is not None:
            first = node.body[0]
            out.append((getattr(node, "name", "<module>"), first.lineno, first.end_lineno - first.lineno + 1))
    return out


def _commentary(source: str) -> list[tuple[int, str]]:
    """(line number, text) of every comment and docstring line of a source text."""
    import io
    import tokenize

    lines = source.splitlines()
    numbers = {tok.start[0] for tok in tokenize.generate_tokens(io.StringIO(source).readline)
               if tok.type == tokenize.COMMENT}
    for _, first, count in _docstrings(source):
        numbers |= set(range(first, first + count))
    return [(n, lines[n - 1]) for n in sorted(numbers)]


def _long_docstrings(path: Path) -> list[str]:
    source = path.read_text(encoding="utf-8")
    return [f"{path.relative_to(ROOT)}:{name}" for name, _, count in _docstrings(source) if count > MAX_DOCSTRING_LINES]


def _dated_lines(path: Path) -> list[str]:
    return [f"{path.relative_to(ROOT)}:{n} {text.strip()}" for n, text in _commentary(path.read_text(encoding="utf-8"))
            if DATED.search(text)]


def test_docstrings_are_short():
    found = [hit for path in _code() for hit in _long_docstrings(path)]
    assert len(LONG_DOCSTRING_ALLOWED) <= MAX_LONG_DOCSTRING_ALLOWED, "the allow-list must stay short"
    assert sorted(set(found) - set(LONG_DOCSTRING_ALLOWED)) == [], \
        f"docstrings over {MAX_DOCSTRING_LINES} lines: say what and why, point to docs/method.md or a decision record"
    assert sorted(set(LONG_DOCSTRING_ALLOWED) - set(found)) == [], "allow-listed docstrings are short now: drop them"


def test_no_dated_figures_in_code_comments_or_docstrings():
    found = [hit for path in _code() for hit in _dated_lines(path)]
    assert len(DATED_ALLOWED) <= MAX_DATED_ALLOWED, "the allow-list must stay short"
    assert sorted(set(found) - set(DATED_ALLOWED)) == [], \
        "dated figures belong in docs/decisions/ (the record they came from) or docs/calibration.md: point to it"
    assert sorted(set(DATED_ALLOWED) - set(found)) == [], "allow-listed lines are gone: drop them from the list"


def test_the_docstring_and_date_checks_flag_what_they_should():
    long = '"""' + "\n" * MAX_DOCSTRING_LINES + '"""\n\ndef f():\n    """One line."""\n'
    source = long + "# 2026-11-30: 15% held out\n# see docs/decisions/2026-11-30-simd-lane-padding.md\nx = '2026-11-30'\n"
    assert [(name, count) for name, _, count in _docstrings(source)] == [("<module>", MAX_DOCSTRING_LINES + 1), ("f", 1)]
    dated = [n for n, text in _commentary(source) if DATED.search(text)]
    assert dated == [MAX_DOCSTRING_LINES + 5]  # the comment's figure; not the record's name, not a string
