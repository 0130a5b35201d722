"""Measured GEMM throughput of OpenXLA's GPU cost model (xla/service/gpu/model/matmul_interpolator_data.h) as the
YAML that `python -m bench xla-gemm` reads (calibrate/data/xla_matmul_<key>.yaml).

    python scripts/xla_matmul_extract.py HEADER GPU_KEY COMMIT > calibrate/data/xla_matmul_<key>.yaml

HEADER: the header file as text (e.g. `git show <commit>:xla/service/gpu/model/matmul_interpolator_data.h`), GPU_KEY:
its table key (sm_90). Every entry (b, m, n, k) with its bf16 and f32 FLOP/s is copied as it is; nothing computed.
"""
from __future__ import annotations

import re
import sys

DTYPES = {"bf16xbf16->bf16": "bfloat16", "f32xf32->f32": "float32"}


def entries(text: str, key: str) -> list[dict]:
    starts = [(m.start(), m.group(1)) for m in re.finditer(r'key: "((?:sm|gfx)[^"]*)"', text)] + [(len(text), "")]
    block = next(text[a:b] for (a, name), (b, _) in zip(starts, starts[1:]) if name == key)
    out = []
    for m in re.finditer(r"entries \{\s*b: (\d+)\s*m: (\d+)\s*n: (\d+)\s*k: (\d+)\s*((?:flops \{[^}]*\}\s*)+)\}", block):
        rates = dict(re.findall(r'flops \{ key: "([^"]+)" value: (\d+) \}', m.group(5)))
        row = dict(zip("bmnk", map(int, m.groups()[:4])))
        row.update({DTYPES[k]: float(v) for k, v in rates.items() if k in DTYPES})
        out.append(row)
    return out


def main(argv: list[str]) -> int:
    header, key, commit = argv
    rows = entries(open(header).read(), key)
    print(f"# OpenXLA's measured GEMM throughput, table '{key}' of xla/service/gpu/model/matmul_interpolator_data.h")
    print(f"# (Apache-2.0, the OpenXLA Authors; the licence's text: calibrate/data/deepbench/LICENSE), as stored in")
    print(f"# ROCm/xla at {commit}; made by scripts/xla_matmul_extract.py")
    print(f"source: 'OpenXLA matmul_interpolator_data.h, table {key} (ROCm/xla @{commit}), FLOP/s = 2 b m n k / time'")
    print(f"gpu_key: {key}")
    print("entries:  # b, m, n, k, bfloat16 FLOP/s, float32 FLOP/s (XLA's default f32 precision: TF32 tensor cores)")
    for r in sorted(rows, key=lambda r: (r["b"], r["m"], r["n"], r["k"])):
        print(f"  - [{r['b']}, {r['m']}, {r['n']}, {r['k']}, {r['bfloat16']:.6g}, {r['float32']:.6g}]")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
