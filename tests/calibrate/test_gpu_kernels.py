"""The GPU kernel model (calibrate.gpu_kernels), its joint fit (calibrate.gpu_kernel_fit), the datasheets
(calibrate.gpu_specs), the cost model's use of it and `python -m bench deepbench` (issue 37, "Tests").

The regime tests compute their expected times in the test, from the formula of gpu_kernels' docstring
(`reference_compute` below: waves * (wave_s + 2 tm tn ceil(k / s) / min(efficiency * peak_per_SM, intensity *
feed)) + split partials, the fastest tile and split, then max(floor, compute, operand bytes / DRAM)) with
hand-chosen constants on a 10-SM GPU. Constants added to the model later take their prior (`constants`), so these
tests check formulas and behaviour rather than fitted numbers.
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from calibrate import gpu_kernel_fit as gf
from calibrate import gpu_kernels as gk
from calibrate import gpu_specs
from calibrate.coefficients import GpuKernelMode, parse_coefficients
from profiler.errors import UserError
from profiler.profile import GPUInfo, Machine, Profile, Provenance, Sample, SCHEMA_VERSION, utc_now_iso

REPO = Path(__file__).resolve().parents[2]


def constants(**overrides) -> dict:
    """Every constant of the model at its prior, these overridden."""
    unknown = set(overrides) - set(gk.PARAMS)
    assert not unknown, f"not constants of the model: {unknown}"
    return {**{name: p.prior for name, p in gk.PARAMS.items()}, **overrides}


#: hand-chosen constants: the main loop at half the SM's peak, a feed so fast no tile is feed-bound unless a test
#: lowers it, DRAM at half its bandwidth, round floors
HAND = constants(efficiency=0.5, gemm_ratio=1.0, bwd_data_ratio=1.0, bwd_weight_ratio=1.0, feed_bytes_per_s=1e15,
                 memory_efficiency=0.5, floor_s=2e-5, conv_floor_ratio=2.0, wave_s=1e-7, winograd_fwd=0.5,
                 winograd_bwd_data=0.5, winograd_bwd_weight=0.5, fft_fwd=0.25, fft_bwd_data=0.25, fft_bwd_weight=0.25,
                 transposed_memory_ratio=1.5, unaligned_ratio=0.7, unaligned_bwd_ratio=0.3)
#: a 10-SM GPU: 1e13 FLOP/s (1e12 per SM), 1e11 bytes/s of DRAM, CUDA cores
HW = gk.Hardware(sms=10, peak_flops_per_s=1e13, fallback_flops_per_s=1e13, memory_bytes_per_s=1e11, tensor_cores=False)
#: the same GPU's tensor-core mode: 1e14 FLOP/s, its CUDA cores' 1e13 the fallback
HW_TC = gk.Hardware(sms=10, peak_flops_per_s=1e14, fallback_flops_per_s=1e13, memory_bytes_per_s=1e11,
                    tensor_cores=True)
V100 = gk.Hardware(sms=80, peak_flops_per_s=15.7e12, fallback_flops_per_s=15.7e12, memory_bytes_per_s=900e9,
                   tensor_cores=False)


def overhead(values) -> float:
    """What a convolution call adds to its main kernel (0 while the model has no such constant)."""
    return values.get("conv_overhead_s", 0.0)


def reference_compute(values, hw, m, n, k, batch=1, element=4, rows_amp=1.0, cols_amp=1.0, max_split=1,
                      ratio=1.0, sm_peak=None, extra_bytes=0.0, reduce_kernel=False):
    """The fastest tile and split of a (batched) product m x n x k, from the module docstring's formula;
    reduce_kernel: a split pays one more call floor (cuBLAS's split-K reduction kernel)."""
    sm_peak = hw.peak_flops_per_s / hw.sms if sm_peak is None else sm_peak
    best = math.inf
    for tm, tn in gk.TILES:
        tiles = math.ceil(m / tm) * math.ceil(n / tn) * batch
        intensity = 2 * tm * tn / ((tm * rows_amp + tn * cols_amp) * element)
        rate = min(values["efficiency"] * ratio * sm_peak, intensity * values["feed_bytes_per_s"])
        for split in gk.SPLITS:
            if split > 1 and (split > max_split or k / split < gk.MIN_SPLIT_DEPTH):
                break
            waves = math.ceil(tiles * split / hw.sms)
            partials = m * n * batch * split * gk.PARTIAL_BYTES if split > 1 else 0.0
            t = waves * (values["wave_s"] + 2 * tm * tn * math.ceil(k / split) / rate) \
                + (partials + extra_bytes) / hw.memory_bytes_per_s \
                + (values["floor_s"] if reduce_kernel and split > 1 else 0.0)
            best = min(best, t)
    return best


def gemm_bytes(m, n, k, element=4):
    return (m * k + k * n + m * n) * element


def reference_gemm(values, hw, m, n, k, transposed=False, element=4):
    compute = reference_compute(values, hw, m, n, k, element=element, max_split=gk.SPLITS[-1],
                                ratio=values["gemm_ratio"], reduce_kernel=True)
    memory = gemm_bytes(m, n, k, element) / (values["memory_efficiency"] * hw.memory_bytes_per_s)
    return max(values["floor_s"], compute, memory * (values["transposed_memory_ratio"] if transposed else 1.0))


def conv(n, c, h, w, f, r, stride=1, pad=None, **extra):
    pad = r // 2 if pad is None else pad
    return {"N": n, "C": c, "H": h, "W": w, "F": f, "kernel": [r, r], "stride": [stride, stride],
            "padding": [pad, pad], **extra}


def conv_out(size, r, stride, pad):
    return (size + 2 * pad - r) // stride + 1


def reference_conv_implicit(values, hw, pass_, p, element=4, sm_peak=None):
    """An implicit-GEMM convolution's call time by hand (docs: forward (N P Q, F, C R S), backward-data over every
    input position (N H W, C, F ceil(R/sh) ceil(S/sw)), backward-weight (F, C R S, N P Q) split up to N ways)."""
    (r, s), (sh, sw), (ph, pw) = p["kernel"], p["stride"], p["padding"]
    pp, q = conv_out(p["H"], r, sh, ph), conv_out(p["W"], s, sw, pw)
    amp = sw / min(s, sw)
    m, n, k = {"fwd": (p["N"] * pp * q, p["F"], p["C"] * r * s),
               "bwd_data": (max(1, p["N"] * p["H"] * p["W"] // (sh * sw)), p["C"], p["F"] * r * s),
               "bwd_weight": (p["F"], p["C"] * r * s, p["N"] * pp * q)}[pass_]
    ratio = {"fwd": 1.0, "bwd_data": values["bwd_data_ratio"], "bwd_weight": values["bwd_weight_ratio"]}[pass_]
    compute = reference_compute(values, hw, m, n, k, element=element, ratio=ratio, sm_peak=sm_peak,
                                rows_amp=amp if pass_ == "fwd" else 1.0,
                                cols_amp=amp if pass_ == "bwd_weight" else 1.0,
                                max_split=p["N"] * (pp if (sh, sw) != (1, 1) else 1) if pass_ == "bwd_weight" else 1)
    if pass_ == "bwd_data" and (r < sh or s < sw):  # windows with gaps between them: their own kernels
        compute /= values.get("gapped_bwd_data_ratio", 1.0)
    elif pass_ == "bwd_data" and (sh, sw) != (1, 1):  # cuDNN's own strided backward-data kernels
        compute /= values.get("strided_bwd_data_ratio", 1.0)
    nbytes = (p["N"] * p["C"] * p["H"] * p["W"] + p["F"] * p["C"] * r * s + p["N"] * p["F"] * pp * q) * element
    memory = nbytes / (values["memory_efficiency"] * hw.memory_bytes_per_s)
    return overhead(values) + max(values["floor_s"] * values["conv_floor_ratio"], compute, memory)


def best_candidate(values, hw, op, pass_, params, dtype="float32", search=True):
    peak = gk.sm_peak(values, hw, op, params)
    return min(gk.candidates(op, pass_, params, dtype, hw.sms, hw.tensor_cores, search),
               key=lambda c: gk.candidate_time(values, peak, *c[:5], pass_, op == "gemm", hw.memory_bytes_per_s, c[5]))


# ------------------------------------------------------------------------------------------ regimes by hand
def test_waves_and_tile_quantisation():
    values = constants(**{**HAND, "wave_s": 1e-3})  # a wave costs more than its work: the fewest waves win
    per_sm = values["efficiency"] * HW.peak_flops_per_s / HW.sms
    # 1280 x 256 is exactly 10 tiles of the largest CTA (256 x 128 or 128 x 256): one wave on 10 SMs
    below = gk.kernel_time_s(values, HW, "gemm", "fwd", {"M": 1280, "N": 256, "K": 64}, "float32")
    assert below == pytest.approx(1e-3 + 2 * 256 * 128 * 64 / per_sm, rel=1e-12)
    # one more row needs an 11th tile of any size: a second wave
    above = gk.kernel_time_s(values, HW, "gemm", "fwd", {"M": 1281, "N": 256, "K": 64}, "float32")
    assert above == pytest.approx(2 * (1e-3 + 2 * 256 * 128 * 64 / per_sm), rel=1e-12)
    assert best_candidate(values, HW, "gemm", "fwd", {"M": 1280, "N": 256, "K": 64})[1] == 1
    assert best_candidate(values, HW, "gemm", "fwd", {"M": 1281, "N": 256, "K": 64})[1] == 2
    # per tile: 10 tiles of 128 x 128 are one wave, 11 are two (split 1 is each tile's first candidate)
    for m, waves in ((1280, 1), (1281, 2), (2560, 2), (2561, 3)):
        cands = gk.candidates("gemm", "fwd", {"M": m, "N": 128, "K": 16}, "float32", 10, False)
        assert len(cands) == len(gk.TILES)  # K = 16: too short to split
        assert cands[gk.TILES.index((128, 128))][1] == waves


@pytest.mark.parametrize("shape", [(1280, 256, 64), (1281, 256, 64), (333, 77, 1999), (4096, 4096, 4096),
                                   (1, 1000, 2048), (64, 64, 100000)])
def test_the_chosen_time_is_the_best_tile_and_split_of_the_formula(shape):
    m, n, k = shape
    for values in (HAND, constants(**{**HAND, "wave_s": 3e-6, "feed_bytes_per_s": 2e10})):
        got = gk.kernel_time_s(values, HW, "gemm", "fwd", {"M": m, "N": n, "K": k}, "float32")
        assert got == pytest.approx(reference_gemm(values, HW, m, n, k), rel=1e-9)


def test_a_feed_bound_tile_runs_at_its_intensity_times_the_feed():
    values = constants(**{**HAND, "feed_bytes_per_s": 1e9, "wave_s": 0.0})
    # one 16 x 32 CTA (K = 16: no split): 2 * 16 * 32 / ((16 + 32) * 4) FLOP per byte at 1e9 bytes/s
    cands = gk.candidates("gemm", "fwd", {"M": 16, "N": 32, "K": 16}, "float32", 10, False)
    index = gk.TILES.index((16, 32))
    _, waves, flops, intensity, partials, reductions = cands[index]
    assert (waves, flops, partials, reductions) == (1, 2 * 16 * 32 * 16, 0.0, 0)
    assert intensity == pytest.approx(2 * 16 * 32 / (48 * 4))
    t = gk.candidate_time(values, HW.peak_flops_per_s / HW.sms, *cands[index][:5], "fwd", True,
                          HW.memory_bytes_per_s, reductions)
    assert t == pytest.approx(flops / (intensity * 1e9))


def test_split_k_serves_a_small_output_with_a_long_reduction():
    fast = HW._replace(memory_bytes_per_s=1e13)  # DRAM fast enough that the product is compute-bound
    params = {"M": 16, "N": 32, "K": 2 ** 20}  # one CTA of the smallest tile without a split
    got = gk.kernel_time_s(HAND, fast, "gemm", "fwd", params, "float32")
    assert got == pytest.approx(reference_gemm(HAND, fast, 16, 32, 2 ** 20), rel=1e-9)
    unsplit = reference_compute(HAND, fast, 16, 32, 2 ** 20, max_split=1)
    assert unsplit == pytest.approx(HAND["wave_s"] + 2 * 16 * 32 * 2 ** 20 / (0.5 * 1e12))
    assert got < unsplit / 4  # 8 or more CTAs share the reduction instead of one
    _, waves, flops, _, partials, reductions = best_candidate(HAND, fast, "gemm", "fwd", params)
    assert partials > 0 and flops <= 2 * 16 * 32 * 2 ** 20 / 8
    assert reductions == 1  # cuBLAS adds the partial results in a kernel of its own: one more call floor
    floor_free = constants(**{**HAND, "floor_s": 0.0})
    assert got == pytest.approx(gk.kernel_time_s(floor_free, fast, "gemm", "fwd", params, "float32")
                                + HAND["floor_s"], rel=1e-9)
    assert gk.max_split("gemm", "fwd", params) == gk.SPLITS[-1]
    # never splits below MIN_SPLIT_DEPTH of the reduction each
    assert len(gk.candidates("gemm", "fwd", {"M": 64, "N": 64, "K": 63}, "float32", 10, False)) == len(gk.TILES)
    assert len(gk.candidates("gemm", "fwd", {"M": 64, "N": 64, "K": 64}, "float32", 10, False)) == 2 * len(gk.TILES)
    assert len(gk.candidates("gemm", "fwd", params, "float32", 10, False)) == len(gk.SPLITS) * len(gk.TILES)


def test_split_k_refused_to_convolution_forward_and_backward_data_limited_to_the_batch_for_backward_weight():
    # one output position, a long reduction: the shape split-K is for
    p = conv(4, 2048, 3, 3, 64, 3, pad=0)
    assert gk.max_split("conv2d", "fwd", p) == 1 and gk.max_split("conv2d", "bwd_data", p) == 1
    assert gk.max_split("conv2d", "bwd_weight", p) == 4
    # a strided one splits over images x output rows (DeepSpeech's 5x10 stride-2 layer: its rate grows with N)
    strided = conv(4, 32, 79, 341, 32, 5, stride=2, pad=0)  # P = 38
    assert gk.max_split("conv2d", "bwd_weight", strided) == 4 * 38
    assert gk.kernel_time_s(HAND, HW, "conv2d", "bwd_weight", strided, "float32", search=False) == pytest.approx(
        reference_conv_implicit(HAND, HW, "bwd_weight", strided), rel=1e-9)
    for pass_ in ("fwd", "bwd_data"):
        cands = gk.candidates("conv2d", pass_, p, "float32", 10, False, search=False)
        assert len(cands) == len(gk.TILES) and all(c[4] == 0.0 for c in cands)  # one per tile, no partials
    cands = gk.candidates("conv2d", "bwd_weight", conv(4, 2048, 64, 64, 64, 3), "float32", 10, False, search=False)
    assert len(cands) == 3 * len(gk.TILES)  # splits 1, 2 and 4 of N P Q = 16384 (8 would exceed the batch)
    for pass_ in gk.PASSES:
        got = gk.kernel_time_s(HAND, HW, "conv2d", pass_, p, "float32", search=False)
        assert got == pytest.approx(reference_conv_implicit(HAND, HW, pass_, p), rel=1e-9)


def test_dram_floor_of_a_skinny_gemm():
    m, n, k = 16, 16, 500000
    got = gk.kernel_time_s(HAND, HW, "gemm", "fwd", {"M": m, "N": n, "K": k}, "float32")
    memory = (m * k + k * n + m * n) * 4 / (HAND["memory_efficiency"] * HW.memory_bytes_per_s)
    assert got == pytest.approx(memory, rel=1e-12)
    assert reference_compute(HAND, HW, m, n, k, max_split=256) < memory / 2  # memory-bound by far
    assert gk.operand_bytes("gemm", {"M": m, "N": n, "K": k}, "float16") == (m * k + k * n + m * n) * 2


def test_a_transposed_operand_scales_the_memory_time_only():
    ratio = HAND["transposed_memory_ratio"]
    skinny = {"M": 16, "N": 16, "K": 500000}
    plain = gk.kernel_time_s(HAND, HW, "gemm", "fwd", skinny, "float32")
    for flags in ({"transpose_a": True}, {"transpose_b": True}, {"transpose_a": True, "transpose_b": True}):
        assert gk.kernel_time_s(HAND, HW, "gemm", "fwd", {**skinny, **flags}, "float32") == pytest.approx(plain * ratio)
    assert gk.kernel_time_s(HAND, HW, "gemm", "fwd", {**skinny, "transpose_a": False}, "float32") == plain
    big = {"M": 2048, "N": 2048, "K": 2048}
    compute_bound = gk.kernel_time_s(HAND, HW, "gemm", "fwd", big, "float32")
    assert compute_bound > ratio * gemm_bytes(2048, 2048, 2048) / (HAND["memory_efficiency"] * HW.memory_bytes_per_s)
    assert gk.kernel_time_s(HAND, HW, "gemm", "fwd", {**big, "transpose_a": True, "transpose_b": True},
                            "float32") == compute_bound
    # a convolution is never "transposed"
    assert not gk.transposed("conv2d", {**conv(1, 8, 8, 8, 8, 3), "transpose_a": True})


def test_call_floors():
    assert gk.kernel_time_s(HAND, HW, "gemm", "fwd", {"M": 16, "N": 16, "K": 16}, "float32") == HAND["floor_s"]
    tiny = conv(1, 1, 4, 4, 1, 1)
    for pass_ in gk.PASSES:
        assert gk.kernel_time_s(HAND, HW, "conv2d", pass_, tiny, "float32") == pytest.approx(
            overhead(HAND) + HAND["floor_s"] * HAND["conv_floor_ratio"], rel=1e-12)
    if "conv_overhead_s" in gk.PARAMS:  # added to every convolution, above the floor too
        more = constants(**{**HAND, "conv_overhead_s": 1e-3})
        big = conv(32, 256, 28, 28, 256, 3)
        assert gk.kernel_time_s(more, HW, "conv2d", "fwd", big, "float32") == pytest.approx(
            1e-3 + gk.kernel_time_s(constants(**{**HAND, "conv_overhead_s": 1e-30}), HW, "conv2d", "fwd", big,
                                    "float32"), rel=1e-12)


def test_tensor_core_alignment_of_channels():
    """cuDNN 7.3 on pads an unaligned convolution's C and K up to multiples of 8 and runs tensor cores: the call costs
    the padded shape's tiles at the fitted share of the tensor-core peak (a 3-channel first layer 8/3 of its own
    work); an unaligned grouped one runs on CUDA cores at their peak."""
    ratio = HAND["unaligned_ratio"]
    first = conv(32, 3, 224, 224, 64, 7, stride=2, pad=3)
    aligned = conv(32, 64, 56, 56, 64, 3)
    assert gk.unaligned("conv2d", first, True) and not gk.unaligned("conv2d", aligned, True)
    assert gk.unaligned("conv2d", conv(8, 64, 28, 28, 60, 3), True)  # output channels count too
    assert not gk.unaligned("conv2d", first, False)  # CUDA-core modes have no alignment
    assert not gk.unaligned("gemm", {"M": 3, "N": 3, "K": 3}, True)  # only convolutions are padded
    assert gk.padded_channels(first) == {**first, "C": 8, "F": 64}
    assert gk.sm_peak(HAND, HW_TC, "conv2d", first) == pytest.approx(ratio * 1e14 / 10)
    assert gk.sm_peak(HAND, HW_TC, "conv2d", aligned) == pytest.approx(1e14 / 10)
    assert gk.sm_peak(HAND, HW, "conv2d", first) == pytest.approx(1e13 / 10)
    depthwise = {**conv(32, 36, 28, 28, 36, 3), "groups": 36}
    assert gk.sm_peak(HAND, HW_TC, "conv2d", depthwise) == pytest.approx(1e13 / 10)  # the CUDA-core fallback
    assert gk.sm_peak(HAND, HW_TC, "conv2d", first, "bwd_weight") == pytest.approx(
        HAND["unaligned_bwd_ratio"] * 1e14 / 10)  # the backward passes' own share
    for p in (first, aligned):
        for pass_ in gk.PASSES:
            peak = (HAND[gk.unaligned_share(pass_)] if p is first else 1.0) * 1e14 / 10
            got = gk.kernel_time_s(HAND, HW_TC, "conv2d", pass_, p, "float16")
            shape = gk.padded_channels(p) if p is first else p
            # the tiles run over the padded shape; the operands' DRAM bytes stay the real ones
            no_dram = constants(**{**HAND, "memory_efficiency": 1e12})
            expected = reference_conv_implicit(no_dram, HW_TC, pass_, shape, element=2, sm_peak=peak)
            memory = gk.operand_bytes("conv2d", p, "float16") / (HAND["memory_efficiency"] * HW_TC.memory_bytes_per_s)
            assert got == pytest.approx(max(expected, overhead(HAND) + memory), rel=1e-9)
    # with the share at 1 (and DRAM out of the way) the padded first layer costs what an 8-channel layer does
    at_one = constants(**{**HAND, "unaligned_ratio": 1.0, "memory_efficiency": 1e12})
    assert gk.kernel_time_s(at_one, HW_TC, "conv2d", "fwd", first, "float16") == pytest.approx(
        gk.kernel_time_s(at_one, HW_TC, "conv2d", "fwd", {**first, "C": 8}, "float16"), rel=0.02)


def test_which_algorithms_a_convolution_may_run():
    three = conv(8, 64, 56, 56, 64, 3)
    for pass_ in gk.PASSES:
        fused = ("winograd_fused",) if pass_ != "bwd_weight" else ()  # cuDNN has no fused weight-gradient one
        assert gk.algorithms("conv2d", pass_, three, False, True) == ("implicit_gemm", "winograd") + fused + ("fft",)
        assert gk.algorithms("conv2d", pass_, three, False, False) == ("implicit_gemm",)  # PyTorch's heuristic
        assert gk.algorithms("conv2d", pass_, three, True, True) == ("implicit_gemm",)  # tensor cores
    assert gk.algorithms("conv2d", "fwd", conv(8, 64, 56, 56, 64, 3, stride=2), False, True) == ("implicit_gemm",)
    assert gk.algorithms("conv2d", "fwd", conv(8, 64, 56, 56, 64, 1), False, True) == ("implicit_gemm",)  # no FFT
    assert gk.algorithms("conv2d", "fwd", conv(8, 64, 56, 56, 64, 5), False, True) == ("implicit_gemm", "fft")
    assert gk.algorithms("gemm", "fwd", {"M": 8, "N": 8, "K": 8}, False, True) == ("implicit_gemm",)
    # candidates carry the algorithm's index
    assert {c[0] for c in gk.candidates("conv2d", "fwd", three, "float32", 10, False)} == {0, 1, 2, 4}
    assert {c[5] for c in gk.candidates("conv2d", "bwd_weight", three, "float32", 10, False)} == {0}  # no reduce call
    assert {c[0] for c in gk.candidates("conv2d", "fwd", three, "float32", 10, False, search=False)} == {0}


def test_winograd_and_fft_products_and_the_fastest_algorithm():
    p = conv(8, 64, 56, 56, 64, 3)
    tiles = 8 * 14 * 14  # 56 / 4 = 14 output tiles of 4 x 4 a side
    assert gk.products("conv2d", "fwd", p, "winograd") == (tiles, 64, 64, 36)
    assert gk.products("conv2d", "bwd_data", p, "winograd") == (tiles, 64, 64, 36)
    assert gk.products("conv2d", "bwd_weight", p, "winograd") == (64, 64, tiles, 36)
    fft_tiles = 8 * 2 * 2  # 30-wide valid edge: ceil(56 / 30) = 2 a side
    assert gk.products("conv2d", "fwd", p, "fft") == (fft_tiles, 64, 64, 32 * 17 * 4)
    # cuDNN's fused Winograd: F(2x2, 3x3), 16 points per 2x2 output tile, transformed in shared memory
    assert gk.products("conv2d", "fwd", p, "winograd_fused") == (8 * 28 * 28, 64, 64, 16)
    assert gk.products("conv2d", "bwd_data", p, "winograd_fused") == (8 * 28 * 28, 64, 64, 16)
    assert gk.transform_bytes(p, "winograd_fused", "float32") == 0.0
    assert gk.transform_bytes(p, "implicit_gemm", "float32") == 0.0
    assert gk.transform_bytes(p, "winograd", "float32") == 2.0 * (8 * 64 * 196 + 64 * 64 + 8 * 64 * 196) * 36 * 4
    assert gk.transform_bytes(p, "fft", "float16") == 2.0 * (8 * 64 * 4 + 64 * 64 + 8 * 64 * 4) * 2 * 32 * 17 * 4
    # by hand: each algorithm's time and the call's, the fastest of them (search) or the implicit GEMM (heuristic)
    values = constants(**{**HAND, "winograd_fwd": 2.0})
    p = conv(8, 256, 28, 28, 256, 3)  # wide channels: the transforms' traffic pays off
    tiles, fft_tiles = 8 * 7 * 7, 8
    implicit = reference_conv_implicit(values, HW, "fwd", p)
    floor = values["floor_s"] * values["conv_floor_ratio"]
    memory = gk.operand_bytes("conv2d", p, "float32") / (values["memory_efficiency"] * HW.memory_bytes_per_s)
    fast_dram = HW._replace(memory_bytes_per_s=1e14)  # the transforms' traffic costs next to nothing
    wino = reference_compute(values, fast_dram, tiles, 256, 256, batch=36, ratio=2.0,
                             extra_bytes=gk.transform_bytes(p, "winograd", "float32"))
    fused = reference_compute(values, fast_dram, 8 * 14 * 14, 256, 256, batch=16, ratio=2.0)  # 2x2 tiles, in SMEM
    fft = reference_compute(values, fast_dram, fft_tiles, 256, 256, batch=32 * 17 * 4, ratio=values["fft_fwd"],
                            extra_bytes=gk.transform_bytes(p, "fft", "float32"))
    implicit_fast = reference_conv_implicit(values, fast_dram, "fwd", p)
    memory_fast = memory * HW.memory_bytes_per_s / fast_dram.memory_bytes_per_s
    assert max(floor, memory_fast) < wino < min(fused, fft, implicit_fast - overhead(values))
    searched = overhead(values) + wino
    assert gk.kernel_time_s(values, fast_dram, "conv2d", "fwd", p, "float32") == pytest.approx(searched, rel=1e-9)
    assert gk.kernel_time_s(values, HW, "conv2d", "fwd", p, "float32", search=False) == pytest.approx(implicit,
                                                                                                       rel=1e-9)
    assert gk.chosen_algorithm(values, fast_dram, "conv2d", "fwd", p, "float32") == "winograd"
    # on the slow DRAM the F(4x4) transforms' round trips cost more than the fused F(2x2)'s 1.78x more products
    # (16 per 4 outputs against 36 per 16)
    fused_slow = reference_compute(values, HW, 8 * 14 * 14, 256, 256, batch=16, ratio=2.0)
    assert fused_slow < reference_compute(values, HW, tiles, 256, 256, batch=36, ratio=2.0,
                                          extra_bytes=gk.transform_bytes(p, "winograd", "float32"))
    assert gk.kernel_time_s(values, HW, "conv2d", "fwd", p, "float32") == pytest.approx(
        overhead(values) + max(floor, memory, fused_slow), rel=1e-9)
    assert gk.chosen_algorithm(values, HW, "conv2d", "fwd", p, "float32") == "winograd_fused"
    fft_wins = constants(**{**HAND, "fft_fwd": 1e3})
    assert gk.chosen_algorithm(fft_wins, fast_dram, "conv2d", "fwd", p, "float32") == "fft"
    assert gk.chosen_algorithm(values, HW, "conv2d", "fwd", p, "float32", search=False) == "implicit_gemm"
    assert gk.chosen_algorithm(values, HW_TC, "conv2d", "fwd", p, "float16") == "implicit_gemm"
    assert gk.chosen_algorithm(values, HW, "gemm", "fwd", {"M": 8, "N": 8, "K": 8}, "float32") is None
    slow = constants(**{**HAND, "winograd_fwd": 1e-3, "fft_fwd": 1e-3})
    assert gk.chosen_algorithm(slow, HW, "conv2d", "fwd", p, "float32") == "implicit_gemm"


def test_the_search_never_makes_a_call_slower():
    values = constants(**{**HAND, "winograd_fwd": 1.5, "fft_bwd_data": 3.0, "winograd_bwd_weight": 0.9})
    for p in (conv(8, 64, 56, 56, 64, 3), conv(1, 3, 224, 224, 64, 5, pad=2), conv(32, 512, 7, 7, 512, 3)):
        for pass_ in gk.PASSES:
            assert gk.kernel_time_s(values, HW, "conv2d", pass_, p, "float32") <= \
                gk.kernel_time_s(values, HW, "conv2d", pass_, p, "float32", search=False)


def intensities(op, pass_, params, dtype="float32"):
    """Each tile's intensity (implicit GEMM: candidates run tile by tile, every tile with the same splits)."""
    cands = gk.candidates(op, pass_, params, dtype, 10, False, search=False)
    per_tile = len(cands) // len(gk.TILES)
    assert per_tile * len(gk.TILES) == len(cands)
    return [cands[i * per_tile][3] for i in range(len(gk.TILES))]


def test_stride_two_one_by_one_gathers_twice_what_it_uses():
    s1, s2 = conv(16, 256, 56, 56, 512, 1), conv(16, 256, 56, 56, 512, 1, stride=2)
    assert gk.gather_amplification("conv2d", s2) == 2.0
    assert gk.gather_amplification("conv2d", s1) == 1.0
    assert gk.gather_amplification("conv2d", conv(16, 256, 56, 56, 512, 3, stride=2)) == 1.0  # wide kernel: no skip
    assert gk.gather_amplification("gemm", {"M": 1, "N": 1, "K": 1}) == 1.0
    # the gathered operand's bytes count twice: the forward's rows (N P Q), the weight gradient's reduction side
    for pass_, rows, cols in (("fwd", 2.0, 1.0), ("bwd_weight", 1.0, 2.0), ("bwd_data", 1.0, 1.0)):
        for (tm, tn), i1, i2 in zip(gk.TILES, intensities("conv2d", pass_, s1), intensities("conv2d", pass_, s2)):
            assert i1 == pytest.approx(2 * tm * tn / ((tm + tn) * 4))
            assert i2 == pytest.approx(2 * tm * tn / ((tm * rows + tn * cols) * 4))
    # a tall tile's intensity nearly halves (a square one's drops to 2/3)
    i1, i2 = intensities("conv2d", "fwd", s1), intensities("conv2d", "fwd", s2)
    tall, square = gk.TILES.index((256, 32)), gk.TILES.index((128, 128))
    assert i2[tall] / i1[tall] == pytest.approx((256 + 32) / (512 + 32))
    assert i2[square] / i1[square] == pytest.approx(2 / 3)
    # a feed-bound stride-2 forward: a quarter of the FLOPs of its stride-1 twin, more than a quarter of the time
    fed = constants(**{**HAND, "feed_bytes_per_s": 1e9})
    t1 = gk.kernel_time_s(fed, HW, "conv2d", "fwd", s1, "float32")
    t2 = gk.kernel_time_s(fed, HW, "conv2d", "fwd", s2, "float32")
    assert t2 > 1.3 * t1 / 4
    assert t2 == pytest.approx(reference_conv_implicit(fed, HW, "fwd", s2), rel=1e-9)


def test_strided_backward_data_runs_one_product_per_stride_phase():
    p = conv(8, 64, 56, 56, 128, 3, stride=2)  # P = Q = 28
    assert gk.products("conv2d", "fwd", p, "implicit_gemm") == (8 * 28 * 28, 128, 64 * 9, 1)
    # four phases of 8 x 28 x 28 input positions, each with its share of the 3x3 taps: the forward's work
    assert gk.products("conv2d", "bwd_data", p, "implicit_gemm") == (8 * 28 * 28, 64, 128 * 9, 1)
    assert gk.products("conv2d", "bwd_weight", p, "implicit_gemm") == (128, 64 * 9, 8 * 28 * 28, 1)
    one = conv(8, 64, 56, 56, 128, 3)  # stride 1: N H W = N P Q, F R S
    assert gk.products("conv2d", "bwd_data", one, "implicit_gemm") == (8 * 56 * 56, 64, 128 * 9, 1)
    assert gk.products("gemm", "fwd", {"M": 3, "N": 5, "K": 7}, "implicit_gemm") == (3, 5, 7, 1)
    for q in (p, one):
        assert gk.kernel_time_s(HAND, HW, "conv2d", "bwd_data", q, "float32", search=False) == pytest.approx(
            reference_conv_implicit(HAND, HW, "bwd_data", q), rel=1e-9)
    if "strided_bwd_data_ratio" in gk.PARAMS:  # a strided backward-data's own efficiency, nothing else's
        half = constants(**{**HAND, "strided_bwd_data_ratio": 0.5})
        big = conv(32, 256, 56, 56, 256, 3, stride=2)
        assert gk.kernel_time_s(half, HW, "conv2d", "bwd_data", big, "float32") == pytest.approx(
            reference_conv_implicit(half, HW, "bwd_data", big), rel=1e-9)
        assert gk.kernel_time_s(half, HW, "conv2d", "bwd_data", big, "float32") - overhead(half) == pytest.approx(
            2 * (gk.kernel_time_s(HAND, HW, "conv2d", "bwd_data", big, "float32") - overhead(HAND)), rel=1e-9)
        for q, pass_ in ((big, "fwd"), (big, "bwd_weight"), (one, "bwd_data")):
            assert gk.kernel_time_s(half, HW, "conv2d", pass_, q, "float32") == \
                gk.kernel_time_s(HAND, HW, "conv2d", pass_, q, "float32")


def test_a_kernel_narrower_than_its_stride_is_its_own_backward_data_regime():
    """1x1 stride 2 (gaps between the windows) takes gapped_bwd_data_ratio; 3x3 stride 2 (overlapping windows)
    strided_bwd_data_ratio; neither touches the other, nor a unit stride, by hand against the reference."""
    gapped, overlapping, unit = conv(8, 256, 56, 56, 128, 1, stride=2), conv(8, 64, 56, 56, 128, 3, stride=2), \
        conv(8, 64, 56, 56, 128, 1)
    assert gk.gapped_backward_data("conv2d", "bwd_data", gapped)
    assert not gk.gapped_backward_data("conv2d", "bwd_data", overlapping)
    assert not gk.gapped_backward_data("conv2d", "fwd", gapped) and not gk.gapped_backward_data("conv2d", "bwd_data", unit)
    slow = constants(**{**HAND, "gapped_bwd_data_ratio": 0.05})
    t = lambda v, q: gk.kernel_time_s(v, HW, "conv2d", "bwd_data", q, "float32")
    assert t(slow, gapped) == pytest.approx(reference_conv_implicit(slow, HW, "bwd_data", gapped), rel=1e-9)
    assert t(slow, gapped) > 2 * t(HAND, gapped)  # compute-bound at a twentieth of the rate (memory-bound before)
    assert t(slow, overlapping) == t(HAND, overlapping) and t(slow, unit) == t(HAND, unit)


def test_conv_shape_reads_scalars_pairs_and_refuses_a_missing_size():
    x = gk.conv_shape({"N": 2, "C": 3, "H": 10, "W": 12, "F": 4, "kernel": 3, "stride": [2, 1], "padding": (1,)})
    assert (x.r, x.s, x.stride_h, x.stride_w, x.pad_h, x.pad_w, x.p, x.q) == (3, 3, 2, 1, 1, 1, 5, 12)
    with pytest.raises(UserError, match="'F'"):
        gk.conv_shape({"N": 2, "C": 3, "H": 10, "W": 12})


@pytest.mark.parametrize("op,pass_,shape,transposes", [
    ("linear", "fwd", (32, 1000, 2048), (False, True)),
    ("linear", "bwd_data", (32, 2048, 1000), (False, False)),
    ("linear", "bwd_weight", (2048, 1000, 32), (True, False)),
    ("gemm", "fwd", (32, 1000, 2048), (False, False)),
    ("gemm", "bwd_data", (32, 2048, 1000), (False, True)),
    ("gemm", "bwd_weight", (2048, 1000, 32), (True, False)),
])
def test_as_kernel_call_maps_linear_and_gemm_passes_to_forward_gemms(op, pass_, shape, transposes):
    m, n, k = shape
    assert gk.as_kernel_call(op, pass_, {"M": 32, "N": 1000, "K": 2048}) == (
        "gemm", "fwd", {"M": m, "N": n, "K": k, "transpose_a": transposes[0], "transpose_b": transposes[1]})


def test_a_measured_gemm_keeps_its_own_operand_order():
    shape = {"M": 512, "N": 8, "K": 500000, "transpose_a": True, "transpose_b": False}
    assert gk.as_kernel_call("gemm", "fwd", shape) == ("gemm", "fwd", shape)
    plain = gk.as_kernel_call("gemm", "fwd", {"M": 512, "N": 8, "K": 500000})[2]
    assert (plain["transpose_a"], plain["transpose_b"]) == (False, False)
    sample = Sample(benchmark="gemm", variant="fwd", params=shape, device="cuda", threads=1, times_s=[1e-3])
    assert gf.kernel_samples([sample])[("float32", None)][0].params["transpose_a"] is True


def test_as_kernel_call_keeps_undilated_convolutions_and_refuses_the_rest():
    p = conv(8, 64, 56, 56, 64, 3)
    for pass_ in gk.PASSES:
        assert gk.as_kernel_call("conv2d", pass_, p) == ("conv2d", pass_, p)
    assert gk.as_kernel_call("conv2d", "fwd", {**p, "groups": 1, "dilation": [1, 1]})[0] == "conv2d"
    assert gk.as_kernel_call("conv2d", "fwd", {**p, "dilation": 1})[0] == "conv2d"
    assert gk.as_kernel_call("conv2d", "fwd", {**p, "groups": 64})[0] == "conv2d"  # grouped: per-group products
    assert gk.as_kernel_call("conv2d", "fwd", {**p, "dilation": [2, 2]}) is None
    assert gk.as_kernel_call("conv2d", "fwd", {**p, "dilation": 2}) is None
    volume = {**p, "D": 8}
    assert gk.as_kernel_call("conv3d", "fwd", volume) == ("conv3d", "fwd", volume)
    assert gk.as_kernel_call("conv3d", "fwd", {**volume, "dilation": [1, 2, 2]}) is None
    assert gk.as_kernel_call("conv2d", "bwd", p) is None
    assert gk.as_kernel_call("bmm", "fwd", {"B": 2, "M": 3, "N": 4, "K": 5}) is None
    assert gk.as_kernel_call("relu", "fwd", {"size": 10}) is None


@pytest.mark.parametrize("op,pass_", [("bmm", "fwd"), ("gemm", "bwd_data"), ("gemm", "bwd_weight"),
                                      ("linear", "fwd"), ("conv2d", "bwd"), ("conv3d", "bwd")])
def test_kernel_time_refuses_what_it_does_not_cover(op, pass_):
    with pytest.raises(UserError, match="GPU kernel model covers"):
        gk.kernel_time_s(HAND, HW, op, pass_, {"M": 8, "N": 8, "K": 8, **conv(1, 8, 8, 8, 8, 3)}, "float32")


def test_families_and_params():
    assert gk.family("conv2d", "bwd_data") in gk.FAMILIES and gk.family("gemm", "fwd") in gk.FAMILIES
    assert all(p.prior > 0 and p.sigma > 0 for p in gk.PARAMS.values())
    assert all(512 <= a * b <= 32768 and max(a, b) <= 8 * min(a, b) for a, b in gk.TILES)


# ------------------------------------------------------------------------------------------ the fit
#: the "true" constants of the synthetic GPU, away from the priors
TRUE = constants(efficiency=0.65, gemm_ratio=1.1, bwd_data_ratio=0.85, bwd_weight_ratio=0.75,
                 feed_bytes_per_s=2.5e10, memory_efficiency=0.7, floor_s=9e-6, conv_floor_ratio=1.8, wave_s=2e-6,
                 winograd_fwd=0.8, winograd_bwd_data=0.7, winograd_bwd_weight=0.6, fft_fwd=0.4, fft_bwd_data=0.35,
                 fft_bwd_weight=0.3, transposed_memory_ratio=1.3,
                 **({"conv_overhead_s": 3e-6} if "conv_overhead_s" in gk.PARAMS else {}))


def draw_shapes(rng, count):
    """GEMMs (some skinny with a long K, some transposed) and convolutions of every pass."""
    out = []
    for _ in range(count):
        if rng.random() < 0.4:
            m, n, k = (int(2 ** rng.uniform(3, 13)) for _ in range(3))
            if rng.random() < 0.15:
                k = int(2 ** rng.uniform(15, 19))
            out.append(("gemm", "fwd", {"M": m, "N": n, "K": k, "transpose_a": bool(rng.random() < 0.3),
                                        "transpose_b": bool(rng.random() < 0.3)}))
        else:
            r, stride = int(rng.choice([1, 3, 5])), int(rng.choice([1, 1, 2]))
            size = int(rng.choice([7, 14, 28, 56, 112]))
            out.append(("conv2d", str(rng.choice(gk.PASSES)),
                        conv(int(rng.choice([1, 4, 8, 16, 32])), int(rng.choice([3, 16, 32, 64, 128, 256, 512])), size,
                             size, int(rng.choice([16, 32, 64, 128, 256, 512])), r, stride=stride)))
    return out


def synthetic(values, hardware, shapes, rng=None, noise=0.0, group=""):
    return [gf.KernelSample(op, pass_, p, "float32",
                            gk.kernel_time_s(values, hardware, op, pass_, p, "float32")
                            * (float(np.exp(noise * rng.standard_normal())) if noise else 1.0), group)
            for op, pass_, p in shapes]


def test_a_fit_to_synthetic_samples_recovers_its_constants():
    rng = np.random.default_rng(7)
    samples = synthetic(TRUE, V100, draw_shapes(rng, 150), rng, noise=0.015)
    fitted = gf.fit(samples, V100)
    assert set(fitted) == set(gk.PARAMS)
    for name, tolerance in (("efficiency", 0.10), ("memory_efficiency", 0.10), ("floor_s", 0.10),
                            ("feed_bytes_per_s", 0.15)):
        assert fitted[name] == pytest.approx(TRUE[name], rel=tolerance), name
    held = synthetic(TRUE, V100, draw_shapes(np.random.default_rng(8), 60))
    predicted = gf.predict(fitted, held, V100)
    measured = np.array([s.time_s for s in held])
    assert np.median(np.abs(predicted / measured - 1)) < 0.03
    assert np.median(gf.accuracy(predicted, measured)) > 0.97


def test_constants_no_sample_informs_keep_their_prior_or_the_given_centre():
    """A CUDA-core fit has no padded call and DeepBench no 3-D one: those constants stay at their priors, or at the
    centres given (a prior measured elsewhere); the others are fitted as before."""
    rng = np.random.default_rng(7)
    samples = synthetic(TRUE, V100, draw_shapes(rng, 40), rng, noise=0.015)
    plain = gf.fit(samples, V100)
    moved = gf.fit(samples, V100, centres={"unaligned_bwd_ratio": 0.07, "conv3d_fwd": 0.8})
    assert plain["unaligned_ratio"] == gk.PARAMS["unaligned_ratio"].prior
    assert plain["conv3d_bwd_weight"] == gk.PARAMS["conv3d_bwd_weight"].prior
    assert (moved["unaligned_bwd_ratio"], moved["conv3d_fwd"]) == (0.07, 0.8)
    assert moved["efficiency"] == pytest.approx(plain["efficiency"], rel=1e-9)


def test_the_fit_predicts_as_kernel_time_does():
    """predict_arrays (vectorised over candidates) and kernel_time_s (one call) are the same model."""
    rng = np.random.default_rng(3)
    shapes = draw_shapes(rng, 40) + [("conv2d", "fwd", conv(8, 3, 56, 56, 64, 3))]
    samples = synthetic(TRUE, V100, shapes)
    assert gf.predict(TRUE, samples, V100) == pytest.approx([s.time_s for s in samples], rel=1e-9)
    tc = gk.Hardware(80, 125e12, 15.7e12, 900e9, True)
    halves = [gf.KernelSample(s.op, s.pass_, s.params, "float16",
                              gk.kernel_time_s(TRUE, tc, s.op, s.pass_, s.params, "float16")) for s in samples]
    assert gf.predict(TRUE, halves, tc) == pytest.approx([s.time_s for s in halves], rel=1e-9)
    assert gf.predict(TRUE, samples, V100, search=False) == pytest.approx(
        [gk.kernel_time_s(TRUE, V100, s.op, s.pass_, s.params, "float32", search=False) for s in samples], rel=1e-9)


def test_a_small_fit_comes_back_near_its_samples():
    rng = np.random.default_rng(5)
    samples = synthetic(TRUE, V100, draw_shapes(rng, 24))
    fitted = gf.fit(samples, V100)
    assert all(v > 0 and math.isfinite(v) for v in fitted.values())
    predicted = gf.predict(fitted, samples, V100)
    assert np.median(gf.accuracy(predicted, np.array([s.time_s for s in samples]))) > 0.9
    with pytest.raises(ValueError, match="no samples"):
        gf.fit([], V100)


def test_leave_one_group_out():
    rng = np.random.default_rng(11)
    shapes = draw_shapes(rng, 16)
    lone = synthetic(TRUE, V100, shapes, group="resnet")
    assert np.isnan(gf.leave_one_group_out(lone, V100)).all()  # nothing else to fit to
    two = synthetic(TRUE, V100, shapes[:8], group="resnet") + synthetic(TRUE, V100, shapes[8:], group="deepspeech")
    held = gf.leave_one_group_out(two, V100)
    assert held.shape == (16,) and np.isfinite(held).all() and (held > 0).all()
    # each group predicted by a fit to the other alone
    assert held[8:] == pytest.approx(gf.predict(gf.fit(two[:8], V100), two[8:], V100), rel=1e-9)


def test_accuracy():
    assert gf.accuracy(np.array([1.0, 1.5, 0.5, 3.0]), np.array([1.0, 1.0, 1.0, 1.0])).tolist() == [1.0, 0.5, 0.5, -1.0]


def sample(benchmark, variant, params, time_s=1e-4, dtype="float32", **extra):
    return Sample(benchmark=benchmark, variant=variant, params=params, device="cuda", dtype=dtype, threads=1,
                  times_s=[time_s, 3 * time_s, 2 * time_s], extra=extra)


def test_kernel_samples_keeps_gemms_and_plain_convolutions():
    p = conv(8, 64, 28, 28, 64, 3)
    profile_samples = [
        sample("gemm", "fwd", {"M": 64, "N": 64, "K": 64}, application="DeepSpeech"),
        sample("gemm", "bwd_data", {"M": 64, "N": 64, "K": 64}, application="DeepSpeech"),
        sample("linear", "fwd", {"M": 64, "N": 64, "K": 64}),
        sample("conv2d", "fwd", p, application="Resnet"),
        sample("conv2d", "bwd_data", {**p, "groups": 1, "dilation": [1, 1]}),
        sample("conv2d", "bwd_weight", {**p, "dilation": 1}, application=None),
        sample("conv2d", "fwd", {**p, "groups": 2}),
        sample("conv2d", "fwd", {**p, "dilation": [2, 2]}),
        sample("conv3d", "fwd", {**p, "D": 8}, layer="cosmo_conv1_3x3x3"),
        sample("relu", "fwd", {"size": 100}),
        sample("stream", "triad", {"size_bytes": 100}),
        sample("gemm", "fwd", {"M": 64, "N": 64, "K": 64}, dtype="float16", math="fp16_storage_fp32_math"),
        sample("gemm", "fwd", {"M": 32, "N": 64, "K": 64}, dtype="float16"),
    ]
    groups = gf.kernel_samples(profile_samples)
    assert set(groups) == {("float32", None), ("float16", "fp16_storage_fp32_math"), ("float16", None)}
    rows = groups[("float32", None)]
    # a GEMM's backward pass and a linear layer are the forward GEMMs they run, with their transposes
    assert [(r.op, r.pass_, r.group) for r in rows] == [("gemm", "fwd", "DeepSpeech"), ("gemm", "fwd", "DeepSpeech"),
                                                        ("gemm", "fwd", ""), ("conv2d", "fwd", "Resnet"),
                                                        ("conv2d", "bwd_data", ""), ("conv2d", "bwd_weight", ""),
                                                        ("conv3d", "fwd", "cosmo")]  # a grid layer: its network
    assert rows[1].params == {"M": 64, "N": 64, "K": 64, "transpose_a": False, "transpose_b": True}
    assert rows[2].params["transpose_b"] is True  # PyTorch's linear runs X W^T
    assert rows[0].time_s == pytest.approx(2e-4)  # the median of the calls
    assert rows[0].dtype == "float32" and rows[3].params == p
    assert gf.kernel_samples([sample("relu", "fwd", {"size": 100})]) == {}


def test_fit_gpu_kernels_of_a_known_and_an_unknown_gpu():
    rng = np.random.default_rng(2)
    shapes = draw_shapes(rng, 12)
    profile_samples = [sample(op, pass_, p, time_s=gk.kernel_time_s(TRUE, V100, op, pass_, p, "float32"),
                              application="A" if i % 2 else "B")
                       for i, (op, pass_, p) in enumerate(shapes)]
    assert gf.fit_gpu_kernels(profile_samples, "Radeon RX 7900 XTX") is None
    assert gf.fit_gpu_kernels([sample("relu", "fwd", {"size": 10})], "Tesla V100-SXM2-16GB") is None
    record = gf.fit_gpu_kernels(profile_samples, "Tesla V100-SXM2-16GB", sms=78, search=False)
    assert record.gpu == "Tesla V100-SXM2" and record.sms == 78 and record.search is False
    assert record.memory_bytes_per_s == 900e9 and list(record.modes) == ["float32"]
    mode = record.modes["float32"]
    assert (mode.math, mode.tensor_cores, mode.peak_flops_per_s, mode.fallback_flops_per_s) == \
        ("float32", False, 15.7e12, 15.7e12)
    assert mode.samples == 12 and set(mode.values) == set(gk.PARAMS)
    assert mode.held_out_median_accuracy and set(mode.held_out_median_accuracy) <= set(gk.FAMILIES)
    assert all(math.isfinite(a) for a in mode.held_out_median_accuracy.values())
    assert any("12 measured kernel times" in s for s in record.sources)
    # a GPU the datasheet file lacks: fitted on the figures its own record derives (gpu_specs.derive_spec)
    device = GPUInfo(name="Radeon RX 7900 XTX", sms=80, max_sm_clock_mhz=1530, compute_capability="7.0",
                     max_mem_clock_mhz=877, memory_bus_width_bits=4096)
    derived = gf.fit_gpu_kernels(profile_samples, device.name, sms=80, search=False, device=device)
    assert derived.gpu == "Radeon RX 7900 XTX" and derived.sms == 80
    assert derived.modes["float32"].peak_flops_per_s == pytest.approx(15.67e12, rel=1e-3)
    assert any("derived from the device" in s for s in derived.sources)


def test_gpu_kernel_mode_names_exactly_the_models_constants():
    good = dict(math="float32", tensor_cores=False, peak_flops_per_s=15.7e12, fallback_flops_per_s=15.7e12,
                values=dict(TRUE), samples=3)
    assert GpuKernelMode(**good).values == TRUE
    missing = {k: v for k, v in TRUE.items() if k != "floor_s"}
    with pytest.raises(ValidationError, match=r"missing \['floor_s'\]"):
        GpuKernelMode(**{**good, "values": missing})
    with pytest.raises(ValidationError, match=r"unknown \['bogus_s'\]"):
        GpuKernelMode(**{**good, "values": {**TRUE, "bogus_s": 1.0}})
    with pytest.raises(ValidationError):
        GpuKernelMode(**{**good, "values": {**TRUE, "efficiency": -0.5}})
    record = {"gpu": "Tesla V100-SXM2", "sms": 80, "memory_bytes_per_s": 900e9,
              "modes": {"float32": {**good, "values": missing}}}
    with pytest.raises(UserError, match="gpu_kernels.*values must name exactly the model's constants"):
        parse_coefficients({"gpu_kernels": record}, "p.yaml")
    assert parse_coefficients({"gpu_kernels": {**record, "modes": {"float32": good}}}, "p.yaml").gpu_kernels.sms == 80


# ------------------------------------------------------------------------------------------ datasheets
@pytest.mark.parametrize("name,expected", [("Tesla V100-SXM2-16GB", "Tesla V100-SXM2"),
                                           ("NVIDIA GTX TitanXp", "NVIDIA TITAN Xp"),
                                           ("NVIDIA TITAN Xp", "NVIDIA TITAN Xp"),
                                           ("NVIDIA TITAN X (Pascal)", "NVIDIA TITAN X (Pascal)"),
                                           ("NVIDIA H100 80GB HBM3", "H100 SXM5"),
                                           ("NVIDIA A100-SXM4-40GB", "A100-SXM4"),
                                           ("GeForce GTX 1080 Ti", "GeForce GTX 1080 Ti"),
                                           # DeepBench's other training sheets: Turing, Maxwell, AMD Vega
                                           ("NVIDIA T4", "Tesla T4"), ("Tesla T4", "Tesla T4"),
                                           ("Nvidia TitanX", "GeForce GTX TITAN X (Maxwell)"),
                                           ("Nvidia TitanX Pascal", "NVIDIA TITAN X (Pascal)"),
                                           ("AMD MI25", "Radeon Instinct MI25"),
                                           ("AMD Vega Frontier Edition 16GB", "Radeon Vega Frontier Edition"),
                                           # ... and no false friends: a MI250X is not a MI25, a GT 430 not a T4
                                           ("AMD Instinct MI250X", None), ("NVIDIA GeForce GT 430", None),
                                           ("NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"),
                                           ("NVIDIA A100 80GB PCIe", "A100-PCIe-80GB"),
                                           ("Radeon RX 7900 XTX", None), ("", None),
                                           # whole words only: an A10 is not an A100, an A10G or an RTX A4000
                                           ("NVIDIA A10", "NVIDIA A10"), ("NVIDIA A10G", None),
                                           ("NVIDIA RTX A4000", None), ("NVIDIA A40", "NVIDIA A40"),
                                           ("NVIDIA L4", "NVIDIA L4"), ("NVIDIA L40", "NVIDIA L40"),
                                           ("NVIDIA L40S", "NVIDIA L40S"), ("Tesla P4", "Tesla P4"),
                                           ("Tesla P40", "Tesla P40"), ("Quadro GV100", None),
                                           ("NVIDIA H100 PCIe", "H100 PCIe"), ("NVIDIA H800", "H100 SXM5"),
                                           ("Tesla V100-PCIE-16GB", "Tesla V100-PCIE"),
                                           ("Tesla V100S-PCIE-32GB", "Tesla V100S-PCIE"),
                                           ("NVIDIA GeForce RTX 4090", "GeForce RTX 4090"),
                                           ("NVIDIA TITAN V", "NVIDIA TITAN V"), ("NVIDIA GH200 480GB", None)])
def test_find_spec(name, expected):
    spec = gpu_specs.find_spec(name)
    assert (spec.name if spec else None) == expected


def test_math_modes():
    v100, p100, a100, ti = (gpu_specs.find_spec(n) for n in ("V100", "P100", "A100", "1080 Ti"))
    assert gpu_specs.math_mode(v100, "float16") == ("float16_tensor", True)
    assert gpu_specs.math_mode(v100, "fp16") == ("float16_tensor", True)
    assert gpu_specs.math_mode(v100, "float32") == ("float32", False)
    assert gpu_specs.math_mode(p100, "float16", gpu_specs.FP16_STORAGE_FP32_MATH) == ("float32", False)
    assert gpu_specs.math_mode(p100, "float16") == ("float16_cuda", False)
    assert gpu_specs.math_mode(a100, "tf32") == ("tf32_tensor", True)
    assert gpu_specs.math_mode(a100, "bfloat16") == ("bfloat16_tensor", True)
    assert gpu_specs.math_mode(ti, "bfloat16") == ("float32", False)
    t4 = gpu_specs.find_spec("NVIDIA T4")
    assert gpu_specs.math_mode(t4, "float16") == ("float16_tensor", True)
    assert gpu_specs.math_mode(t4, "tf32") == ("float32", False)
    assert gpu_specs.math_mode(ti, "float16") == ("float32", False)
    assert gpu_specs.math_mode(v100, "tf32") == ("float32", False)
    assert gpu_specs.hardware(v100, "float16") == gk.Hardware(80, 125e12, 15.7e12, 900e9, True)
    assert gpu_specs.hardware(p100, "float16", gpu_specs.FP16_STORAGE_FP32_MATH, sms=50) == \
        gk.Hardware(50, 9.3e12, 9.3e12, 732e9, False)
    with pytest.raises(UserError):
        gpu_specs.math_mode(v100, "float17")


def test_every_datasheet_entry_is_usable():
    specs = gpu_specs.load_specs()
    assert len({s.name for s in specs}) == len(specs)
    for spec in specs:
        assert "float32" in spec.peak_flops_per_s and spec.sms >= 1
        assert gpu_specs.find_spec(spec.name) == spec  # an entry's own name finds it
        for dtype in ("float32", "float16", "bfloat16", "tf32"):
            assert gpu_specs.hardware(spec, dtype).peak_flops_per_s >= spec.peak_flops_per_s["float32"]


#: (name, SMs, maximum SM clock MHz, compute capability, maximum memory clock MHz as NVML reports it, bus bits)
DEVICES = [("Tesla V100-SXM2-16GB", 80, 1530, "7.0", 877, 4096), ("NVIDIA A100-SXM4-40GB", 108, 1410, "8.0", 1215, 5120),
           ("NVIDIA H100 80GB HBM3", 132, 1980, "9.0", 2619, 5120), ("NVIDIA H100 PCIe", 114, 1755, "9.0", 1593, 5120),
           ("Tesla T4", 40, 1590, "7.5", 5001, 256), ("NVIDIA L40S", 142, 2520, "8.9", 9001, 384),
           ("NVIDIA L4", 58, 2040, "8.9", 6251, 192), ("NVIDIA A40", 84, 1740, "8.6", 7251, 384),
           ("NVIDIA GeForce RTX 3090", 82, 1695, "8.6", 9751, 384),
           ("NVIDIA GeForce RTX 4090", 128, 2520, "8.9", 10501, 384),
           ("NVIDIA GeForce RTX 2080 Ti", 68, 1545, "7.5", 7000, 352), ("GeForce GTX 1080 Ti", 28, 1582, "6.1", 5505, 352),
           # as NVML reported a real H200 (calibrate/profiles/h200.yaml, 2026-11-30: its HBM clock idles at its maximum)
           ("NVIDIA H200", 132, 1980, "9.0", 3201, 6016)]


@pytest.mark.parametrize("name,sms,sm_mhz,cc,mem_mhz,bus", DEVICES)
def test_derived_figures_match_the_datasheets(name, sms, sm_mhz, cc, mem_mhz, bus):
    """Two data files checked against each other: the per-SM rates of gpu_architectures.yaml, times what the
    device reports, give each listed card's datasheet peaks and bandwidth (within 2.5%: boost clocks are rounded)."""
    device = GPUInfo(name=name, sms=sms, max_sm_clock_mhz=sm_mhz, compute_capability=cc, max_mem_clock_mhz=mem_mhz,
                     memory_bus_width_bits=bus)
    derived, listed = gpu_specs.derive_spec(device), gpu_specs.find_spec(name)
    assert derived.sms == listed.sms
    assert derived.memory_bytes_per_s == pytest.approx(listed.memory_bytes_per_s, rel=0.025)
    assert set(derived.peak_flops_per_s) >= set(listed.peak_flops_per_s) - {"float16_cuda"}
    for mode, peak in listed.peak_flops_per_s.items():
        if mode in derived.peak_flops_per_s:
            assert derived.peak_flops_per_s[mode] == pytest.approx(peak, rel=0.025), mode


def test_derived_figures_need_every_fact():
    full = dict(name="NVIDIA RTX A4000", sms=48, max_sm_clock_mhz=1560, compute_capability="8.6",
                max_mem_clock_mhz=7001, memory_bus_width_bits=256)
    spec = gpu_specs.derive_spec(GPUInfo(**full))
    assert spec.peak_flops_per_s["float32"] == pytest.approx(256 * 48 * 1560e6)
    assert spec.peak_flops_per_s["float16_tensor"] == pytest.approx(1024 * 48 * 1560e6)  # not a GeForce card
    assert spec.memory_bytes_per_s == pytest.approx(448.064e9) and "derived from the device" in spec.source
    assert gpu_specs.math_mode(spec, "bfloat16") == ("bfloat16_tensor", True)
    for missing in ("sms", "max_sm_clock_mhz", "compute_capability", "max_mem_clock_mhz", "memory_bus_width_bits"):
        assert gpu_specs.derive_spec(GPUInfo(**{**full, missing: None})) is None
    assert gpu_specs.derive_spec(GPUInfo(**{**full, "compute_capability": "3.7"})) is None  # no rates for Kepler
    assert gpu_specs.spec_for("NVIDIA RTX A4000") is None
    assert gpu_specs.spec_for("NVIDIA RTX A4000", GPUInfo(**full)).sms == 48
    assert gpu_specs.spec_for("NVIDIA A40", GPUInfo(**full)).name == "NVIDIA A40"  # the datasheet first


def test_the_gpu_specs_command_sets_both_figures_side_by_side(monkeypatch, capsys):
    from profiler import metadata

    h100 = GPUInfo(name="NVIDIA H100 80GB HBM3", sms=132, max_sm_clock_mhz=1980, compute_capability="9.0",
                   max_mem_clock_mhz=2619, memory_bus_width_bits=5120)
    a4000 = GPUInfo(name="NVIDIA RTX A4000", sms=48, max_sm_clock_mhz=1560, compute_capability="8.6")
    monkeypatch.setattr(metadata, "nvml_gpus", lambda nvml=None: ([h100, a4000], "550.1"))
    assert gpu_specs.main([]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("GPU 0: NVIDIA H100 80GB HBM3; sms 132")
    assert out[1].startswith("  datasheet: 132 SMs, float32 66.9 TFLOP/s") and out[2].startswith("  derived: 132 SMs")
    assert out[4:] == ["  datasheet: none", "  derived: none"]  # no memory clock reported: nothing derived
    monkeypatch.setattr(metadata, "nvml_gpus", lambda nvml=None: ([], None))
    assert gpu_specs.main([]) == 0 and "no GPU" in capsys.readouterr().out


def test_a_malformed_datasheet_file_is_a_user_error(tmp_path):
    bad = tmp_path / "gpus.yaml"
    bad.write_text("gpus:\n  - name: X\n    names: [x]\n    sms: 0\n    peak_flops_per_s: {float32: 1}\n"
                   "    memory_bytes_per_s: 1\n    source: s\n")
    with pytest.raises(UserError, match="sms"):
        gpu_specs.load_specs(bad)


# ------------------------------------------------------------------------------------------ the cost model
GPU_SHAPES = ([("gemm", "fwd", {"M": m, "N": n, "K": k}) for m in (64, 1024) for n in (128, 2048) for k in (256, 4096)]
              + [("conv2d", pass_, conv(n, c, h, h, f, r)) for pass_ in gk.PASSES
                 for n, c, h, f, r in ((8, 64, 56, 64, 3), (16, 128, 28, 128, 3), (4, 256, 14, 512, 1),
                                       (32, 32, 112, 64, 3))]
              + [("conv3d", pass_, {"N": n, "C": c, "D": h, "H": h, "W": h, "F": f, "kernel": 3, "padding": 1})
                 for pass_ in gk.PASSES for n, c, h, f in ((1, 32, 32, 64), (8, 64, 8, 128))])


def gpu_profile(samples) -> Profile:
    machine = Machine(hostname="gpu-node", cpu_cores=2, device_memory_bytes=16e9,
                      gpus=[GPUInfo(name="Tesla V100-SXM2-16GB", memory_bytes=16e9)])
    return Profile(schema_version=SCHEMA_VERSION, machine=machine, created=utc_now_iso(), samples=samples,
                   provenance=Provenance(kind="calibrated", source="synthetic GPU kernel times"))


@pytest.fixture(scope="module")
def fitted_gpu_profile():
    from calibrate.fit import fit_profile

    rng = np.random.default_rng(4)
    samples = [sample(op, pass_, p, time_s=gk.kernel_time_s(TRUE, V100, op, pass_, p, "float32")
                      * float(np.exp(0.01 * rng.standard_normal())), application="A" if i % 2 else "B")
               for i, (op, pass_, p) in enumerate(GPU_SHAPES)]
    return fit_profile(gpu_profile(samples))


def kernel_model(cm, dtype="float32"):
    record = cm.coefficients.gpu_kernels
    mode = record.modes[dtype]
    return mode.values, gk.Hardware(record.sms, mode.peak_flops_per_s, mode.fallback_flops_per_s,
                                    record.memory_bytes_per_s, mode.tensor_cores)


def test_a_gpu_profile_carries_its_kernel_model(fitted_gpu_profile):
    from calibrate.cost_model import cost_model_from_profile

    cm = cost_model_from_profile(fitted_gpu_profile)
    record = cm.coefficients.gpu_kernels
    assert record is not None and record.gpu == "Tesla V100-SXM2" and record.sms == 80 and record.search
    assert list(record.modes) == ["float32"] and record.modes["float32"].samples == len(GPU_SHAPES)
    assert set(record.modes["float32"].held_out_median_accuracy) == set(gk.FAMILIES)  # two applications
    assert cm.conv_algorithm_search is True
    values, hw = kernel_model(cm)
    assert hw == gk.Hardware(80, 15.7e12, 15.7e12, 900e9, False)
    # 20 samples identify the times, not every constant: the fitted model reproduces its samples
    samples = fitted_gpu_profile.samples
    predicted = np.array([gk.kernel_time_s(values, hw, s.benchmark, s.variant, s.params, s.dtype) for s in samples])
    assert np.median(gf.accuracy(predicted, np.array([np.median(s.times_s) for s in samples]))) > 0.9


def test_linear_and_gemm_passes_cost_as_their_forward_gemm(fitted_gpu_profile):
    from calibrate.cost_model import cost_model_from_profile

    cm = cost_model_from_profile(fitted_gpu_profile)
    values, hw = kernel_model(cm)
    shape = {"M": 48, "N": 1000, "K": 2048}  # not a measured shape: the model answers
    expected = gk.kernel_time_s(values, hw, "gemm", "fwd", {"M": 2048, "N": 1000, "K": 48, "transpose_a": True,
                                                            "transpose_b": False}, "float32")
    assert cm.compute_time_s("linear", "bwd_weight", shape, "float32") == expected
    assert cm.compute_time_s("linear", "bwd_weight", shape, "fp32") == expected
    assert cm.compute_time_s("linear", "fwd", shape, "float32") == gk.kernel_time_s(
        values, hw, "gemm", "fwd", {**shape, "transpose_a": False, "transpose_b": True}, "float32")
    assert cm.compute_time_s("gemm", "bwd_data", shape, "float32") == gk.kernel_time_s(
        values, hw, "gemm", "fwd", {"M": 48, "N": 2048, "K": 1000, "transpose_a": False, "transpose_b": True},
        "float32")
    p = conv(2, 96, 40, 40, 80, 3)
    for pass_ in gk.PASSES:
        assert cm.compute_time_s("conv2d", pass_, p, "float32") == gk.kernel_time_s(values, hw, "conv2d", pass_, p,
                                                                                     "float32")


def test_a_transposed_pass_is_not_served_from_the_plain_gemms_cache(fitted_gpu_profile):
    from calibrate.cost_model import cost_model_from_profile

    data = json.loads(json.dumps(fitted_gpu_profile.coefficients))
    data["gpu_kernels"]["modes"]["float32"]["values"].update(transposed_memory_ratio=3.0, memory_efficiency=0.01)
    cm = cost_model_from_profile(fitted_gpu_profile.model_copy(update={"coefficients": data}))
    shape = {"M": 300, "N": 200, "K": 100}  # memory-bound at 1% of the DRAM bandwidth
    plain = cm.compute_time_s("gemm", "fwd", shape, "float32")
    assert cm.compute_time_s("linear", "fwd", shape, "float32") == pytest.approx(3 * plain)
    assert cm.compute_time_s("gemm", "fwd", shape, "float32") == plain


def test_a_measured_shape_keeps_its_measured_time(fitted_gpu_profile):
    from calibrate.cost_model import cost_model_from_profile

    cm = cost_model_from_profile(fitted_gpu_profile)
    measured = next(s for s in fitted_gpu_profile.samples if s.benchmark == "gemm")
    assert cm.compute_time_s("gemm", "fwd", measured.params, "float32") == pytest.approx(np.mean(measured.times_s))


def test_tf32_uses_the_float32_mode_when_the_profile_has_no_tf32_one(fitted_gpu_profile):
    from calibrate.cost_model import cost_model_from_profile

    cm = cost_model_from_profile(fitted_gpu_profile)
    assert "tf32" not in cm.coefficients.gpu_kernels.modes
    values, hw = kernel_model(cm)
    shape, p = {"M": 100, "N": 3000, "K": 700}, conv(4, 48, 30, 30, 96, 3)
    assert cm.compute_time_s("linear", "fwd", shape, "tf32") == cm.compute_time_s("linear", "fwd", shape, "float32")
    assert cm.compute_time_s("conv2d", "bwd_data", p, "tf32") == gk.kernel_time_s(values, hw, "conv2d", "bwd_data",
                                                                                   p, "float32")
    # a dtype with no mode (and not tf32) is costed by the family fits, which this profile lacks for it
    with pytest.raises(UserError, match="no coefficient for conv2d fwd float16"):
        cm.compute_time_s("conv2d", "fwd", p, "float16")


def test_grouped_convolutions_run_one_product_per_group_and_dilated_ones_take_the_family_fit(fitted_gpu_profile):
    from calibrate.cost_model import ProfileCostModel, cost_model_from_profile

    cm = cost_model_from_profile(fitted_gpu_profile)
    values, hw = kernel_model(cm)
    grouped = {**conv(8, 64, 28, 28, 64, 3), "groups": 4}
    assert gk.products("conv2d", "fwd", grouped, "implicit_gemm") == (8 * 28 * 28, 16, 16 * 9, 4)
    assert gk.algorithms("conv2d", "fwd", grouped, False, True) == ("implicit_gemm",)
    assert cm.compute_time_s("conv2d", "fwd", grouped, "float32") == \
        gk.kernel_time_s(values, hw, "conv2d", "fwd", grouped, "float32")
    # a depthwise convolution is its memory term alone (plus the convolution's overhead)
    dw = {**conv(8, 64, 28, 28, 64, 3), "groups": 64}
    memory = gk.operand_bytes("conv2d", dw, "float32") / (values["memory_efficiency"] * hw.memory_bytes_per_s)
    floor = values["floor_s"] * values["conv_floor_ratio"]
    assert gk.kernel_time_s(values, hw, "conv2d", "fwd", dw, "float32") == pytest.approx(
        values["conv_overhead_s"] + max(floor, memory), rel=1e-12)
    # grouped samples stay out of the fit's rows
    assert gf.kernel_samples([Sample(benchmark="conv2d", variant="fwd", params=grouped, device="cuda", threads=1,
                                     times_s=[1e-4])]) == {}
    without = ProfileCostModel(cm.coefficients.model_copy(update={"gpu_kernels": None}), name="no kernel model",
                               device_memory_bytes=16e9, devices_per_node=1, provenance="calibrated")
    dilated = {**conv(8, 64, 28, 28, 64, 3), "dilation": [2, 2]}
    assert cm.compute_time_s("conv2d", "fwd", dilated, "float32") == \
        without.compute_time_s("conv2d", "fwd", dilated, "float32")


def test_without_the_algorithm_search_a_convolution_is_never_faster(fitted_gpu_profile):
    from calibrate.cost_model import cost_model_from_profile

    data = json.loads(json.dumps(fitted_gpu_profile.coefficients))
    data["gpu_kernels"]["modes"]["float32"]["values"].update(winograd_fwd=3.0, winograd_bwd_data=3.0)
    for coefficients in (fitted_gpu_profile.coefficients, data):  # as fitted, and with a Winograd worth choosing
        cm = cost_model_from_profile(fitted_gpu_profile.model_copy(update={"coefficients": coefficients}))
        shapes = [conv(n, c, h, h, f, 3) for n, c, h, f in ((8, 64, 56, 64), (32, 256, 14, 256), (1, 512, 7, 512),
                                                             (16, 128, 30, 96))]
        searched = [cm.compute_time_s("conv2d", pass_, p, "float32") for p in shapes for pass_ in gk.PASSES]
        cm.conv_algorithm_search = False
        heuristic = [cm.compute_time_s("conv2d", pass_, p, "float32") for p in shapes for pass_ in gk.PASSES]
        assert all(h >= s for h, s in zip(heuristic, searched))
        if coefficients is data:
            assert any(h > 1.2 * s for h, s in zip(heuristic, searched))
            values, hw = kernel_model(cm)
            assert heuristic[0] == gk.kernel_time_s(values, hw, "conv2d", "fwd", shapes[0], "float32", search=False)


def test_the_algorithm_setting_survives_at_bound(fitted_gpu_profile):
    from calibrate.cost_model import cost_model_from_profile

    cm = cost_model_from_profile(fitted_gpu_profile)
    cm.conv_algorithm_search = False
    assert cm.at_bound("low").conv_algorithm_search is False


# ------------------------------------------------------------------------------------------ python -m bench deepbench
#: DeepBench's convolution header (the 1080 Ti layout: R before S, pad_h before pad_w, vertical stride first)
CONV_HEADER = [None, None, "W", "H", "C", "N", "K ", "R", "S", "pad_h", "pad_w", "Vertical stride", "Horizontal stride",
               "Forward (msec)", "wrt Inputs (msec)", "wrt Parameters (msec)", None, "P", "Q", "Total Time (msec)",
               "FWD TERAFLOPS", "BWD INPUTS TERAFLOPS", "BWD PARMS TERAFLOPS", "Forward Algorithm"]
BENCH_GEMMS = [("DeepSpeech", 1760, 16, 1760), ("DeepSpeech", 1760, 64, 1760), ("DeepSpeech", 2560, 32, 2560),
               ("Speaker ID", 1024, 700, 512), ("Speaker ID", 512, 1500, 2816), ("Speaker ID", 4096, 16, 4096)]
BENCH_CONVS = [("Resnet", 56, 56, 64, 8, 64, 3, 1), ("Resnet", 28, 28, 128, 16, 128, 3, 1),
               ("Resnet", 14, 14, 256, 16, 512, 1, 2), ("Vision", 224, 224, 3, 8, 64, 7, 2),
               ("Vision", 112, 112, 64, 8, 128, 3, 1), ("Vision", 7, 7, 512, 32, 512, 3, 1)]


def deepbench_workbook(path: Path) -> Path:
    """An FP32 DeepBench sheet of V100-like times (the model's own, with TRUE constants) and its Specs sheet."""
    import openpyxl

    def ms(op, pass_, p):
        return 1e3 * gk.kernel_time_s(TRUE, V100, op, pass_, p, "float32")

    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Results - FP32"
    sheet.append(["Precision", "Float"])
    sheet.append([])
    sheet.append(["Dense Matrix Multiplication", None, "M", "N", "K", "A Transpose", "B Transpose", None,
                  "Time (msec)", "TERAFLOPS"])
    for app, m, n, k in BENCH_GEMMS:
        sheet.append([None, app, m, n, k, "N", "N", None, ms("gemm", "fwd", {"M": m, "N": n, "K": k}), 1.0])
    sheet.append([])
    sheet.append(["Convolution"])
    sheet.append(CONV_HEADER)
    for app, w, h, c, n, k, r, stride in BENCH_CONVS:
        p = conv(n, c, h, w, k, r, stride=stride)
        sheet.append([None, app, w, h, c, n, k, r, r, r // 2, r // 2, stride, stride, ms("conv2d", "fwd", p),
                      ms("conv2d", "bwd_data", p), ms("conv2d", "bwd_weight", p), None, 0, 0, 0, 0, 0, 0,
                      "IMPLICIT_GEMM"])
    specs = book.create_sheet("Specs")
    for row in (["GPU Model", "NVIDIA V100"], ["CUDA Version", "10.1.243"], ["Cudnn Version", "7.6.2.24"]):
        specs.append(row)
    book.save(path)
    return path


def test_bench_deepbench_on_a_small_workbook(tmp_path, capsys):
    from bench.__main__ import main  # in-process: an uncaught error fails the test

    book = deepbench_workbook(tmp_path / "small.xlsx")
    results, docs = tmp_path / "results", tmp_path / "docs" / "deepbench.md"
    docs.parent.mkdir()
    assert main(["deepbench", str(book), "--json", "--results", str(results), "--docs", str(docs)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert list(summary) == ["NVIDIA V100"] and list(summary["NVIDIA V100"]) == ["float32"]
    families = summary["NVIDIA V100"]["float32"]
    convs, input_layers = len(BENCH_CONVS), sum(c < 4 for _, _, _, c, *_ in BENCH_CONVS)
    assert {f: v["rows"] for f, v in families.items()} == {
        "gemm/fwd": len(BENCH_GEMMS), "conv2d/fwd": convs, "conv2d/bwd_data": convs - input_layers,
        "conv2d/bwd_weight": convs}
    for figures in families.values():
        assert set(figures) == {"rows", "median_accuracy", "mean_accuracy"}
        assert figures["median_accuracy"] <= 1.0 and figures["mean_accuracy"] <= 1.0
        assert figures["median_accuracy"] > 0.5  # times from the model itself: held out, still close
    recorded = json.loads((results / "deepbench.json").read_text())
    assert recorded["name"] == "deepbench"
    names = [f["name"] for f in recorded["figures"]]
    # four headline figures (two with the targets), each cell's median and mean, the forward regimes' agreement
    assert "NVIDIA V100 float32 gemm/fwd: held-out median accuracy" in names and len(names) == 6 + 2 * len(families)
    assert "monotone ceiling of the mean accuracy, worst GPU x dtype x family" in names
    assert [f["target"] for f in recorded["figures"][:2]] == [">= 90", ">= 85"]
    rows = [json.loads(line) for line in (results / "deepbench-rows.jsonl").read_text().splitlines()]
    assert len(rows) == sum(v["rows"] for v in families.values())
    assert {r["application"] for r in rows} == {"DeepSpeech", "Speaker ID", "Resnet", "Vision"}
    text = docs.read_text()
    assert text.startswith("<!-- generated by `python -m bench deepbench`") and "| NVIDIA V100 | float32 |" in text
    # every forward row records IMPLICIT_GEMM: the agreement is the share the model also runs as implicit GEMM
    forward = [r for r in rows if r["family"] == "conv2d/fwd"]
    assert {r["cudnn_algorithm"] for r in forward} == {"IMPLICIT_GEMM"}
    share = sum(r["algorithm"] == "implicit_gemm" for r in forward) / len(forward)
    assert recorded["figures"][-1]["value"] == pytest.approx(100 * share, abs=0.01)
    assert f"| NVIDIA V100 | float32 | {len(forward)} | {100 * share:.1f}% |" in text


def test_cudnn_forward_algorithms_map_to_the_models_regimes():
    from bench.deepbench import cudnn_regime

    assert [cudnn_regime(n) for n in ("IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "LICIT_PRECOMP_GEMM", "GEMM")] == \
        ["implicit_gemm"] * 4  # DeepBench's V100 sheet truncates some names
    assert cudnn_regime("WINOGRAD") == "winograd_fused" and cudnn_regime("WINOGRAD_NONFUSED") == "winograd"
    assert cudnn_regime("FFT") == cudnn_regime("FFT_TILING") == "fft"
    assert cudnn_regime(None) is None and cudnn_regime("DIRECT") is None
    assert {cudnn_regime(n) for n in ("WINOGRAD", "WINOGRAD_NONFUSED", "FFT", "GEMM")} <= set(gk.ALGORITHMS)


def test_bench_deepbench_on_text_output_needs_its_gpu(tmp_path, capsys):
    """gemm_bench's text names no GPU: --gpu does (and may not contradict a workbook's Specs sheet)."""
    from bench.__main__ import main

    lines = [f"{'Times':>30}", "    m       n      k      a_t     b_t      precision        time (usec) "]
    lines += [f"{m:>7}{n:>7}{k:>7}{0:>7}{0:>7}{'float':>13}"
              f"{1e6 * gk.kernel_time_s(TRUE, V100, 'gemm', 'fwd', {'M': m, 'N': n, 'K': k}, 'float32'):>20.2f}"
              for _, m, n, k in BENCH_GEMMS]
    text = tmp_path / "gemm_bench.txt"
    text.write_text("\n".join(lines) + "\n")
    out = ["--results", str(tmp_path / "r"), "--docs", str(tmp_path / "d.md")]
    assert main(["deepbench", str(text), *out]) == 2
    assert "pass --gpu NAME" in capsys.readouterr().err
    assert main(["deepbench", str(text), "--gpu", "Tesla V100-SXM2-16GB", "--json", *out]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["Tesla V100-SXM2-16GB"]["float32"]["gemm/fwd"]["rows"] == len(BENCH_GEMMS)
    book = deepbench_workbook(tmp_path / "small.xlsx")  # names the NVIDIA V100
    assert main(["deepbench", str(book), "--gpu", "Tesla T4", *out]) == 2
    assert "names the GPU 'NVIDIA V100'" in capsys.readouterr().err


def test_a_3d_convolution_is_the_implicit_gemm_of_its_3d_window():
    """By hand: 2 samples of 4 x 8^3 into 16 filters of 3^3 (padding 1) run forward as (2 x 512) x 16 x (4 x 27),
    the input gradient as (2 x 512) x 4 x (16 x 27), the weight gradient as 16 x 108 x 1024, on the implicit GEMM
    only; a one-deep window over a one-deep volume is the 2-D convolution, in every pass and quantity."""
    x = {"N": 2, "C": 4, "D": 8, "H": 8, "W": 8, "F": 16, "kernel": 3, "stride": 1, "padding": 1}
    assert gk.products("conv3d", "fwd", x, "implicit_gemm") == (1024, 16, 108, 1)
    assert gk.products("conv3d", "bwd_data", x, "implicit_gemm") == (1024, 4, 432, 1)
    assert gk.products("conv3d", "bwd_weight", x, "implicit_gemm") == (16, 108, 1024, 1)
    assert gk.algorithms("conv3d", "fwd", x, tensor_cores=False, search=True) == ("implicit_gemm_3d",)
    assert gk.operand_bytes("conv3d", x, "float32") == 4 * (2 * 4 * 512 + 16 * 4 * 27 + 2 * 16 * 512)
    assert gk.window_reuse("conv3d", x) == 1 / 27
    assert gk.max_split("conv3d", "bwd_weight", x) == 2 * 8  # one output depth slice of one sample per CTA
    assert gk.unaligned("conv3d", x, tensor_cores=True) and not gk.unaligned("conv3d", x, tensor_cores=False)
    flat = {"N": 2, "C": 16, "H": 14, "W": 14, "F": 32, "kernel": 3, "stride": 2, "padding": 1}
    deep = {**flat, "D": 1, "kernel": [1, 3, 3], "stride": [1, 2, 2], "padding": [0, 1, 1]}
    hw = gk.Hardware(80, 15.7e12, 15.7e12, 9e11, False)
    values = {name: p.prior for name, p in gk.PARAMS.items()}
    for pass_ in gk.PASSES:
        assert gk.products("conv3d", pass_, deep, "implicit_gemm") == gk.products("conv2d", pass_, flat,
                                                                                    "implicit_gemm")
        assert gk.kernel_time_s(values, hw, "conv3d", pass_, deep, "float32", search=False) == pytest.approx(
            gk.kernel_time_s(values, hw, "conv2d", pass_, flat, "float32", search=False))
    assert gk.strided_backward_data("conv3d", "bwd_data", deep) and not gk.gapped_backward_data("conv3d", "bwd_data",
                                                                                               deep)
    # the 3-D kernels' own efficiency per pass: at ratio 1 the 2-D call's time, at 1/2 a compute-bound call's about
    # twice (the split-K partials' DRAM traffic does not scale)
    big = {"N": 8, "C": 64, "D": 32, "H": 32, "W": 32, "F": 64, "kernel": 3, "padding": 1}
    no_floor = {**values, "memory_efficiency": 1e12, "conv_overhead_s": 1e-30, "wave_s": 1e-30,
                "feed_bytes_per_s": 1e18}
    half = {**no_floor, "conv3d_bwd_weight": 0.5}
    assert gk.kernel_time_s(half, hw, "conv3d", "bwd_weight", big, "float32", search=False) == pytest.approx(
        2 * gk.kernel_time_s(no_floor, hw, "conv3d", "bwd_weight", big, "float32", search=False), rel=0.01)
    assert gk.kernel_time_s(half, hw, "conv3d", "fwd", big, "float32", search=False) == pytest.approx(
        gk.kernel_time_s(no_floor, hw, "conv3d", "fwd", big, "float32", search=False), rel=1e-12)


def test_pseudo_fp16_gemms_run_at_the_float32_peak_beside_true_half_convolutions():
    """DeepBench's P100 FP16 sheet (cuDNN 6 binaries): cuBLAS GEMMs with FP32 arithmetic, cuDNN convolutions in true
    half (split_math). Both on the 18.7 TFLOP/s half peak, an FP32-arithmetic call at 9.3 / 18.7 of it; other modes
    1.0. A compute-bound GEMM at peak_scale 0.5 takes twice the main loop of one at 1.0, by hand; with_math gives each
    sample its own math's scale and each op the larger set's."""
    p100 = gpu_specs.find_spec("Tesla P100-PCIE-16GB")
    hw, scale = gpu_specs.split_math(p100, "float16", gpu_specs.FP16_STORAGE_FP32_MATH)
    assert hw.peak_flops_per_s == 18.7e12 and not hw.tensor_cores and scale == pytest.approx(9.3 / 18.7)
    assert gpu_specs.split_math(p100, "float16", "fp16") == (hw, 1.0)
    assert gpu_specs.split_math(p100, "float32")[1] == 1.0
    v100 = gpu_specs.find_spec("Tesla V100-SXM2")
    assert gpu_specs.split_math(v100, "float16")[1] == 1.0  # tensor cores: one mode
    gemm = {"M": 4096, "N": 4096, "K": 4096}
    values = dict(HAND, floor_s=1e-9, wave_s=1e-12)
    whole, half = gf.predict(values, [gf.KernelSample("gemm", "fwd", gemm, "float32", 1.0),
                                      gf.KernelSample("gemm", "fwd", gemm, "float32", 1.0, peak_scale=0.5)], HW)
    assert half == pytest.approx(2 * whole, rel=1e-6)
    assert half == pytest.approx(gk.kernel_time_s(values, HW._replace(peak_flops_per_s=5e12), "gemm", "fwd", gemm,
                                                  "float32"), rel=1e-9)
    conv = {"N": 1, "C": 8, "H": 8, "W": 8, "F": 8}
    hw2, rows, gemm_scale, conv_scale = gf.with_math(p100, "float16", [
        (gf.KernelSample("gemm", "fwd", gemm, "float16", 1.0), gpu_specs.FP16_STORAGE_FP32_MATH),
        (gf.KernelSample("conv2d", "fwd", conv, "float16", 1.0), "fp16")])
    assert hw2 == hw and [s.peak_scale for s in rows] == [pytest.approx(9.3 / 18.7), 1.0]
    assert (gemm_scale, conv_scale) == (pytest.approx(9.3 / 18.7), 1.0)
    # today's binaries the reverse: true-half GEMMs, convolutions in FP32 arithmetic
    _, _, gemm_scale, conv_scale = gf.with_math(p100, "float16", [
        (gf.KernelSample("gemm", "fwd", gemm, "float16", 1.0), "fp16"),
        (gf.KernelSample("conv2d", "fwd", conv, "float16", 1.0), gpu_specs.FP16_STORAGE_FP32_MATH)])
    assert (gemm_scale, conv_scale) == (1.0, pytest.approx(9.3 / 18.7))
