"""Residual correction: learn what the analytical model misses from measured runs, prove it on held-out
runs, and store it so that loading it from an untrusted file is safe.

Target r = log(measured / predicted); features from calibrate/correction_features.py. fit_correction scores
per-strategy factors, ridge, random forest and gradient boosting by grouped cross-validation (whole models and
whole scenarios held out), keeps the best and gates it per strategy so it is never worse than the analytical
model in cross-validation. save_correction / load_correction store plain parameters only (evaluated by
evaluate_model, never unpickled), referenced by path and sha256, and refuse a changed file or one trained for
another profile. docs/validation.md ("Residual correction"); docs/decisions/2026-11-29-correction-selection.md.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal, Mapping, Optional, Sequence, Union

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from calibrate.correction_features import (
    NUMERIC_FEATURES,
    feature_names,
    feature_vector,
    MAX_CORRECTION_FACTOR,
    log_residual,
    numeric_features,
    strategy_of,
)
from calibrate.trees import Tree, tree_arrays, values_at
from profiler.errors import UserError
from profiler.inputs import decode_utf8, parse_json, read_bytes, read_text
from profiler.profile import CorrectionRef, Profile, utc_now_iso, write_atomic

FORMAT = "paraoracle-correction"
FORMAT_VERSION = 1
CANDIDATES = ("strategy_factors", "ridge", "ridge_strong", "random_forest", "gradient_boosting")  # simplest first
SCHEMES = ("models", "scenarios")  # what a CV fold holds out
MAX_FOLDS = 5


# ---------------------------------------------------------------------------------------------------
# Reading measured runs


def read_runs(path: Path | str) -> tuple[list[dict[str, Any]], int]:
    """Read runs JSONL (one record per line, see correction_features): (usable runs, runs skipped because
    they have no analytical prediction or no measurement, e.g. an infeasible plan). UserError names
    file:line:field."""
    path = Path(path)
    lines = read_text(path, "runs", f"--runs {path}").splitlines()
    records, skipped = [], 0
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        record = parse_json(line, str(path), line=number)
        if not isinstance(record, dict):
            raise UserError(f"{path}:{number}: expected a JSON object per line")
        if record.get("predicted_time_s") is None or record.get("measured_time_s") is None:
            skipped += 1
            continue
        try:
            strategy_of(record)
            numeric_features(record)
            log_residual(record)
        except ValueError as err:
            raise UserError(f"{path}:{number}: {err}") from None
        records.append(record)
    if not records:
        raise UserError(f"--runs {path}: no runs with both a prediction and a measurement")
    return records, skipped


def group_of(record: Mapping[str, Any], scheme: str) -> str:
    """The CV group of a record: its model name, or its scenario id (defaulting to the model name)."""
    model = str(record.get("model", "?"))
    return model if scheme == "models" else str(record.get("scenario", model))


# ---------------------------------------------------------------------------------------------------
# Candidate models and their plain-parameter export


def accuracy_optimal_factor(ratios: np.ndarray) -> float:
    """The constant f that maximises the mean accuracy 1 - |f p - m| / m over runs with ratios r = m / p:
    it minimises sum |f - r| / r, i.e. the median of r weighted by 1 / r (lower than the mean of log r
    when the ratios spread, since over-predicting costs without bound and under-predicting at most 1)."""
    order = np.argsort(ratios)
    r = ratios[order]
    cumulative = np.cumsum(1.0 / r)
    return float(r[np.searchsorted(cumulative, 0.5 * cumulative[-1])])


class StrategyFactors:
    """One multiplicative factor per strategy, each the accuracy-optimal constant of its runs
    (accuracy_optimal_factor), shrunk in log space towards the factor of all runs with weight
    runs / (runs + 1); a strategy not seen in training gets the all-runs factor. The robust candidate when
    there are few runs per strategy. Exported as a ridge model on the strategy indicators."""

    def fit(self, X: np.ndarray, y: np.ndarray) -> "StrategyFactors":
        first = len(NUMERIC_FEATURES)
        ratios = np.exp(y)
        self.n_features_ = X.shape[1]
        self.intercept_ = math.log(accuracy_optimal_factor(ratios))
        coef = []
        for column in range(first, X.shape[1]):
            mask = X[:, column] > 0.5
            runs = int(mask.sum())
            own = math.log(accuracy_optimal_factor(ratios[mask])) if runs else self.intercept_
            coef.append(runs / (runs + 1.0) * (own - self.intercept_))
        self.coef_ = np.array([0.0] * first + coef)
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        return X @ self.coef_ + self.intercept_


def _make_estimator(kind: str, seed: int):
    from sklearn.ensemble import GradientBoostingRegressor, RandomForestRegressor
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if kind == "strategy_factors":
        return StrategyFactors()
    if kind in ("ridge", "ridge_strong"):  # strong: for small run sets, where alpha 1 overfits
        return make_pipeline(StandardScaler(), Ridge(alpha=1.0 if kind == "ridge" else 10.0))
    if kind == "random_forest":
        return RandomForestRegressor(n_estimators=100, max_depth=8, min_samples_leaf=2, random_state=seed)
    if kind == "gradient_boosting":
        return GradientBoostingRegressor(n_estimators=150, max_depth=3, learning_rate=0.05,
                                         min_samples_leaf=3, random_state=seed)
    raise ValueError(f"unknown candidate {kind!r}")


def export_model(kind: str, estimator) -> dict[str, Any]:
    """A fitted candidate as plain parameters (lists and floats) that evaluate_model reads."""
    if kind == "strategy_factors":
        n = estimator.n_features_
        return {"kind": "ridge", "mean": [0.0] * n, "scale": [1.0] * n, "coef": estimator.coef_.tolist(),
                "intercept": estimator.intercept_}
    if kind in ("ridge", "ridge_strong"):
        scaler, ridge = estimator[0], estimator[1]
        return {"kind": "ridge", "mean": scaler.mean_.tolist(), "scale": scaler.scale_.tolist(),
                "coef": ridge.coef_.tolist(), "intercept": float(ridge.intercept_)}
    if kind == "random_forest":
        return {"kind": "trees", "base": 0.0, "weight": 1.0 / len(estimator.estimators_),
                "trees": [tree_arrays(t) for t in estimator.estimators_]}
    if kind == "gradient_boosting":
        base = float(np.asarray(estimator.init_.constant_).ravel()[0])
        return {"kind": "trees", "base": base, "weight": float(estimator.learning_rate),
                "trees": [tree_arrays(t) for t in estimator.estimators_[:, 0]]}
    raise ValueError(f"unknown candidate {kind!r}")


def evaluate_model(model: Mapping[str, Any], X: np.ndarray) -> np.ndarray:
    """Predict log residuals from exported parameters.

    Trees compare float32 features with float64 thresholds, exactly as scikit-learn's tree predict does,
    so the result matches it bit for bit up to summation order."""
    X = np.asarray(X, dtype=np.float64)
    if model["kind"] == "ridge":
        z = (X - np.asarray(model["mean"])) / np.asarray(model["scale"])
        return z @ np.asarray(model["coef"]) + float(model["intercept"])
    if model["kind"] == "trees":
        total = sum(values_at(tree, X) for tree in model["trees"])
        return float(model["base"]) + float(model["weight"]) * np.asarray(total, dtype=np.float64)
    if model["kind"] == "none":
        return np.zeros(len(X))
    raise ValueError(f"unknown model kind {model['kind']!r}")


# ---------------------------------------------------------------------------------------------------
# Grouped cross-validation and model selection


def accuracy(predicted_s: np.ndarray, measured_s: np.ndarray) -> np.ndarray:
    """Per-run accuracy 1 - |predicted - measured| / measured (1 = exact; can go negative)."""
    return 1.0 - np.abs(predicted_s - measured_s) / measured_s


@dataclass(frozen=True)
class Dataset:
    X: np.ndarray
    y: np.ndarray  # log(measured / predicted)
    predicted_s: np.ndarray
    measured_s: np.ndarray
    strategy: np.ndarray  # per row
    groups: dict[str, np.ndarray]  # scheme -> group label per row
    strategies: tuple[str, ...]  # indicator order in X


def build_dataset(records: Sequence[Mapping[str, Any]]) -> Dataset:
    strategies = tuple(sorted({strategy_of(r) for r in records}))
    return Dataset(
        X=np.array([feature_vector(r, strategies) for r in records], dtype=np.float64),
        y=np.array([log_residual(r) for r in records]),
        predicted_s=np.array([float(r["predicted_time_s"]) for r in records]),
        measured_s=np.array([float(r["measured_time_s"]) for r in records]),
        strategy=np.array([strategy_of(r) for r in records]),
        groups={s: np.array([group_of(r, s) for r in records]) for s in SCHEMES},
        strategies=strategies,
    )


@dataclass
class StrategyRow:
    strategy: str
    runs: int
    analytical: float  # mean accuracy of the analytical model
    corrected: dict[str, float]  # scheme -> held-out mean accuracy after the gated correction
    enabled: bool


@dataclass
class CVReport:
    """Held-out accuracy, per candidate (ungated) and, for the chosen one, per strategy (gated)."""

    chosen: str
    schemes: tuple[str, ...]
    folds: dict[str, int]
    candidates: dict[str, dict[str, float]]  # candidate -> scheme -> overall mean accuracy (ungated)
    analytical_overall: float
    corrected_overall: dict[str, float]  # scheme -> gated overall mean accuracy
    strategies: list[StrategyRow] = field(default_factory=list)

    @property
    def headline(self) -> tuple[float, float, float]:
        """(analytical overall, corrected overall under the worse scheme, worst per-strategy corrected)."""
        worst_strategy = min(min(row.corrected.values()) for row in self.strategies)
        return self.analytical_overall, min(self.corrected_overall.values()), worst_strategy

    def to_dict(self) -> dict[str, Any]:
        return {
            "chosen": self.chosen, "schemes": list(self.schemes), "folds": self.folds,
            "candidates": self.candidates, "analytical_overall": self.analytical_overall,
            "corrected_overall": self.corrected_overall,
            "strategies": [{"strategy": r.strategy, "runs": r.runs, "analytical": r.analytical,
                            "corrected": r.corrected, "enabled": r.enabled} for r in self.strategies],
        }

    def table(self) -> str:
        """The CV table as aligned text."""
        heads = ["strategy", "runs", "analytical"] + [f"held-out {s}" for s in self.schemes] + ["correction"]
        rows = [[r.strategy, str(r.runs), f"{r.analytical:.1%}"] + [f"{r.corrected[s]:.1%}" for s in self.schemes]
                + ["on" if r.enabled else "off (CV: no gain)"] for r in self.strategies]
        rows.append(["overall", str(sum(r.runs for r in self.strategies)), f"{self.analytical_overall:.1%}"]
                    + [f"{self.corrected_overall[s]:.1%}" for s in self.schemes] + [""])
        widths = [max(len(x) for x in col) for col in zip(heads, *rows)]
        lines = ["  ".join(x.ljust(w) for x, w in zip(line, widths)).rstrip() for line in [heads, *rows]]
        cands = ", ".join(f"{c} " + "/".join(f"{v[s]:.1%}" for s in self.schemes) for c, v in self.candidates.items())
        folds = ", ".join(f"{s}: {n} folds" for s, n in self.folds.items())
        return "\n".join([f"candidates (ungated held-out accuracy, {'/'.join(self.schemes)}): {cands}",
                          f"chosen: {self.chosen}   grouped CV ({folds}); accuracy = 1 - |t - measured| / measured",
                          *lines])


def _held_out_predictions(data: Dataset, kind: str, scheme: str, seed: int) -> np.ndarray:
    from sklearn.model_selection import GroupKFold

    groups = data.groups[scheme]
    folds = GroupKFold(n_splits=min(MAX_FOLDS, len(set(groups))))
    out = np.empty(len(data.y))
    numeric = len(NUMERIC_FEATURES)
    for train, test in folds.split(data.X, data.y, groups):
        estimator = _make_estimator(kind, seed).fit(data.X[train], data.y[train])
        X_test = data.X[test].copy()  # held-out features clamped to the training range, as Correction.apply does
        X_test[:, :numeric] = np.clip(X_test[:, :numeric], data.X[train, :numeric].min(axis=0),
                                      data.X[train, :numeric].max(axis=0))
        out[test] = evaluate_model(export_model(kind, estimator), X_test)
    return out


def cross_validate(data: Dataset, seed: int = 0) -> CVReport:
    """Score every candidate by grouped CV, choose the best, gate it per strategy (module docstring)."""
    schemes = tuple(s for s in SCHEMES if len(set(data.groups[s])) >= 2)
    if not schemes:
        raise UserError("runs: need runs of at least 2 models or 2 scenarios to hold whole groups out in cross-validation")
    analytical = accuracy(data.predicted_s, data.measured_s)
    held_out = {c: {s: _held_out_predictions(data, c, s, seed) for s in schemes} for c in CANDIDATES}
    scores = {c: {s: float(accuracy(data.predicted_s * np.exp(held_out[c][s]), data.measured_s).mean())
                  for s in schemes} for c in CANDIDATES}
    chosen = max(CANDIDATES, key=lambda c: min(scores[c].values()))  # ties keep the simpler (earlier) one
    corrected = {s: accuracy(data.predicted_s * np.exp(held_out[chosen][s]), data.measured_s) for s in schemes}
    rows = []
    gated = {s: analytical.copy() for s in schemes}
    for strategy in data.strategies:
        mask = data.strategy == strategy
        enabled = all(corrected[s][mask].mean() >= analytical[mask].mean() for s in schemes)
        for s in schemes:
            if enabled:
                gated[s][mask] = corrected[s][mask]
        rows.append(StrategyRow(strategy, int(mask.sum()), float(analytical[mask].mean()),
                                {s: float(gated[s][mask].mean()) for s in schemes}, enabled))
    return CVReport(
        chosen=chosen, schemes=schemes,
        folds={s: min(MAX_FOLDS, len(set(data.groups[s]))) for s in schemes},
        candidates=scores, analytical_overall=float(analytical.mean()),
        corrected_overall={s: float(gated[s].mean()) for s in schemes}, strategies=rows,
    )


# ---------------------------------------------------------------------------------------------------
# The stored correction (schema validated on load: the file may come from anyone)


class _Ridge(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    kind: Literal["ridge"]
    mean: list[float]
    scale: list[float]
    coef: list[float]
    intercept: float


class _Trees(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    kind: Literal["trees"]
    base: float
    weight: float
    trees: list[Tree] = Field(min_length=1)


class _ProfileIdentity(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    sha256: str
    hostname: str
    created: str


class _Domain(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    min: list[float]
    max: list[float]

    @model_validator(mode="after")
    def _ordered(self):
        if any(lo > hi for lo, hi in zip(self.min, self.max)):
            raise ValueError("domain min must not exceed max")
        return self


class CorrectionFile(BaseModel):
    """The on-disk correction (JSON)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    format: Literal["paraoracle-correction"]
    format_version: int
    trained: str
    profile: _ProfileIdentity
    runs: dict[str, Any]
    target: Literal["log(measured_time_s / predicted_time_s)"]
    features: list[str]
    strategies: list[str]
    enabled: dict[str, bool]
    domain: _Domain
    model: Union[_Ridge, _Trees] = Field(discriminator="kind")
    cv: dict[str, Any]

    @model_validator(mode="after")
    def _consistent(self):
        n = len(self.features)
        if self.features != list(feature_names(tuple(self.strategies))):
            raise ValueError("features do not match this paraoracle's feature layout (retrain the correction)")
        if len(self.domain.min) != len(NUMERIC_FEATURES) or len(self.domain.max) != len(NUMERIC_FEATURES):
            raise ValueError("domain arrays must have one entry per numeric feature")
        if isinstance(self.model, _Ridge):
            if not len(self.model.mean) == len(self.model.scale) == len(self.model.coef) == n:
                raise ValueError("ridge arrays must have one entry per feature")
            if any(s == 0 or not math.isfinite(s) for s in self.model.scale):
                raise ValueError("ridge scale entries must be finite and non-zero")
        else:
            for tree in self.model.trees:
                if any(not 0 <= f < n for f in tree.split_features()):
                    raise ValueError("a tree splits on a feature index outside the feature list")
        reach = reachable_log_factor(self.model, self.domain)
        if reach > math.log(MAX_CORRECTION_FACTOR):
            raise ValueError(f"the model can scale a prediction by up to e^{reach:.4g} on its domain; at most "
                             f"{MAX_CORRECTION_FACTOR:g}x either way is accepted")
        return self


