"""The timing harness: statistics by hand, adaptive stopping, and that it measures what it times."""
import time

import pytest

from profiler.timing import Measurement, Timer, median_rel_ci


def test_statistics_match_hand_values():
    m = Measurement(times_s=[1.0, 2.0, 3.0, 4.0, 100.0], number=1, device="cpu", threads=1)
    assert m.median_s == 3.0
    assert m.min_s == 1.0
    assert m.iqr_s == pytest.approx(4.0 - 2.0)
    mean = 22.0
    var = sum((t - mean) ** 2 for t in m.times_s) / 5
    assert m.cv == pytest.approx(var**0.5 / mean)


def test_median_ci_shrinks_with_identical_samples():
    assert median_rel_ci([1.0] * 50) == 0.0
    assert median_rel_ci([1.0, 2.0]) == float("inf")


def test_timer_measures_a_sleep_and_keeps_every_sample():
    m = Timer(lambda: time.sleep(0.002), warmup_s=0.005, min_samples=5, max_samples=8, budget_s=0.5).measure()
    assert 0.0019 < m.median_s < 0.02
    assert 5 <= len(m.times_s) <= 8
    assert m.threads >= 1 and m.device == "cpu"


def test_timer_batches_tiny_calls_and_converges():
    """A no-op batched into 0.1 ms samples meets a loose 50% interval as soon as it has its minimum samples."""
    m = Timer(lambda: None, min_sample_s=1e-4, target_rel_ci=0.5, budget_s=5.0).measure()
    assert m.number > 1
    assert m.stopped_by == "converged"


def test_timer_stops_at_its_budget_or_its_sample_cap():
    """An interval no timing meets (1e-12): the timer stops at the budget, or at max_samples when that comes first."""
    by_budget = Timer(lambda: None, min_sample_s=1e-4, target_rel_ci=1e-12, budget_s=0.05, max_samples=10**6).measure()
    assert by_budget.stopped_by == "budget"
    by_cap = Timer(lambda: None, min_sample_s=1e-4, target_rel_ci=1e-12, budget_s=60.0, min_samples=3,
                   max_samples=7).measure()
    assert by_cap.stopped_by == "max_samples" and len(by_cap.times_s) == 7


def test_timer_rejects_bad_parameters():
    with pytest.raises(ValueError):
        Timer(lambda: None, min_samples=0)


def test_cold_calls_are_timed_one_by_one_after_an_eviction_write():
    """With cold_evict_bytes the CPU clock writes its buffer before every call, outside the timed region."""
    from profiler.timing import _CpuClock

    clock = _CpuClock(4096)
    seen = []

    def fn():
        seen.append(float(clock.evict[0]))  # the write happened just before this call
        clock.evict[0] = 0.0

    clock.time(fn, 3)
    assert seen == [1.0, 1.0, 1.0]
    m = Timer(lambda: None, cold_evict_bytes=4096, warmup_s=0.0, min_samples=3, max_samples=3).measure()
    assert m.number == 1 and len(m.times_s) == 3
