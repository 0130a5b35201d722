"""`profiler import-deepbench`: DeepBench workbooks (a small one written here with openpyxl, and Baidu's V100
workbook in calibrate/data/deepbench) and the text tables DeepBench's binaries print, laid out here with the
widths of code/nvidia/gemm_bench.cu, conv_bench.cu, nccl_single_all_reduce.cu, nccl_mpi_all_reduce.cu and
osu_allreduce/osu_coll.c (their figures are synthetic)."""
import io
import subprocess
import sys
from collections import Counter
from pathlib import Path

import openpyxl
import pytest

from paraoracle.cli import profiler_main as main
from profiler.deepbench import read_deepbench
from profiler.errors import UserError
from profiler.profile import load_profile

DATA = Path(__file__).resolve().parents[2] / "calibrate" / "data" / "deepbench"
V100 = DATA / "DeepBench_NV_V100.xlsx"
P100 = DATA / "DeepBench_NV_P100.xlsx"

# ---- a small workbook ------------------------------------------------------------------------------------------
#: the 1080 Ti layout of the convolution header (R before S, pad_h before pad_w, vertical stride first)
CONV_HEADER = [None, None, "W", "H", "C", "N", "K ", "R", "S", "pad_h", "pad_w", "Vertical stride", "Horizontal stride",
               "Forward (msec)", "wrt Inputs (msec)", "wrt Parameters (msec)", None, "P", "Q", "Total Time (msec)",
               "FWD TERAFLOPS", "BWD INPUTS TERAFLOPS", "BWD PARMS TERAFLOPS", "Forward Algorithm"]


def _conv_row(app, w, h, c, n, k, r, s, pad_h, pad_w, v, hs, fwd, bwd_in, bwd_w, algo):
    return [None, app, w, h, c, n, k, r, s, pad_h, pad_w, v, hs, fwd, bwd_in, bwd_w, None, 0, 0, 0, 0, 0, 0, algo]


def small_workbook(path: Path, fp16: bool = False) -> Path:
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Results - FP16 ip, Mixed math" if fp16 else "Results - FP32"
    rows = [
        ["Precision", "16 bit inputs, 16 bit multiplication, 32 bit addition" if fp16 else "Float"],
        [],
        ["Dense Matrix Multiplication", None, "M", "N", "K", "A Transpose", "B Transpose", None, "Time (msec)",
         "TERAFLOPS"],
        [None, "DeepSpeech", 1760, 16, 1760, "N", "N", None, 0.038, 2.6],
        [None, "DeepSpeech", 2560, 7133, 2560, "N", "T", "(both matrices are 2560x7133)", 7.058, 13.2],
        [],
        [None, "Speaker ID", 1024, 700, 512, "T", "N", None, 0.071, 10.3],
        [],
        ["Convolution"],
        CONV_HEADER,
        _conv_row("DeepSpeech", 700, 161, 1, 4, 32, 5, 20, 0, 0, 2, 2, 0.078, "N/A*", 0.127, "IMPLICIT_GEMM"),
        [],
        _conv_row("Resnet", 56, 56, 64, 8, 64, 3, 3, 1, 1, 1, 1, 0.5, 0.52, 0.61, "WINOGRAD"),
        _conv_row("Vision", 224, 224, 3, 8, 64, 7, 7, 3, 3, 2, 2, "fast", 0.3, 0.4, "IMPLICIT_GEMM"),
        [None, None, None, "* = The backward pass wrt inputs is excluded for these kernels"],
        [],
        ["Recurrent Layers - LSTM", "Source", "Hidden Units", "N", "Timesteps", None, "Time Forward (msec)"],
        [None, "Machine Translation", 512, 16, 25, None, 1.095],
        [],
        ["All-Reduce", None, "Size # floats", "# chips / accelerator cards", None, None, "Mean All Reduce Time (msec)",
         None, "Gigabytes/sec", "Selected Algorithm", "Std Dev All Reduce Time (msec)"],
        [],
        [None, None, 100000, 8, None, None, 0.148, None, 21.6, "NCCL 2.0 MPI", 0.0027],
        [None, None, 16777216, 16, 2, None, 56.9, None, 18.9, "Baidu RingAllReduce", 0.53],
        [None, None, 3097600, 32, 4, None, None, None, None, "OSU MPI"],
    ]
    for row in rows:
        sheet.append(row)
    specs = book.create_sheet("Specs")
    for row in (["CPU Model", "Intel(R) Xeon(R) CPU E5-2698 v4 @ 2.20GHz"], ["GPU Model", "NVIDIA V100"],
                ["CUDA Version", "10.1.243"], ["Cudnn Version", "7.6.2.24"], ["OpenMPI Version", "-"],
                ["Nvidia Driver", 418.67]):
        specs.append(row)
    book.save(path)
    return path


