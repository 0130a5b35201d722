"""The repository reads on its own: no file refers to the notes folder beside it, the README stays a short user's
guide, and the tests mirror the packages."""
from __future__ import annotations

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
