"""Valid inputs the fuzz cases start from: real profiles, a layer spec, a suite, a shapes file, nccl-tests
logs, DeepBench output (text and a workbook), measured runs and a trained correction. Loaded once per process."""
from __future__ import annotations

import copy
import functools
import hashlib
import json
from pathlib import Path

import yaml

from calibrate.shipped import shipped_profile

REPO = Path(__file__).resolve().parents[2]
V100 = shipped_profile("v100-dgx1-8gpu.published")  # links, collectives, framework, fabric
CPU_TREES = REPO / "tests" / "data" / "drift_quick_cpu_profile.yaml"  # compute fits with boosted trees
CPU_SAMPLES = REPO / "tests" / "data" / "drift_cpu_profile.yaml"  # samples, small
NCCL = REPO / "tests" / "data" / "nccl_tests"
DEEPBENCH_V100 = REPO / "calibrate" / "data" / "deepbench" / "DeepBench_NV_V100.xlsx"

SPEC = {"name": "tiny", "input": [3, 16, 16], "layers": [
    {"name": "conv1", "op": "conv2d", "filters": 4, "kernel": 3, "padding": 1},
    {"name": "bn1", "op": "batchnorm"}, {"name": "relu1", "op": "relu"},
    {"name": "dw1", "op": "conv2d", "filters": 4, "kernel": 3, "padding": 2, "dilation": 2, "groups": 4},
    {"name": "up1", "op": "conv_transpose2d", "filters": 4, "kernel": 2, "stride": 2},
    {"name": "pool1", "op": "maxpool", "kernel": 2},
    {"name": "flat", "op": "flatten"}, {"name": "fc", "op": "linear", "out": 10}]}
SUITE = {"warmup": 1, "iterations": 2, "runs": [
    {"model": "small_cnn2d", "knobs": {"width": 4, "image": 16}, "batch": 8, "ranks": 2, "strategies": ["data"]}]}
SHAPES = {"shapes": [
    {"op": "conv2d", "params": {"N": 2, "C": 4, "F": 4, "H": 8, "W": 8, "kernel": 3, "stride": 1, "padding": 1}},
    {"op": "gemm", "params": {"M": 16, "N": 10, "K": 64}, "dtype": "float32"},
    {"op": "relu", "params": {"N": 2, "C": 4, "H": 8, "W": 8}}]}

#: the arguments that make `predictor run` cheap (a tiny zoo model)
RUN_TAIL = ["--model", "small_cnn2d", "--model-arg", "width=4", "--model-arg", "image=16", "--batch", "8", "--gpus", "2"]


def dump(doc) -> str:
    """YAML without anchors (the readers refuse aliases, and a shared sub-document would make one)."""
    class NoAliases(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):
        def ignore_aliases(self, data):
            return True
    return yaml.dump(doc, Dumper=NoAliases, sort_keys=False, default_flow_style=None, width=120)


@functools.lru_cache(maxsize=None)
def _load(path: Path) -> dict:
    return yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def doc(path: Path) -> dict:
    """A fresh deep copy of a YAML document."""
    return copy.deepcopy(_load(path))


@functools.lru_cache(maxsize=None)
def text(path: Path) -> str:
    return path.read_text()


@functools.lru_cache(maxsize=None)
def _runs_text() -> str:
    from calibrate.correction_synthetic import synthetic_runs

    return "".join(json.dumps(r) + "\n" for r in synthetic_runs(models=3, overhead_per_call_s=1e-3, seed=2))


def runs_lines() -> list[str]:
    return _runs_text().splitlines()


@functools.lru_cache(maxsize=None)
def _trained() -> tuple[str, dict]:
    """(profile YAML text, correction document) trained for the V100 profile on synthetic runs."""
    from calibrate.correction import fit_correction, read_runs
    from profiler.profile import load_profile
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        runs = Path(folder) / "runs.jsonl"
        runs.write_text(_runs_text())
        records, _ = read_runs(runs)
    profile = load_profile(V100)
    spec, _ = fit_correction(records, profile, seed=0, runs_source={"path": "runs.jsonl", "sha256": "0" * 64, "rows": len(records)})
    return text(V100), spec.model_dump(mode="json")