def test_small_workbook_rows_become_samples(tmp_path):
    path = small_workbook(tmp_path / "mine.xlsx")
    samples, run = read_deepbench(path)
    kinds = Counter((s.benchmark, s.variant) for s in samples)
    assert kinds == {("gemm", "fwd"): 3, ("conv2d", "fwd"): 2, ("conv2d", "bwd_data"): 2, ("conv2d", "bwd_weight"): 3,
                     ("allreduce", "throughput"): 2}
    assert run.skipped == {"n/a": 1, "bad value": 1, "recurrent": 1, "no time": 1}
    assert (run.gpu, run.cpu_model) == ("NVIDIA V100", "Intel(R) Xeon(R) CPU E5-2698 v4 @ 2.20GHz")
    assert run.versions == {"cuda": "10.1.243", "cudnn": "7.6.2.24", "driver": "418.67"}
    assert run.sheets == ["Results - FP32"] and run.gpus_per_node == 8 and run.nodes == 2

    gemm = samples[1]
    assert gemm.params == {"M": 2560, "N": 7133, "K": 2560, "transpose_a": False, "transpose_b": True}
    assert gemm.times_s == [pytest.approx(7.058e-3)] and gemm.flops == 2.0 * 2560 * 7133 * 2560
    assert gemm.dtype == "float32" and gemm.device == "cuda" and gemm.threads == 1
    assert gemm.extra["math"] == "fp32" and gemm.extra["application"] == "DeepSpeech"
    assert gemm.extra["note"] == "(both matrices are 2560x7133)" and gemm.extra["gpu"] == "NVIDIA V100"
    assert gemm.extra["source"] == "mine.xlsx:Results - FP32:5" and len(gemm.extra["source_sha256"]) == 64

    first = [s for s in samples if s.benchmark == "conv2d" and s.extra["source"].endswith(":11")]
    assert [s.variant for s in first] == ["fwd", "bwd_weight"]  # wrt inputs is N/A*: skipped, not guessed
    fwd, bwd_weight = first
    assert fwd.params == {"N": 4, "C": 1, "H": 161, "W": 700, "F": 32, "kernel": [5, 20], "stride": [2, 2],
                          "padding": [0, 0]}
    assert fwd.flops == 2.0 * 4 * 32 * 1 * 5 * 20 * 79 * 341  # P = (161 - 5) // 2 + 1, Q = (700 - 20) // 2 + 1
    assert fwd.extra["algorithm"] == "IMPLICIT_GEMM" and "algorithm" not in bwd_weight.extra
    assert bwd_weight.times_s == [pytest.approx(0.127e-3)]

    reduce_ = [s for s in samples if s.benchmark == "allreduce"]
    assert reduce_[0].params == {"size_bytes": 400000, "group": {"size": 8, "nodes": 1}}
    assert reduce_[1].params == {"size_bytes": 4 * 16777216, "group": {"size": 16, "nodes": 2}}
    assert reduce_[1].extra["implementation"] == "Baidu RingAllReduce"
    assert reduce_[1].extra["std_s"] == pytest.approx(0.53e-3)
    assert reduce_[1].extra["bandwidth_bytes_per_s"] == pytest.approx(18.9e9)


def test_fp16_sheets_carry_their_math(tmp_path):
    samples, _ = read_deepbench(small_workbook(tmp_path / "half.xlsx", fp16=True))
    gemm = samples[0]
    assert gemm.dtype == "float16" and gemm.extra["math"] == "tensor_core"
    assert gemm.bytes_moved == 2 * (1760 * 1760 + 1760 * 16 + 1760 * 16)
    p100, _ = read_deepbench(P100)
    # its binaries (@7b75e76) ran cuBLAS in FP32 arithmetic and cuDNN convolutions in true half
    pseudo = {(s.benchmark, s.extra["math"]) for s in p100 if s.dtype == "float16" and s.benchmark in ("gemm", "conv2d")}
    assert pseudo == {("gemm", "fp16_storage_fp32_math"), ("conv2d", "fp16")}


