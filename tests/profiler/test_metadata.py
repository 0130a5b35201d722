"""Machine metadata on CPU, and the NVML path with a fake NVML module (no GPU needed)."""
import types

import torch

from profiler import metadata
from profiler.profile import Machine


def test_cpu_machine_metadata():
    m = metadata.collect_machine("cpu", nvml=_broken_nvml())
    assert isinstance(m, Machine)
    assert m.hostname and m.cpu_cores >= 1 and m.memory_bytes > 2**28
    assert m.device_memory_bytes == m.memory_bytes and m.gpus_per_node == 1
    assert m.versions["torch"] and m.versions["python"]
    assert m.gpus == []
    assert m.cpu_capability == torch.backends.cpu.get_cpu_capability()  # the ISA calibrate.shapes pads to


def _broken_nvml():
    def fail():
        raise RuntimeError("NVML Shared Library Not Found")

    return types.SimpleNamespace(nvmlInit=fail)


def test_nvml_absent_gives_no_gpus():
    assert metadata.nvml_gpus(_broken_nvml()) == ([], None)


class FakeNVML:
    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 0, 1, 0

    def __init__(self):
        self.shutdown = False

    def nvmlInit(self): pass
    def nvmlShutdown(self): self.shutdown = True
    def nvmlDeviceGetCount(self): return 2
    def nvmlDeviceGetHandleByIndex(self, i): return i
    def nvmlSystemGetDriverVersion(self): return b"570.1"
    def nvmlDeviceGetName(self, h): return b"NVIDIA H200"
    def nvmlDeviceGetMemoryInfo(self, h): return types.SimpleNamespace(total=141 * 10**9)
    def nvmlDeviceGetClockInfo(self, h, kind): return 1980 if kind == 0 else 3201
    def nvmlDeviceGetEnforcedPowerLimit(self, h): return 700_000
    def nvmlDeviceGetTemperature(self, h, kind): return 41
    def nvmlDeviceGetCurrentClocksEventReasons(self, h): return 0x1 | 0x4 | 0x20
    def nvmlDeviceGetCurrPcieLinkGeneration(self, h): return 5
    def nvmlDeviceGetCurrPcieLinkWidth(self, h): return 16
    def nvmlDeviceGetCudaComputeCapability(self, h): return (9, 0)

    def nvmlDeviceGetNvLinkState(self, h, link):
        if link >= 3:
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")
        return 1


def test_gpu_fields_from_nvml_and_unsupported_queries_left_empty():
    nvml = FakeNVML()
    gpus, driver = metadata.nvml_gpus(nvml)
    assert driver == "570.1" and nvml.shutdown
    assert len(gpus) == 2
    g = gpus[0]
    assert g.name == "NVIDIA H200" and g.memory_bytes == 141e9
    assert g.sm_clock_mhz == 1980 and g.mem_clock_mhz == 3201 and g.power_limit_w == 700
    assert g.temperature_c == 41 and g.pcie_generation == 5 and g.pcie_width == 16
    assert g.nvlink_links == 3
    assert g.throttle_reasons == ["SwPowerCap", "SwThermalSlowdown"]  # GpuIdle is not a slowdown
    assert g.uuid is None  # not in the fake: left empty, no failure
    assert g.compute_capability == "9.0"


def test_cuda_machine_uses_gpu_memory():
    m = metadata.collect_machine("cuda", nvml=FakeNVML())
    assert m.gpus_per_node == 2 and m.device_memory_bytes == 141e9 and m.driver_version == "570.1"


def test_throttle_reason_names():
    assert metadata.throttle_reason_names(0x8 | 0x40 | 0x80) == ["HwSlowdown", "HwThermalSlowdown", "HwPowerBrakeSlowdown"]
    assert metadata.throttle_reason_names(0) == []


def test_cpu_model_from_cpuinfo(tmp_path):
    f = tmp_path / "cpuinfo"
    f.write_text("processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Gold 6148\n")
    assert metadata.cpu_model(f) == "Intel(R) Xeon(R) Gold 6148"


def test_malloc_regime_is_pinned_on_linux():
    """profiler.allocator sets glibc's trim and mmap thresholds (calibration and validation ranks share them)."""
    import sys

    from profiler.allocator import keep_freed_memory

    done = keep_freed_memory()
    if sys.platform.startswith("linux"):
        assert done.startswith("glibc: no trimming")
    else:
        assert done.startswith("unchanged")
