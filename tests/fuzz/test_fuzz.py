"""The fuzz suite under pytest: a fixed-seed subset by default, the whole pool (and more) when `slow` runs."""
from __future__ import annotations

import os
import random

import pytest

from . import RANDOM_COEFFICIENTS, all_cases, sample
from .core import run_in_process, run_subprocess

SEED = 19
DEFAULT_CASES = 400  # in process, well under a minute on two cores
DEFAULT_SUBPROCESSES = 6  # each starts Python and imports torch
LIMIT_S = 30.0


def _report(results) -> str:
    failed = [r for r in results if not r.ok]
    return "\n".join(f"{r.case.id}: {'; '.join(r.problems)} | stderr: {r.stderr.strip()[:300]!r}" for r in failed)


@pytest.fixture(scope="module")
def pool():
    return all_cases(SEED)


def test_pool_is_large_and_distinct(pool):
    assert len(pool) >= 300 and len({c.id for c in pool}) == len(pool)
    assert sum(c.expect_exit == 0 for c in pool) >= 5  # valid controls keep the harness honest


@pytest.mark.slow  # CI runs it (scripts/test.sh runs every test); the -m "not slow" inner loop does not
def test_fixed_seed_subset(pool, tmp_path):
    cases = sample(pool, DEFAULT_CASES, SEED)
    results = [run_in_process(case, tmp_path / f"c{i}", LIMIT_S) for i, case in enumerate(cases)]
    assert len(results) == DEFAULT_CASES
    assert all(r.ok for r in results), _report(results)


@pytest.mark.slow
def test_subprocess_sample(pool, tmp_path):
    """As a user runs them: the exit code and the stderr of a real process."""
    bad = [c for c in pool if c.expect_exit == 2]
    cases = random.Random(SEED).sample(bad, DEFAULT_SUBPROCESSES)
    code_cases = [c for c in pool if c.id == "suite/code-os-system/suite-shapes"]
    results = [run_subprocess(case, tmp_path / f"s{i}", 4 * LIMIT_S) for i, case in enumerate(cases + code_cases)]
    assert all(r.ok for r in results), _report(results)


@pytest.mark.slow
def test_whole_pool_and_more(request, tmp_path):
    """Minutes long: runs only when asked for (`-m slow`, or FUZZ_FULL=1)."""
    if "slow" not in (request.config.getoption("markexpr") or "") and not os.environ.get("FUZZ_FULL"):
        pytest.skip("the whole fuzz pool runs with -m slow or FUZZ_FULL=1 (python -m tests.fuzz runs it too)")
    pool = all_cases(SEED + 1, RANDOM_COEFFICIENTS + 1000)
    results = [run_in_process(case, tmp_path / f"c{i}", LIMIT_S) for i, case in enumerate(pool)]
    picked = random.Random(SEED + 1).sample(pool, 30)
    results += [run_subprocess(case, tmp_path / f"s{i}", 4 * LIMIT_S) for i, case in enumerate(picked)]
    assert all(r.ok for r in results), _report(results)
