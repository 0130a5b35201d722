"""A step's device time by kind of kernel: names sorted into kinds, measured and predicted sums, the CPU trace."""
import pytest

from predictor.kernel_breakdown import (compare, kind_of, measured_breakdown, predicted_breakdown, predicted_kinds,
                                        render, top_kernels)


@pytest.mark.parametrize("name, kind", [
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1", "matmul"),
    ("ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_nn", "matmul"),
    ("void cudnn::detail::implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, true, false, true>", "matmul"),
    ("flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4>>", "matmul"),
    ("aten::addmm", "matmul"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>", "memory"),
    ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>", "memory"),
    ("void at::native::multi_tensor_apply_kernel<at::native::TensorListMetadata<3>>", "optimizer"),
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", "communication"),
    ("aten::relu_", "memory"),
    ("aten::broadcast_tensors", "memory"),
    ("c10d::allreduce_", "communication"),
])
def test_kernel_names_sort_into_kinds(name, kind):
    assert kind_of(name) == kind


def test_measured_breakdown_by_hand():
    """10 ms of GEMMs, 3 ms element-wise, 1 ms update in a 20 ms step: 6 ms of it the device ran no kernel."""
    events = [("ampere_sgemm_128x64_nn", 0.006), ("cutlass_80_tensorop_gemm", 0.004),
              ("vectorized_elementwise_kernel", 0.003), ("multi_tensor_apply_kernel", 0.001)]
    out = measured_breakdown(events, step_s=0.020)
    assert out == pytest.approx({"matmul": 0.010, "memory": 0.003, "optimizer": 0.001, "communication": 0.0,
                                 "idle": 0.006})
    assert measured_breakdown(events, step_s=0.005)["idle"] == 0.0  # overlapping streams: never negative


def test_predicted_breakdown_and_comparison():
    predicted = predicted_breakdown([("linear", 0.008), ("conv2d", 0.002), ("gelu", 0.001), ("add", 0.001)], 0.0005)
    assert predicted == pytest.approx({"matmul": 0.010, "memory": 0.002, "optimizer": 0.0005, "communication": 0.0})
    measured = {"matmul": 0.012, "memory": 0.004, "optimizer": 0.001, "communication": 0.0, "idle": 0.003}
    rows = [{"kernel_breakdown_s": measured, "predicted_breakdown_s": predicted}, {"kernel_breakdown_s": measured}]
    totals = compare(rows)
    assert totals["matmul"] == pytest.approx((0.010, 0.012)) and totals["idle"] == pytest.approx((0.0, 0.003))
    text = "\n".join(render(rows))
    assert "1 traced runs" in text and "(0.83x)" in text and render([{"kernel_breakdown_s": measured}]) == []


def test_a_cpu_step_traced_and_predicted():
    """The runner's profiled step on the CPU (its ops' self times stand in for kernels) and the serial plan's
    prediction by the same kinds: both see matrix products and element-wise work."""
    import torch

    from predictor.api import default_plans, load_cost_model, load_model, predict
    from predictor.runner.build import build_replica
    from predictor.runner.config import RunConfig
    from predictor.runner.measure import kernel_trace
    from predictor.runner.nets import synthetic_batch

    graph = load_model("small_cnn2d", width=4, image=16)
    cfg = RunConfig("small_cnn2d", "serial", 1, 4, knobs=(("image", 16), ("width", 4)))
    replica = build_replica(cfg, graph, "cpu")
    x, y = synthetic_batch(graph, 4, seed=0, dtype=torch.float32, device="cpu")
    x, y = replica.local_batch(x, y)
    events = kernel_trace(replica, x, y, "cpu")
    measured = measured_breakdown(events, step_s=sum(s for _, s in events))
    assert measured["matmul"] > 0 and measured["memory"] > 0 and measured["idle"] == pytest.approx(0.0, abs=1e-9)

    cost_model, _ = load_cost_model("v100-dgx1-8gpu.published")
    plan = default_plans(graph, "serial", 4, 1, 1, "fp32", "sgd")[0]
    prediction = predict(graph, plan, cost_model)
    kinds = predicted_kinds(graph, plan, prediction, cost_model)
    assert kinds["matmul"] > 0 and kinds["memory"] > 0 and kinds["optimizer"] == pytest.approx(prediction.update_s)
    # the layers' sum is the prediction's compute (forward + backward), split into the two kinds
    assert kinds["matmul"] + kinds["memory"] == pytest.approx(prediction.compute_fwd_s + prediction.compute_bwd_s,
                                                               rel=1e-6)


def test_top_kernels_sum_per_name_and_rank():
    events = [("gemm_a", 0.002), ("elementwise", 0.001), ("gemm_a", 0.003), ("gemm_b", 0.004), ("softmax", 0.0005)]
    top = top_kernels(events, count=2)
    assert top == [{"name": "gemm_a", "kind": "matmul", "seconds": pytest.approx(0.005)},
                   {"name": "gemm_b", "kind": "matmul", "seconds": pytest.approx(0.004)}]
    assert len(top_kernels(events)) == 4 and top_kernels([("x" * 300, 1.0)])[0]["name"] == "x" * 120
