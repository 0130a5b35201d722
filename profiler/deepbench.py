"""Read Baidu DeepBench results into Samples, so the kernel times DeepBench publishes (or a user's own DeepBench
run) can calibrate a GPU without measuring it: the training workbooks (results/train/*.xlsx) and the text tables
DeepBench's binaries print (gemm_bench, conv_bench, the all-reduce benchmarks).

GEMM rows become gemm/fwd samples, convolution passes conv2d samples, all-reduce rows allreduce/throughput samples;
recurrent layers are counted and skipped. Columns are found by their header text. A missing or malformed cell skips
that pass or row with a count by reason (DeepBenchRun.skipped), never a guess; a file that is neither, or corrupt,
is a one-line UserError. Pure parsing: read once through profiler.inputs, openpyxl reads cached values only
(nothing runs). docs/deepbench.md.
"""
from __future__ import annotations

import hashlib
import io
import math
import re
import warnings
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from pydantic import ValidationError

from profiler import inputs, opmath
from profiler.dtypes import DTYPE_BYTES
from profiler.errors import UserError
from profiler.profile import Sample

KIND = "DeepBench workbook"  # profiler.inputs' size cap for it: the default (64 MiB; a real workbook is < 100 KB)
MAX_UNZIPPED_BYTES = 32 << 20  # what the archive's members may expand to (a real workbook: 0.6 MB)
MAX_MEMBERS = 1000
MAX_SHEETS = 64
MAX_ROWS = 20_000  # rows read per sheet (a real result sheet has < 400)
MAX_COLUMNS = 64  # columns read per row (a real one has < 32)
MAX_DIM = 1 << 31  # largest shape dimension (cuBLAS and cuDNN take 32-bit ints)
MAX_FLOATS = 1 << 40  # largest all-reduce size in floats
#: the math label of FP16 kernels that store half and compute in FP32 (the P100 "pseudo FP16" sheet's GEMMs; today's
#: conv_bench training rows); calibrate.gpu_specs prices them at the FP32 peak
FP16_STORAGE_FP32_MATH = "fp16_storage_fp32_math"
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")
_OLE2_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # an Excel 97-2003 .xls

#: what a skipped pass or row is counted under (DeepBenchRun.skipped)
REASONS = {
    "n/a": "an 'N/A' time (DeepBench did not run that pass)",
    "no time": "an empty time cell",
    "recurrent": "recurrent layers (Vanilla, LSTM, GRU) are not imported",
    "not supported": "the binary printed 'Not Supported'",
    "int8": "int8 inference rows are not imported",
    "sparse": "sparse matrix multiplication rows are not imported",
    "zero time": "a time of 0 (below the binaries' 1 us resolution)",
    "bad value": "a cell that is not what its column holds (text, negative, non-integral, infinite)",
    "bad row": "a row with too few or too many columns",
    "unrecognised block": "a block whose title is not GEMM, sparse GEMM, convolution, recurrent or all-reduce",
    "unrecognised line": "a text line outside DeepBench's tables",
}


@dataclass
class DeepBenchRun:
    """What one DeepBench file says about the machine and what was read from it."""

    path: str
    format: str  # "xlsx" | "text"
    gpu: Optional[str] = None  # the Specs sheet's "GPU Model"
    cpu_model: Optional[str] = None
    versions: dict[str, Optional[str]] = field(default_factory=lambda: {"cuda": None, "cudnn": None, "driver": None})
    specs: dict[str, str] = field(default_factory=dict)  # every filled row of the Specs sheet
    sheets: list[str] = field(default_factory=list)  # result sheets read (text: the binaries' tables)
    skipped: Counter = field(default_factory=Counter)  # reason (REASONS) -> passes or rows skipped
    #: "cuda"; "cpu" for a workbook whose Specs sheet names a CPU and no GPU (Intel's Xeon Phi KNL workbook)
    device: str = "cuda"
    gpus_per_node: Optional[int] = None  # most GPUs of one node in an all-reduce row
    nodes: int = 1  # most nodes of a timed all-reduce row
    sha256: str = ""

    def skip(self, reason: str, count: int = 1) -> None:
        if reason not in REASONS:
            raise ValueError(f"unknown skip reason {reason!r}")  # a bug here, not a bad file
        self.skipped[reason] += count

    def skipped_text(self) -> str:
        """'18 n/a, 134 recurrent' (most first), or 'none'."""
        return ", ".join(f"{n} {reason}" for reason, n in self.skipped.most_common()) or "none"


