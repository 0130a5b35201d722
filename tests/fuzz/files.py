"""Cases where the file itself is hostile, whatever kind it should be: special files (FIFO, device, folder,
symlink loop, missing, oversize, not UTF-8) and hostile YAML/JSON (alias bombs, deep nesting, 5000-digit
integers, tags, code) given to every reader."""
from __future__ import annotations

from . import materials as m
from .core import FIFO, FOLDER, LOOP, MARKER, Case

# reader name -> (file name it reads, argv with F for the file); other files the command needs come from SUPPORT
READERS = {
    "show": ("p.yaml", ["profiler", "show", "F"]),
    "run-profile": ("p.yaml", ["predictor", "run", "--profile", "F", *m.RUN_TAIL]),
    "fit": ("p.yaml", ["profiler", "fit", "F", "--out", "{d}/fitted.yaml"]),
    "drift": ("p.yaml", ["profiler", "drift", "F", "{d}/good.yaml", "--no-predict"]),
    "history": ("p.yaml", ["profiler", "history", "F", "{d}/good.yaml"]),
    "validate-profile": ("p.yaml", ["predictor", "validate", "--profile", "F", "--suite", "smoke", "--out", "{d}/runs.jsonl"]),
    "train-profile": ("p.yaml", ["predictor", "train-correction", "--profile", "F", "--runs", "{d}/runs.jsonl"]),
    "nccl-into": ("p.yaml", ["profiler", "import-nccl-tests", "{d}/ar.txt", "--into", "F", "--out", "{d}/merged.yaml"]),
    "spec-yaml": ("spec.yaml", ["predictor", "run", "--model", "F", "--batch", "8", "--gpus", "2", "--profile", "{d}/good.yaml"]),
    "spec-json": ("spec.json", ["predictor", "run", "--model", "F", "--batch", "8", "--gpus", "2", "--profile", "{d}/good.yaml"]),
    "suite-validate": ("suite.yaml", ["predictor", "validate", "--suite", "F", "--profile", "{d}/good.yaml", "--out", "{d}/new.jsonl"]),
    "suite-shapes": ("suite.yaml", ["predictor", "shapes", "--suite", "F", "--out", "{d}/new-shapes.yaml"]),
    "shapes-calibrate": ("shapes.yaml", ["profiler", "calibrate", "--device", "cpu", "--only", "compute", "--shapes", "F",
                                         "--out", "{d}/new-profile.yaml"]),
    "runs": ("runs.jsonl", ["predictor", "train-correction", "--profile", "{d}/good.yaml", "--runs", "F", "--out", "{d}/c.json"]),
    "model-error-profile": ("p.yaml", ["predictor", "model-error", "--profile", "F", "{d}/runs.jsonl", "--write"]),
    "model-error-runs": ("runs.jsonl", ["predictor", "model-error", "--profile", "{d}/good.yaml", "F"]),
    "nccl-text": ("ar.txt", ["profiler", "import-nccl-tests", "F", "--out", "{d}/imported.yaml"]),
    "nccl-json": ("a2a.json", ["profiler", "import-nccl-tests", "F", "--out", "{d}/imported.yaml"]),
    "deepbench-text": ("db.txt", ["profiler", "import-deepbench", "F", "--out", "{d}/imported.yaml"]),
    "deepbench-xlsx": ("db.xlsx", ["profiler", "import-deepbench", "F", "--out", "{d}/imported.yaml"]),
    "deepbench-into": ("p.yaml", ["profiler", "import-deepbench", "{d}/db.txt", "--into", "F", "--out", "{d}/merged.yaml"]),
    "correction": ("p.correction.json", ["predictor", "run", "--profile", "{d}/ref.yaml", *m.RUN_TAIL]),
    "xla-gemm": ("xla.yaml", ["bench", "xla-gemm", "F", "--results", "{d}/results"]),
}
YAML_READERS = ("show", "run-profile", "drift", "history", "spec-yaml", "suite-validate", "suite-shapes", "shapes-calibrate",
                "xla-gemm")
JSON_READERS = ("spec-json", "runs", "model-error-runs", "nccl-json", "correction")