def reachable_log_factor(model: Union[_Ridge, _Trees], domain: _Domain) -> float:
    """The largest |log factor| the model can give on its inputs: numeric features clamped to the domain
    (Correction.apply), strategy indicators 0 or 1; for trees, every tree at its largest leaf."""
    if isinstance(model, _Trees):
        return abs(model.base) + abs(model.weight) * sum(max(map(abs, tree.value)) for tree in model.trees)
    n = len(domain.min)
    low, high = list(domain.min) + [0.0] * (len(model.coef) - n), list(domain.max) + [1.0] * (len(model.coef) - n)
    return abs(model.intercept) + sum(max(abs(c / s * (lo - m)), abs(c / s * (hi - m)))
                                      for c, s, m, lo, hi in zip(model.coef, model.scale, model.mean, low, high))


def profile_identity(profile: Profile) -> str:
    """sha256 of the profile's content without its correction reference (so adding the reference does
    not change the identity the correction was trained for)."""
    content = profile.model_dump(mode="json", exclude={"correction"}, exclude_none=True)
    return hashlib.sha256(json.dumps(content, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


@dataclass(frozen=True)
class CorrectedTime:
    analytical_s: float
    corrected_s: float
    applied: bool  # False: strategy gated off by CV, or never seen in training
    in_domain: bool
    reasons: tuple[str, ...]  # why out of domain / not applied


@dataclass(frozen=True)
class Correction:
    """A loaded, validated correction. apply() takes the same plain record the runs file holds."""

    spec: CorrectionFile
    path: Path

    @cached_property
    def _model_params(self) -> dict[str, Any]:
        return self.spec.model.model_dump()

    def apply(self, record: Mapping[str, Any]) -> CorrectedTime:
        """Corrected iteration time for one prediction record (see correction_features).

        Features outside the training range are clamped to it (no extrapolation) and reported as out of
        domain; an unseen or CV-disabled strategy keeps the analytical figure (and says so first in
        `reasons`)."""
        analytical_s = float(record["predicted_time_s"])
        strategy = strategy_of(record)
        numeric = numeric_features(record)
        reasons = []
        clamped = []
        for name, lo, hi in zip(NUMERIC_FEATURES, self.spec.domain.min, self.spec.domain.max):
            value = numeric[name]
            tolerance = 1e-9 * max(1.0, abs(lo), abs(hi))
            if value < lo - tolerance or value > hi + tolerance:
                reasons.append(f"{name}={value:.4g} outside trained [{lo:.4g}, {hi:.4g}]")
            clamped.append(min(max(value, lo), hi))
        strategies = tuple(self.spec.strategies)
        if strategy not in strategies:
            return CorrectedTime(analytical_s, analytical_s, False, False,
                                 (f"strategy '{strategy}' not in the training runs", *reasons))
        if not self.spec.enabled.get(strategy, False):
            return CorrectedTime(analytical_s, analytical_s, False, not reasons,
                                 (f"correction disabled for '{strategy}' by cross-validation", *reasons))
        x = np.array([clamped + [1.0 if strategy == s else 0.0 for s in strategies]])
        factor = float(np.exp(evaluate_model(self._model_params, x)[0]))
        return CorrectedTime(analytical_s, analytical_s * factor, True, not reasons, tuple(reasons))


def fit_correction(records: Sequence[Mapping[str, Any]], profile: Profile, *, runs_source: Mapping[str, Any],
                   seed: int = 0) -> tuple[CorrectionFile, CVReport]:
    """Cross-validate, choose, gate, then fit the chosen candidate on all runs. Runs that record the
    `profile_identity` they were predicted with must have been predicted with this profile."""
    identity = profile_identity(profile)
    others = [r for r in records if r.get("profile_identity") not in (None, identity)]
    if others:
        raise UserError(f"runs: {len(others)} of {len(records)} runs were predicted with another profile "
                        f"(profile_identity {str(others[0]['profile_identity'])[:12]}, this one {identity[:12]}); "
                        "validate again with this profile")
    data = build_dataset(records)
    report = cross_validate(data, seed)
    estimator = _make_estimator(report.chosen, seed).fit(data.X, data.y)
    numeric = data.X[:, : len(NUMERIC_FEATURES)]
    try:  # the fitted model is held to the schema any correction file is (a bounded factor on its domain)
        spec = CorrectionFile(
            format=FORMAT, format_version=FORMAT_VERSION, trained=utc_now_iso(),
            profile=_ProfileIdentity(sha256=profile_identity(profile), hostname=profile.machine.hostname,
                                     created=profile.created),
            runs=dict(runs_source), target="log(measured_time_s / predicted_time_s)",
            features=list(feature_names(data.strategies)), strategies=list(data.strategies),
            enabled={r.strategy: r.enabled for r in report.strategies},
            domain=_Domain(min=numeric.min(axis=0).tolist(), max=numeric.max(axis=0).tolist()),
            model=export_model(report.chosen, estimator), cv=report.to_dict(),
        )
    except ValidationError as err:
        raise UserError(f"the correction fitted to these runs is refused: "
                        f"{err.errors()[0]['msg'].removeprefix('Value error, ')}") from None
    return spec, report


def save_correction(spec: CorrectionFile, path: Path | str, profile: Profile, profile_path: Path | str) -> CorrectionRef:
    """Write the correction atomically and return the reference to put in the profile (path relative to
    the profile's folder when it lies under it)."""
    path = Path(path)
    text = json.dumps(spec.model_dump(mode="json"), indent=1) + "\n"
    write_atomic(path, text)
    folder = Path(profile_path).resolve().parent
    try:
        ref_path = str(path.resolve().relative_to(folder))
    except ValueError:
        ref_path = str(path.resolve())
    return CorrectionRef(path=ref_path, sha256=hashlib.sha256(text.encode()).hexdigest())


def load_correction(profile: Profile, profile_path: Optional[Path | str] = None) -> Optional[Correction]:
    """The profile's correction, or None when it has none. One-line UserError when the file is missing,
    changed since it was referenced (sha256 mismatch), malformed, or trained for another profile."""
    ref = profile.correction
    if ref is None:
        return None
    where = f"profile {profile_path}" if profile_path else "profile"
    path = Path(ref.path)
    if not path.is_absolute() and profile_path is not None:
        path = Path(profile_path).parent / path
    try:
        raw = read_bytes(path, "correction")
    except UserError as err:
        raise UserError(f"{where}: field 'correction.path': {err}; retrain with `predictor train-correction`") from None
    if hashlib.sha256(raw).hexdigest() != ref.sha256:
        raise UserError(f"{path}: sha256 does not match the profile's correction reference (the file was changed "
                        "or tampered with after training); refusing it - retrain with `predictor train-correction`")
    try:
        data = parse_json(decode_utf8(raw, str(path)), str(path))
    except UserError as err:
        raise UserError(f"not a valid correction file: {err}") from None
    try:
        spec = CorrectionFile.model_validate(data)
    except ValidationError as err:
        e = err.errors()[0]
        loc = ".".join(str(p) for p in e["loc"]) or "(top level)"
        raise UserError(f"{path}: not a valid correction file: field '{loc}': {e['msg'].removeprefix('Value error, ')}") from None
    if spec.format_version != FORMAT_VERSION:
        raise UserError(f"{path}: field 'format_version' is {spec.format_version}; this paraoracle reads {FORMAT_VERSION}")
    identity = profile_identity(profile)
    if spec.profile.sha256 != identity:
        raise UserError(f"{path}: trained for another profile (host {spec.profile.hostname}, created "
                        f"{spec.profile.created}, identity {spec.profile.sha256[:12]}) - this profile's identity is "
                        f"{identity[:12]}; refusing it - train one for this profile with `predictor train-correction`")
    return Correction(spec=spec, path=path)


def file_sha256(path: Path | str) -> str:
    return hashlib.sha256(read_bytes(path, "runs")).hexdigest()
