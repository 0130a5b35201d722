"""The calibrated domain of a compute fit, and whether a call lies inside it.

A fit (calibrate.compute) interpolates well between the shapes it measured and is a guess beyond them: trees and
Gaussian processes extrapolate flat. A call is *in the domain* of its family when every domain feature lies
within the family's measured range and some measured sample lies within NEAR_FACTOR of it in every feature
(Chebyshev distance in log10): a call between two far-apart grid shapes can still be far from anything measured.
The features are the sizes a kernel's choice and efficiency depend on; the derived intensity and the CPU-only
native-convolution features are left out (they follow from the others). docs/method.md §3 ("Where the fit is
measured, and where it guesses").
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

from calibrate.coefficients import FitDomain

#: a call within this factor of a measured shape in every domain feature counts as measured
NEAR_FACTOR = 4.0
_NEAR_LOG10 = math.log10(NEAR_FACTOR)
_LOG_AS_IS = ("log_flops", "log_bytes", "log_min_dim", "log_batch", "log_in_channels", "log_out_channels",
              "log_channels", "log_spatial")
_LOG_OF = ("kernel_volume",)
_COUNT = ("spatial_dims",)
DOMAIN_FEATURES = _LOG_AS_IS + _LOG_OF + _COUNT
_DIGITS = 3  # stored points are rounded to 1e-3 in log10 (0.2%)


def _columns(feature_names: Sequence[str]) -> list[tuple[int, str]]:
    return [(i, name) for i, name in enumerate(feature_names) if name in DOMAIN_FEATURES]


def _value(name: str, raw: float) -> float:
    return math.log10(max(raw, 1.0)) if name in _LOG_OF else float(raw)


def domain_point(feature_names: Sequence[str], features: Sequence[float]) -> tuple[float, ...]:
    """A call's point in the domain features (a fit's features, calibrate.shapes.work)."""
    return tuple(_value(name, features[i]) for i, name in _columns(feature_names))


def fit_domain(feature_names: Sequence[str], samples: Sequence[Sequence[float]]) -> Optional[FitDomain]:
    """The domain of a family measured at `samples` (each a features list in `feature_names` order); None
    without samples."""
    if not samples:
        return None
    names = [name for _, name in _columns(feature_names)]
    points = sorted({tuple(round(v, _DIGITS) for v in domain_point(feature_names, s)) for s in samples})
    low = [min(p[k] for p in points) for k in range(len(names))]
    high = [max(p[k] for p in points) for k in range(len(names))]
    return FitDomain(features=names, low=low, high=high, points=[list(p) for p in points])


def in_domain(domain: FitDomain, feature_names: Sequence[str], features: Sequence[float]) -> bool:
    """Whether a call with `features` (in `feature_names` order) lies in `domain` (module docstring)."""
    named = dict(zip(feature_names, features))
    try:
        point = [_value(name, named[name]) for name in domain.features]
    except KeyError:
        return False  # a feature the fit's domain has and the call lacks: not comparable
    tol = 0.5 * 10 ** -_DIGITS
    if any(v < lo - tol or v > hi + tol for v, lo, hi in zip(point, domain.low, domain.high)):
        return False
    return any(max(abs(v - q) for v, q in zip(point, p)) <= _NEAR_LOG10 + tol for p in domain.points)
