"""Framework overhead fit (calibrate.framework) on samples drawn from known per-layer costs, and the
mean statistic collective fits use (a sum of calls pays their mean)."""
import numpy as np
import pytest

from calibrate.alphabeta import Point, fit_alpha_beta
from calibrate.fit import fit_profile
from calibrate.synthetic import noisy_times, profile_with
from profiler.errors import UserError
from profiler.profile import Sample

KERNEL_S, FORWARD_S, BACKWARD_S, START_S = 1e-6, 2e-6, 5e-6, 20e-6


def framework_samples(rng, lengths=(4, 16, 64), noise=0.03):
    per_layer = {"kernel": KERNEL_S, "forward": KERNEL_S + FORWARD_S, "step": 2 * KERNEL_S + FORWARD_S + BACKWARD_S}
    return [Sample(benchmark="framework", variant=v, device="cpu", threads=1, params={"layers": k},
                   times_s=noisy_times(START_S + k * cost, rng, noise, 9))
            for v, cost in per_layer.items() for k in lengths]


def test_recovers_known_per_layer_overheads_with_intervals():
    fit = fit_profile(profile_with(framework_samples(np.random.default_rng(0)))).coefficients["framework"]
    for name, truth in (("forward_per_layer_s", FORWARD_S), ("backward_per_layer_s", BACKWARD_S)):
        est = fit[name]
        assert est["value"] == pytest.approx(truth, rel=0.1), name
        assert est["low"] <= est["value"] <= est["high"]


def test_one_chain_length_is_a_clear_error():
    samples = [s for s in framework_samples(np.random.default_rng(1)) if s.params["layers"] == 16]
    with pytest.raises(UserError, match="framework kernel has samples for fewer than 2 chain lengths"):
        fit_profile(profile_with(samples))


def test_mean_statistic_pays_a_heavy_tail():
    """Calls at 1 ms with one in three at 4 ms: the median line says 1 ms, the mean line 2 ms per call."""
    times = np.array([1e-3, 1e-3, 4e-3] * 5)
    sizes = [1e3, 1e4, 1e5, 1e6]
    rng = np.random.default_rng(2)
    for statistic, per_call in (("median", 1e-3), ("mean", 2e-3)):
        fit = fit_alpha_beta([Point(x, times, statistic) for x in sizes], rng)
        assert fit.segments[0].alpha_s.value == pytest.approx(per_call, rel=1e-6), statistic


def test_recovers_the_optimizers_fixed_and_per_tensor_cost():
    rng = np.random.default_rng(2)
    step_s, per_tensor_s = 25e-6, 2e-6
    optimizer = [Sample(benchmark="framework", variant="optimizer", device="cpu", threads=1, params={"layers": k},
                        times_s=noisy_times(step_s + k * per_tensor_s, rng, 0.03, 9)) for k in (4, 16, 64)]
    fit = fit_profile(profile_with(framework_samples(rng) + optimizer)).coefficients["framework"]
    assert fit["optimizer_step_s"]["value"] == pytest.approx(step_s, rel=0.15)
    assert fit["optimizer_per_tensor_s"]["value"] == pytest.approx(per_tensor_s, rel=0.1)
    assert fit["optimizer_per_tensor_s"]["low"] <= fit["optimizer_per_tensor_s"]["value"] <= fit["optimizer_per_tensor_s"]["high"]
    old = fit_profile(profile_with(framework_samples(rng))).coefficients["framework"]  # profiles from before it
    assert old.get("optimizer_step_s") is None and old.get("optimizer_per_tensor_s") is None


COLD_FORWARD_S, COLD_BACKWARD_S, WARM_LAYER_S = 20e-6, 40e-6, 30e-6


def cold_samples(rng, orders=("cycled", "grouped"), noise=0.02):
    """Chains of 30 layers at WARM_LAYER_S per layer and pass, plus the cold time of every layer after a type
    change: 30 of them cycled, 5 grouped."""
    transitions = {"cycled": 30, "grouped": 5}
    out = []
    for order in orders:
        n = transitions[order]
        forward = 30 * WARM_LAYER_S + n * COLD_FORWARD_S
        step = forward + 30 * WARM_LAYER_S + n * COLD_BACKWARD_S
        for variant, t in (("cold_forward", forward), ("cold_step", step)):
            out.append(Sample(benchmark="framework", variant=variant, device="cpu", threads=1,
                              params={"layers": 30, "order": order, "transitions": n},
                              times_s=noisy_times(t, rng, noise, 9)))
    return out


