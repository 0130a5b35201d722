"""Alpha-beta fits on synthetic samples from known coefficients: recovery, break detection, coverage."""
import numpy as np
import pytest

from calibrate.alphabeta import (Point, detect_segments, fit_alpha_beta, fit_line, sampling_noise, segment_for,
                                 segment_time_s)
from calibrate.synthetic import noisy_times

SIZES = [2.0**k for k in range(3, 27)]


def points(time_s, rng, sizes=SIZES, noise=0.03, calls=9):
    return [Point(s, np.array(noisy_times(time_s(s), rng, noise, calls))) for s in sizes]


def test_fit_line_exact_on_noiseless_line():
    x = np.array([1e3, 1e5, 1e7])
    alpha, beta = fit_line(x, 10e-6 + x / 2e9)
    assert alpha == pytest.approx(10e-6, rel=1e-9)
    assert 1 / beta == pytest.approx(2e9, rel=1e-9)


def test_fit_line_never_negative():
    x = np.array([1e3, 1e4, 1e5, 1e6])
    alpha, beta = fit_line(x, x / 1e9 * 1.0 - 1e-9 + 1e-12 * x)  # would need a negative intercept
    assert alpha >= 0 and beta >= 0


@pytest.mark.parametrize("alpha_s,bw", [(20e-6, 5e9), (3e-6, 80e9), (150e-6, 0.8e9)])
def test_recovers_alpha_and_beta_within_5_percent(alpha_s, bw):
    rng = np.random.default_rng(7)
    fit = fit_alpha_beta(points(lambda s: alpha_s + s / bw, rng), rng)
    assert len(fit.segments) == 1
    seg = fit.segments[0]
    assert seg.alpha_s.value == pytest.approx(alpha_s, rel=0.05)
    assert seg.bandwidth_bytes_per_s.value == pytest.approx(bw, rel=0.05)
    assert fit.quality.median_rel_error < 0.05


def test_detects_an_injected_regime_break():
    rng = np.random.default_rng(3)
    knee = 2.0**16  # eager -> rendezvous: latency jumps, bandwidth doubles
    truth = lambda s: 5e-6 + s / 2e9 if s < knee else 40e-6 + s / 4e9
    fit = fit_alpha_beta(points(truth, rng), rng)
    assert len(fit.segments) == 2
    assert 2.0**15 < fit.segments[1].from_x <= knee
    assert fit.segments[0].alpha_s.value == pytest.approx(5e-6, rel=0.05)
    assert fit.segments[1].bandwidth_bytes_per_s.value == pytest.approx(4e9, rel=0.05)
    for s in (1e3, 1e5, 1e7):
        assert segment_time_s(segment_for(fit, s), s) == pytest.approx(truth(s), rel=0.05)


def test_no_break_on_a_single_regime():
    rng = np.random.default_rng(11)
    for _ in range(5):
        x = np.array(SIZES)
        t = np.array([p.t for p in points(lambda s: 10e-6 + s / 3e9, rng)])
        assert len(detect_segments(x, t)) == 1


@pytest.mark.slow  # a real fit: seconds on 2 cores (CI runs it)
def test_bootstrap_intervals_cover_the_truth_in_90_percent_of_trials():
    rng = np.random.default_rng(2026)
    alpha_s, bw = 12e-6, 6e9
    sizes = [2.0**k for k in range(6, 24, 2)]
    trials, covered_alpha, covered_bw = 60, 0, 0
    for _ in range(trials):
        fit = fit_alpha_beta(points(lambda s: alpha_s + s / bw, rng, sizes=sizes, noise=0.05, calls=7), rng)
        covered_alpha += fit.segments[0].alpha_s.low <= alpha_s <= fit.segments[0].alpha_s.high
        covered_bw += fit.segments[-1].bandwidth_bytes_per_s.low <= bw <= fit.segments[-1].bandwidth_bytes_per_s.high
    print(f"coverage over {trials} trials: alpha {covered_alpha / trials:.0%}, bandwidth {covered_bw / trials:.0%}")
    assert covered_alpha / trials >= 0.90
    assert covered_bw / trials >= 0.90


def test_bounds_order_times():
    rng = np.random.default_rng(5)
    fit = fit_alpha_beta(points(lambda s: 8e-6 + s / 1e9, rng, noise=0.05), rng)
    seg = segment_for(fit, 1e6)
    assert segment_time_s(seg, 1e6, "low") <= segment_time_s(seg, 1e6) <= segment_time_s(seg, 1e6, "high")


