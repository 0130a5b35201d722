"""Read nccl-tests output (text, or JSON from `-J`) into Samples, so a cluster's existing nccl-tests runs can
be reused and compared with `profiler calibrate`'s own collectives (the format nccl-tests' src/util.cu
prints: header `#` lines with run parameters and one `#  Rank r Group g Pid p on HOST device d [...] NAME`
line per rank; rows `size count type redop root` then `time algbw busbw #wrong` out-of-place and again
in-place, `-I 1` adding `i_min i_max i_p99 i_cv%` after each; times in us, bandwidths in GB/s). Lines as launchers
print them are read too (Open MPI's `--tag-output` prefix, a rank's stderr dropped; Slurm's `srun --label`), and
lines that are neither a `#` line nor a result row (NCCL_DEBUG=INFO, warnings) are passed over.

Each row gives two Samples (placement out_of_place / in_place), variant "throughput" (nccl-tests times
back-to-back ops with one sync and averages over ranks). size_bytes is nccl-tests' size column, which is
our S for every operation. Pure parsing: no I/O beyond reading the given file.
"""
from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from profiler.errors import UserError
from profiler import inputs
from profiler.profile import Sample

PROGRAMS = {
    "all_reduce_perf": "allreduce", "all_gather_perf": "allgather", "reduce_scatter_perf": "reduce_scatter",
    "alltoall_perf": "alltoall", "broadcast_perf": "broadcast", "sendrecv_perf": "sendrecv",
}
DTYPES = {"float": "float32", "half": "float16", "bfloat16": "bfloat16", "double": "float64", "int32": "int32",
          "int": "int32", "int8": "int8", "uint8": "uint8", "int64": "int64", "uint32": "uint32", "uint64": "uint64",
          "f8e4m3": "float8_e4m3fn", "f8e5m2": "float8_e5m2"}
_RANK_LINE = re.compile(r"^#\s+Rank\s+(\d+)\s+Group\s+(\d+)\s+Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)\s+\[[^\]]*\]\s*(.*)$")
_PLACEMENTS = ("out_of_place", "in_place")
#: what launchers put before each line: Open MPI's --tag-output ("[1,0]<stdout>:"), Slurm's srun --label ("0: ")
_TAGGED = re.compile(r"^\[\d+,\d+\]<(stdout|stderr|stddiag)>:")
_LABELLED = re.compile(r"^\s*\d+:\s")


@dataclass
class NcclRun:
    """What one nccl-tests output file says about the job."""

    op: str | None = None
    program: str | None = None
    hosts_by_rank: dict[int, str] = field(default_factory=dict)
    group_by_rank: dict[int, int] = field(default_factory=dict)
    device_names: list[str] = field(default_factory=list)
    header: list[str] = field(default_factory=list)

    def group(self) -> dict:
        """The measured group: ranks of group 0 (NCCL_TESTS_SPLIT splits the world into several)."""
        ranks = sorted(r for r, g in self.group_by_rank.items() if g == min(self.group_by_rank.values()))
        hosts = [self.hosts_by_rank[r] for r in ranks]
        distinct = len(set(hosts))
        kind = "intra" if distinct == 1 else ("inter" if distinct == len(hosts) else "mixed")
        return {"size": len(ranks), "ranks": ranks, "hosts": sorted(set(hosts)), "nodes": distinct, "kind": kind}


def _op_from_program(name: str | None) -> str | None:
    if not name:
        return None
    base = Path(name.strip()).name
    for program, op in PROGRAMS.items():
        if base.startswith(program):
            return op
    return None


def _program_in_filename(path: Path) -> str | None:
    for program in PROGRAMS:
        if program in path.name:
            return program
    return None


MAX_SIZE_BYTES = 1 << 48  # larger than any message nccl-tests can allocate


#: a result row starts with its size: a number, signed ones included so that a negative size is refused, not skipped
_NUMBER_FIRST = re.compile(r"[-+]?\d")


def _float(text, path: Path, line_no, column: str) -> float:
    """A finite number from a text cell or a JSON value (a bool is not a number)."""
    try:
        if isinstance(text, bool):
            raise TypeError
        value = float(text)
    except (TypeError, ValueError):
        raise UserError(f"{path}:{line_no}: column '{column}' is {str(text)[:40]!r}, expected a number") from None
    if not math.isfinite(value):
        raise UserError(f"{path}:{line_no}: column '{column}' is {text!r}, expected a finite number")
    return value


def _count(text, path: Path, line_no, column: str) -> int:
    """A non-negative integer no larger than MAX_SIZE_BYTES (sizes and element counts)."""
    try:
        if isinstance(text, (bool, float)):
            raise TypeError
        value = int(text)
    except (TypeError, ValueError):
        raise UserError(f"{path}:{line_no}: column '{column}' is {str(text)[:40]!r}, expected an integer") from None
    if not 0 <= value <= MAX_SIZE_BYTES:
        raise UserError(f"{path}:{line_no}: column '{column}' is {value}, expected 0..{MAX_SIZE_BYTES}")
    return value


