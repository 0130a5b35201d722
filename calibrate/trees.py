"""Regression trees as plain arrays, and their one evaluation rule (for the compute efficiency fits,
calibrate.compute, and the residual correction, calibrate.correction).

A tree is scikit-learn's `tree_` arrays: children_left, children_right (-1 at a leaf; children numbered after
their parent), feature, threshold, value. scikit-learn trains and predicts on float32 features against float64
thresholds, going left when x[feature] <= threshold; both evaluators below round the features to float32
first, so an exported tree predicts exactly what the fitted estimator did.
"""
from __future__ import annotations

from array import array
from typing import Mapping, Sequence

import numpy as np

KEYS = ("children_left", "children_right", "feature", "threshold", "value")


def tree_arrays(estimator) -> dict[str, list]:
    """A fitted sklearn regression tree (one output) as plain lists."""
    t = estimator.tree_
    return {"children_left": t.children_left.tolist(), "children_right": t.children_right.tolist(),
            "feature": t.feature.tolist(), "threshold": t.threshold.tolist(), "value": t.value.reshape(-1).tolist()}


def float32_row(row: Sequence[float]) -> array:
    """One feature row rounded to float32 (cheap enough for the predictor's one-shape-at-a-time calls)."""
    return array("f", row)


def value_at(left: Sequence[int], right: Sequence[int], feature: Sequence[int], threshold: Sequence[float],
             value: Sequence[float], row32: Sequence[float]) -> float:
    """The tree's value at one float32 row (float32_row)."""
    node = 0
    while left[node] != -1:
        node = left[node] if row32[feature[node]] <= threshold[node] else right[node]
    return value[node]


def values_at(tree: Mapping[str, Sequence], X: np.ndarray) -> np.ndarray:
    """The tree's values at every row of X (rounded to float32 here), vectorized over rows."""
    X32 = np.asarray(X).astype(np.float32)
    left = np.asarray(tree["children_left"], dtype=np.int64)
    right = np.asarray(tree["children_right"], dtype=np.int64)
    feature = np.asarray(tree["feature"], dtype=np.int64)
    threshold = np.asarray(tree["threshold"], dtype=np.float64)
    value = np.asarray(tree["value"], dtype=np.float64)
    node = np.zeros(len(X32), dtype=np.int64)
    rows = np.arange(len(X32))
    for _ in range(len(left)):  # children have larger indices, so the depth is below the node count
        internal = left[node] >= 0
        if not internal.any():
            break
        n, r = node[internal], rows[internal]
        go_left = X32[r, feature[n]] <= threshold[n]
        node[internal] = np.where(go_left, left[n], right[n])
    return value[node]