def support(reader: str) -> dict:
    """The valid files a reader's command needs besides the one under test."""
    files = {"good.yaml": lambda: m.text(m.V100)}
    if reader in ("train-profile", "model-error-profile"):
        files["runs.jsonl"] = "\n".join(m.runs_lines()) + "\n"
    if reader == "nccl-into":
        files["ar.txt"] = m.text(m.NCCL / "all_reduce_perf_8gpu.txt")
    if reader == "deepbench-into":
        files["db.txt"] = m.deepbench_text()
    if reader == "correction":  # ref.yaml names p.correction.json with the hash of whatever the case puts there
        files["ref.yaml"] = lambda: m.dump({**m.doc(m.V100), "correction": {"path": "p.correction.json", "sha256": "0" * 64}})
    return files


def reader_case(case_id: str, reader: str, content, needle: str | None = None, path: str | None = None) -> Case:
    name, argv = READERS[reader]
    target = path or f"{{d}}/{name}"
    files = support(reader)
    if path is None:
        files[name] = content
    argv = [target if a == "F" else a for a in argv]
    return Case(case_id, argv, files, needle if needle is not None else (path or name))


def special_cases() -> list[Case]:
    specials = {
        "fifo": FIFO, "folder": FOLDER, "symlink-loop": LOOP, "not-utf8": b"a: caf\xe9 \xff\xfe\n",
        "nul-bytes": b"\x00" * 64, "empty": "", "oversize": ("sparse", 300 << 20),
    }
    out = []
    for reader in READERS:
        for label, content in specials.items():
            out.append(reader_case(f"special/{label}/{reader}", reader, content))
        if reader != "correction":  # its file is named by the profile, not on the command line
            out.append(reader_case(f"special/dev-zero/{reader}", reader, None, "/dev/zero", path="/dev/zero"))
            out.append(reader_case(f"special/missing/{reader}", reader, None, "nowhere", path="{d}/nowhere/x.yaml"))
    return out


def _bomb(levels: int = 9) -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


HOSTILE_YAML = {
    "alias-bomb": _bomb(),
    "alias-in-settings": "schema_version: 1\nsettings: {a: &x [1, 2], b: *x}\n",
    "deep-flow": "a: " + "[" * 200 + "]" * 200 + "\n",
    "deep-block": "".join("  " * i + f"k{i}:\n" for i in range(150)) + "  " * 150 + "v: 1\n",
    "libyaml-depth": "[" * 20000 + "]" * 20000,
    "int-5000-digits": "schema_version: " + "9" * 5000 + "\n",
    "python-apply": f"a: !!python/object/apply:os.system ['touch {MARKER}']\n",
    "python-name": "a: !!python/name:os.system\n",
    "binary-tag": "a: !!binary aGVsbG8=\n",
    "custom-tag": "a: !custom {b: 1}\n",
    "set-tag": "a: !!set {b, c}\n",
    "duplicate-key": "schema_version: 1\nschema_version: 1\n",
    "two-documents": "a: 1\n---\nb: 2\n",
    "top-level-list": "- 1\n- 2\n",
    "top-level-scalar": "42\n",
    "unclosed-flow": "a: [1, 2\n",
    "tab-indent": "a:\n\tb: 1\n",
    "control-char": "a: \x07\n",
    "long-string": "a: " + "x" * (2 << 20) + "\n",
}
HOSTILE_JSON = {
    "deep": "[" * 100000 + "]" * 100000,
    "deep-object": '{"a":' * 5000 + "1" + "}" * 5000,
    "int-5000-digits": '{"a": ' + "7" * 5000 + "}",
    "duplicate-key": '{"a": 1, "a": 2}',
    "truncated": '{"a": [1, 2',
    "top-level-list": "[1, 2, 3]",
    "not-json": "this is not json\n",
    "nan-everywhere": '{"a": NaN, "b": Infinity}',
}


def hostile_cases() -> list[Case]:
    out = []
    for reader in YAML_READERS:
        for label, content in HOSTILE_YAML.items():
            if label == "long-string" and reader not in ("suite-validate", "suite-shapes"):
                continue  # only the suite's 1 MiB cap refuses 2 MiB by size; elsewhere it is just a bad document
            out.append(reader_case(f"yaml/{label}/{reader}", reader, content))
    for reader in JSON_READERS:
        for label, content in HOSTILE_JSON.items():
            if reader == "runs":
                content = content.replace("\n", " ") + "\n"
            if reader == "correction":
                files = {**support(reader), "ref.yaml": lambda c=content: m.correction_pair(c)["p.yaml"],
                         "p.correction.json": content}
                out.append(Case(f"json/{label}/{reader}", list(READERS[reader][1]), files, "p.correction.json"))
                continue
            out.append(reader_case(f"json/{label}/{reader}", reader, content))
    return out
