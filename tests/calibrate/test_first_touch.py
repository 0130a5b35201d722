"""First touch of fresh host tensors (calibrate.backends.host, host_fit): the tensors a call allocates, by hand; which
benchmarks preallocate their result (checked against the profiler's own cases); the fit and the cost by hand."""
import pytest

from calibrate import backends, shapes
from calibrate.backends import host, host_fit
from calibrate.coefficients import FirstTouchFit
from profiler.errors import UserError
from profiler.profile import Sample

MIB = 2**20


def test_allocations_by_hand():
    conv = {"N": 2, "C": 3, "F": 8, "H": 10, "W": 10, "kernel": 3, "stride": 2, "padding": 1}
    assert shapes.allocations("conv2d", "fwd", conv, "float32") == (2 * 8 * 5 * 5 * 4.0,)
    assert shapes.allocations("conv2d", "bwd_data", conv, "float32") == (2 * 3 * 10 * 10 * 4.0,)
    assert shapes.allocations("conv2d", "bwd_weight", conv, "bf16") == (8 * 3 * 9 * 2.0,)
    gemm = {"M": 5, "N": 7, "K": 11}
    assert [shapes.allocations("linear", p, gemm, "float32") for p in ("fwd", "bwd_data", "bwd_weight")] == [
        (5 * 7 * 4.0,), (5 * 11 * 4.0,), (11 * 7 * 4.0,)]
    act = {"N": 2, "C": 4, "H": 6, "W": 6}
    assert shapes.allocations("relu", "bwd_data", act, "float32") == (2 * 4 * 36 * 4.0,)
    assert shapes.allocations("maxpool", "fwd", {**act, "kernel": 2}, "float32") == (2 * 4 * 9 * 4.0, 2 * 4 * 9 * 8.0)
    assert shapes.allocations("maxpool", "bwd_data", {**act, "kernel": 2}, "float32") == (2 * 4 * 36 * 4.0,)
    assert shapes.allocations("add", "bwd_data", act, "float32") == ()  # no kernel of its own
    assert shapes.benchmark_allocations("relu", "fwd", act, "float32") == ()
    assert shapes.benchmark_allocations("relu", "bwd_data", act, "float32") == (2 * 4 * 36 * 4.0,)


def test_preallocated_set_matches_the_profilers_benchmarks():
    """A benchmark that writes into a preallocated result returns that same tensor on every call; one that
    allocates returns a new one. shapes.PREALLOCATED_IN_BENCHMARK must name exactly the first kind."""
    import profiler.bench_compute as bc

    cases = (bc.memory_op_cases({"N": 1, "C": 2, "H": 6, "W": 6}, "float32", "cpu")
             + bc.conv_cases({"N": 1, "C": 2, "F": 4, "H": 6, "W": 6, "kernel": 3, "stride": 1, "padding": 1},
                             "float32", "cpu")
             + bc.linear_cases(4, 6, 8, "float32", "cpu") + [bc.gemm_case(4, 6, 8, "float32", "cpu")])
    seen = set()
    for case in cases:
        pass_ = "bwd_data" if case.variant == "bwd" else case.variant
        if (case.benchmark, pass_) in shapes.ZERO_COST:
            continue
        fn = case.build()
        first, second = fn(), fn()
        if isinstance(first, (tuple, list)):  # a backward's (grad_input, grad_weight, ...): the one it computes
            first, second = next(t for t in first if t is not None), next(t for t in second if t is not None)
        preallocated = first is second
        assert preallocated == ((case.benchmark, pass_) in shapes.PREALLOCATED_IN_BENCHMARK), case.label
        seen.add((case.benchmark, pass_))
    assert shapes.PREALLOCATED_IN_BENCHMARK <= seen


def alloc_sample(variant, size, times, threshold=32 * MIB):
    return Sample(benchmark="alloc", variant=variant, params={"bytes": size, "threshold_bytes": threshold},
                  device="cpu", dtype="float32", threads=1, times_s=times)


def test_fit_and_cost_by_hand():
    # 48 MiB: 30 ms fresh vs 5 ms reused -> 25 ms; 96 MiB: 65 vs 10 -> 55 ms; median of the two rates
    samples = [alloc_sample("fresh", 48 * MIB, [0.030, 0.031, 0.029]), alloc_sample("reused", 48 * MIB, [0.005]),
               alloc_sample("fresh", 96 * MIB, [0.065]), alloc_sample("reused", 96 * MIB, [0.010, 0.010])]
    fit = host_fit.fit_first_touch(samples)
    want = (0.025 / (48 * MIB) + 0.055 / (96 * MIB)) / 2
    assert fit.s_per_byte == pytest.approx(want) and fit.threshold_bytes == 32 * MIB
    assert host.first_touch_cost_s(fit, (48 * MIB, 31 * MIB, 64 * MIB)) == pytest.approx(want * 112 * MIB)
    assert host.first_touch_cost_s(None, (48 * MIB,)) == 0.0
    assert host_fit.fit_first_touch([alloc_sample("fresh", 48 * MIB, [0.03])]) is None
    with pytest.raises(UserError):
        host_fit.fit_first_touch([alloc_sample("fresh", 48 * MIB, [0.03]),
                                     alloc_sample("fresh", 96 * MIB, [0.03], threshold=64 * MIB),
                                     alloc_sample("reused", 48 * MIB, [0.01]),
                                     alloc_sample("reused", 96 * MIB, [0.01], threshold=64 * MIB)])


