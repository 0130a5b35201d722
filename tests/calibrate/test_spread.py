"""Stragglers (calibrate.spread, docs/method.md §25): the expected slowest of n draws of a measured spread, checked by
hand on distributions whose order statistics are known, the tail fit, and the sourced defaults."""
from __future__ import annotations

import math

import numpy as np
import pytest

from calibrate.coefficients import TailDistribution
from calibrate.spread import (DEFAULTS, SCREEN_MIN_RATIO, excess, expected_max, fit_ratios, fit_spread, gpd_pwm,
                              kept_share, max_quantile, published_spread, quantile, sample_ratios, screened_device)


def harmonic(n: int) -> float:
    return sum(1.0 / k for k in range(1, n + 1))


def exponential(scale: float, start: float = 1.0) -> TailDistribution:
    """start + Exp(scale): an exponential tail from (almost) p = 0."""
    return TailDistribution(probabilities=[1e-12], ratios=[start], tail_shape=0.0, tail_scale=scale)


@pytest.mark.parametrize("n", [1, 2, 3, 8, 64, 512, 4096])
def test_expected_max_of_exponentials_is_the_harmonic_number(n):
    # E[max of n i.i.d. Exp(beta)] = beta * H_n (the gaps between order statistics are Exp(beta / k))
    assert expected_max(exponential(0.1), n) == pytest.approx(1.0 + 0.1 * harmonic(n), rel=1e-5)


def test_excess_is_relative_to_one_rank_and_grows_with_n():
    d = exponential(0.1)
    assert excess(d, 1) == 0.0 and excess(None, 100) == 0.0
    # E[max of 8] / E[r] - 1 = (1 + 0.1 H_8) / 1.1 - 1
    assert excess(d, 8) == pytest.approx((1 + 0.1 * harmonic(8)) / 1.1 - 1, rel=1e-5)
    values = [excess(d, n) for n in (2, 4, 16, 256, 4096)]
    assert values == sorted(values) and values[0] > 0


def test_max_quantiles_by_hand():
    # P(max of n <= x) = F(x)^n: the q-quantile of the max is Q(q^(1/n)); exponential: 1 - 0.1 ln(1 - q^(1/n))
    d = exponential(0.1)
    for n, q in ((1, 0.5), (16, 0.1), (16, 0.9), (1000, 0.9)):
        assert max_quantile(d, n, q) == pytest.approx(1 - 0.1 * math.log(1 - q ** (1 / n)), rel=1e-6)
    low, high = excess(d, 16, "low"), excess(d, 16, "high")
    assert low < excess(d, 16) < high


def test_generalized_pareto_tail_by_hand():
    # beyond the last point: u + sigma / xi ((zeta / (1 - p))^xi - 1)
    d = TailDistribution(probabilities=[0.5, 0.9], ratios=[1.0, 1.2], tail_shape=0.25, tail_scale=0.05)
    p = np.asarray([0.7, 0.99, 0.9999])
    expected = [1.1, 1.2 + 0.05 / 0.25 * ((0.1 / 0.01) ** 0.25 - 1), 1.2 + 0.05 / 0.25 * ((0.1 / 1e-4) ** 0.25 - 1)]
    assert quantile(d, p) == pytest.approx(expected, rel=1e-9)


def test_probability_weighted_moments_recover_the_tail():
    rng = np.random.default_rng(3)
    xi, sigma = gpd_pwm(rng.pareto(4.0, 20000))  # Lomax(4) = GPD(xi = 1/4, sigma = 1/4)
    assert xi == pytest.approx(0.25, abs=0.05) and sigma == pytest.approx(0.25, rel=0.1)
    xi, sigma = gpd_pwm(rng.exponential(2.0, 20000))  # GPD(0, 2)
    assert xi == pytest.approx(0.0, abs=0.05) and sigma == pytest.approx(2.0, rel=0.05)


def test_heavy_tails_are_not_taken_for_a_normal():
    """Two spreads with the same median and standard deviation: a normal one and one with a Pareto tail. The fitted
    expected max over many ranks follows the tail; a normal assumption would give both the same."""
    rng = np.random.default_rng(7)
    normal = 1.0 + rng.normal(0.0, 0.02, 40000)
    heavy = 1.0 + 0.02 * (rng.pareto(3.0, 40000) - 0.5) / math.sqrt(0.75)  # Lomax(3): sd sqrt(3/4)
    fit_normal, fit_heavy = fit_ratios(normal, "normal"), fit_ratios(heavy, "heavy")
    assert fit_heavy.tail_shape > 0.2 and abs(fit_normal.tail_shape) < 0.2
    # the normal's expected max of 1000 draws: 1 + 3.24 sigma (tables of normal order statistics)
    assert expected_max(fit_normal, 1000) == pytest.approx(1 + 3.24 * 0.02, abs=0.01)
    assert excess(fit_heavy, 1000) > 1.5 * excess(fit_normal, 1000)