class _Bad(Exception):
    """A cell that cannot be read as its column's quantity; carries the skip reason."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


# ---- cells -----------------------------------------------------------------------------------------------------
_NA = re.compile(r"^n\s*/?\s*a\**$", re.IGNORECASE)  # N/A, N/A*, NA


def _number(value: Any) -> float:
    """A finite number from a numeric cell or a numeric string; _Bad otherwise."""
    if isinstance(value, bool):
        raise _Bad("bad value")
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            raise _Bad("bad value") from None
    else:
        raise _Bad("bad value")
    if not math.isfinite(number):
        raise _Bad("bad value")
    return number


def _integer(value: Any, low: int, high: int = MAX_DIM) -> int:
    """An integer in [low, high] (a float cell holding one is accepted, 78.5 is not)."""
    if isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d{1,30}\s*", value):
        number = int(value)
    else:
        as_float = _number(value)
        if not as_float.is_integer():
            raise _Bad("bad value")
        number = int(as_float)
    if not low <= number <= high:
        raise _Bad("bad value")
    return number


def _time_s(value: Any, units_per_s: float) -> float:
    """A positive time in seconds from a cell in units of 1 / units_per_s (dividing by 1e3 gives 0.038 ms exactly
    as 0.038 / 1000); _Bad("n/a" | "no time" | ...) otherwise."""
    if value is None or (isinstance(value, str) and not value.strip()):
        raise _Bad("no time")
    if isinstance(value, str) and _NA.match(value.strip()):
        raise _Bad("n/a")
    if isinstance(value, str) and value.strip().lower().replace(" ", "") == "notsupported":
        raise _Bad("not supported")
    number = _number(value)
    if number == 0:
        raise _Bad("zero time")
    if number < 0:
        raise _Bad("bad value")
    return number / units_per_s


def _transpose(value: Any) -> bool:
    text = str(value).strip().lower() if value is not None else ""
    if text in ("t", "1", "true", "yes"):
        return True
    if text in ("n", "0", "false", "no"):
        return False
    raise _Bad("bad value")


def _text(value: Any, limit: int = 200) -> Optional[str]:
    """A cell as text (375.66 -> '375.66', 8.0 -> '8'), or None for an empty or '-' cell."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = " ".join(str(value).split())[:limit]
    return text if text and text != "-" else None


def _units_per_s(header: str) -> Optional[float]:
    """Units per second of a time column from its header: '(msec)' -> 1e3, '(usec)' -> 1e6."""
    if re.search(r"\b(msec|ms|milliseconds?)\b", header):
        return 1e3
    if re.search(r"\b(usec|us|microseconds?)\b", header):
        return 1e6
    if re.search(r"\b(sec|s|seconds?)\b", header):
        return 1.0
    return None


# ---- samples ---------------------------------------------------------------------------------------------------
def _sample(where: str, **fields) -> Sample:
    try:
        return Sample(device="cuda", threads=1, **fields)
    except ValidationError as err:
        e = err.errors()[0]
        raise UserError(f"{where}: {'.'.join(map(str, e['loc']))}: {e['msg']}") from None


def gemm_sample(m: int, n: int, k: int, transpose_a: bool, transpose_b: bool, time_s: float, dtype: str,
                extra: dict, where: str) -> Sample:
    return _sample(where, benchmark="gemm", variant="fwd", dtype=dtype, times_s=[time_s],
                   params={"M": m, "N": n, "K": k, "transpose_a": transpose_a, "transpose_b": transpose_b},
                   flops=opmath.gemm_flops(m, n, k), bytes_moved=float(opmath.gemm_bytes(m, n, k, DTYPE_BYTES[dtype])),
                   extra=extra)


@dataclass
class ConvShape:
    """One DeepBench convolution: N images of C x H x W, F filters of R (height) x S (width)."""

    n: int
    c: int
    h: int
    w: int
    f: int
    r: int
    s: int
    pad_h: int
    pad_w: int
    stride_v: int
    stride_h: int

    def output(self) -> tuple[int, int]:
        """(P, Q): output height and width; _Bad when the filter does not fit the padded input."""
        p = opmath.window_output_size(self.h, self.r, self.stride_v, self.pad_h)
        q = opmath.window_output_size(self.w, self.s, self.stride_h, self.pad_w)
        if p < 1 or q < 1:
            raise _Bad("bad value")
        return p, q

    def params(self) -> dict:
        return {"N": self.n, "C": self.c, "H": self.h, "W": self.w, "F": self.f, "kernel": [self.r, self.s],
                "stride": [self.stride_v, self.stride_h], "padding": [self.pad_h, self.pad_w]}


def conv_sample(shape: ConvShape, variant: str, time_s: float, dtype: str, extra: dict, where: str) -> Sample:
    p, q = shape.output()
    flops = opmath.conv_flops(shape.n, shape.c, shape.f, shape.r * shape.s, p * q)
    moved = DTYPE_BYTES[dtype] * (shape.n * shape.c * shape.h * shape.w + shape.f * shape.c * shape.r * shape.s
                                  + shape.n * shape.f * p * q)
    return _sample(where, benchmark="conv2d", variant=variant, dtype=dtype, times_s=[time_s], params=shape.params(),
                   flops=flops, bytes_moved=float(moved), extra=extra)


