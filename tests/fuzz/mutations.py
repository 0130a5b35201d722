"""Cases that keep the file well-formed and break what it says: impossible numbers, wrong types, broken
structure, in profiles, layer specs, suites, shapes files, nccl-tests logs, DeepBench output, run datasets and
corrections."""
from __future__ import annotations

import copy
import functools
import json
import random

from . import materials as m
from .core import MARKER, Case
from .files import reader_case

NAN, INF = float("nan"), float("inf")
HUGE, TINY = 1e308, 5e-324  # finite, but beyond any size, rate or time (profiler.inputs.check_numbers)
WRONG = {"not": "a number"}


def _set(doc, path, value):
    *head, last = path
    for key in head:
        doc = doc[key]
    if value is _DELETE:
        del doc[last]
    else:
        doc[last] = value
    return doc


_DELETE = object()


def _mutated(source, path, value):
    doc = m.doc(source)
    _set(doc, path, value)
    return doc


# ---- profiles --------------------------------------------------------------------------------------------------
def _numeric_leaves(node, path=()):
    if isinstance(node, bool):
        return
    if isinstance(node, (int, float)):
        yield path
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from _numeric_leaves(value, path + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _numeric_leaves(value, path + (i,))


def _must_be_positive(path) -> bool:
    """Fields whose zero or negative value is physically impossible."""
    text = "/".join(map(str, path))
    return any(word in text for word in ("bandwidth", "peak_per_s", "time_scale", "amplitude", "y_std",
                                         "length_scales", "time_s", "memory_bytes"))


def coefficient_cases(rng: random.Random, count: int) -> list[Case]:
    """`count` random numeric coefficients of real profiles set to values no machine has."""
    sources = [(m.V100, "v100"), (m.CPU_TREES, "cpu")]
    pool = []
    for source, tag in sources:
        for path in _numeric_leaves(m.doc(source)["coefficients"]):
            values = [("nan", NAN), ("inf", INF), ("-inf", -INF), ("wrong-type", WRONG), ("1e308", HUGE),
                      ("-1e308", -HUGE), ("5e-324", TINY)]
            if _must_be_positive(path):
                values += [("negative", -1.0), ("zero", 0.0)]
            pool += [(source, tag, path, label, value) for label, value in values]
    rng.shuffle(pool)
    out = []
    for source, tag, path, label, value in pool[:count]:
        content = lambda s=source, p=("coefficients",) + path, v=value: m.dump(_mutated(s, p, v))
        out.append(reader_case(f"coefficient/{tag}/{'.'.join(map(str, path))}={label}", "run-profile", content))
    return out


CURATED_COEFFICIENTS = [  # (source, path below coefficients, value, label): the list, on purpose
    (m.V100, ("compute", "conv2d/fwd/float32", "launch_s", "value"), -1e-3, "negative-launch"),
    (m.V100, ("compute", "conv2d/fwd/float32", "efficiency", "init"), NAN, "nan-efficiency"),
    (m.V100, ("links", "allreduce", "inter", "bus_bandwidth_bytes_per_s", "value"), -1e9, "negative-busbw"),
    (m.V100, ("links", "allreduce", "intra", "base_latency_s", "low"), -1e-6, "negative-latency"),
    (m.V100, ("memory", "device/triad", "segments", 0, "bandwidth_bytes_per_s", "value"), 0.0, "zero-stream-bw"),
    (m.V100, ("compute", "gemm/fwd/float32", "peak_per_s"), 0.0, "zero-peak"),
    (m.V100, ("compute", "gemm/fwd/float32", "time_scale"), {"value": 1.0, "low": 2.0, "high": 0.5}, "interval-upside-down"),
    (m.V100, ("execution", "overlap_efficiency", "value"), 1.5, "efficiency-above-1"),
    (m.CPU_TREES, ("compute", "conv2d/fwd/float32", "efficiency", "trees", 0, "value", 0), INF, "inf-leaf"),
    (m.CPU_TREES, ("compute", "conv2d/fwd/float32", "efficiency", "trees", 0, "feature", 0), 99, "feature-out-of-range"),
    (m.CPU_TREES, ("compute", "conv2d/fwd/float32", "efficiency", "trees", 0, "children_left", 0), 0, "tree-cycle"),
    (m.CPU_TREES, ("compute", "conv2d/fwd/float32", "efficiency", "trees", 0, "children_right", 0), 10 ** 9, "child-out-of-range"),
    (m.CPU_TREES, ("compute", "conv2d/fwd/float32", "efficiency", "trees", 0, "threshold"), [], "ragged-tree"),
    (m.CPU_TREES, ("compute", "conv2d/fwd/float32", "efficiency", "gp"),
     {"train_x": [[1.0]], "alpha": [1.0, 2.0], "length_scales": [1.0], "amplitude": 1.0, "y_mean": 0.0, "y_std": 1.0}, "gp-shapes"),
    (m.CPU_TREES, ("compute", "conv2d/fwd/float32", "efficiency", "gp"),
     {"train_x": [[1.0] * 8], "alpha": [1.0], "length_scales": [1.0] * 8, "amplitude": 1.0, "y_mean": 0.0, "y_std": -1.0}, "gp-noise"),
    (m.V100, ("compute",), [], "compute-is-a-list"),
    (m.V100, ("version",), 99, "unknown-version-field"),
    (m.V100, ("links", "allreduce", "bogus"), {}, "unknown-level"),
    (m.V100, ("compute", "conv2d/fwd/float32", "kind"), "seconds", "unknown-kind"),
    (m.V100, ("compute", "conv2d/fwd/float32", "launch_s"), _DELETE, "missing-launch"),
    # extreme finite numbers: an efficiency that underflows to 0 divided by zero in predictor run
    (m.V100, ("compute", "gemm/fwd/float32", "efficiency", "init"), -HUGE, "init-minus-1e308"),
    (m.V100, ("compute", "gemm/fwd/float32", "efficiency", "init"), -1e29, "init-minus-1e29"),
    (m.V100, ("compute", "gemm/fwd/float32", "efficiency", "slope"), -1e3, "slope-steep-negative"),
    (m.V100, ("compute", "gemm/fwd/float32", "peak_per_s"), TINY, "peak-denormal"),
    (m.V100, ("compute", "gemm/fwd/float32", "launch_s", "value"), HUGE, "launch-1e308"),
    (m.CPU_TREES, ("compute", "conv2d/fwd/float32", "efficiency", "trees", 0, "value", 0), -HUGE, "leaf-minus-1e308"),
    (m.CPU_TREES, ("compute", "conv2d/fwd/float32", "efficiency", "learning_rate"), 1e20, "learning-rate-1e20"),
]


def curated_profile_cases() -> list[Case]:
    out = []
    for source, path, value, label in CURATED_COEFFICIENTS:
        content = lambda s=source, p=("coefficients",) + path, v=value: m.dump(_mutated(s, p, v))
        out.append(reader_case(f"profile/{label}", "run-profile", content))
    structural = [  # (top-level path, value, label, reader)
        (("machine", "cpu_cores"), -4, "negative-cores", "show"),
        (("machine", "nodes"), 0, "zero-nodes", "show"),
        (("machine", "gpus_per_node"), -8, "negative-gpus-per-node", "run-profile"),
        (("machine", "device_memory_bytes"), INF, "inf-device-memory", "run-profile"),
        (("machine", "device_memory_bytes"), -1.0, "negative-device-memory", "run-profile"),
        (("machine", "memory_bytes"), 0, "zero-host-memory", "show"),
        (("created",), "last tuesday", "garbage-created", "show"),
        (("created",), "2024-13-45T99:00:00", "impossible-date", "show"),
        (("created",), 12345, "numeric-created", "show"),
        (("schema_version",), 2, "future-schema", "show"),
        (("schema_version",), "1", "string-schema", "show"),
        (("machine",), _DELETE, "no-machine", "show"),
        (("machine",), ["a", "b"], "machine-list", "show"),
        (("provenance", "kind"), "guessed", "bad-provenance", "show"),
        (("bogus_top_key",), 1, "unknown-top-key", "show"),
        (("coefficients",), [1, 2], "coefficients-list", "run-profile"),
        (("correction",), {"path": 5}, "bad-correction-ref", "show"),
        (("samples",), "abc", "samples-string", "show"),
    ]
    for path, value, label, reader in structural:
        out.append(reader_case(f"profile/{label}", reader, lambda p=path, v=value: m.dump(_mutated(m.V100, p, v))))
    samples = [
        ((0, "times_s", 0), NAN, "nan-time"), ((0, "times_s", 0), 0.0, "zero-time"), ((0, "times_s", 0), -1e-3, "negative-time"),
        ((0, "times_s", 0), INF, "inf-time"), ((0, "times_s"), [], "no-times"), ((0, "threads"), 0, "zero-threads"),
        ((0, "flops"), -5.0, "negative-flops"), ((0, "times_s"), _DELETE, "missing-times"), ((0, "bytes_moved"), NAN, "nan-bytes"),
    ]
    for path, value, label in samples:
        text = lambda p=("samples",) + path, v=value: m.dump(_mutated(m.CPU_SAMPLES, p, v))
        for reader in ("show", "fit", "drift", "history"):
            out.append(reader_case(f"sample/{label}/{reader}", reader, text))
    return out


# ---- layer specs, suites, shapes files -------------------------------------------------------------------------
CONV = {"name": "c", "op": "conv2d", "filters": 4, "kernel": 3}
SPECS = {
    "no-layers": {"input": [3, 8, 8], "layers": []}, "empty-input": {"input": [], "layers": [CONV]},
    "negative-input": {"input": [3, -8, 8], "layers": [CONV]}, "input-string": {"input": "3,8,8", "layers": [CONV]},
    "kernel-zero": {"input": [3, 8, 8], "layers": [{**CONV, "kernel": 0}]},
    "kernel-mixed-sign": {"input": [3, 8, 8], "layers": [{**CONV, "kernel": [3, -3]}]},
    "kernel-too-big": {"input": [3, 8, 8], "layers": [{**CONV, "kernel": 11}]},
    "kernel-float": {"input": [3, 8, 8], "layers": [{**CONV, "kernel": 2.5}]},
    "kernel-string": {"input": [3, 8, 8], "layers": [{**CONV, "kernel": "3"}]},
    "stride-zero": {"input": [3, 8, 8], "layers": [{**CONV, "stride": 0}]},
    "padding-negative": {"input": [3, 8, 8], "layers": [{**CONV, "padding": -1}]},
    "padding-huge": {"input": [3, 8, 8], "layers": [{**CONV, "padding": 10 ** 7}]},
    "filters-huge": {"input": [3, 8, 8], "layers": [{**CONV, "filters": 10 ** 12}]},
    "filters-bool": {"input": [3, 8, 8], "layers": [{**CONV, "filters": True}]},
    "pool-too-big": {"input": [3, 8, 8], "layers": [{"op": "maxpool", "kernel": 9}]},
    "pool-on-flat": {"input": [48], "layers": [{"op": "maxpool", "kernel": 2}]},
    "conv3d-on-2d": {"input": [3, 8, 8], "layers": [{**CONV, "op": "conv3d"}]},
    "linear-zero": {"input": [3, 8, 8], "layers": [{"op": "linear", "out": 0}]},
    "duplicate-names": {"input": [3, 8, 8], "layers": [dict(CONV), dict(CONV)]},
    "unknown-input": {"input": [3, 8, 8], "layers": [{**CONV, "inputs": ["ghost"]}]},
    "inputs-string": {"input": [3, 8, 8], "layers": [{**CONV, "inputs": "c"}]},
    "op-list": {"input": [3, 8, 8], "layers": [{"op": ["conv2d"]}]},
    "op-missing": {"input": [3, 8, 8], "layers": [{"name": "x"}]},
    "unknown-op": {"input": [3, 8, 8], "layers": [{"op": "attention"}]},
    "layer-not-mapping": {"input": [3, 8, 8], "layers": ["conv2d"]},
    "add-mismatch": {"input": [3, 8, 8], "layers": [CONV, {"name": "s", "op": "add", "inputs": ["", "c"]}]},
    "concat-mismatch": {"input": [3, 8, 8], "layers": [{**CONV, "stride": 2}, {"name": "k", "op": "concat", "inputs": ["", "c"]}]},
    "top-level-list": [CONV], "code-tag": f"!!python/object/apply:os.system ['touch {MARKER}']",
}


def spec_cases() -> list[Case]:
    out = []
    for label, spec in SPECS.items():
        out.append(reader_case(f"spec/{label}/yaml", "spec-yaml", spec if isinstance(spec, str) else m.dump(spec)))
        if not isinstance(spec, str):
            out.append(reader_case(f"spec/{label}/json", "spec-json", json.dumps(spec)))
    return out


RUN = m.SUITE["runs"][0]
SUITES = {
    "code-os-system": {"runs": [{**RUN, "model": "os:system", "knobs": {"command": f"touch {MARKER}"}}]},
    "code-subprocess": {"runs": [{**RUN, "model": "subprocess:getoutput", "knobs": {"cmd": f"touch {MARKER}"}}]},
    "code-builtins-exec": {"runs": [{**RUN, "model": "builtins:exec", "knobs": {"source": f"open('{MARKER}','w')"}}]},
    "code-file": {"runs": [{**RUN, "model": "evil.py"}]},
    "code-file-callable": {"runs": [{**RUN, "model": "evil.py:model"}]},
    "model-list": {"runs": [{**RUN, "model": ["small_cnn2d"]}]},
    "model-missing": {"runs": [{k: v for k, v in RUN.items() if k != "model"}]},
    "model-unknown": {"runs": [{**RUN, "model": "resnet51"}]},
    "strategy-unknown": {"runs": [{**RUN, "strategies": ["diagonal"]}]},
    "strategies-empty": {"runs": [{**RUN, "strategies": []}]},
    "strategy-number": {"runs": [{**RUN, "strategies": [5]}]},
    "batch-zero": {"runs": [{**RUN, "batch": 0}]}, "batch-negative": {"runs": [{**RUN, "batch": -8}]},
    "batch-bool": {"runs": [{**RUN, "batch": True}]}, "batch-float": {"runs": [{**RUN, "batch": 8.5}]},
    "batch-string": {"runs": [{**RUN, "batch": "8"}]}, "batch-huge": {"runs": [{**RUN, "batch": 10 ** 12}]},
    "ranks-zero": {"runs": [{**RUN, "ranks": 0}]}, "ranks-huge": {"runs": [{**RUN, "ranks": 100000}]},
    "warmup-negative": {**m.SUITE, "warmup": -1}, "iterations-zero": {**m.SUITE, "iterations": 0},
    "iterations-huge": {**m.SUITE, "iterations": 10 ** 9},
    "knobs-list": {"runs": [{**RUN, "knobs": [1, 2]}]}, "knob-huge": {"runs": [{**RUN, "knobs": {"width": 10 ** 9}}]},
    "knob-nan": {"runs": [{**RUN, "knobs": {"width": NAN}}]}, "knob-negative": {"runs": [{**RUN, "knobs": {"image": -16}}]},
    "knob-unknown": {"runs": [{**RUN, "knobs": {"colour": 3}}]},
    "dtype-unknown": {"runs": [{**RUN, "dtype": "fp8"}]}, "entry-unknown-key": {"runs": [{**RUN, "colour": "red"}]},
    "runs-mapping": {"runs": {"a": 1}}, "runs-empty": {"runs": []}, "top-unknown-key": {**m.SUITE, "bogus": 1},
    "micro-batches-zero": {"runs": [{**RUN, "micro_batches": 0}]}, "p-model-negative": {"runs": [{**RUN, "p_model": -2}]},
    "entry-not-mapping": {"runs": ["small_cnn2d"]}, "both-strategy-keys": {"runs": [{**RUN, "strategy": "data"}]},
    "knob-list": {"runs": [{**RUN, "knobs": {"width": [4], "image": 16}}]},
    "knob-mapping": {"runs": [{**RUN, "knobs": {"width": {"a": 1}, "image": 16}}]},
    "knob-list-of-lists": {"runs": [{**RUN, "knobs": {"width": [[4]], "image": 16}}]},
    "knob-zero-width": {"runs": [{**RUN, "knobs": {"width": 0, "image": 16}}]},
    "knob-image-1": {"runs": [{**RUN, "knobs": {"width": 4, "image": 1}}]},
    "knob-1e308": {"runs": [{**RUN, "knobs": {"width": HUGE, "image": 16}}]},
}
EVIL_PY = f"open({MARKER!r}, 'w').close()\nmodel = None\n"


def suite_cases() -> list[Case]:
    out = []
    for label, suite in SUITES.items():
        for reader in ("suite-validate", "suite-shapes"):
            case = reader_case(f"suite/{label}/{reader}", reader, m.dump(suite))
            case.files["evil.py"] = EVIL_PY
            out.append(case)
    return out


def _shape(op, **params):
    return {"shapes": [{"op": op, "params": params}]}


SHAPES = {
    "kernel-too-big": _shape("conv2d", N=1, C=4, F=4, H=8, W=8, kernel=11),
    "groups-not-dividing": _shape("conv2d", N=1, C=4, F=6, H=8, W=8, kernel=3, groups=4),
    "gemm-huge": _shape("gemm", M=1 << 20, N=1 << 20, K=1 << 20), "gemm-dim-huge": _shape("gemm", M=2, N=2, K=1 << 30),
    "zero-dim": _shape("relu", N=1, C=0, H=4, W=4), "negative-dim": _shape("relu", N=-1, C=2, H=4, W=4),
    "float-dim": _shape("relu", N=1.5, C=2, H=4, W=4), "bool-dim": _shape("relu", N=True, C=2, H=4, W=4),
    "string-dim": _shape("relu", N="1", C=2, H=4, W=4), "unknown-param": _shape("relu", N=1, C=2, H=4, W=4, colour=3),
    "missing-param": _shape("conv2d", N=1, C=2), "unknown-op": _shape("softmax", N=1),
    "conv2d-with-D": _shape("conv2d", N=1, C=2, F=2, D=4, H=4, W=4, kernel=3),
    "stride-zero": _shape("conv2d", N=1, C=2, F=2, H=4, W=4, kernel=3, stride=0),
    "params-list": {"shapes": [{"op": "relu", "params": [1, 2, 3, 4]}]},
    "entry-not-mapping": {"shapes": ["relu"]}, "shapes-empty": {"shapes": []}, "shapes-missing": {"other": 1},
    "bad-dtype": {"shapes": [{"op": "relu", "params": {"N": 1, "C": 2, "H": 4, "W": 4}, "dtype": "float128"}]},
    "gpu-dtype-on-cpu": {"shapes": [{"op": "relu", "params": {"N": 1, "C": 2, "H": 4, "W": 4}, "dtype": "float16"}]},
}


def shapes_cases() -> list[Case]:
    return [reader_case(f"shapes/{label}", "shapes-calibrate", m.dump(doc)) for label, doc in SHAPES.items()]


# ---- nccl-tests logs, run datasets, corrections ----------------------------------------------------------------
def _text_row_edit(column: int, value: str):
    def edit(text: str) -> str:
        lines = text.splitlines()
        row = next(i for i, line in enumerate(lines) if line.strip() and not line.lstrip().startswith("#"))
        cells = lines[row].split()
        cells[column] = value
        lines[row] = "  ".join(cells)
        return "\n".join(lines) + "\n"
    return edit


NCCL_TEXT = {
    "nan-time": _text_row_edit(5, "nan"), "inf-time": _text_row_edit(5, "inf"), "negative-time": _text_row_edit(5, "-15.8"),
    "zero-time": _text_row_edit(5, "0"), "negative-size": _text_row_edit(0, "-8"), "float-size": _text_row_edit(0, "8.5"),
    "nan-busbw": _text_row_edit(7, "nan"), "negative-algbw": _text_row_edit(6, "-1"), "garbage-count": _text_row_edit(1, "lots"),
    "huge-size": _text_row_edit(0, "9" * 40), "short-row": lambda t: t + "  8  2  float\n",
    "no-rank-lines": lambda t: "\n".join(l for l in t.splitlines() if "Rank" not in l) + "\n",
    "no-operation": lambda t: "\n".join(l for l in t.splitlines() if "Collective test" not in l) + "\n",
    "only-header": lambda t: "\n".join(l for l in t.splitlines() if l.startswith("#")) + "\n",
}


def _json_edit(path, value):
    def edit(doc):
        _set(doc, path, value)
        return doc
    return edit


NCCL_JSON = {
    "time-string": _json_edit(("results", 0, "out_of_place", "time"), "fast"),
    "time-null": _json_edit(("results", 0, "out_of_place", "time"), None),
    "time-negative": _json_edit(("results", 0, "out_of_place", "time"), -20.8),
    "time-nan": _json_edit(("results", 0, "out_of_place", "time"), NAN),
    "size-negative": _json_edit(("results", 0, "size"), -4096), "size-string": _json_edit(("results", 0, "size"), "4K"),
    "size-huge": _json_edit(("results", 0, "size"), 10 ** 40), "busbw-inf": _json_edit(("results", 0, "out_of_place", "bus_bw"), INF),
    "results-dict": _json_edit(("results",), {"a": 1}), "results-empty": _json_edit(("results",), []),
    "result-list": _json_edit(("results", 0), [1, 2]), "body-list": _json_edit(("results", 0, "out_of_place"), [1]),
    "args-dict": _json_edit(("args",), {"a": 1}), "args-numbers": _json_edit(("args",), [1, 2]),
    "devices-string": _json_edit(("config", "devices"), "dgx04"), "device-no-host": _json_edit(("config", "devices", 0, "hostname"), _DELETE),
    "config-list": _json_edit(("config",), [1]), "per-iter-string": _json_edit(("results", 0, "out_of_place_per_iter"), "x"),
    "times-us-strings": _json_edit(("results", 0, "out_of_place_per_iter"), {"times_us": ["a"]}),
    "count-string": _json_edit(("results", 0, "count"), "many"),
}


def nccl_cases() -> list[Case]:
    out = []
    base = m.text(m.NCCL / "all_reduce_perf_8gpu.txt")
    for label, edit in NCCL_TEXT.items():
        out.append(reader_case(f"nccl-text/{label}", "nccl-text", edit(base)))
    source = json.loads(m.text(m.NCCL / "alltoall_perf_4gpu.json"))
    for label, edit in NCCL_JSON.items():
        out.append(reader_case(f"nccl-json/{label}", "nccl-json", json.dumps(edit(copy.deepcopy(source)))))
    return out


def _every_row(edit):
    """Apply edit(cells) -> cells to every result row of a DeepBench text (a row that still parses would be
    imported, so each case breaks them all)."""
    def apply(text: str) -> str:
        lines = text.splitlines()
        for i, line in enumerate(lines):
            if line.strip()[:1].isdigit():
                lines[i] = "  ".join(edit(line.split()))
        return "\n".join(lines) + "\n"
    return apply


def _cell(column: int, value: str):
    return _every_row(lambda cells: cells[:column] + [value] + cells[column + 1:])


DEEPBENCH_TEXT = {
    "nan-sizes": _cell(0, "nan"), "negative-sizes": _cell(0, "-16"), "huge-sizes": _cell(0, "9" * 40),
    "fractional-sizes": _cell(0, "78.5"), "short-rows": _every_row(lambda cells: cells[:2]),
    "long-rows": _every_row(lambda cells: cells + ["7"] * 9),
    # the time columns: from the 7th on in gemm and conv rows (conv's shape too), the 3rd of an all-reduce row
    "times-nan": _every_row(lambda cells: [("nan" if i >= (6 if len(cells) > 3 else 2) and c[:1].isdigit() else c)
                                           for i, c in enumerate(cells)]),
    "only-headers": lambda t: "\n".join(l for l in t.splitlines() if not l.strip()[:1].isdigit()) + "\n",
    "no-ranks": lambda t: t.replace(" Num Ranks: 8", ""),
    "no-headers": lambda t: "\n".join(l for l in t.splitlines() if "usec" not in l and "msec" not in l) + "\n",
    "not-utf8-tail": lambda t: (t + "caf\udce9\n").encode("utf-8", "surrogateescape"),
    "nul-in-rows": _cell(1, "\x00"),
}


def _no_time(value):
    return [m.GEMM_TITLE, [None, "DeepSpeech", 1760, 16, 1760, "N", "N", None, value],
            [None, "DeepSpeech", 2048, 32, 2048, "T", "N", None, value]]


def _billion_laughs() -> bytes:
    entities = "".join(f'<!ENTITY e{i} "{"".join(f"&e{i - 1};" for _ in range(10))}">' for i in range(1, 10))
    sheet = (f'<?xml version="1.0"?><!DOCTYPE w [<!ENTITY e0 "lol">{entities}]>'
             '<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>'
             '<row r="1"><c r="A1" t="inlineStr"><is><t>&e9;</t></is></c></row></sheetData></worksheet>')
    return sheet.encode()


def _external_entity() -> bytes:
    return (f'<?xml version="1.0"?><!DOCTYPE w [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
            '<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>'
            '<row r="1"><c r="A1" t="inlineStr"><is><t>&x;</t></is></c></row></sheetData></worksheet>').encode()


SHEET = "xl/worksheets/sheet1.xml"
DEEPBENCH_XLSX = {
    "truncated-real": lambda: m.DEEPBENCH_V100.read_bytes()[:40000],
    "first-half": lambda: m.deepbench_workbook()[: len(m.deepbench_workbook()) // 2],
    "zip-of-text": lambda: m.zip_with({"hello.txt": b"not a workbook"}),
    "sheet-not-xml": lambda: m.zip_with({SHEET: b"<worksheet><sheetData><row r='1'><c"}, m.deepbench_workbook()),
    "sheet-billion-laughs": lambda: m.zip_with({SHEET: _billion_laughs()}, m.deepbench_workbook()),
    "sheet-external-entity": lambda: m.zip_with({SHEET: _external_entity()}, m.deepbench_workbook()),
    "zip-bomb": lambda: m.zip_with({"xl/media/big.bin": b"\0" * (40 << 20)}, m.deepbench_workbook()),
    "macro-member": lambda: m.zip_with({"xl/vbaProject.bin": f"Shell touch {MARKER}".encode()},
                                       m.deepbench_rows([["nothing", "here"]])),
    "no-blocks": lambda: m.deepbench_rows([["Precision", "Float"], ["hello", 1, 2]]),
    "only-specs": lambda: m.deepbench_rows([], specs=True),
    "no-time-column": lambda: m.deepbench_rows([m.GEMM_TITLE[:-1], [None, "x", 1, 2, 3, "N", "N"]]),
    "two-m-columns": lambda: m.deepbench_rows([m.GEMM_TITLE + ["M"], [None, "x", 1, 2, 3, "N", "N", None, 0.1, 4]]),
    "times-na": lambda: m.deepbench_rows(_no_time("N/A*")),
    "times-empty": lambda: m.deepbench_rows(_no_time(None)),
    "times-negative": lambda: m.deepbench_rows(_no_time(-0.038)),
    "times-text": lambda: m.deepbench_rows(_no_time("fast")),
    "times-bool": lambda: m.deepbench_rows(_no_time(True)),
    "transpose-garbage": lambda: m.deepbench_rows([m.GEMM_TITLE, [None, "x", 16, 16, 16, "maybe", "N", None, 0.1]]),
    "sizes-zero": lambda: m.deepbench_rows([m.GEMM_TITLE, [None, "x", 0, 16, 16, "N", "N", None, 0.1]]),
    "unknown-precision": lambda: m.deepbench_rows(_no_time(0.1), title="Results"),
    "only-recurrent": lambda: m.deepbench_rows([["Recurrent Layers - LSTM", "Source", "Hidden Units", "N"],
                                                [None, "MT", 512, 16]]),
    "conv-filter-too-big": lambda: m.deepbench_rows([
        ["Convolution"], [None, None, "W", "H", "C", "N", "K", "R", "S", "pad_h", "pad_w", "Vertical stride",
                          "Horizontal stride", "Forward (msec)"],
        [None, "x", 7, 7, 3, 8, 64, 9, 9, 0, 0, 1, 1, 0.1]]),
    "too-many-rows": lambda: m.deepbench_rows([m.GEMM_TITLE] + [[None, "x", 16, 16, 16, "N", "N", None, 0.1]] * 20001),
}


def deepbench_cases() -> list[Case]:
    base = m.deepbench_text()
    out = [reader_case(f"deepbench-text/{label}", "deepbench-text", edit(base)) for label, edit in DEEPBENCH_TEXT.items()]
    out += [reader_case(f"deepbench-xlsx/{label}", "deepbench-xlsx", build) for label, build in DEEPBENCH_XLSX.items()]
    return out


def _runs(edit) -> str:
    records = [json.loads(line) for line in m.runs_lines()]
    edit(records)
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records)


RUNS = {
    "measured-nan": lambda r: r[3].update(measured_time_s=NAN), "measured-negative": lambda r: r[3].update(measured_time_s=-1.0),
    "measured-zero": lambda r: r[3].update(measured_time_s=0.0), "measured-inf": lambda r: r[3].update(measured_time_s=INF),
    "measured-string": lambda r: r[3].update(measured_time_s="slow"), "predicted-negative": lambda r: r[3].update(predicted_time_s=-1.0),
    "strategy-number": lambda r: r[3].update(strategy=5), "terms-list": lambda r: r[3].update(terms=[1, 2]),
    "devices-negative": lambda r: r[3].update(devices=-4), "devices-nan": lambda r: r[3].update(devices=NAN),
    "line-is-list": lambda r: r.insert(2, "[1, 2, 3]"), "line-is-garbage": lambda r: r.insert(2, "{oops"),
    "huge-integer": lambda r: r.insert(2, '{"a": ' + "1" * 5000 + "}"),
    "nothing-usable": lambda r: r.__setitem__(slice(None), [{"predicted_time_s": None, "measured_time_s": 1.0}]),
    "one-model-only": lambda r: r.__setitem__(slice(None), [dict(x, model="one", scenario="one") for x in r]),
    "measured-1e308": lambda r: r[3].update(measured_time_s=HUGE), "predicted-denormal": lambda r: r[3].update(predicted_time_s=TINY),
    "measured-minus-inf": lambda r: r[3].update(measured_time_s=-INF), "flops-1e308": lambda r: r[3].update(flops_per_device=HUGE),
    "measured-1e30": lambda r: r[3].update(measured_time_s=1e30),  # 1e33 x its prediction: no residual to learn
    "predicted-1e-30": lambda r: r[3].update(predicted_time_s=1e-30),
}


def runs_cases() -> list[Case]:
    return ([reader_case(f"runs/{label}", "runs", _runs(edit)) for label, edit in RUNS.items()]
            + [reader_case(f"dataset/{label}", "model-error-runs", functools.partial(_dataset, edit))
               for label, edit in DATASETS.items()])


@functools.lru_cache(maxsize=1)
def _dataset_rows() -> str:
    """Four measured rows of a validation dataset (`predictor validate --out`): small_cnn2d serial runs at two
    widths and batches, measured 1.2x their prediction with the V100 profile."""
    import dataclasses

    from calibrate.cost_model import load_cost_model
    from predictor.api import default_plans, load_model, predict

    cost_model, rows = load_cost_model(m.V100), []
    for width in (4, 6):
        knobs = {"width": width, "image": 16}
        graph = load_model("small_cnn2d", **knobs)
        for batch in (4, 8):
            plan = default_plans(graph, "serial", batch, 1, 2)[0]
            seconds = predict(graph, plan, cost_model, interval=False).iteration_s
            rows.append({"label": "serial", "scenario": f"small_cnn2d/{width}/B{batch}", "model": "small_cnn2d",
                         "knobs": knobs, "measured_time_s": 1.2 * seconds, "prediction": {"plan": dataclasses.asdict(plan)}})
    return json.dumps(rows)


def _dataset(edit) -> str:
    rows = json.loads(_dataset_rows())
    edit(rows)
    return "".join(json.dumps(r) + "\n" for r in rows)


def _plan(**fields):
    return lambda r: r[1]["prediction"]["plan"].update(fields)


DATASETS = {  # model-error's reader of validation datasets
    "measured-string": lambda r: r[1].update(measured_time_s="slow"), "measured-negative": lambda r: r[1].update(measured_time_s=-1.0),
    "measured-list": lambda r: r[1].update(measured_time_s=[1.0]), "measured-1e308": lambda r: r[1].update(measured_time_s=HUGE),
    "prediction-list": lambda r: r[1].update(prediction=[1]), "plan-string": lambda r: r[1].update(prediction={"plan": "x"}),
    "plan-batch-string": _plan(batch="many"), "plan-devices-float": _plan(devices=2.5), "plan-split-strings": _plan(spatial_split=["a"]),
    "plan-batch-huge": _plan(batch=10 ** 12), "plan-extra-garbage": _plan(extra=[1, 2]),
    "knobs-list": lambda r: r[1].update(knobs=[1]), "knob-nan-string": lambda r: r[1].update(knobs={"width": {"a": 1}}),
    "label-list": lambda r: r[1].update(label=[1]), "model-number": lambda r: r[1].update(model=5),
    "model-code": lambda r: r[1].update(model="os:system", knobs={"command": f"touch {MARKER}"}),
    "model-file": lambda r: r[1].update(model="evil.py"),
    "knob-zero-width": lambda r: r[1].update(knobs={"width": 0, "image": 16}),
}


def _correction(edit) -> dict[str, str]:
    doc = m.correction_doc()
    edit(doc)
    files = m.correction_pair(json.dumps(doc))
    files["ref.yaml"] = files.pop("p.yaml")
    return files


TREES = {"kind": "trees", "base": 0.0, "weight": 1.0, "trees": [
    {"children_left": [1, -1, -1], "children_right": [2, -1, -1], "feature": [0, -2, -2],
     "threshold": [0.5, -2.0, -2.0], "value": [0.0, 0.1, -0.1]}]}


def _trees(edit):
    """A valid boosted-trees model in place of the trained one, then `edit` applied to it."""
    def apply(doc):
        doc["model"] = copy.deepcopy(TREES)
        edit(doc["model"], doc["model"]["trees"][0])
    return apply


def _ridge(edit):
    """`edit` applied to a ridge model (the trained one when it is ridge, else one of the right size)."""
    def apply(doc):
        if doc["model"]["kind"] != "ridge":
            n = len(doc["features"])
            doc["model"] = {"kind": "ridge", "mean": [0.0] * n, "scale": [1.0] * n, "coef": [0.0] * n, "intercept": 0.0}
        edit(doc["model"])
    return apply


CORRECTIONS = {
    "tree-cycle": _trees(lambda model, tree: tree.update(children_left=[0, -1, -1])),
    "tree-child-out-of-range": _trees(lambda model, tree: tree.update(children_right=[99, -1, -1])),
    "tree-feature-out-of-range": _trees(lambda model, tree: tree.update(feature=[999, -2, -2])),
    "tree-nan-leaf": _trees(lambda model, tree: tree["value"].__setitem__(1, NAN)),
    "tree-inf-threshold": _trees(lambda model, tree: tree["threshold"].__setitem__(0, INF)),
    "tree-ragged": _trees(lambda model, tree: tree["value"].pop()),
    "tree-empty": _trees(lambda model, tree: model.update(trees=[])),
    "tree-nan-base": _trees(lambda model, tree: model.update(base=NAN)),
    "tree-weight-string": _trees(lambda model, tree: model.update(weight="heavy")),
    "ridge-zero-scale": _ridge(lambda model: model["scale"].__setitem__(0, 0.0)),
    "ridge-nan-intercept": _ridge(lambda model: model.update(intercept=NAN)),
    "ridge-inf-mean": _ridge(lambda model: model["mean"].__setitem__(0, INF)),
    "ridge-short-coef": _ridge(lambda model: model["coef"].pop()),
    "ridge-intercept-1e308": _ridge(lambda model: model.update(intercept=HUGE)),
    "ridge-intercept-1e29": _ridge(lambda model: model.update(intercept=1e29)),  # exp overflowed to inf
    "ridge-coef-1e20": _ridge(lambda model: model["coef"].__setitem__(0, 1e20)),
    "ridge-scale-denormal": _ridge(lambda model: model["scale"].__setitem__(0, TINY)),
    "tree-weight-1e20": _trees(lambda model, tree: model.update(weight=1e20)),
    "tree-leaf-1e29": _trees(lambda model, tree: tree["value"].__setitem__(1, 1e29)),
    "tree-base-minus-1e308": _trees(lambda model, tree: model.update(base=-HUGE)),
    "domain-upside-down": lambda d: d["domain"].update(min=[v + 1e9 for v in d["domain"]["max"]]),
    "domain-short": lambda d: d["domain"]["min"].pop(),
    "format": lambda d: d.update(format="pickle"), "format-version": lambda d: d.update(format_version=2),
    "features": lambda d: d["features"].append("extra"), "identity": lambda d: d["profile"].update(sha256="f" * 64),
    "enabled-string": lambda d: d.update(enabled={"data": "yes please"}), "model-missing": lambda d: d.pop("model"),
    "model-kind": lambda d: d["model"].update(kind="pickle"), "extra-key": lambda d: d.update(payload="rm -rf /"),
}


def correction_cases() -> list[Case]:
    from .files import READERS

    argv = list(READERS["correction"][1])
    def files(edit, tamper=False) -> dict:
        pair = functools.lru_cache(maxsize=1)(lambda: _correction(edit))
        text = lambda: pair()["p.correction.json"]
        if tamper:
            text = lambda: pair()["p.correction.json"].replace('"enabled": {', '"enabled": {"x": true, ', 1)
        return {"good.yaml": lambda: m.text(m.V100), "ref.yaml": lambda: pair()["ref.yaml"], "p.correction.json": text}

    out = [Case(f"correction/{label}", argv, files(edit), "p.correction.json") for label, edit in CORRECTIONS.items()]
    out.append(Case("correction/tampered", argv, files(lambda d: None, tamper=True), "p.correction.json"))
    for label, edit in (("trees", _trees(lambda model, tree: None)), ("ridge", _ridge(lambda model: None))):
        out.append(Case(f"control/correction-{label}", argv, files(edit), "", 0))
    return out