def test_fit_spread_from_samples_and_its_sources():
    rng = np.random.default_rng(0)
    compute = [list(1e-3 * (1 + rng.exponential(0.05, 60))) for _ in range(16)]
    collectives = [list(2e-4 * (1 + rng.exponential(0.1, 50))) for _ in range(4)]
    spread = fit_spread(compute, collectives, on_gpu=True)
    assert set(spread) == {"step", "collective", "device"}
    assert spread["step"].samples == 240 and spread["collective"].samples == 200  # the 4 longest of 16 samples
    assert "step" not in fit_spread(compute[:8], collectives, on_gpu=False)  # 2 x 60 calls: too few to say
    assert spread["device"] == DEFAULTS["device"] and "Sinha" in spread["device"].sources[0]
    assert fit_spread([[1.0, 1.0]], [], on_gpu=False) is None  # too few calls: nothing to say
    assert sample_ratios([[1, 2, 3, 4, 5]]) == pytest.approx([1 / 3, 2 / 3, 1, 4 / 3, 5 / 3])


def test_device_default_meets_its_source():
    """Sinha et al. (SC22): outliers up to 1.5x the median GPU; the default puts the expected slowest of Summit's
    27,648 GPUs there, and keeps a node of 8 within a few percent."""
    d = DEFAULTS["device"]
    assert expected_max(d, 27648) / expected_max(d, 1) == pytest.approx(1.5, rel=0.03)
    assert 0.01 < excess(d, 8) < 0.04
    assert DEFAULTS["collective"].sources[0].startswith("assumed")


def test_screened_spread_by_hand():
    """A screening at 1 + c keeps r = 1 + Exp(beta) below it: F(1 + c) = 1 - exp(-c / beta) of the draws, the mean
    of one kept draw is 1 + beta - c e^(-c/beta) / (1 - e^(-c/beta)), and the max of many tends to 1 + c."""
    beta, c = 0.1, 0.15
    d = exponential(beta).model_copy(update={"upper_ratio": 1.0 + c})
    kept = 1.0 - math.exp(-c / beta)
    assert kept_share(d) == pytest.approx(kept, rel=1e-6)
    assert expected_max(d, 1) == pytest.approx(1 + beta - c * math.exp(-c / beta) / kept, rel=1e-5)
    # the max of n kept draws has CDF (F(x) / F(1 + c))^n: its q-quantile is 1 - beta ln(1 - kept q^(1/n))
    assert max_quantile(d, 16, 0.5) == pytest.approx(1 - beta * math.log(1 - kept * 0.5 ** (1 / 16)), rel=1e-6)
    assert expected_max(d, 100000) == pytest.approx(1 + c, abs=1e-3)
    with pytest.raises(ValueError):
        TailDistribution(probabilities=[0.5], ratios=[1.0], upper_ratio=0.9)


def test_screened_device_spread_bounds_the_slowest_gpu():
    """A screened system's jobs never meet a GPU slower than 1 / 0.95 of the median (DCGM's targeted stress): the
    excess stays under 5.3% at any size and grows by well under a point from 280 to 2,240 GPUs (Megatron's 530B:
    +3.5% in all), where the unscreened spread adds 17 points."""
    screened = screened_device(DEFAULTS["device"], "a test")
    assert screened.upper_ratio == pytest.approx(1 / SCREEN_MIN_RATIO)
    assert "screened: a test" in screened.sources[-1]
    assert max(excess(screened, n) for n in (8, 512, 4096, 27648)) < 1 / SCREEN_MIN_RATIO - 1
    assert excess(screened, 2240) - excess(screened, 280) < 0.01
    assert excess(DEFAULTS["device"], 2240) - excess(DEFAULTS["device"], 280) > 0.15
    assert published_spread("screened", "x")["device"].upper_ratio is not None
    unscreened = published_spread("unscreened", "why")["device"]
    assert unscreened.upper_ratio is None and unscreened.sources[-1] == "not screened: why"


def test_unknown_screening_is_a_range():
    """A system whose screening no source states: the prediction and the interval's fast end as a screened system
    (the max of 1 + Exp(beta) draws kept below 1 + c), the slow end as an unscreened one (all draws), by hand."""
    beta, c = 0.1, 0.15
    assumed = exponential(beta).model_copy(update={"upper_ratio": 1.0 + c, "upper_ratio_assumed": True})
    kept, free = exponential(beta).model_copy(update={"upper_ratio": 1.0 + c}), exponential(beta)
    for n in (8, 512):
        assert excess(assumed, n) == pytest.approx(excess(kept, n))
        assert excess(assumed, n, "low") == pytest.approx(excess(kept, n, "low"))
        # the unscreened max's 90% quantile: 1 - beta ln(1 - 0.9^(1/n)), over the mean of one draw, 1 + beta
        assert excess(assumed, n, "high") == pytest.approx((1 - beta * math.log(1 - 0.9 ** (1 / n))) / (1 + beta) - 1,
                                                           rel=1e-6)
        assert excess(assumed, n, "high") == pytest.approx(excess(free, n, "high"))
    assert excess(assumed, 512, "high") > 1.5 * excess(assumed, 512)
    device = published_spread("unknown", "no source says")["device"]
    assert device.upper_ratio == pytest.approx(1 / SCREEN_MIN_RATIO) and device.upper_ratio_assumed
    assert "screening not stated: no source says" in device.sources[-1]
    with pytest.raises(ValueError):
        TailDistribution(probabilities=[0.5], ratios=[1.0], upper_ratio_assumed=True)
