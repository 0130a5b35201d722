"""calibrate.backends.host's column floor: the floor of a 3-D weight gradient oneDNN runs as im2col + GEMM, by hand."""
import numpy as np
import pytest

from calibrate.backends import host, host_fit
from profiler.profile import Sample


def sample(params, seconds, variant="bwd_weight", benchmark="conv3d"):
    return Sample(benchmark=benchmark, variant=variant, params=params, device="cpu", dtype="float32", threads=1,
                  times_s=[seconds] * 3)


def test_column_floor_fit_and_cost_by_hand():
    base = dict(N=8, C=4, F=4, D=16, H=16, W=16, kernel=3, stride=1, padding=1)
    cols = 8 * 4 * 27 * 16 ** 3
    assert host.im2col_columns("conv3d", base) == cols
    rates = np.linspace(0.5e-9, 1.4e-9, 10)
    samples = [sample({**base, "F": 4 + i}, r * cols) for i, r in enumerate(rates)]
    # outside the regime: a forward, 16 channels (the direct kernel), a 2-D weight gradient
    samples += [sample(base, 1.0, variant="fwd"), sample({**base, "C": 16}, 1.0),
                sample(dict(N=8, C=4, F=4, H=16, W=16, kernel=3, stride=1, padding=1), 1.0, benchmark="conv2d")]
    fit = host_fit.fit_conv_columns(samples)
    assert fit.samples == 10
    assert fit.s_per_column == pytest.approx(np.percentile(rates, host_fit.COLUMN_QUANTILE))
    few = dict(N=236, C=4, F=4, D=16, H=16, W=16, kernel=5, stride=1, padding=2)
    assert host.column_floor_s(fit, "conv3d", "bwd_weight", few, "float32", 1) == \
        pytest.approx(236 * 4 * 125 * 16 ** 3 * fit.s_per_column)
    assert host.column_floor_s(fit, "conv3d", "bwd_weight", few, "float32", None) == 0.0  # a GPU call
    assert host.column_floor_s(fit, "conv3d", "bwd_data", few, "float32", 1) == 0.0
    assert host.column_floor_s(None, "conv3d", "bwd_weight", few, "float32", 1) == 0.0
    assert host_fit.fit_conv_columns(samples[10:]) is None