def test_recovers_the_cold_code_time_per_layer_and_pass():
    """(t_cycled - t_grouped) / (30 - 5) per pass, by hand: 20 us forward, 40 us backward."""
    rng = np.random.default_rng(3)
    fit = fit_profile(profile_with(framework_samples(rng) + cold_samples(rng))).coefficients["framework"]
    for name, truth in (("cold_forward_per_layer_s", COLD_FORWARD_S), ("cold_backward_per_layer_s", COLD_BACKWARD_S)):
        est = fit[name]
        assert est["value"] == pytest.approx(truth, rel=0.15), name
        assert est["low"] <= truth <= est["high"], name
    assert fit["forward_per_layer_s"]["value"] == pytest.approx(FORWARD_S, rel=0.1)  # the warm fit is untouched
    from calibrate.report import fit_lines

    line = next(l for l in fit_lines(fit_profile(profile_with(framework_samples(rng) + cold_samples(rng))))
                if l.startswith("framework per layer"))
    assert "cold code (the layer before ran another kernel) + forward 2" in line and ", backward 4" in line


def test_the_cost_model_adds_the_cold_time_to_every_layers_overhead():
    from calibrate.cost_model import load_cost_model

    rng = np.random.default_rng(4)
    warm = load_cost_model(fit_profile(profile_with(framework_samples(rng))))
    cold = load_cost_model(fit_profile(profile_with(framework_samples(rng) + cold_samples(rng, noise=0.0))))
    assert warm.coefficients.framework.cold_forward_per_layer_s is None  # profiles measured before it: none
    for pass_, extra in (("fwd", COLD_FORWARD_S), ("bwd", COLD_BACKWARD_S)):
        assert cold.framework_overhead_s(pass_) - warm.framework_overhead_s(pass_) == pytest.approx(extra, rel=0.15)


def test_cold_chains_in_one_order_only_are_a_clear_error():
    samples = framework_samples(np.random.default_rng(5)) + cold_samples(np.random.default_rng(5), orders=("cycled",))
    with pytest.raises(UserError, match="cold-code samples lack cold_forward grouped, cold_step grouped"):
        fit_profile(profile_with(samples))


def test_cold_chains_of_unequal_rounds_are_a_clear_error():
    samples = cold_samples(np.random.default_rng(6))
    samples[0] = samples[0].model_copy(update={"times_s": samples[0].times_s[:-1]})
    with pytest.raises(UserError, match="different numbers of rounds"):
        fit_profile(profile_with(framework_samples(np.random.default_rng(6)) + samples))


def test_a_gpu_calibration_fits_its_hosts_dispatch_time_per_layer_pass():
    """On a GPU the same chains give the host's time per layer pass (Coefficients.host_dispatch, the floor of a GPU
    layer pass: docs/method.md §3d): the forward chain's slope and the step's less it; a CPU calibration has none."""
    from calibrate.fit import fit_coefficients
    from calibrate.framework import fit_host_dispatch
    from profiler.profile import GPUInfo

    rng = np.random.default_rng(3)
    samples = framework_samples(rng)
    fit = fit_host_dispatch(samples, rng)
    assert fit.forward_per_layer_s.value == pytest.approx(KERNEL_S + FORWARD_S, rel=0.1)
    assert fit.backward_per_layer_s.value == pytest.approx(KERNEL_S + BACKWARD_S, rel=0.1)
    assert fit.forward_per_layer_s.low <= fit.forward_per_layer_s.value <= fit.forward_per_layer_s.high
    cpu = fit_profile(profile_with(samples)).coefficients
    assert "host_dispatch" not in cpu
    gpu = profile_with([s.model_copy(update={"device": "cuda"}) for s in samples])
    machine = gpu.machine.model_copy(update={"gpus": [GPUInfo(name="NVIDIA H200", memory_bytes=141e9, sms=132)],
                                             "gpus_per_node": 1})
    coefficients = fit_coefficients(gpu.model_copy(update={"machine": machine}))
    assert not coefficients.device_is_host
    assert coefficients.host_dispatch.backward_per_layer_s.value == pytest.approx(KERNEL_S + BACKWARD_S, rel=0.1)
    # each expert GEMM's launch is not measured by the chains: the published figure, and the fit says so
    assert fit.per_expert_gemm_s.value == pytest.approx(24.75e-6)
    assert fit.per_expert_gemm_fp8_s.value == pytest.approx(49.5e-6)
    assert any("not measured here" in src for src in fit.sources)