def test_headers_are_found_by_text_not_position(tmp_path):
    """The V100 layout (S before R, pad_w first, horizontal stride first) gives the same shape."""
    path = tmp_path / "v100_layout.xlsx"
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Results FP32"
    sheet.append(["Convolution"])
    sheet.append([None, None, "W", "H", "C", "N", "K ", "S (Filter width)", "R (Filter height)", "pad_w", "pad_h",
                  "Horizontal stride", "Vertical stride", "Forward (msec)", "wrt Inputs (msec)",
                  "wrt Parameters (msec)", None, "P", "Q", "Total Time (msec)", "Forward Algorithm"])
    sheet.append([None, "DeepSpeech", 700, 161, 1, 4, 32, 20, 5, 0, 0, 2, 2, 0.078, 0.1, 0.127, None, 341, 79, 0.3,
                  "IMPLICIT_GEMM"])
    book.save(path)
    samples, _ = read_deepbench(path)
    assert samples[0].params["kernel"] == [5, 20] and len(samples) == 3


# ---- the binaries' text output ---------------------------------------------------------------------------------
def gemm_bench_text(rows) -> str:
    """gemm_bench.cu's layout: a_t and b_t come out as 0 / 1 (`cout << setw(7) << a_t ? "t" : "n"` prints the bool)."""
    lines = [f"{'Running training benchmark ':>45}", f"{'Times':>30}", "-" * 88,
             "    m       n      k      a_t     b_t      precision        time (usec) "]
    for m, n, k, a_t, b_t, precision, time_us in rows:
        lines.append(f"{m:>7}{n:>7}{k:>7}{int(a_t):>7}{int(b_t):>7}{precision:>13}{time_us:>20}")
    return "\n".join(lines) + "\n"


def conv_bench_text(rows) -> str:
    lines = [f"{'Running training benchmark ':>45}", f"{'Times':>30}", "-" * 190,
             "   w      h      c      n      k      f_w    f_h  pad_w  pad_h    stride_w  stride_h    precision  "
             "fwd_time (usec)  bwd_inputs_time (usec)  bwd_params_time (usec)  total_time (usec)   fwd_algo ", "-" * 200]
    for w, h, c, n, k, s, r, pad_w, pad_h, ws, hs, precision, fwd, bi, bp, algo in rows:
        lines.append(f"{w:>5}{h:>7}{c:>7}{n:>7}{k:>7}{s:>7}{r:>7}{pad_w:>7}{pad_h:>8}{ws:>10}{hs:>10}{precision:>10}"
                     f"{fwd:>15}{bi:>24}{bp:>24}{fwd + bi + bp:>19}{algo:>25}")
    return "\n".join(lines) + "\n"


def nccl_text(title: str, ranks: int, rows, max_time: bool) -> str:
    header = ("    # of floats    bytes transferred    Avg Time (msec)    Max Time (msec)" if max_time
              else "    # of floats    bytes transferred    Time (msec)   ")
    lines = [f" {title} ", f" Num Ranks: {ranks}", "-" * (100 if max_time else 75), header,
             "-" * (100 if max_time else 75)]
    for row in rows:
        lines.append(f"{row[0]:>15}{row[0] * 4:>15}" + "".join(f"{t:>20}" for t in row[1:]))
    return "\n".join(lines) + "\n"


def osu_text(ranks: int, rows) -> str:
    lines = ["# OSU MPI-CUDA Allreduce Latency Test", f"# Number of Ranks {ranks}", f"{'# Size':<10}{'Avg Latency(ms)':>20}"]
    lines += [f"{size:<10}{avg:>20.2f}" for size, avg in rows]
    return "\n".join(lines) + "\n"


