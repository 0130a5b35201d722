"""GPU kernel models fitted to DeepBench's measured kernels (calibrate/data/deepbench), shipped as data for the
GPUs of published profiles: the compute of a profile built from DeepBench alone, with no constant fitted to
training runs (docs/gpu-kernels.md).

    python -m calibrate.deepbench_kernels      # refit from the workbooks, rewrite calibrate/data/deepbench_kernels.yaml

DeepBench names each shape's application in its V100 workbook only; the other workbooks time the same shape list,
so a shape's application is read from any file that names it (the leave-one-application-out figures need it).
Backward-data rows of input layers (fewer than INPUT_LAYER_CHANNELS channels) are left out, as DeepBench's own
V100 sheet leaves them out: no gradient flows into the data, so no training step runs them.
"""
from __future__ import annotations

import argparse
import functools
import json
from pathlib import Path
from typing import Optional, Sequence

from calibrate import gpu_specs
from calibrate.coefficients import GpuKernels
from calibrate.gpu_kernel_fit import fit_gpu_kernels
from profiler import inputs
from profiler.deepbench import DeepBenchRun, read_deepbench
from profiler.errors import UserError
from profiler.profile import Sample, dump_yaml, write_atomic

DATA = Path(__file__).resolve().parent / "data"
WORKBOOKS = tuple(sorted((DATA / "deepbench").glob("*.xlsx")))
KERNELS_FILE = DATA / "deepbench_kernels.yaml"
INPUT_LAYER_CHANNELS = 4


def _shape_key(sample: Sample) -> tuple:
    return sample.benchmark, json.dumps(sample.params, sort_keys=True)


def input_layer_backward_data(sample: Sample) -> bool:
    return sample.benchmark == "conv2d" and sample.variant == "bwd_data" and int(sample.params["C"]) < INPUT_LAYER_CHANNELS


def application_labels(sample_lists: Sequence[Sequence[Sample]]) -> dict[tuple, str]:
    """Shape -> the application any of these samples names for it (DeepBench times one shape list everywhere)."""
    return {_shape_key(s): s.extra["application"] for samples in sample_lists for s in samples
            if s.extra.get("application")}


def with_labels(samples: Sequence[Sample], labels: dict[tuple, str]) -> list[Sample]:
    """The samples, each unnamed one given the application `labels` holds for its shape."""
    return [s if s.extra.get("application") or _shape_key(s) not in labels else
            s.model_copy(update={"extra": {**s.extra, "application": labels[_shape_key(s)]}}) for s in samples]


@functools.lru_cache(maxsize=1)
def carried_labels() -> dict[tuple, str]:
    """application_labels of the workbooks the repository carries (read once per process)."""
    return application_labels([read_deepbench(path)[0] for path in WORKBOOKS])


def labelled(sample_lists: Sequence[Sequence[Sample]], carried: bool = False) -> list[list[Sample]]:
    """The samples, each unnamed one given the application another sample of the same shape names; with `carried`,
    a shape still unnamed takes the carried workbooks' label (DeepBench's Titan X and AMD sheets name none)."""
    labels = application_labels(sample_lists)
    if carried and any(not s.extra.get("application") and _shape_key(s) not in labels
                       for samples in sample_lists for s in samples):
        labels = {**carried_labels(), **labels}
    return [with_labels(samples, labels) for samples in sample_lists]


def read_labelled(files: Sequence[Path], carried: bool = False) -> list[tuple[Path, list[Sample], DeepBenchRun]]:
    """Each file's samples, labelled (`labelled`), input-layer backward-data left out (module docstring)."""
    read = [(Path(path), *read_deepbench(path)) for path in files]
    named = labelled([samples for _, samples, _ in read], carried)
    return [(path, [s for s in samples if not input_layer_backward_data(s)], run)
            for (path, _, run), samples in zip(read, named)]


def fit_workbooks(files: Sequence[Path] = WORKBOOKS) -> dict[str, GpuKernels]:
    """GPU (its calibrate/data/gpus.yaml name) -> the kernel model fitted to its DeepBench rows."""
    by_gpu: dict[str, list[Sample]] = {}
    for path, samples, run in read_labelled(files):
        spec = gpu_specs.find_spec(run.gpu or "")
        if spec is None:
            raise UserError(f"{path}: GPU {run.gpu!r} is not in calibrate/data/gpus.yaml")
        by_gpu.setdefault(spec.name, []).extend(samples)
    out = {}
    for name, samples in sorted(by_gpu.items()):
        kernels = fit_gpu_kernels(samples, name)
        if kernels is not None:
            out[name] = kernels.model_copy(update={"sources": kernels.sources + [
                "DeepBench training results (Baidu Research, Apache-2.0; calibrate/data/deepbench), "
                "cuBLAS/cuDNN timed with cuDNN's algorithm search"]})
    return out


@functools.lru_cache(maxsize=None)
def load_kernels(path: Path = KERNELS_FILE) -> dict[str, GpuKernels]:
    data = inputs.read_yaml(path, "GPU kernel models")
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping of GPU name -> kernel model")
    from pydantic import ValidationError

    try:
        return {str(name): GpuKernels.model_validate(entry) for name, entry in data.items()}
    except ValidationError as err:
        e = err.errors()[0]
        raise UserError(f"{path}: field {'.'.join(str(p) for p in e['loc'])}: {e['msg']}") from None


def kernels_for(gpu_name: str, float32_peak_flops_per_s: Optional[float] = None) -> Optional[GpuKernels]:
    """The DeepBench kernel model of a GPU's chip (None when DeepBench has none), its peaks scaled to
    `float32_peak_flops_per_s` where given: the same silicon at another clock (DeepBench's P100 is the PCIe card
    at 1303 MHz, a DGX-1's the SXM2 at 1480 MHz)."""
    spec = gpu_specs.find_spec(gpu_name)
    kernels = load_kernels().get(spec.name) if spec else None
    if kernels is None or float32_peak_flops_per_s is None:
        return kernels
    factor = float32_peak_flops_per_s / spec.peak_flops_per_s["float32"]
    modes = {dtype: mode.model_copy(update={"peak_flops_per_s": mode.peak_flops_per_s * factor,
                                            "fallback_flops_per_s": mode.fallback_flops_per_s * factor})
             for dtype, mode in kernels.modes.items()}
    return kernels.model_copy(update={"modes": modes, "sources": kernels.sources + [
        f"peaks scaled by {factor:.3f}: this GPU's FP32 peak over DeepBench's card's"]})


def write_kernels_main(argv, description: str, default: Path, fit, header: str) -> int:
    """The command that refits kernel models (`fit()`: GPU -> GpuKernels) and writes them to --out."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--out", type=Path, default=default, help="file to write (default: %(default)s)")
    args = parser.parse_args(argv)
    models = fit()
    write_atomic(args.out, header + dump_yaml({name: m.model_dump(mode="json", exclude_none=True)
                                                for name, m in models.items()}))
    print(f"{args.out}: {', '.join(models)}")
    return 0


def main(argv=None) -> int:
    return write_kernels_main(argv, __doc__.splitlines()[0], KERNELS_FILE, fit_workbooks, (
        "# GPU kernel models fitted to DeepBench's measured kernels: `python -m calibrate.deepbench_kernels`\n"
        "# writes this file from calibrate/data/deepbench; do not edit by hand.\n"))


if __name__ == "__main__":
    raise SystemExit(main())
