"""Machine metadata for a profile: host, CPU, memory, GPUs (through NVML when present), software versions.

NVML (nvidia-ml-py, `import pynvml`) is optional: a missing library, a missing driver or an unsupported
query leaves the field empty instead of failing (each raises an NVMLError; NVML API reference). Every GPU
query goes through `_nvml_value`, so the collection is testable with a fake NVML module.
"""
from __future__ import annotations

import os
import platform
import socket
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any, Callable, Optional

import psutil
import torch

from profiler.profile import GPUInfo, Machine

# NVML clock-event (throttle) reason bits (nvmlDeviceGetCurrentClocksEventReasons, NVML API reference).
THROTTLE_REASONS = {
    0x1: "GpuIdle", 0x2: "ApplicationsClocksSetting", 0x4: "SwPowerCap", 0x8: "HwSlowdown",
    0x10: "SyncBoost", 0x20: "SwThermalSlowdown", 0x40: "HwThermalSlowdown", 0x80: "HwPowerBrakeSlowdown",
    0x100: "DisplayClockSetting",
}
MAX_NVLINKS = 18  # NVML_NVLINK_MAX_LINKS on Hopper


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> Optional[str]:
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.lower().startswith(("model name", "hardware")) and ":" in line:
                return line.split(":", 1)[1].strip() or None
    except OSError:
        pass
    return platform.processor() or None


def throttle_reason_names(mask: int) -> list[str]:
    """Names of the set bits of an NVML clocks-event-reasons mask (GpuIdle is not a slowdown: skipped)."""
    return [name for bit, name in THROTTLE_REASONS.items() if mask & bit and bit != 0x1]


def _nvml_value(call: Callable[[], Any], default=None):
    """One NVML query; any NVML error (not supported, no permission, ...) gives `default`."""
    try:
        value = call()
    except Exception:  # pynvml raises NVMLError subclasses and, for absent symbols, AttributeError
        return default
    return value.decode() if isinstance(value, bytes) else value


def _gpu_info(nvml, handle) -> GPUInfo:
    memory = _nvml_value(lambda: nvml.nvmlDeviceGetMemoryInfo(handle))
    power_mw = _nvml_value(lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(handle))
    reasons = _nvml_value(lambda: nvml.nvmlDeviceGetCurrentClocksEventReasons(handle))
    if reasons is None:
        reasons = _nvml_value(lambda: nvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle))
    links = [_nvml_value(lambda i=i: nvml.nvmlDeviceGetNvLinkState(handle, i)) for i in range(MAX_NVLINKS)]
    cc = _nvml_value(lambda: nvml.nvmlDeviceGetCudaComputeCapability(handle))
    return GPUInfo(
        name=_nvml_value(lambda: nvml.nvmlDeviceGetName(handle), "unknown GPU"),
        memory_bytes=float(memory.total) if memory is not None else None,
        sm_clock_mhz=_nvml_value(lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)),
        mem_clock_mhz=_nvml_value(lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM)),
        power_limit_w=power_mw / 1000 if power_mw is not None else None,
        temperature_c=_nvml_value(lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)),
        throttle_reasons=throttle_reason_names(int(reasons)) if reasons is not None else [],
        pcie_generation=_nvml_value(lambda: nvml.nvmlDeviceGetCurrPcieLinkGeneration(handle)),
        pcie_width=_nvml_value(lambda: nvml.nvmlDeviceGetCurrPcieLinkWidth(handle)),
        nvlink_links=sum(1 for state in links if state),
        uuid=_nvml_value(lambda: nvml.nvmlDeviceGetUUID(handle)),
        max_sm_clock_mhz=_nvml_value(lambda: nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM)),
        max_mem_clock_mhz=_nvml_value(lambda: nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_MEM)),
        memory_bus_width_bits=_nvml_value(lambda: nvml.nvmlDeviceGetMemoryBusWidth(handle)),
        compute_capability=".".join(str(x) for x in cc) if cc else None,
    )