def test_text_tables_of_every_binary(tmp_path):
    path = tmp_path / "deepbench_run.txt"
    path.write_text(
        gemm_bench_text([(1760, 16, 1760, False, False, "float", 38), (2560, 7133, 2560, False, True, "float", 7058),
                         (512, 8, 500000, True, False, "half", 0)])
        + conv_bench_text([(700, 161, 1, 4, 32, 20, 5, 0, 0, 2, 2, "float", 78, 160, 127, "IMPLICIT_GEMM"),
                           (56, 56, 64, 8, 64, 3, 3, 1, 1, 1, 1, "half", 500, 520, 610, "WINOGRAD")])
        + nccl_text("NCCL AllReduce", 8, [(100000, 0.148), (3097600, 2.5057)], max_time=False)
        + nccl_text("NCCL MPI AllReduce", 16, [(100000, 0.5046, 0.52)], max_time=True)
        + osu_text(32, [(100000, 0.81), (3097600, 4.63)]))
    samples, run = read_deepbench(path)
    kinds = Counter((s.benchmark, s.variant, s.dtype) for s in samples)
    assert kinds == {("gemm", "fwd", "float32"): 2, ("conv2d", "fwd", "float32"): 1, ("conv2d", "bwd_data", "float32"): 1,
                     ("conv2d", "bwd_weight", "float32"): 1, ("conv2d", "fwd", "float16"): 1,
                     ("conv2d", "bwd_data", "float16"): 1, ("conv2d", "bwd_weight", "float16"): 1,
                     ("allreduce", "throughput", "float32"): 5}
    assert run.skipped == {"zero time": 1} and run.gpu is None
    assert run.sheets == ["gemm_bench", "conv_bench", "nccl_single_all_reduce", "nccl_mpi_all_reduce", "osu_allreduce"]
    gemm = samples[1]
    assert gemm.params == {"M": 2560, "N": 7133, "K": 2560, "transpose_a": False, "transpose_b": True}
    assert gemm.times_s == [pytest.approx(7058e-6)] and gemm.extra["source"] == "deepbench_run.txt:6"
    conv = [s for s in samples if s.benchmark == "conv2d"]
    assert conv[0].params == {"N": 4, "C": 1, "H": 161, "W": 700, "F": 32, "kernel": [5, 20], "stride": [2, 2],
                              "padding": [0, 0]}
    assert [s.times_s[0] for s in conv[:3]] == [pytest.approx(t * 1e-6) for t in (78, 160, 127)]
    assert conv[0].extra["algorithm"] == "IMPLICIT_GEMM" and conv[3].extra["math"] == "fp16_storage_fp32_math"
    reduce_ = [s for s in samples if s.benchmark == "allreduce"]
    assert reduce_[0].params == {"size_bytes": 400000, "group": {"size": 8, "nodes": 1}}
    assert reduce_[0].times_s == [pytest.approx(0.148e-3)]
    assert reduce_[2].params == {"size_bytes": 400000, "group": {"size": 16}}  # an MPI job's nodes are not printed
    assert reduce_[2].extra["max_time_s"] == pytest.approx(0.52e-3)
    assert reduce_[4].params["group"] == {"size": 32} and reduce_[4].extra["implementation"] == "OSU MPI"
    assert run.gpus_per_node == 8


def test_text_of_the_rocm_and_arm_binaries(tmp_path):
    """code/amd/gemm_bench.cpp and conv_bench_rocm.cpp print no precision column (rocBLAS SGEMM; MIOpen in float,
    its default) and name MIOpen's forward algorithm; code/arm/gemm_bench.cc times gemmlowp's int8 products in ms."""
    rocm = tmp_path / "rocm.txt"
    rocm.write_text("\n".join([
        f"{'Times':>30}", "-" * 88, "    m       n      k      a_t     b_t      time (usec) ",
        f"{1760:>7}{16:>7}{1760:>7}{'n':>7}{'n':>7}{35:>13}", f"{2560:>7}{7000:>7}{2560:>7}{'n':>7}{'t':>7}{6000:>13}",
        f"{'Times':>30}", "-" * 190,
        "   w      h      c      n      k      f_w      f_h    pad_w  pad_h    stride_w  stride_h    fwd_time (usec)  "
        "bwd_inputs_time (usec)  bwd_params_time (usec)  total_time (usec)   fwd_algo ", "-" * 190,
        f"{700:>5}{161:>7}{1:>7}{4:>7}{32:>7}{20:>7}{5:>7}{0:>7}{0:>8}{2:>10}{2:>10}{300:>14}{400:>24}{500:>24}"
        f"{1200:>19}{'miopenConvolutionFwdAlgoGEMM':>30}",
        f"{'Totals':>82}{300:>14}{400:>24}{500:>24}{1200:>19}"]) + "\n")
    samples, run = read_deepbench(rocm)
    assert run.sheets == ["gemm_bench (ROCm)", "conv_bench_rocm"] and run.skipped == {"unrecognised line": 1}
    assert [(s.benchmark, s.variant, s.dtype) for s in samples] == [
        ("gemm", "fwd", "float32"), ("gemm", "fwd", "float32"), ("conv2d", "fwd", "float32"),
        ("conv2d", "bwd_data", "float32"), ("conv2d", "bwd_weight", "float32")]
    assert samples[1].params["transpose_b"] is True and samples[1].times_s == [pytest.approx(6e-3)]
    conv = samples[2]
    assert conv.params["kernel"] == [5, 20] and conv.params["stride"] == [2, 2] and conv.times_s == [pytest.approx(3e-4)]
    assert conv.extra["algorithm"] == "miopenConvolutionFwdAlgoGEMM"
    arm = tmp_path / "arm.txt"
    arm.write_text(f"{'Times':>30}\n    m       n      k      a_t    b_t    time (msec)     GOPS \n"
                   f"{5124:>7}{700:>7}{2048:>7}{'n':>7}{'n':>7}{120.5:>13}{122.3:>13}\n")
    with pytest.raises(UserError, match="1 int8"):
        read_deepbench(arm)


