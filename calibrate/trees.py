"""Regression trees as plain arrays: their one schema (Tree) and their one evaluation rule, for the compute
efficiency fits (calibrate.compute, stored in a profile) and the residual correction (calibrate.correction).

A tree is scikit-learn's `tree_` arrays: children_left, children_right (-1 at a leaf; children numbered after
their parent), feature, threshold, value. scikit-learn trains and predicts on float32 features against float64
thresholds, going left when x[feature] <= threshold; both evaluators below round the features to float32
first, so an exported tree predicts exactly what the fitted estimator did.
"""
from __future__ import annotations

from array import array
from typing import Mapping, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, model_validator

KEYS = ("children_left", "children_right", "feature", "threshold", "value")
#: refuse absurd files before evaluating them
MAX_TREE_NODES = 2_000_000


class Tree(BaseModel):
    """One regression tree as sklearn's `tree_` arrays, validated on load (a file may come from anyone): arrays of
    one length, no NaN or infinity, every node a leaf (both children -1) or the parent of two later nodes."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    children_left: list[int]
    children_right: list[int]
    feature: list[int]
    threshold: list[float]
    value: list[float]

    @model_validator(mode="after")
    def _well_formed(self):
        n = len(self.value)
        if not 0 < n <= MAX_TREE_NODES or any(len(a) != n for a in (self.children_left, self.children_right,
                                                                      self.feature, self.threshold)):
            raise ValueError(f"tree arrays must be non-empty, of equal length and at most {MAX_TREE_NODES} nodes")
        for i, (left, right) in enumerate(zip(self.children_left, self.children_right)):
            # children after their parent: every index in range and no cycle, as sklearn numbers its nodes
            if (left == -1) != (right == -1) or (left != -1 and not (i < left < n and i < right < n)):
                raise ValueError(f"tree node {i}: children must both be -1 (a leaf) or later nodes below {n}")
        return self

    def split_features(self) -> set[int]:
        """The feature indices the internal nodes split on."""
        return {f for f, left in zip(self.feature, self.children_left) if left != -1}


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
