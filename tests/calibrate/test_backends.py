"""The backends (calibrate.backends): each device's rules only in its own modules, each backend's features only in
its own fits, the backend chosen by the profile's device, and prediction following the feature list a fit stored."""
import re
from pathlib import Path

import numpy as np
import pytest

from calibrate import backends, shapes
from calibrate.backends import host
from calibrate.coefficients import EfficiencyModel, Tree
from calibrate.cost_model import ProfileCostModel, load_cost_model
from calibrate.fit import fit_compute_families
from calibrate.shipped import shipped_profile
from profiler.errors import UserError
from profiler.profile import Sample

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("kernels", "profiler", "calibrate", "predictor", "paraoracle", "bench")

#: names of PyTorch-CPU and oneDNN rules (matched case-insensitively)
HOST_WORDS = ("onednn", "mkldnn", "avx", "simd", "im2col", "cpu_native", "native_columns", "lane_padd",
              "blocked_buffer")
#: where they may stand: the host backend, and the profiler, which measures the host (tests are not scanned)
HOST_PLACES = ("calibrate/backends/host.py", "calibrate/backends/host_fit.py", "profiler/")
#: names of CUDA libraries' rules
CUDA_WORDS = ("cudnn", "cublas", "cutlass", "tensor_core", "tensor core", "winograd")
#: the generic compute path, which holds no device's rules
GENERIC = ("calibrate/shapes.py", "calibrate/compute.py", "calibrate/cost_model.py", "calibrate/fit.py",
           "calibrate/domain.py", "calibrate/trees.py", "calibrate/gp.py", "calibrate/alphabeta.py",
           "calibrate/coefficients.py", "calibrate/report.py", "calibrate/cost_api.py", "calibrate/backends/__init__.py")
#: words a file may carry all the same, and why: keys of the stored profile format, or another meaning of the word
ALLOWED = {("calibrate/coefficients.py", "simd"): "the stored key Coefficients.host_simd_lanes",
           ("calibrate/coefficients.py", "im2col"): "the stored key ConvWeightFit.im2col (class Im2colFloor)",
           ("calibrate/coefficients.py", "tensor_core"): "the stored key GpuKernelMode.tensor_cores",
           ("calibrate/gpu_kernels.py", "im2col"): "a GPU implicit GEMM's input operand, not the host's rule"}


def _sources():
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            yield path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8")


def _hits(words, where) -> list[str]:
    found = []
    for name, text in _sources():
        if not where(name):
            continue
        for word in words:
            if (name, word) not in ALLOWED and re.search(re.escape(word), text, re.IGNORECASE):
                found.append(f"{name}: {word}")
    return found


def test_no_host_rule_outside_the_host_backend():
    assert _hits(HOST_WORDS, lambda name: not name.startswith(HOST_PLACES)) == []


def test_no_cuda_rule_in_the_generic_compute_path():
    assert _hits(CUDA_WORDS, lambda name: name in GENERIC) == []


def test_allowances_are_still_needed():
    texts = dict(_sources())
    stale = [f"{name}: {word}" for name, word in ALLOWED if word.lower() not in texts[name].lower()]
    assert stale == []


def _conv_samples(device: str) -> list[Sample]:
    rng = np.random.default_rng(0)
    out = []
    for n in (1, 2, 4, 8):
        for c in (4, 16, 32):
            params = dict(N=n, C=c, F=16, H=16, W=16, kernel=3, stride=1, padding=1)
            seconds = 2.0 * n * c * 16 * 9 * 256 / 1e10
            out.append(Sample(benchmark="conv2d", variant="fwd", device=device, dtype="float32", threads=1,
                              params=params, times_s=list(seconds * (1 + 0.02 * rng.standard_normal(3)))))
    return out


def test_each_backend_fits_its_own_features_only():
    gpu = fit_compute_families(_conv_samples("cuda:0"), None, 0, learners=("trees",), workers=1)
    cpu = fit_compute_families(_conv_samples("cpu"), None, 0, learners=("trees",), workers=1)
    assert gpu["conv2d/fwd/float32"].efficiency.features == shapes.FLOP_FEATURES
    assert not set(gpu["conv2d/fwd/float32"].efficiency.features) & host.HostBackend.own_features
    assert cpu["conv2d/fwd/float32"].efficiency.features == host.FLOP_FEATURES == shapes.FLOP_FEATURES + list(
        host.OWN_FEATURES)


def test_the_backend_follows_the_device():
    gpu_model, cpu_model = load_cost_model(shipped_profile("v100-dgx1-8gpu.published")), \
        load_cost_model(str(ROOT / "tests/data/drift_quick_cpu_profile.yaml"))
    assert not gpu_model.backend.device_is_host and cpu_model.backend.device_is_host
    assert backends.for_profile(None, _conv_samples("cpu")).device_is_host
    assert not backends.for_profile(None, _conv_samples("cuda:0")).device_is_host


def test_prediction_follows_the_feature_list_a_fit_stored():
    """A GPU fit from before the split stored the host's two columns (always 0 on a GPU): a tree splitting on one
    of them reads 0 and predicts as a fit without them; a feature no backend computes is refused."""
    model = load_cost_model(shipped_profile("v100-dgx1-8gpu.published"))
    call = ("gemm", "fwd", dict(M=512, N=1024, K=768), "float16")
    fit = model.coefficients.compute["gemm/fwd/float16"]
    before = model.compute_time_s(*call)
    old = list(shapes.FLOP_FEATURES) + list(host.OWN_FEATURES)
    split = Tree(children_left=[1, -1, -1], children_right=[2, -1, -1], feature=[old.index("log_native_columns"), -2, -2],
                 threshold=[0.5, 0.0, 0.0], value=[0.0, 0.0, -5.0])

    def with_efficiency(efficiency):
        compute = {**model.coefficients.compute, "gemm/fwd/float16": fit.model_copy(update={"efficiency": efficiency})}
        coefficients = model.coefficients.model_copy(update={"compute": compute})
        return ProfileCostModel(coefficients, name="t", device_memory_bytes=1e10, devices_per_node=1, provenance="t")

    assert fit.efficiency.features == shapes.FLOP_FEATURES and fit.efficiency.trees  # a GEMM sweep's tree
    stored = fit.efficiency.model_copy(update={"features": old, "trees": fit.efficiency.trees + [split]})
    assert with_efficiency(EfficiencyModel(**stored.model_dump())).compute_time_s(*call) == before
    unknown = fit.efficiency.model_copy(update={"features": shapes.FLOP_FEATURES + ["no_such_feature"]})
    with pytest.raises(UserError, match="no_such_feature"):
        with_efficiency(EfficiencyModel(**unknown.model_dump())).compute_time_s(*call)