def test_text_not_supported_and_malformed_rows_are_counted(tmp_path):
    text = gemm_bench_text([(1760, 16, 1760, False, False, "float", 38), (1760, 32, 1760, False, False, "float", 41)])
    text = text.replace(f"{41:>20}", f"{'Not Supported':>20}").replace(f"{1760:>7}{16:>7}", f"{1760:>7}{'x16':>7}")
    path = tmp_path / "gemm.txt"
    path.write_text(text + "Segmentation fault\n")
    with pytest.raises(UserError, match="no timed GEMM, convolution or all-reduce row") as err:
        read_deepbench(path)
    assert "1 not supported" in str(err.value) and "1 bad value" in str(err.value)
    assert "1 unrecognised line" in str(err.value) and str(path) in str(err.value)


# ---- bad files -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("content, expected", [
    (lambda: V100.read_bytes()[:20000], "not a readable .xlsx workbook"),
    (lambda: b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe", "neither an .xlsx workbook nor DeepBench text"),
    (lambda: b"a,b,c\n1,2,3\n", "neither an .xlsx workbook nor DeepBench benchmark output"),
    (lambda: b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 100, r"\.xls\) workbook"),
])
def test_bad_files_are_one_line_errors(tmp_path, content, expected):
    bad = tmp_path / "results.xlsx"
    bad.write_bytes(content())
    with pytest.raises(UserError, match=expected) as err:
        read_deepbench(bad)
    assert str(bad) in str(err.value) and "\n" not in str(err.value)


def test_workbook_without_blocks_or_with_a_missing_column(tmp_path):
    empty = tmp_path / "empty.xlsx"
    book = openpyxl.Workbook()
    book.active.append(["hello", "world"])
    book.save(empty)
    with pytest.raises(UserError, match="no DeepBench block found"):
        read_deepbench(empty)
    broken = tmp_path / "broken.xlsx"
    book = openpyxl.Workbook()
    book.active.title = "FP32"
    book.active.append(["Dense Matrix Multiplication", None, "M", "N", "K", "A Transpose", "B Transpose", None])
    book.save(broken)
    with pytest.raises(UserError, match=r"sheet 'FP32' row 1: Dense Matrix Multiplication block has no 'time' column"):
        read_deepbench(broken)


def inference_workbook(path: Path) -> Path:
    """DeepBench's inference layout (results/inference/server/*.xlsx): int8 GEMMs and convolutions (a device sheet's
    forward column without a unit), a sparse GEMM block with its sparse and dense times, recurrent layers."""
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Results - Mixed Precision"
    for row in (["Precision", "GEMM, Conv: Int8 multiplication, 32 bit accumulation"],
                ["Sparse Ops, RNN: single precision"],
                ["Dense Matrix Multiplication", "M", "N", "K", "A Transpose", "B Transpose", "Time (msec)", "TERAFLOPS"],
                [None, 5124, 700, 2048, "N", "N", 0.2, 73.4], [None, 35, 700, 2048, "N", "N", 0.01, 10.0],
                ["Sparse Matrix Multiplication", "M", "N", "K", "A Transpose", "B Transpose", "Sparsity",
                 "Sparse Time (msec)", "Dense Time (msec)", "SparseTERAFLOPS", "Speedup wrt dense"],
                [None, 7680, 1, 2560, "N", "N", 0.95, 0.03, 0.05, 0.06, 1.7],
                ["Convolution"],
                [None, None, "W (input - time)", "H (input)", "C (channels)", "N (batch size)",
                 "K  (number of filters)", "S (filter width)", "R (filter height)", "pad_w", "pad_h",
                 "Horizontal Stride", "Vertical Stride", "Forward"],
                [None, None, 700, 161, 1, 4, 32, 20, 5, 0, 0, 2, 2, 0.05],
                ["Recurrent Layers - LSTM", "Input", "N", "Timesteps", "Time Forward (msec) "], [None, 512, 1, 25, 0.1]):
        sheet.append(row)
    specs = book.create_sheet("Specs")
    specs.append(["GPU Model", "NVIDIA T4"])
    book.save(path)
    return path