def test_detects_two_breaks_like_nccl_protocol_switches():
    """LL (low latency, half bandwidth) -> LL128 -> Simple (high latency, full bandwidth), as in
    NCCL's protocol choice (src/graph/tuning.cc); sizes 8 B .. 1 GiB, two points per octave."""
    rng = np.random.default_rng(12)
    sizes = sorted({round(2.0 ** (k / 2)) for k in range(6, 61)})

    def truth(s):
        if s < 2**14:
            return 6e-6 + s / 20e9
        if s < 2**21:
            return 14e-6 + s / 80e9
        return 40e-6 + s / 100e9

    fit = fit_alpha_beta(points(truth, rng, sizes=sizes, noise=0.02), rng)
    assert len(fit.segments) == 3
    assert 2**13 < fit.segments[1].from_x <= 2**14 * 1.5 and 2**20 < fit.segments[2].from_x <= 2**21 * 1.5
    assert fit.segments[2].bandwidth_bytes_per_s.value == pytest.approx(100e9, rel=0.05)
    assert fit.quality.median_rel_error < 0.03


def test_stream_fit_separates_the_dram_regime_of_a_measured_sweep():
    """Triad medians measured on the 2-core VM (2026-11-29; 2x sizes, 96 KB to 403 MB moved per call), redrawn
    with 2% noise: about 70 GB/s while the arrays fit the 32 MB L3, 29 GB/s from DRAM. With the collective
    fits' break penalty this sweep was fitted as one 66 GB/s line, which then served as the DRAM bandwidth."""
    from calibrate.fit import dram_bandwidth, fit_memory
    from calibrate.synthetic import stream_samples

    medians_us = [3.5, 3.2, 7.1, 9.7, 22.3, 35.0, 93.2, 173.3, 448.3, 1293.9, 2964.0, 6928.7, 13852.1]
    sizes = [98304.0 * 2**k for k in range(len(medians_us))]
    measured = dict(zip(sizes, medians_us))
    samples = stream_samples(sizes, lambda moved: measured[moved] * 1e-6, np.random.default_rng(3), noise=0.02)
    fits = fit_memory(samples, np.random.default_rng(0))
    assert len(fits["host/triad"].segments) >= 2
    assert dram_bandwidth(fits, "host") == pytest.approx(402653184.0 / 13852.1e-6, rel=0.15)


@pytest.mark.parametrize("statistic, factor", [("mean", 1.0), ("median", 1.2533)])
def test_sampling_noise_matches_the_standard_error_of_the_statistic(statistic, factor):
    """Normal per-call noise sigma over n calls: the statistic's relative standard error is sigma / sqrt(n) for
    the mean and about 1.2533x that for the median; the median absolute deviation is 0.6745x the error."""
    rng = np.random.default_rng(4)
    sigma, calls = 0.10, 50
    points = [Point(float(x), np.array(noisy_times(1e-3, rng, sigma, calls)), statistic) for x in range(1, 41)]
    expected = 0.6745 * factor * sigma / np.sqrt(calls)
    assert 0.75 * expected < sampling_noise(points) < 1.3 * expected
    assert sampling_noise([Point(1.0, np.array([1e-3, 2e-3]))]) is None  # too few calls to redraw


def test_a_fit_reports_the_noise_of_its_samples():
    rng = np.random.default_rng(5)
    sizes = [2.0 ** k for k in range(4, 20)]
    quiet, noisy = ([Point(s, np.array(noisy_times(10e-6 + s / 1e9, rng, noise, 9))) for s in sizes]
                    for noise in (0.01, 0.2))
    q_quiet = fit_alpha_beta(quiet, rng).quality
    q_noisy = fit_alpha_beta(noisy, rng).quality
    assert q_quiet.sample_noise_rel_error < 0.01 < 0.03 < q_noisy.sample_noise_rel_error


@pytest.mark.parametrize("lengths", [(5, 5, 5, 5), (3, 7, 3, 30, 7, 2)])
def test_resample_draws_what_one_choice_per_sample_draws(lengths):
    """resample takes each sample's statistic per group of equally long samples; the values and the random
    stream must be those of one rng.choice per sample (the bootstrap CIs stay the same)."""
    from calibrate.alphabeta import MIN_TIME_S, STATISTICS, resample

    rng = np.random.default_rng(5)
    points = [Point(float(i + 1), rng.uniform(1e-3, 2e-3, n), ("median", "mean")[i % 2]) for i, n in enumerate(lengths)]
    ours_rng, their_rng = np.random.default_rng(9), np.random.default_rng(9)
    for _ in range(3):
        pick, drawn = resample(points, ours_rng)
        if min(lengths) >= 3:
            expected_pick = np.arange(len(points))
        else:
            expected_pick = their_rng.integers(0, len(points), len(points))
        expected = [STATISTICS[points[i].statistic](their_rng.choice(points[i].times_s, len(points[i].times_s)))
                    for i in expected_pick]
        assert pick.tolist() == expected_pick.tolist()
        assert drawn.tolist() == pytest.approx(np.maximum(expected, MIN_TIME_S).tolist(), rel=1e-12)
