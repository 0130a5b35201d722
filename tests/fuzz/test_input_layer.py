"""Issue 42 item 8, in the fast tier: one fuzz case of each class the input layer now closes (extreme floats in a
profile, a run, a dataset and a correction; names longer than the file system allows; suite knobs that are lists,
mappings, zero widths or images too small; a model file that calls sys.exit) ends in one line naming the file,
field or flag, exit 2. The whole pool runs them all (test_fuzz.py, `python -m tests.fuzz`)."""
from __future__ import annotations

import pytest

from . import all_cases
from .core import run_in_process

CLASSES = (
    "profile/init-minus-1e308", "profile/init-minus-1e29", "profile/peak-denormal", "profile/learning-rate-1e20",
    "runs/measured-1e308", "runs/predicted-denormal", "runs/measured-1e30",
    "dataset/measured-string", "dataset/plan-batch-string", "dataset/model-code", "dataset/knob-zero-width",
    "correction/ridge-intercept-1e29", "correction/tree-weight-1e20",
    "flag/out-folder-name-too-long", "flag/calibrate-out-name-too-long", "flag/profile-name-too-long",
    "suite/knob-list/suite-shapes", "suite/knob-mapping/suite-shapes", "suite/knob-zero-width/suite-shapes",
    "suite/knob-image-1/suite-shapes", "flag/model-file-exit-0-at-import", "flag/model-file-exit-in-forward",
)


@pytest.fixture(scope="module")
def cases():
    return {c.id: c for c in all_cases(0, 0)}


@pytest.mark.parametrize("case_id", CLASSES)
def test_each_class_ends_in_one_line_exit_2(cases, case_id, tmp_path):
    result = run_in_process(cases[case_id], tmp_path, 60.0)
    assert result.ok, f"{case_id}: {'; '.join(result.problems)} | {result.stderr.strip()[:300]}"
    assert result.code == 2