def test_inference_workbooks_are_counted_not_misread(tmp_path):
    """Int8 rows are never read as float16 (the sheet says 'mixed' too), a sparse block is not a GEMM block missing
    its time column: the file holds nothing to import, and the one-line error says what it skipped."""
    with pytest.raises(UserError, match=r"no timed GEMM.*3 int8.*1 sparse|no timed GEMM.*1 sparse.*3 int8") as err:
        read_deepbench(inference_workbook(tmp_path / "t4_inference.xlsx"))
    assert "\n" not in str(err.value) and "1 recurrent" in str(err.value)
    # beside a training sheet, the training rows are read and the others counted
    path = small_workbook(tmp_path / "both.xlsx")
    book = openpyxl.load_workbook(path)
    sheet = book.create_sheet("Results - Int8")
    for row in (["Precision", "Int8 inputs 32 bit math"], ["Sparse Matrix Multiplication", "M", "N", "K",
                "A Transpose", "B Transpose", "Sparsity", "Sparse Time (msec)", "Dense Time (msec)"],
                [None, 7680, 1, 2560, "N", "N", 0.95, 0.03, 0.05],
                ["Dense Matrix Multiplication", "M", "N", "K", "A Transpose", "B Transpose", "Time (msec)"],
                [None, 5124, 700, 2048, "N", "N", 0.2]):
        sheet.append(row)
    book.save(path)
    samples, run = read_deepbench(path)
    assert run.skipped["int8"] == 1 and run.skipped["sparse"] == 1
    assert {s.dtype for s in samples} == {"float32"} and len(samples) == 12  # the small workbook's twelve


def cpu_workbook(path: Path) -> Path:
    """Intel's Xeon Phi layout (results/train/DeepBench_IA_KNL7250.xlsx): no GPU, one process per node."""
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Results - FP32"
    for row in (["Precision", "Float"],
                ["Dense Matrix Multiplication", "M", "N", "K", "A Transpose", "B Transpose", "Time (msec)", "TERAFLOPS"],
                [None, 1760, 16, 1760, "N", "N", 0.3, 0.33],
                ["All-Reduce", "Size # floats", "# nodes (1 process per node)", "Mean All Reduce Time (msec)",
                 "Gigabytes/sec", "Selected Algorithm", "Std Dev All Reduce Time (msec)"],
                [None, 100000, 4, 0.2, 2.0, "MLSL", 0.01], [None, 100000, 16, 0.5, 0.8, "MLSL", 0.02]):
        sheet.append(row)
    specs = book.create_sheet("Specs")
    specs.append(["CPU Model", "Intel(R) Xeon Phi(TM) 7250F"])
    specs.append(["Intel MKL Version", "MKL 2017.3"])
    book.save(path)
    return path


def test_a_cpu_workbook_is_a_cpu_profile(tmp_path, capsys):
    path = cpu_workbook(tmp_path / "knl.xlsx")
    samples, run = read_deepbench(path)
    assert run.gpu is None and run.device == "cpu" and {s.device for s in samples} == {"cpu"}
    reduces = [s for s in samples if s.benchmark == "allreduce"]
    assert [(s.params["group"]["size"], s.params["group"]["nodes"]) for s in reduces] == [(4, 4), (16, 16)]
    assert main(["import-deepbench", str(path), "--out", str(tmp_path / "knl.yaml")]) == 0
    assert "CPU: Intel(R) Xeon Phi(TM) 7250F" in capsys.readouterr().out
    profile = load_profile(tmp_path / "knl.yaml")
    assert profile.machine.gpus == [] and profile.machine.nodes == 16 and profile.machine.gpus_per_node == 1
    assert main(["import-deepbench", str(path), "--gpu", "V100", "--out", str(tmp_path / "x.yaml")]) == 2
    assert "timed a CPU" in capsys.readouterr().err
    both = small_workbook(tmp_path / "v100.xlsx")
    assert main(["import-deepbench", str(path), str(both), "--out", str(tmp_path / "y.yaml")]) == 2