def nvml_gpus(nvml=None) -> tuple[list[GPUInfo], Optional[str]]:
    """(GPUs, driver version) via NVML; ([], None) when the library or driver is absent."""
    if nvml is None:
        try:
            import pynvml as nvml
        except ImportError:
            return [], None
    try:
        nvml.nvmlInit()
    except Exception:  # NVMLError_LibraryNotFound / DriverNotLoaded on machines without a GPU
        return [], None
    try:
        count = _nvml_value(nvml.nvmlDeviceGetCount, 0)
        gpus = []
        for i in range(count):
            handle = _nvml_value(lambda i=i: nvml.nvmlDeviceGetHandleByIndex(i))
            if handle is not None:
                gpus.append(_gpu_info(nvml, handle))
        return gpus, _nvml_value(nvml.nvmlSystemGetDriverVersion)
    finally:
        _nvml_value(nvml.nvmlShutdown)


def software_versions() -> dict[str, Optional[str]]:
    """Versions of python, torch, CUDA, cuDNN, NCCL, cupy and paraoracle (None where absent)."""
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    nccl = None
    if torch.cuda.is_available():
        try:
            version = torch.cuda.nccl.version()
            nccl = ".".join(str(x) for x in version) if isinstance(version, tuple) else str(version)
        except (RuntimeError, AttributeError):
            nccl = None
    try:
        paraoracle = importlib_metadata.version("paraoracle")
    except importlib_metadata.PackageNotFoundError:
        paraoracle = None
    cupy = None
    for distribution in ("cupy-cuda12x", "cupy-cuda13x", "cupy-cuda11x", "cupy"):
        try:
            cupy = importlib_metadata.version(distribution)
            break
        except importlib_metadata.PackageNotFoundError:
            continue
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": str(cudnn) if cudnn is not None else None,
        "nccl": nccl,
        "cupy": cupy,
        "paraoracle": paraoracle,
    }


def with_sm_counts(gpus: list[GPUInfo]) -> list[GPUInfo]:
    """The GPUs with their SM counts, which NVML does not report, from torch where CUDA runs (unchanged without)."""
    if not torch.cuda.is_available():
        return gpus
    return [g.model_copy(update={"sms": torch.cuda.get_device_properties(i).multi_processor_count})
            if i < torch.cuda.device_count() else g for i, g in enumerate(gpus)]


def collect_machine(device: str = "cpu", nvml=None) -> Machine:
    """Everything the profile records about this machine. `device_memory_bytes` is the memory of one
    GPU (cuda) or the host memory (cpu); `gpus_per_node` is the GPU count (cuda) or 1 (cpu: the host is the one device)."""
    memory_bytes = float(psutil.virtual_memory().total)
    gpus, driver = nvml_gpus(nvml)
    cuda = device.startswith("cuda")
    if cuda and not gpus and torch.cuda.is_available():  # NVML unusable: torch still knows the basics
        props = [torch.cuda.get_device_properties(i) for i in range(torch.cuda.device_count())]
        gpus = [GPUInfo(name=p.name, memory_bytes=float(p.total_memory)) for p in props]
    if cuda:
        gpus = with_sm_counts(gpus)
    device_memory = gpus[0].memory_bytes if cuda and gpus else memory_bytes
    return Machine(
        hostname=socket.gethostname(),
        cpu_model=cpu_model(),
        cpu_cores=psutil.cpu_count(logical=False) or os.cpu_count(),
        cpu_capability=torch.backends.cpu.get_cpu_capability(),
        cpu_threads=os.cpu_count(),
        memory_bytes=memory_bytes,
        gpus=gpus,
        gpus_per_node=len(gpus) if cuda else 1,
        device_memory_bytes=device_memory,
        driver_version=driver,
        versions=software_versions(),
        os=platform.platform(),
    )