def conv_passes(shape: ConvShape, passes: list[tuple[str, Any, float]], dtype: str, math_: str, extra: dict,
                algorithm: Optional[str], run: "DeepBenchRun", where: str) -> list[Sample]:
    """One Sample per timed pass of a convolution row: passes are (variant, time cell, cell units per second); a
    cell that is not a time is skipped with its reason; cuDNN's forward algorithm goes with the forward."""
    out = []
    for variant, cell, units_per_s in passes:
        try:
            time_s = _time_s(cell, units_per_s)
        except _Bad as bad:
            run.skip(bad.reason)
            continue
        pass_extra = {"math": math_, **extra}
        if variant == "fwd" and algorithm is not None:
            pass_extra["algorithm"] = algorithm
        out.append(conv_sample(shape, variant, time_s, dtype, pass_extra, where))
    return out


def allreduce_sample(floats: int, gpus: int, nodes: Optional[int], time_s: float, extra: dict, where: str) -> Sample:
    size_bytes = 4 * floats  # DeepBench reduces float32 buffers
    group = {"size": gpus} if nodes is None else {"size": gpus, "nodes": nodes}
    return _sample(where, benchmark="allreduce", variant="throughput", dtype="float32", times_s=[time_s],
                   params={"size_bytes": size_bytes, "group": group}, bytes_moved=float(size_bytes), extra=extra)


# ---- workbooks -------------------------------------------------------------------------------------------------
def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0][:120]}" if text else type(err).__name__