def test_cli_error_is_one_line_exit_2(tmp_path):
    cut = tmp_path / "cut.xlsx"
    cut.write_bytes(V100.read_bytes()[:30000])
    done = subprocess.run([sys.executable, "-m", "paraoracle.cli", "import-deepbench", str(cut),
                           "--out", str(tmp_path / "o.yaml")], capture_output=True, text=True)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and str(cut) in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "o.yaml").exists()


# ---- Baidu's V100 workbook -------------------------------------------------------------------------------------
#: counted by reading the sheets: 160 GEMM rows in each precision; 94 convolution rows, 10 of them with "N/A*" wrt
#: inputs (the DeepSpeech and first-layer kernels); 53 recurrent rows (12 vanilla, 22 LSTM, 19 GRU) per sheet; 25
#: all-reduce rows in the FP32 sheet, none with a time
V100_COUNTS = {("gemm", "fwd", "float32"): 160, ("gemm", "fwd", "float16"): 160,
               ("conv2d", "fwd", "float32"): 94, ("conv2d", "fwd", "float16"): 94,
               ("conv2d", "bwd_data", "float32"): 84, ("conv2d", "bwd_data", "float16"): 84,
               ("conv2d", "bwd_weight", "float32"): 94, ("conv2d", "bwd_weight", "float16"): 94}


def test_v100_workbook_counts_and_a_known_row():
    samples, run = read_deepbench(V100)
    assert Counter((s.benchmark, s.variant, s.dtype) for s in samples) == V100_COUNTS
    assert run.skipped == {"recurrent": 106, "n/a": 20, "no time": 25}
    assert run.gpu == "NVIDIA V100" and run.versions == {"cuda": "10.1.243", "cudnn": "7.6.2.24", "driver": "418.67"}
    assert run.sheets == ["Results FP32", "Results - FP16 ip, Mixed math"] and run.gpus_per_node == 8
    # Results FP32 row 5: DeepSpeech, 1760 x 16 x 1760, N, N, 0.038 ms
    first = samples[0]
    assert first.extra["source"] == "DeepBench_NV_V100.xlsx:Results FP32:5"
    assert first.params == {"M": 1760, "N": 16, "K": 1760, "transpose_a": False, "transpose_b": False}
    assert first.times_s == [0.038 / 1000] and first.extra["application"] == "DeepSpeech"
    # Results FP32 row 250: Resnet 7x7x512, N 8, K 512, 3x3, pad 1, stride 1: 0.236 / 0.244 / 0.136 ms, Winograd
    row = [s for s in samples if s.extra["source"] == "DeepBench_NV_V100.xlsx:Results FP32:250"]
    assert [(s.variant, s.times_s[0]) for s in row] == [("fwd", 0.236 / 1000), ("bwd_data", 0.244 / 1000),
                                                         ("bwd_weight", 0.136 / 1000)]
    assert row[0].params == {"N": 8, "C": 512, "H": 7, "W": 7, "F": 512, "kernel": [3, 3], "stride": [1, 1],
                             "padding": [1, 1]}
    assert row[0].extra["algorithm"] == "WINOGRAD_NONFUSED" and row[0].extra["math"] == "fp32"


def test_v100_flops_match_the_sheets_teraflops():
    """Our 2MNK and 2NFCRSPQ against the workbook's own TERAFLOPS columns (time x TFLOP/s)."""
    samples, _ = read_deepbench(V100)
    book = openpyxl.load_workbook(io.BytesIO(V100.read_bytes()), read_only=True, data_only=True)
    sheets = {ws.title: list(ws.iter_rows(values_only=True)) for ws in book.worksheets}
    checked = 0
    for s in samples:
        if s.variant != "fwd":
            continue
        _, sheet, number = s.extra["source"].split(":")
        row = sheets[sheet][int(number) - 1]
        teraflops = row[9] if s.benchmark == "gemm" else row[20]
        assert s.flops / s.times_s[0] / 1e12 == pytest.approx(teraflops, rel=1e-6)
        checked += 1
    assert checked == 160 * 2 + 94 * 2