def correction_pair(correction_text: str) -> dict[str, str]:
    """Files of a profile referencing `correction_text` by its own sha256 (so that its schema is what is tested)."""
    profile_text, _ = _trained()
    data = yaml.load(profile_text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    data["correction"] = {"path": "p.correction.json", "sha256": hashlib.sha256(correction_text.encode()).hexdigest()}
    return {"p.yaml": dump(data), "p.correction.json": correction_text}


def correction_doc() -> dict:
    return copy.deepcopy(_trained()[1])


# ---- DeepBench -------------------------------------------------------------------------------------------------
def deepbench_text() -> str:
    """What DeepBench's gemm_bench, conv_bench and nccl_single_all_reduce print (code/nvidia/*.cu), two rows each."""
    lines = [f"{'Running training benchmark ':>45}", f"{'Times':>30}", "-" * 88,
             "    m       n      k      a_t     b_t      precision        time (usec) "]
    lines += [f"{m:>7}{n:>7}{k:>7}{0:>7}{0:>7}{'float':>13}{t:>20}" for m, n, k, t in ((1760, 16, 1760, 38),
                                                                                    (2048, 32, 2048, 45))]
    lines += [f"{'Running training benchmark ':>45}", f"{'Times':>30}", "-" * 190,
              "   w      h      c      n      k      f_w    f_h  pad_w  pad_h    stride_w  stride_h    precision  "
              "fwd_time (usec)  bwd_inputs_time (usec)  bwd_params_time (usec)  total_time (usec)   fwd_algo ", "-" * 200]
    for w, h, c, n, k, f in ((56, 56, 64, 8, 64, 3), (28, 28, 128, 8, 128, 3)):
        lines.append(f"{w:>5}{h:>7}{c:>7}{n:>7}{k:>7}{f:>7}{f:>7}{1:>7}{1:>8}{1:>10}{1:>10}{'float':>10}{500:>15}{520:>24}"
                     f"{610:>24}{1630:>19}{'WINOGRAD':>25}")
    lines += [" NCCL AllReduce ", " Num Ranks: 8", "-" * 75, "    # of floats    bytes transferred    Time (msec)   ",
              "-" * 75]
    lines += [f"{floats:>15}{floats * 4:>15}{t:>20}" for floats, t in ((100000, 0.148), (3097600, 2.5057))]
    return "\n".join(lines) + "\n"


def deepbench_rows(result_rows: list[list], specs: bool = True, title: str = "Results FP32") -> bytes:
    """An .xlsx workbook with one result sheet holding `result_rows` (and a Specs sheet)."""
    import io

    import openpyxl

    book = openpyxl.Workbook()
    book.active.title = title
    for row in result_rows:
        book.active.append(row)
    if specs:
        sheet = book.create_sheet("Specs")
        for row in (["GPU Model", "NVIDIA V100"], ["CUDA Version", "10.1.243"], ["Nvidia Driver", 418.67]):
            sheet.append(row)
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


GEMM_TITLE = ["Dense Matrix Multiplication", None, "M", "N", "K", "A Transpose", "B Transpose", None, "Time (msec)"]


def deepbench_workbook() -> bytes:
    """A valid small workbook: two GEMM rows."""
    return deepbench_rows([GEMM_TITLE, [None, "DeepSpeech", 1760, 16, 1760, "N", "N", None, 0.038],
                           [None, "DeepSpeech", 2048, 32, 2048, "T", "N", None, 0.045]])


def zip_with(members: dict[str, bytes], base: bytes | None = None) -> bytes:
    """A zip archive of `base`'s members (a workbook) with `members` added or replacing theirs."""
    import io
    import zipfile

    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        if base is not None:
            with zipfile.ZipFile(io.BytesIO(base)) as source:
                for info in source.infolist():
                    if info.filename not in members:
                        archive.writestr(info.filename, source.read(info.filename))
        for name, data in members.items():
            archive.writestr(name, data)
    return out.getvalue()