def _sample(op, run: NcclRun, path: Path, digest: str, line_no, size_bytes, dtype, placement, time_us,
            algbw_gbs, busbw_gbs, wrong, per_iter: dict, times_us: list[float] | None) -> Sample:
    group = run.group()
    extra = {"source": str(path), "source_sha256": digest, "source_line": line_no, "nccl_tests_program": run.program,
             "algbw_bytes_per_s": algbw_gbs * 1e9, "busbw_bytes_per_s": busbw_gbs * 1e9, "wrong": wrong,
             "timing": "nccl-tests: back-to-back ops then one sync, mean over ranks" if not times_us
             else "nccl-tests -I 1: per-iteration CUDA event times, max over GPUs and processes"}
    if op == "sendrecv":
        extra["note"] = "nccl-tests sendrecv shifts a ring r->r+1 (bidirectional for 2 ranks)"
    extra.update({f"per_iteration_{k}": v for k, v in per_iter.items()})
    times_s = [t * 1e-6 for t in times_us] if times_us else [time_us * 1e-6]
    if not (time_us > 0 and all(t > 0 for t in times_s)):
        raise UserError(f"{path}:{line_no}: time must be positive")
    if not (algbw_gbs >= 0 and busbw_gbs >= 0):
        raise UserError(f"{path}:{line_no}: algbw and busbw must not be negative")
    if not all(v >= 0 for v in per_iter.values()):
        raise UserError(f"{path}:{line_no}: per-iteration statistics must not be negative")
    try:
        return Sample(benchmark=op, variant="throughput", device="cuda", dtype=DTYPES.get(dtype, dtype), threads=1,
                      params={"size_bytes": size_bytes, "placement": placement, "group": group},
                      times_s=times_s, bytes_moved=float(size_bytes), extra=extra)
    except ValidationError as err:
        e = err.errors()[0]
        raise UserError(f"{path}:{line_no}: {'.'.join(map(str, e['loc']))}: {e['msg']}") from None


def _require(run: NcclRun, path: Path, op_override: str | None) -> str:
    op = op_override or run.op
    if op is None:
        raise UserError(f"{path}: cannot tell which collective this is (no 'Collective test starting' line, "
                        f"no program name in the file name); pass --op")
    if not run.hosts_by_rank:
        raise UserError(f"{path}: no '#  Rank N Group G Pid P on HOST device D' lines, so the group size is unknown")
    return op


def parse_text(path: Path, text: str, op_override: str | None = None) -> tuple[list[Sample], NcclRun]:
    run = NcclRun(program=_program_in_filename(path))
    digest = hashlib.sha256(text.encode()).hexdigest()
    columns: list[str] | None = None
    samples: list[Sample] = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        tag = _TAGGED.match(line)
        if tag and tag.group(1) != "stdout":
            continue  # a rank's stderr (warnings), never nccl-tests' table
        stripped = _LABELLED.sub("", line[tag.end():] if tag else line, count=1).strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            match = _RANK_LINE.match(stripped)
            if match:
                rank = int(match.group(1))
                run.hosts_by_rank[rank] = match.group(4)
                run.group_by_rank[rank] = int(match.group(2))
                run.device_names.append(match.group(6).strip())
            elif "Collective test starting:" in stripped:
                run.program = stripped.split(":", 1)[1].strip()
            elif re.match(r"^#\s*size\s+count\s+type", stripped):
                columns = stripped.lstrip("#").split()
            elif stripped.startswith("# nThread") or stripped.startswith("# nccl-tests version"):
                run.header.append(stripped.lstrip("# "))
            continue
        if not _NUMBER_FIRST.match(stripped):
            continue  # launcher and library chatter between the tables (NCCL_DEBUG=INFO lines, 'NCCL version ...')
        op = _require(run, path, op_override or _op_from_program(run.program))
        samples.extend(_row(op, run, path, digest, line_no, stripped.split(), columns))
    if not samples:
        raise UserError(f"{path}: no result rows (is this nccl-tests output?)")
    return samples, run


def _row(op, run, path, digest, line_no, tokens, columns) -> list[Sample]:
    """One result row -> out-of-place and in-place Samples. Columns come from the header line when there
    is one; without it, 13 (or 21 with -I 1) tokens in the default layout."""
    per_placement = 8 if (columns and "i_min" in columns) or len(tokens) in (21, 23) else 4
    lead = 5 if columns is None or "root" in columns else 4
    if len(tokens) < lead + 2 * per_placement:
        raise UserError(f"{path}:{line_no}: expected at least {lead + 2 * per_placement} columns, found {len(tokens)}")
    size_bytes, count = _count(tokens[0], path, line_no, "size"), _count(tokens[1], path, line_no, "count")
    dtype = tokens[2]
    out = []
    for index, placement in enumerate(_PLACEMENTS):
        cells = tokens[lead + index * per_placement: lead + (index + 1) * per_placement]
        time_us = _float(cells[0], path, line_no, "time")
        algbw, busbw = _float(cells[1], path, line_no, "algbw"), _float(cells[2], path, line_no, "busbw")
        wrong = None if cells[3] == "N/A" else _float(cells[3], path, line_no, "#wrong")
        per_iter = {}
        if per_placement == 8:
            per_iter = {"min_s": _float(cells[4], path, line_no, "i_min") * 1e-6,
                        "max_s": _float(cells[5], path, line_no, "i_max") * 1e-6,
                        "p99_s": _float(cells[6], path, line_no, "i_p99") * 1e-6,
                        "cv": _float(cells[7], path, line_no, "i_cv%") / 100}
        out.append(_sample(op, run, path, digest, line_no, size_bytes, dtype, placement, time_us, algbw, busbw,
                           wrong, per_iter, None))
        out[-1].params["count"] = count
    return out