def test_cost_model_adds_first_touch_of_what_the_benchmark_preallocated():
    from calibrate.coefficients import Coefficients
    from calibrate.cost_model import ProfileCostModel

    base = Coefficients(device_is_host=True, host_threads=1)
    touched = base.model_copy(update={"first_touch": FirstTouchFit(s_per_byte=1e-9, threshold_bytes=32 * MIB)})
    big = {"N": 4, "C": 64, "H": 256, "W": 256}  # 64 MiB of float32
    small = {"N": 1, "C": 64, "H": 256, "W": 256}  # 16 MiB

    def time(coefficients, op, pass_, params):
        model = ProfileCostModel(coefficients, name="t", device_memory_bytes=1e9, devices_per_node=1, provenance="t")
        model._measured_shapes = {(f"{op}/{pass_}/float32", shapes.shape_key(params)): 0.01}
        return model.compute_time_s(op, pass_, params, "float32")

    assert time(touched, "relu", "fwd", big) == pytest.approx(0.01 + 64 * MIB * 1e-9)  # preallocated in the benchmark
    assert time(touched, "relu", "fwd", small) == pytest.approx(0.01)  # under the mmap threshold
    assert time(touched, "relu", "bwd_data", big) == pytest.approx(0.01)  # its benchmark allocated it too
    assert time(base, "relu", "fwd", big) == pytest.approx(0.01)  # no fit: nothing added


def test_first_touch_cases_on_cpu_only():
    from profiler.allocator import MMAP_THRESHOLD_BYTES
    from profiler.bench_memory import first_touch_cases

    cases = first_touch_cases("cpu")
    assert {c.variant for c in cases} == {"fresh", "reused"}
    assert all(c.params["bytes"] > MMAP_THRESHOLD_BYTES == c.params["threshold_bytes"] for c in cases)
    assert first_touch_cases("cuda") == []


def test_cost_model_adds_first_touch_beyond_the_familys_largest_benchmark_allocation():
    """A fitted family whose benchmarks never allocated a tensor of the mmap threshold holds no first touch in its
    curve: a call allocating one pays s_per_byte x its bytes on top; a family that did allocate one (or a fit
    that does not say) adds nothing. By hand: a 3x3 convolution writing 64 MiB of float32."""
    from calibrate.coefficients import Coefficients, ComputeFit, EfficiencyModel, Estimate
    from calibrate.cost_model import ProfileCostModel

    conv = {"N": 4, "C": 8, "F": 64, "H": 256, "W": 256, "kernel": 3, "stride": 1, "padding": 1}
    assert shapes.allocations("conv2d", "fwd", conv, "float32") == (64 * MIB,)

    def time(largest, touch=True):
        fit = ComputeFit(kind="flops", launch_s=Estimate.exact(0.0), peak_per_s=1e11,
                         efficiency=EfficiencyModel(features=shapes.feature_names("conv2d"), init=0.0, slope=0.0,
                                                    learning_rate=1.0, trees=[]),
                         time_scale=Estimate.exact(1.0), largest_allocation_bytes=largest)
        coefficients = Coefficients(device_is_host=True, host_threads=1, compute={"conv2d/fwd/float32": fit},
                                    first_touch=FirstTouchFit(s_per_byte=1e-9, threshold_bytes=32 * MIB) if touch else None)
        model = ProfileCostModel(coefficients, name="t", device_memory_bytes=1e9, devices_per_node=1, provenance="t")
        return model.compute_time_s("conv2d", "fwd", conv, "float32")

    kernel = time(None)
    assert kernel > 0
    assert time(16 * MIB) == pytest.approx(kernel + 64 * MIB * 1e-9)  # the grid stopped below the threshold
    assert time(40 * MIB) == pytest.approx(kernel)  # its benchmarks paid first touch themselves
    assert time(16 * MIB, touch=False) == pytest.approx(kernel)  # no first-touch fit: nothing added
    small = dict(conv, N=1)  # 16 MiB: under the threshold
    assert shapes.allocations("conv2d", "fwd", small, "float32") == (16 * MIB,)