# ---- the command -----------------------------------------------------------------------------------------------
def test_cli_writes_merges_and_refuses_to_overwrite(tmp_path, capsys):
    small = small_workbook(tmp_path / "small.xlsx")
    out = tmp_path / "deepbench.yaml"
    assert main(["import-deepbench", str(small), "--out", str(out)]) == 0
    line = capsys.readouterr().out
    assert "12 samples from 1 DeepBench file(s) (NVIDIA V100)" in line
    assert "skipped: " in line and "1 n/a" in line and "1 recurrent" in line and len(line.strip().splitlines()) == 1
    profile = load_profile(out)
    assert len(profile.samples) == 12 and profile.provenance.kind == "calibrated"
    assert "small.xlsx" in profile.provenance.source and profile.settings["imported"] == "deepbench"
    machine = profile.machine
    assert machine.gpus[0].name == "NVIDIA V100" and machine.gpus_per_node == 8 and machine.nodes == 2
    assert machine.cpu_model == "Intel(R) Xeon(R) CPU E5-2698 v4 @ 2.20GHz"
    assert machine.versions == {"cuda": "10.1.243", "cudnn": "7.6.2.24", "driver": "418.67"}

    assert main(["import-deepbench", str(small), "--out", str(out)]) == 2  # exists, no --force
    assert "--force" in capsys.readouterr().err
    assert main(["import-deepbench", str(small), "--out", str(out), "--force"]) == 0

    text = tmp_path / "gemm.txt"
    text.write_text(gemm_bench_text([(1024, 700, 512, False, False, "float", 67)]))
    assert main(["import-deepbench", str(text), "--into", str(out)]) == 0
    assert main(["import-deepbench", str(text), "--into", str(out)]) == 0  # same file again: replaced
    merged = load_profile(out)
    assert len(merged.samples) == 13 and "replacing 1" in capsys.readouterr().out
    assert merged.samples[-1].extra["gpu"] == "NVIDIA V100"  # the profile's GPU for text that names none


@pytest.mark.slow  # end to end: the whole V100 workbook fitted (25 s); CI runs it
def test_cli_imports_and_fits_the_v100_workbook(tmp_path, capsys):
    out = tmp_path / "v100.yaml"
    assert main(["import-deepbench", str(V100), "--out", str(out)]) == 0
    line = capsys.readouterr().out
    assert "864 samples" in line and "skipped: 106 recurrent, 25 no time, 20 n/a (fitted)" in line
    profile = load_profile(out)
    assert len(profile.samples) == 864 and profile.machine.gpus_per_node == 8
    assert {"gemm/fwd/float32", "gemm/fwd/float16", "conv2d/bwd_data/float16"} <= set(profile.coefficients["compute"])


def test_cli_gpu_flag_names_the_gpu_of_text_output(tmp_path, capsys):
    text = tmp_path / "gemm.txt"
    text.write_text(gemm_bench_text([(1024, 700, 512, False, False, "float", 67)]))
    out = tmp_path / "text.yaml"
    assert main(["import-deepbench", str(text), "--gpu", "Tesla V100-SXM2-16GB", "--out", str(out)]) == 0
    assert load_profile(out).machine.gpus[0].name == "Tesla V100-SXM2-16GB"
    small = small_workbook(tmp_path / "small.xlsx")
    assert main(["import-deepbench", str(small), "--gpu", "A100", "--out", str(out), "--force"]) == 2
    assert "small.xlsx names the GPU 'NVIDIA V100'" in capsys.readouterr().err


def test_cli_refuses_two_gpus_in_one_profile(tmp_path, capsys):
    out = tmp_path / "mixed.yaml"
    assert main(["import-deepbench", str(V100), str(P100), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "different GPUs" in err and "NVIDIA V100" in err and "NVIDIA Tesla P100" in err and not out.exists()


def test_imported_shapes_take_the_applications_the_carried_workbooks_name(tmp_path, capsys):
    """gemm_bench text names no application: a DeepBench shape gets the one Baidu's workbooks name for it (the
    kernel model's held-out figures are per application), any other shape stays unnamed."""
    text = tmp_path / "gemm.txt"
    text.write_text(gemm_bench_text([(1760, 16, 1760, False, False, "float", 38), (1000, 700, 500, False, False,
                                                                                  "float", 60)]))
    out = tmp_path / "text.yaml"
    assert main(["import-deepbench", str(text), "--gpu", "NVIDIA V100", "--out", str(out)]) == 0
    capsys.readouterr()
    named = {(s.params["M"], s.params["N"], s.params["K"]): s.extra.get("application") for s in load_profile(out).samples}
    assert named == {(1760, 16, 1760): "DeepSpeech", (1000, 700, 500): None}
