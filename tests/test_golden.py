"""Behaviour unchanged: the default suite's and a search's predictions equal the recorded ones (tests/golden.py)."""
from __future__ import annotations

import json

import pytest

from tests.golden import GOLDEN, current


def _same(a, b, path="") -> list[str]:
    if isinstance(a, float) and isinstance(b, float):
        return [] if a == pytest.approx(b, rel=1e-9) else [f"{path}: {a!r} != recorded {b!r}"]
    if isinstance(a, dict) and isinstance(b, dict):
        keys = sorted(set(a) | set(b))
        return [d for k in keys for d in (_same(a.get(k), b.get(k), f"{path}/{k}"))]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _same(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {a!r} != recorded {b!r}"]


def test_predictions_equal_the_recorded_ones():
    recorded = json.loads(GOLDEN.read_text())
    differences = _same(current(), recorded)
    assert not differences, ("predictions changed (regenerate with `python -m tests.golden --write` only for a "
                             "deliberate model change):\n" + "\n".join(differences[:20]))