def test_fitted_families_record_their_largest_benchmark_allocation():
    from calibrate.fit import _fit_family, compute_points

    samples = [Sample(benchmark="conv2d", variant="fwd", dtype="float32", device="cpu",
                      params={"N": n, "C": 8, "F": 16, "H": 32, "W": 32, "kernel": 3, "stride": 1, "padding": 1},
                      times_s=[1e-3 * n, 1.1e-3 * n], threads=1) for n in (1, 2, 4, 8)]
    points = compute_points(samples)["conv2d/fwd/float32"]
    fit = _fit_family("conv2d/fwd/float32", points, None, 0, ("trees",), backends.for_profile(None, samples))
    assert fit.largest_allocation_bytes == 8 * 16 * 32 * 32 * 4  # the batch-8 output


def test_onednn_blocked_buffers_by_hand_and_their_first_touch():
    """A oneDNN convolution's blocked copies of its activations and weight (channels padded to 16 lanes) are fresh
    tensors of every call: a 4 -> 4 1x1 convolution at batch 168 on 64x64 allocates two of 168 x 16 x 64 x 64 floats
    in each pass (strace showed two 44 MB mmaps a pass), and a call above the threshold pays their first touch."""
    from calibrate.coefficients import Coefficients, ComputeFit, EfficiencyModel, Estimate
    from calibrate.cost_model import ProfileCostModel

    pointwise = {"N": 168, "C": 4, "F": 4, "H": 64, "W": 64, "kernel": 1, "stride": 1, "padding": 0}
    blocked, weight = 168 * 16 * 64 * 64 * 4.0, 16 * 16 * 4.0
    for pass_ in ("fwd", "bwd_data"):  # ... and the weight, reordered by both passes
        assert host.onednn_blocked_buffers("conv2d", pass_, pointwise, "float32", 1, 16) == (blocked, blocked, weight)
    assert host.onednn_blocked_buffers("conv2d", "bwd_weight", pointwise, "float32", 1, 16) == (blocked, blocked)
    # the first-layer kernel (fewer channels than a block, a 3x3 window) reads its input plain, its weight unpadded
    first = {**pointwise, "C": 1, "kernel": 3, "padding": 1}
    assert host.onednn_blocked_buffers("conv2d", "fwd", first, "float32", 1, 16) == (blocked, 16 * 9 * 4.0)
    assert host.onednn_blocked_buffers("conv2d", "bwd_data", first, "float32", 1, 16) == \
        (blocked, blocked, 16 * 9 * 4.0)
    # 20 channels pad to 32; at batch 1 the weight is read plain (a 1360 -> 1360 3x3 at batch 1 mapped no copy)
    wide = {**pointwise, "C": 20, "F": 20, "kernel": 3, "padding": 1, "N": 2}
    assert host.onednn_blocked_buffers("conv2d", "fwd", wide, "float32", 1, 16) == \
        (2 * 32 * 4096 * 4.0,) * 2 + (32 * 32 * 9 * 4.0,)
    assert host.onednn_blocked_buffers("conv2d", "fwd", {**wide, "N": 1}, "float32", 1, 16) == (32 * 4096 * 4.0,) * 2
    # a GPU call, another dtype, a grouped or a native-kernel call: none
    assert host.onednn_blocked_buffers("conv2d", "fwd", pointwise, "float32", None, 16) == ()
    assert host.onednn_blocked_buffers("conv2d", "fwd", pointwise, "bfloat16", 1, 16) == ()
    assert host.onednn_blocked_buffers("conv2d", "fwd", {**pointwise, "groups": 4}, "float32", 1, 16) == ()
    native = {"N": 1, "C": 4, "F": 8, "D": 8, "H": 8, "W": 8, "kernel": 3, "stride": 1, "padding": 1}
    assert host.cpu_native_conv("conv3d", native, "float32", 1)
    assert host.onednn_blocked_buffers("conv3d", "fwd", native, "float32", 1, 16) == ()

    fit = ComputeFit(kind="flops", launch_s=Estimate.exact(0.0), peak_per_s=1e11,
                     efficiency=EfficiencyModel(features=shapes.feature_names("conv2d"), init=0.0, slope=0.0,
                                                learning_rate=1.0, trees=[]),
                     time_scale=Estimate.exact(1.0), largest_allocation_bytes=16 * MIB)

    def time(lanes, touch=True):
        touch_fit = FirstTouchFit(s_per_byte=1e-9, threshold_bytes=32 * MIB) if touch else None
        coefficients = Coefficients(device_is_host=True, host_threads=1, host_simd_lanes=lanes,
                                    compute={"conv2d/fwd/float32": fit}, first_touch=touch_fit)
        model = ProfileCostModel(coefficients, name="t", device_memory_bytes=1e9, devices_per_node=1, provenance="t")
        return model.compute_time_s("conv2d", "fwd", pointwise, "float32")

    assert shapes.allocations("conv2d", "fwd", pointwise, "float32") == (168 * 4 * 4096 * 4.0,)  # 11 MB: no touch
    assert time(16) == pytest.approx(time(16, touch=False) + 2 * blocked * 1e-9)  # the 1 KB weight stays below
    assert time(None) == pytest.approx(time(None, touch=False))  # no lanes recorded: no blocked copies known