def _json_line(text: str, needle: str) -> int:
    """Line of the first occurrence of needle, for error messages about JSON files."""
    position = text.find(needle)
    return text.count("\n", 0, position) + 1 if position >= 0 else 1


def parse_json(path: Path, text: str, op_override: str | None = None) -> tuple[list[Sample], NcclRun]:
    try:
        doc = inputs.parse_json(text, str(path))
    except UserError as err:
        raise UserError(f"{err}; a run that crashed leaves it unclosed") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
        raise UserError(f"{path}: no 'results' list (is this nccl-tests -J output?)")
    digest = hashlib.sha256(text.encode()).hexdigest()
    args = doc.get("args") or []
    config = doc.get("config") or {}
    devices = config.get("devices") or [] if isinstance(config, dict) else None
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise UserError(f"{path}:{_json_line(text, 'args')}: 'args' must be a list of strings (the command line)")
    if not isinstance(devices, list):
        raise UserError(f"{path}:{_json_line(text, 'config')}: 'config' must be a mapping with a 'devices' list")
    run = NcclRun(program=Path(args[0]).name if args else _program_in_filename(path))
    for device in devices:
        try:
            rank = int(device["rank"])
            run.hosts_by_rank[rank] = str(device["hostname"])
            run.group_by_rank[rank] = int(device.get("group", 0))
            run.device_names.append(str(device.get("device_info", "")))
        except (KeyError, TypeError, ValueError, AttributeError):
            raise UserError(f"{path}:{_json_line(text, 'devices')}: a 'config.devices' entry lacks rank/hostname") from None
    op = _require(run, path, op_override or _op_from_program(run.program))
    samples = []
    for index, result in enumerate(doc["results"]):
        where = f"results[{index}]"
        if not isinstance(result, dict) or "size" not in result or "type" not in result:
            raise UserError(f"{path}: {where}: needs integer 'size' and a 'type'")
        size_bytes, dtype = _count(result["size"], path, where, "size"), str(result["type"])
        count = _count(result.get("count", 0), path, where, "count")
        for placement in _PLACEMENTS:
            body = result.get(placement)
            if body is None:  # trace replay writes only in-place results
                continue
            if not isinstance(body, dict) or "alg_bw" not in body or "bus_bw" not in body:
                raise UserError(f"{path}: {where}.{placement}: needs numeric 'time', 'alg_bw' and 'bus_bw'")
            time_us = _float(body.get("time", body.get("cpu_time")), path, f"{where}.{placement}", "time")
            algbw = _float(body["alg_bw"], path, f"{where}.{placement}", "alg_bw")
            busbw = _float(body["bus_bw"], path, f"{where}.{placement}", "bus_bw")
            iters = result.get(f"{placement}_per_iter") or {}
            times = iters.get("times_us") or [] if isinstance(iters, dict) else None
            if not isinstance(times, list):
                raise UserError(f"{path}: {where}.{placement}_per_iter: expected a mapping with a 'times_us' list")
            at = f"{where}.{placement}_per_iter"
            per_iter = {k[:-3] + "_s": _float(iters[k], path, at, k) * 1e-6 for k in ("min_us", "max_us", "p50_us", "p99_us")
                        if k in iters}
            times_us = [_float(t, path, at, "times_us") for t in times]
            sample = _sample(op, run, path, digest, where, size_bytes, dtype, placement, time_us,
                             algbw, busbw, body.get("nwrong"), per_iter, times_us)
            sample.params["count"] = count
            samples.append(sample)
    if not samples:
        raise UserError(f"{path}: 'results' is empty")
    return samples, run


def read_nccl_tests(path: Path | str, op_override: str | None = None) -> tuple[list[Sample], NcclRun]:
    """Samples from one nccl-tests output file (JSON when it starts with '{', else text)."""
    path = Path(path)
    text = inputs.read_text(path, "nccl-tests")
    if op_override is not None and op_override not in PROGRAMS.values():
        raise UserError(f"--op {op_override}: expected one of {', '.join(PROGRAMS.values())}")
    if text.lstrip().startswith("{"):
        return parse_json(path, text, op_override)
    return parse_text(path, text, op_override)