def _workbook_rows(path: Path, data: bytes) -> list[tuple[str, list[tuple]]]:
    """(title, rows) of every worksheet, at most MAX_ROWS x MAX_COLUMNS cached values each. The archive is
    checked first (what its members expand to is bounded), and every failure of openpyxl on a corrupt file
    becomes one UserError."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError) as err:
        raise UserError(f"{path}: not a readable .xlsx workbook (truncated or corrupt: {_first_line(err)})") from None
    if len(members) > MAX_MEMBERS or sum(m.file_size for m in members) > MAX_UNZIPPED_BYTES:
        raise UserError(f"{path}: .xlsx archive expands to more than {MAX_UNZIPPED_BYTES >> 20} MiB or "
                        f"{MAX_MEMBERS} files (a DeepBench workbook is under 1 MiB)")
    import openpyxl

    sheets = []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # openpyxl warns about extensions it drops; nothing for the user
            book = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True, keep_links=False,
                                          keep_vba=False)
            try:
                worksheets = book.worksheets
                if len(worksheets) > MAX_SHEETS:
                    raise UserError(f"{path}: {len(worksheets)} sheets (at most {MAX_SHEETS} read)")
                for sheet in worksheets:
                    rows = [tuple(row) for row in sheet.iter_rows(min_row=1, max_row=MAX_ROWS + 1, max_col=MAX_COLUMNS,
                                                                  values_only=True)]
                    if len(rows) > MAX_ROWS and any(v is not None for v in rows[MAX_ROWS]):
                        raise UserError(f"{path}: sheet {sheet.title!r} has more than {MAX_ROWS} rows")
                    sheets.append((str(sheet.title), rows[:MAX_ROWS]))
            finally:
                book.close()
    except UserError:
        raise
    except Exception as err:  # noqa: BLE001 - openpyxl fails on corrupt input in many ways (KeyError, ParseError, ...)
        raise UserError(f"{path}: not a readable .xlsx workbook ({_first_line(err)})") from None
    return sheets


def _norm(value: Any) -> str:
    """Header text for matching: lower case, single spaces, no trailing '*'."""
    return " ".join(str(value).split()).lower().rstrip("*").strip() if value is not None else ""


_BLOCKS = (("sparse", ("sparse matrix", "sparse gemm")),
           ("gemm", ("dense matrix", "matrix multiplication", "gemm")), ("conv2d", ("convolution",)),
           ("recurrent", ("recurrent", "lstm", "gru", "vanilla rnn")),
           ("allreduce", ("all-reduce", "all reduce", "allreduce")))
_BLOCK_NAMES = {"gemm": "Dense Matrix Multiplication", "conv2d": "Convolution", "allreduce": "All-Reduce"}


def _block_kind(title: str) -> str:
    t = _norm(title)
    for kind, needles in _BLOCKS:
        if any(n in t for n in needles):
            return kind
    return "other"


def _timed(h: str) -> bool:
    return _units_per_s(h) is not None and "flops" not in h


#: per block kind: column key -> (header matcher, required)
_COLUMNS: dict[str, dict[str, tuple[Callable[[str], bool], bool]]] = {
    "gemm": {
        "M": (lambda h: h == "m", True), "N": (lambda h: h == "n", True), "K": (lambda h: h == "k", True),
        "transpose_a": (lambda h: h.startswith("a transpose") or h in ("a_t", "transpose a"), True),
        "transpose_b": (lambda h: h.startswith("b transpose") or h in ("b_t", "transpose b"), True),
        "time": (lambda h: h.startswith("time") and _timed(h), True),
    },
    "conv2d": {
        "W": (lambda h: h == "w", True), "H": (lambda h: h == "h", True), "C": (lambda h: h == "c", True),
        "N": (lambda h: h == "n", True), "F": (lambda h: h == "k" or h.startswith("k ("), True),
        "S": (lambda h: h == "s" or h.startswith("s (") or h == "filter width", True),
        "R": (lambda h: h == "r" or h.startswith("r (") or h == "filter height", True),
        "pad_w": (lambda h: h in ("pad_w", "pad w"), True), "pad_h": (lambda h: h in ("pad_h", "pad h"), True),
        "stride_h": (lambda h: h.startswith("horizontal stride") or h == "stride_w", True),
        "stride_v": (lambda h: h.startswith("vertical stride") or h == "stride_h", True),
        "fwd": (lambda h: h.startswith("forward") and _timed(h), True),
        "bwd_data": (lambda h: "wrt input" in h and _timed(h), False),
        "bwd_weight": (lambda h: ("wrt param" in h or "wrt weight" in h) and _timed(h), False),
        "algorithm": (lambda h: "algorithm" in h, False),
    },
    "allreduce": {
        "floats": (lambda h: "floats" in h, True),
        "gpus": (lambda h: "chips" in h or "gpus" in h or "accelerator" in h, False),
        "nodes": (lambda h: "node" in h, False),
        "time": (lambda h: "time" in h and not h.startswith("std") and _timed(h), True),
        "std": (lambda h: h.startswith("std") and _timed(h), False),
        "bandwidth": (lambda h: "gigabytes/sec" in h or "gb/s" in h, False),
        "implementation": (lambda h: "algorithm" in h or "implementation" in h, False),
    },
}
_APPLICATION_HEADERS = ("source", "application", "app", "network", "model")


@dataclass
class _Block:
    kind: str
    title: str
    columns: dict[str, int] = field(default_factory=dict)
    units_per_s: dict[str, float] = field(default_factory=dict)
    application: Optional[int] = None
    notes: list[int] = field(default_factory=list)  # unlabeled columns that may hold a remark


def _locate(kind: str, title: str, header: tuple, where: str) -> _Block:
    """Columns of a block from its header row, by text; a required column missing or two columns for one
    quantity is a UserError naming the row."""
    block = _Block(kind, title)
    texts = [_norm(v) for v in header]

    def missing(key: str) -> UserError:
        return UserError(f"{where}: {title} block has no {key!r} column (header: "
                         f"{', '.join(repr(str(v)) for v in header if v is not None)[:200]})")
    for key, (matches, required) in _COLUMNS[kind].items():
        hits = [i for i, h in enumerate(texts) if h and matches(h)]
        if len(hits) > 1:
            raise UserError(f"{where}: {title} block has {len(hits)} columns for {key!r} "
                            f"({', '.join(repr(str(header[i])) for i in hits)})")
        if hits:
            block.columns[key] = hits[0]
            if key in ("time", "fwd", "bwd_data", "bwd_weight", "std"):
                block.units_per_s[key] = _units_per_s(texts[hits[0]])
        elif required:
            raise missing(key)
    if kind == "allreduce" and "gpus" not in block.columns:
        # a CPU cluster's sheet counts ranks as nodes ('# nodes (1 process per node)': Intel's KNL workbook)
        if "nodes" not in block.columns or "process per node" not in texts[block.columns["nodes"]]:
            raise missing("gpus")
        block.columns["gpus"] = block.columns["nodes"]
    if kind == "allreduce" and "nodes" not in block.columns:
        after = block.columns["gpus"] + 1  # the workbooks leave the nodes column beside '# chips' unlabeled
        if after < len(texts) and not texts[after]:
            block.columns["nodes"] = after
    named = [i for i, h in enumerate(texts) if h in _APPLICATION_HEADERS]
    first = min(block.columns.values())
    blank_left = [i for i in range(1, first) if not texts[i]]
    block.application = named[0] if named else (blank_left[-1] if blank_left else None)
    used = set(block.columns.values()) | {block.application}
    block.notes = [i for i, h in enumerate(texts) if not h and i not in used and i > first]
    return block


def _precision(sheet: str, precision_row: str) -> Optional[tuple[str, str]]:
    """(dtype, math) of a result sheet from its name and its 'Precision' row."""
    t = f"{sheet} {precision_row}".lower()
    if re.search(r"\bint ?8\b|8 bit|8-bit", t):
        return "int8", "int8"  # inference sheets: int8 products summed in 32 bits (their rows are counted, not read)
    if "pseudo" in t or "psuedo" in t or "32 bit multiplication" in t:
        return "float16", FP16_STORAGE_FP32_MATH  # P100: FP16 storage, FP32 arithmetic
    if "mixed" in t or "16 bit multiplication, 32 bit addition" in t:
        return "float16", "tensor_core"  # V100: FP16 inputs, FP16 products summed in FP32
    if re.search(r"fp16|half|16 bit|16-bit", t):
        return "float16", "fp16"
    if re.search(r"fp32|float|single|32 bit|32-bit", t):
        return "float32", "fp32"
    return None


def _cell(row: tuple, index: Optional[int]) -> Any:
    return row[index] if index is not None and index < len(row) else None


def _row_samples(block: _Block, row: tuple, dtype: str, math_: str, run: DeepBenchRun, base: dict,
                 where: str) -> list[Sample]:
    """The samples of one data row (skips counted in run.skipped)."""
    col = block.columns
    extra = dict(base)
    application = _text(_cell(row, block.application))
    if application is not None:
        extra["application"] = application
    notes = [t for t in (_text(_cell(row, i)) for i in block.notes) if t and not _is_number(t)]
    if notes:
        extra["note"] = "; ".join(notes)
    if block.kind == "gemm":
        try:
            m, n, k = (_integer(_cell(row, col[key]), 1) for key in ("M", "N", "K"))
            ta, tb = _transpose(_cell(row, col["transpose_a"])), _transpose(_cell(row, col["transpose_b"]))
            time_s = _time_s(_cell(row, col["time"]), block.units_per_s["time"])
        except _Bad as bad:
            run.skip(bad.reason)
            return []
        return [gemm_sample(m, n, k, ta, tb, time_s, dtype, {"math": math_, **extra}, where)]
    if block.kind == "conv2d":
        try:
            shape = ConvShape(*(_integer(_cell(row, col[key]), 1) for key in ("N", "C", "H", "W", "F", "R", "S")),
                              *(_integer(_cell(row, col[key]), 0) for key in ("pad_h", "pad_w")),
                              *(_integer(_cell(row, col[key]), 1) for key in ("stride_v", "stride_h")))
            shape.output()
        except _Bad as bad:
            run.skip(bad.reason)
            return []
        passes = [(variant, _cell(row, col[variant]), block.units_per_s[variant])
                  for variant in ("fwd", "bwd_data", "bwd_weight") if variant in col]
        # a pseudo-FP16 workbook (P100, DeepBench @7b75e76) ran its GEMMs in FP32 arithmetic (cublasGemmEx with
        # CUDA_R_32F compute) but its convolutions in true half (a CUDNN_DATA_HALF convolution descriptor)
        conv_math = "fp16" if math_ == FP16_STORAGE_FP32_MATH else math_
        return conv_passes(shape, passes, dtype, conv_math, extra, _text(_cell(row, col.get("algorithm"))), run,
                           where)
    # all-reduce
    try:
        floats = _integer(_cell(row, col["floats"]), 1, MAX_FLOATS)
        gpus = _integer(_cell(row, col["gpus"]), 1)
        nodes_cell = _cell(row, col.get("nodes"))
        nodes = 1 if nodes_cell is None else _integer(nodes_cell, 1, gpus)
    except _Bad as bad:
        run.skip(bad.reason)
        return []
    run.gpus_per_node = max(run.gpus_per_node or 1, -(-gpus // nodes))
    try:
        time_s = _time_s(_cell(row, col["time"]), block.units_per_s["time"])
    except _Bad as bad:
        run.skip(bad.reason)
        return []
    implementation = _text(_cell(row, col.get("implementation")))
    if implementation is not None:
        extra["implementation"] = implementation
    for key, name, to_si in (("std", "std_s", lambda v: v / block.units_per_s["std"]),
                             ("bandwidth", "bandwidth_bytes_per_s", lambda v: v * 1e9)):  # GB/s
        try:
            if _cell(row, col.get(key)) is not None:
                extra[name] = to_si(_number(_cell(row, col[key])))
        except _Bad:
            pass  # a statistic beside the time: left out, the sample stands
    run.nodes = max(run.nodes, nodes)
    return [allreduce_sample(floats, gpus, nodes, time_s, extra, where)]


def _is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


_SPEC_KEYS = {"gpu model": "gpu", "cpu model": "cpu_model", "cuda version": "cuda", "cudnn version": "cudnn",
              "nvidia driver": "driver", "driver version": "driver"}


def _read_specs(rows: list[tuple], run: DeepBenchRun) -> None:
    for row in rows:
        key, value = _text(_cell(row, 0)), _text(_cell(row, 1))
        if key is None or value is None:
            continue
        run.specs[key] = value
        target = _SPEC_KEYS.get(key.lower())
        if target in ("gpu", "cpu_model"):
            setattr(run, target, value)
        elif target:
            run.versions[target] = value


def _is_specs(title: str, rows: list[tuple]) -> bool:
    return title.strip().lower().startswith("spec") or any(_norm(_cell(r, 0)) == "gpu model" for r in rows[:50])


def parse_workbook(path: Path, data: bytes) -> tuple[list[Sample], DeepBenchRun]:
    run = DeepBenchRun(path=str(path), format="xlsx", sha256=hashlib.sha256(data).hexdigest())
    sheets = _workbook_rows(path, data)
    for title, rows in sheets:
        if _is_specs(title, rows):
            _read_specs(rows, run)
    if run.gpu is None and run.cpu_model is not None:
        run.device = "cpu"
    samples: list[Sample] = []
    blocks_seen = 0
    for title, rows in sheets:
        if _is_specs(title, rows):
            continue
        precision_row = next((_text(_cell(r, 1)) or "" for r in rows if _norm(_cell(r, 0)) == "precision"), "")
        found = _sheet_samples(path, title, rows, _precision(title, precision_row), run, samples)
        if found:
            blocks_seen += found
            run.sheets.append(title)
    if not blocks_seen:
        raise UserError(f"{path}: no DeepBench block found (a 'Dense Matrix Multiplication', 'Convolution', "
                        f"recurrent or 'All-Reduce' title in column A of a result sheet)")
    if run.device != "cuda":
        samples = [s.model_copy(update={"device": run.device}) for s in samples]
    return samples, run


def _int8(kind: Optional[str], precision: Optional[tuple[str, str]]) -> bool:
    """A GEMM or convolution block of an int8 inference sheet: its rows are counted, not read (their columns
    differ: a device sheet's forward column has no unit)."""
    return kind in ("gemm", "conv2d") and precision is not None and precision[0] == "int8"


def _sheet_samples(path: Path, title: str, rows: list[tuple], precision: Optional[tuple[str, str]],
                   run: DeepBenchRun, samples: list[Sample]) -> int:
    """Append one sheet's samples; returns the number of blocks it holds."""
    block: Optional[_Block] = None
    pending: Optional[tuple[str, str, int]] = None  # (kind, title, row) of a title row whose header comes next
    kind = None
    blocks = 0
    for number, row in enumerate(rows, start=1):
        filled = [v for v in row if v is not None and not (isinstance(v, str) and not v.strip())]
        if not filled:
            continue
        where = f"{path}: sheet {title!r} row {number}"
        head = row[0] if row else None
        if isinstance(head, str) and head.strip():
            if _norm(head) == "precision":
                continue
            kind, block, pending = _block_kind(head), None, None
            blocks += kind != "other"
            if kind in _COLUMNS:
                if precision is None:
                    raise UserError(f"{where}: cannot tell the sheet's precision (name it FP32 or FP16, or add a "
                                    f"'Precision' row)")
                if len(filled) > 1:
                    block = None if _int8(kind, precision) else _locate(kind, " ".join(head.split()), row, where)
                else:
                    pending = (kind, " ".join(head.split()), number)
            continue
        if pending is not None:  # the header row under a title that stands alone
            block = None if _int8(pending[0], precision) else _locate(pending[0], pending[1], row, where)
            pending = None
            continue
        if len(filled) < 2:
            continue  # a remark under a block ('* = The backward pass wrt inputs is excluded ...')
        if kind == "recurrent":
            run.skip("recurrent")
        elif kind == "sparse":
            run.skip("sparse")
        elif _int8(kind, precision):
            run.skip("int8")
        elif kind == "other":
            run.skip("unrecognised block")
        elif block is not None and precision is not None:
            dtype, math_ = precision
            base = {"source": f"{path.name}:{title}:{number}", "source_sha256": run.sha256}
            if run.gpu is not None:
                base["gpu"] = run.gpu
            samples.extend(_row_samples(block, row, dtype, math_, run, base, where))
    return blocks


# ---- text output of DeepBench's binaries -----------------------------------------------------------------------
_GEMM_HEADER = re.compile(r"^m\s+n\s+k\s+a_t\s+b_t\s+precision\s+time\s*\(usec\)")
_CONV_HEADER = re.compile(r"^w\s+h\s+c\s+n\s+k\s+f_w\s+f_h\s+pad_w\s+pad_h\s+stride_w\s+stride_h\s+precision\s+"
                          r"fwd_time\s*\(usec\)")
#: the same tables without a precision column: ROCm's gemm_bench (rocBLAS SGEMM, times in us) and conv_bench_rocm
#: (MIOpen; float unless run with 'half', which it does not print), ARM's gemm_bench (gemmlowp int8, times in ms)
_GEMM_HEADER_BARE = re.compile(r"^m\s+n\s+k\s+a_t\s+b_t\s+time\s*\((usec|msec)\)")
_CONV_HEADER_BARE = re.compile(r"^w\s+h\s+c\s+n\s+k\s+f_w\s+f_h\s+pad_w\s+pad_h\s+stride_w\s+stride_h\s+"
                               r"fwd_time\s*\(usec\)")
_RNN_HEADER = re.compile(r"^type\s+hidden\s+N\s+timesteps\s+precision")
_REDUCE_HEADER = re.compile(r"^#\s*of floats\s+bytes transferred\s+(Avg\s+)?Time\s*\(msec\)(\s+Max Time\s*\(msec\))?")
_OSU_HEADER = re.compile(r"^#\s*Size\s+Avg Latency\(ms\)(\s+Min Latency\(ms\)\s+Max Latency\(ms\)\s+Iterations)?")
_RANKS = re.compile(r"^(?:#\s*)?(?:Num Ranks:|Number of Ranks)\s*(\d{1,7})$")
#: the title each all-reduce binary prints -> (program, implementation, nodes when known)
_REDUCE_TITLES = {
    "NCCL AllReduce": ("nccl_single_all_reduce", "NCCL single process", 1),
    "NCCL MPI AllReduce": ("nccl_mpi_all_reduce", "NCCL MPI", None),
    "Ring AllReduce": ("ring_all_reduce_mpi", "Baidu ring all-reduce (MPI)", None),
}
_TEXT_DTYPES = {"float": "float32", "half": "float16"}


@dataclass
class _TextTable:
    kind: str  # gemm | conv2d | recurrent | allreduce | osu
    program: str
    training: bool = True
    padded: bool = False  # a pad_kerenels column (built with PAD_KERNELS; in training, with tensor cores)
    max_time: bool = False
    full: bool = False  # OSU -f: min, max and iterations after the average
    ranks: int = 1  # all-reduce: the group size its 'Num Ranks' line gave
    precision: Optional[str] = None  # a table without a precision column: what its binary computes in


def parse_text(path: Path, text: str, digest: str) -> tuple[list[Sample], DeepBenchRun]:
    """Samples from the text one or more DeepBench binaries printed (their outputs may be concatenated)."""
    run = DeepBenchRun(path=str(path), format="text", sha256=digest)
    samples: list[Sample] = []
    table: Optional[_TextTable] = None
    training, ranks, reduce_title = True, None, None
    tables = 0
    for line_no, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or set(stripped) <= {"-"} or stripped == "Times":
            continue
        where = f"{path}:{line_no}"
        if stripped.startswith("Running training benchmark") or stripped.startswith("Running inference benchmark"):
            training, table = "training" in stripped, None
            continue
        if _GEMM_HEADER.match(stripped):
            table = _TextTable("gemm", "gemm_bench", training, padded="pad_ker" in stripped)
        elif bare := _GEMM_HEADER_BARE.match(stripped):
            rocm = bare.group(1) == "usec"
            table = _TextTable("gemm", "gemm_bench (ROCm)" if rocm else "gemm_bench (ARM)", rocm,
                               precision="float" if rocm else "int8")
        elif _CONV_HEADER.match(stripped):
            table = _TextTable("conv2d", "conv_bench", "bwd_inputs_time" in stripped, padded="pad_ker" in stripped)
        elif _CONV_HEADER_BARE.match(stripped):
            table = _TextTable("conv2d", "conv_bench_rocm", "bwd_inputs_time" in stripped, precision="float")
        elif _RNN_HEADER.match(stripped):
            table = _TextTable("recurrent", "rnn_bench", training)
        elif stripped in _REDUCE_TITLES:
            reduce_title, ranks, table = stripped, None, None
            continue
        elif re.match(r"^#\s*OSU MPI.*Allreduce", stripped):
            reduce_title, ranks, table = "OSU", None, None
            continue
        elif _RANKS.match(stripped):
            ranks = int(_RANKS.match(stripped).group(1))
            continue
        elif _REDUCE_HEADER.match(stripped) or _OSU_HEADER.match(stripped):
            osu = bool(_OSU_HEADER.match(stripped))
            if ranks is None:
                raise UserError(f"{where}: all-reduce table without a 'Num Ranks: N' line above it")
            if ranks < 1:
                raise UserError(f"{where}: 'Num Ranks' is {ranks}, expected at least 1")
            program = "osu_allreduce" if osu else _REDUCE_TITLES.get(reduce_title or "", ("all_reduce",))[0]
            table = _TextTable("osu" if osu else "allreduce", program, max_time="Max Time" in stripped,
                               full=osu and "Min Latency" in stripped, ranks=ranks)
        elif stripped.startswith("Total kernels") or stripped.startswith("# "):
            continue
        else:
            if table is None or not re.match(r"^[+-]?\d", stripped):
                run.skip("unrecognised line")
            else:
                samples.extend(_text_row(table, stripped, reduce_title, run, path, line_no))
            continue
        tables += 1
        run.sheets.append(table.program)
    if not tables:
        raise UserError(f"{path}: neither an .xlsx workbook nor DeepBench benchmark output (no gemm_bench, conv_bench, "
                        f"rnn_bench or all-reduce table header found)")
    return samples, run


def _text_row(table: _TextTable, line: str, reduce_title: Optional[str], run: DeepBenchRun, path: Path,
              line_no: int) -> list[Sample]:
    tokens = line.replace("Not Supported", "Not_Supported").split()
    where = f"{path}:{line_no}"
    extra = {"source": f"{path.name}:{line_no}", "source_sha256": run.sha256, "deepbench_program": table.program}
    if not table.training and table.kind in ("gemm", "conv2d"):
        extra["mode"] = "inference"
    try:
        if table.kind == "recurrent":
            run.skip("recurrent")
            return []
        if table.kind == "gemm":
            bare = table.precision is not None  # m n k a_t b_t time [GOPS]
            if not (6 <= len(tokens) <= 7 if bare else 7 <= len(tokens) <= 8):
                raise _Bad("bad row")
            m, n, k = (_integer(t, 1) for t in tokens[:3])
            ta, tb = _transpose(tokens[3]), _transpose(tokens[4])  # gemm_bench.cu prints them as 0 / 1
            dtype, math_ = _text_precision(table.precision or tokens[5], "gemm", table)
            time_s = _time_s(tokens[5 if bare else 6].replace("_", " "), 1e6)
            return [gemm_sample(m, n, k, ta, tb, time_s, dtype, {"math": math_, **extra}, where)]
        if table.kind == "conv2d":
            return _text_conv(table, tokens, extra, run, where)
        # all-reduce: floats, bytes, (avg) time [max time] in ms; OSU: floats, avg [min max iterations] in ms
        expected = (2 + 2 * table.full + table.full) if table.kind == "osu" else (3 + table.max_time)
        if len(tokens) != expected:
            raise _Bad("bad row")
        floats = _integer(tokens[0], 1, MAX_FLOATS)
        if table.kind == "allreduce" and _integer(tokens[1], 1, 4 * MAX_FLOATS) != 4 * floats:
            raise _Bad("bad value")
        time_s = _time_s(tokens[1 if table.kind == "osu" else 2], 1e3)
        if table.kind == "osu":
            implementation, nodes = "OSU MPI", None
            if table.full:
                extra.update(min_time_s=_time_s(tokens[2], 1e3), max_time_s=_time_s(tokens[3], 1e3))
        else:
            _, implementation, nodes = _REDUCE_TITLES.get(reduce_title or "", ("", "unknown", None))
            if table.max_time:
                extra["max_time_s"] = _time_s(tokens[3], 1e3)
        extra["implementation"] = implementation
        extra["timing"] = ("mean per call, every call synchronised" if nodes is not None
                           else "mean over ranks of the mean per-call time")
        if nodes is not None:
            run.nodes = max(run.nodes, nodes)
            run.gpus_per_node = max(run.gpus_per_node or 1, table.ranks)
        return [allreduce_sample(floats, table.ranks, nodes, time_s, extra, where)]
    except _Bad as bad:
        run.skip(bad.reason)
        return []


def _text_precision(token: str, kind: str, table: _TextTable) -> tuple[str, str]:
    """(dtype, math) of a text row's precision column (the binaries' float / half / int8)."""
    if token == "int8":
        raise _Bad("int8")
    if token not in _TEXT_DTYPES:
        raise _Bad("bad value")
    if token == "float":
        return "float32", "fp32"
    if kind == "conv2d" and table.training:  # time_cnn<uint16_t, uint32_t>: FP16 storage, FP32 arithmetic
        return "float16", "tensor_core" if table.padded else FP16_STORAGE_FP32_MATH
    return "float16", "fp16"  # cublasGemmEx with CUDA_R_16F compute; conv inference time_cnn<uint16_t, uint16_t>


def _text_conv(table: _TextTable, tokens: list[str], extra: dict, run: DeepBenchRun, where: str) -> list[Sample]:
    """w h c n k f_w f_h pad_w pad_h stride_w stride_h precision fwd [bwd_inputs bwd_params total] [pad] algo (ROCm's
    without the precision)."""
    bare = table.precision is not None
    if len(tokens) < 13 - bare:
        raise _Bad("bad row")
    w, h, c, n, f, s, r = (_integer(t, 1) for t in tokens[:7])
    pad_w, pad_h = (_integer(t, 0) for t in tokens[7:9])
    stride_h, stride_v = (_integer(t, 1) for t in tokens[9:11])
    shape = ConvShape(n, c, h, w, f, r, s, pad_h, pad_w, stride_v, stride_h)
    shape.output()
    dtype, math_ = _text_precision(table.precision or tokens[11], "conv2d", table)
    rest = tokens[11:] if bare else tokens[12:]
    algorithm = rest.pop() if rest and not _is_number(rest[-1]) and rest[-1] != "Not_Supported" else None
    if len(rest) not in ((4, 5) if table.training else (1, 2)):
        raise _Bad("bad row")
    if rest[0] == "Not_Supported":
        raise _Bad("not supported")
    passes = [("fwd", rest[0], 1e6)] + ([("bwd_data", rest[1], 1e6), ("bwd_weight", rest[2], 1e6)]
                                        if table.training else [])
    return conv_passes(shape, passes, dtype, math_, extra, algorithm, run, where)


# ---- entry point -----------------------------------------------------------------------------------------------
def read_deepbench(path: Path | str) -> tuple[list[Sample], DeepBenchRun]:
    """Samples from one DeepBench file: an .xlsx workbook (told by its zip signature) or the binaries' text
    output. UserError when the file is neither, is corrupt, or has no timed GEMM, convolution or all-reduce row."""
    path = Path(path)
    data = inputs.read_bytes(path, KIND)
    if data.startswith(_ZIP_MAGIC):
        samples, run = parse_workbook(path, data)
    elif data.startswith(_OLE2_MAGIC):
        raise UserError(f"{path}: an Excel 97-2003 (.xls) workbook; save it as .xlsx")
    else:
        try:
            text = inputs.decode_utf8(data, str(path))
        except UserError as err:
            reason = str(err).removeprefix(f"{path}: ")
            raise UserError(f"{path}: neither an .xlsx workbook nor DeepBench text output ({reason})") from None
        samples, run = parse_text(path, text, hashlib.sha256(data).hexdigest())
    if not samples:
        raise UserError(f"{path}: no timed GEMM, convolution or all-reduce row (skipped: {run.skipped_text()})")
    return samples, run
