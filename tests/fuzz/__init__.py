"""The hostile-input fuzz suite: every CLI entry point fed malformed files, special files and bad flags.

    python -m tests.fuzz                       # every case once, in process (a few minutes)
    python -m tests.fuzz --cases 2000 --seed 7 # more random coefficient mutations, another draw
    python -m tests.fuzz --subprocess 20       # also 20 cases as real `python -m ...` processes

pytest runs a fixed-seed subset (tests/fuzz/test_fuzz.py); the whole pool is marked `slow`.
Each case must exit 2 with one line on stderr naming the file or flag, no traceback, within its time
limit, leave every file as it was and run no code (see core.py).
"""
from __future__ import annotations

import random

from .core import Case

RANDOM_COEFFICIENTS = 120  # random coefficient mutations in the default pool


def all_cases(seed: int = 0, random_coefficients: int = RANDOM_COEFFICIENTS) -> list[Case]:
    """The curated cases of every class, then `random_coefficients` random coefficient mutations drawn with
    `seed`; ids are unique."""
    from . import files, flags, mutations

    rng = random.Random(seed)
    cases = (files.special_cases() + files.hostile_cases() + mutations.curated_profile_cases() + mutations.spec_cases()
             + mutations.suite_cases() + mutations.shapes_cases() + mutations.nccl_cases() + mutations.deepbench_cases()
             + mutations.runs_cases()
             + mutations.correction_cases() + flags.flag_cases() + flags.clobber_cases() + flags.control_cases()
             + mutations.coefficient_cases(rng, random_coefficients))
    ids = [c.id for c in cases]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    assert not duplicates, f"duplicate fuzz case ids: {duplicates[:5]}"
    return cases


def sample(cases: list[Case], count: int, seed: int) -> list[Case]:
    """`count` cases drawn with `seed`, every control kept, in a stable order."""
    controls = [c for c in cases if c.expect_exit == 0]
    rest = [c for c in cases if c.expect_exit != 0]
    if count >= len(cases):
        return cases
    chosen = random.Random(seed).sample(rest, max(0, count - len(controls)))
    return controls + sorted(chosen, key=lambda c: c.id)
