"""A residual correction of the published validation, trained and scored leave-one-source-out.

Target r = log(measured / analytical), the analytical prediction that of the held-out protocol
(predictor.published.loso); ridge regression on features that transfer between systems (communication and update
shares, log2 of GPUs, nodes and batch per GPU, framework regime, dtype). For each held-out source the correction is
trained on the others, its strength chosen by an inner leave-one-source-out, and switched off unless that shows it
at least as accurate on every inner source and better on average: a correction that helps the sources it was
trained on transfers badly to one it has not seen. docs/validation.md ("The published correction").
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np

from predictor.published.validate import RowResult

REGIMES = ("ddp", "horovod", "no-overlap")
DTYPES = ("fp32", "tf32", "fp16", "bf16")
STRENGTHS = (1.0, 10.0, 100.0)
MIN_GAIN = 0.005  # half a point of mean accuracy


def features(r: RowResult) -> list[float]:
    t = r.terms
    total = max(r.predicted_s, 1e-12)
    run = r.run
    return ([t.get("comm_exposed_s", 0.0) / total, t.get("comm_hidden_s", 0.0) / total, t.get("update_s", 0.0) / total,
             math.log2(run.num_gpus), math.log2(run.nodes), math.log2(run.batch_per_gpu or 1)]
            + [float(r.setup.framework == g) for g in REGIMES] + [float(r.setup.dtype == d) for d in DTYPES])


class Ridge:
    """Ridge regression y = b + X w on standardised X (closed form)."""

    def __init__(self, strength: float):
        self.strength = strength

    def fit(self, X: np.ndarray, y: np.ndarray) -> "Ridge":
        self.mean, self.scale = X.mean(axis=0), X.std(axis=0)
        self.scale[self.scale == 0] = 1.0
        Z = (X - self.mean) / self.scale
        self.intercept = float(y.mean())
        self.w = np.linalg.solve(Z.T @ Z + self.strength * np.eye(Z.shape[1]), Z.T @ (y - self.intercept))
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        return self.intercept + ((X - self.mean) / self.scale) @ self.w


def _accuracy(pred: np.ndarray, meas: np.ndarray) -> float:
    return float(np.mean(1.0 - np.abs(pred - meas) / meas))


def _inner_choice(X, y, base, meas, groups) -> Optional[float]:
    """The ridge strength whose inner leave-one-source-out accuracy is at least the analytical one on *every*
    inner source and better on average by MIN_GAIN, the best such; None (correction off) otherwise."""
    sources = sorted(set(groups))
    if len(sources) < 2:
        return None
    best, best_acc = None, _accuracy(base, meas) + MIN_GAIN
    analytical = {s: _accuracy(base[groups == s], meas[groups == s]) for s in sources}
    for strength in STRENGTHS:
        corrected = np.empty_like(base)
        for s in sources:
            test = groups == s
            model = Ridge(strength).fit(X[~test], y[~test])
            corrected[test] = base[test] * np.exp(model.predict(X[test]))
        every = all(_accuracy(corrected[groups == s], meas[groups == s]) >= analytical[s] for s in sources)
        acc = _accuracy(corrected, meas)
        if every and acc > best_acc:
            best, best_acc = strength, acc
    return best


def loso_corrected(results: Sequence[RowResult], analytical: dict[str, float]) -> tuple[dict[str, float], dict]:
    """Corrected seconds per row id (held out by source) and, per source, the ridge strength used (None: off)."""
    rows = [r for r in results if r.run.id in analytical]
    X = np.array([features(r) for r in rows])
    base = np.array([analytical[r.run.id] for r in rows])
    meas = np.array([r.measured_s for r in rows])
    y = np.log(meas / base)
    groups = np.array([r.run.source for r in rows])
    out: dict[str, float] = {}
    used: dict[str, Optional[float]] = {}
    for s in sorted(set(groups)):
        test = groups == s
        strength = _inner_choice(X[~test], y[~test], base[~test], meas[~test], groups[~test])
        used[s] = strength
        if strength is None:
            corrected = base[test]
        else:
            corrected = base[test] * np.exp(Ridge(strength).fit(X[~test], y[~test]).predict(X[test]))
        for r, value in zip((r for r, t in zip(rows, test) if t), corrected):
            out[r.run.id] = float(value)
    return out, used
