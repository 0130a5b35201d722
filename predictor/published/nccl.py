"""Published multi-node all-reduce curves (`nccl_published.yaml`) against the reference profiles' link model.

A curve is one nccl-tests (or equivalent) sweep of message sizes with measured times (or bus bandwidths) on n ranks
over N nodes. Read as an alpha-beta line it has two regimes, the latency of small messages and a + F + x / B of
large ones, F the start-up of the bandwidth regime (NCCL's pipeline fill); `fill_s` estimates F per curve as the
intercept of the large sizes' line minus the small sizes' median time. The link model takes t = a + x/B + min(x/B,
F) between them; the reference profiles carry the InfiniBand curve's F (calibrate.published.NCCL_NET_FILL) with the
spread of all curves as its interval, which tests/predictor/test_nccl_curves.py checks. docs/method.md §6
("Bandwidth-regime start-up"); docs/decisions/2026-12-04-network-fill.md.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

from predictor.published.corpus import CORPUS_DIR
from profiler.errors import UserError
from profiler.inputs import read_yaml

NCCL_FILE = CORPUS_DIR / "nccl_published.yaml"
LATENCY_MAX_BYTES = 8 * 1024  # sizes whose time is the latency a
LARGE_MIN_BYTES = 256 * 2**20  # sizes the bandwidth line may be drawn through
LINE_POINTS = 3  # the largest sizes the bandwidth line is drawn through
MIN_POINTS = 2  # distinct large sizes the line needs


@dataclass(frozen=True)
class Curve:
    """One measured all-reduce sweep: (size_bytes, seconds) points on `ranks` ranks over `nodes` nodes."""

    id: str
    nodes: int
    ranks: int
    network: str
    points: tuple[tuple[float, float], ...]

    @property
    def infiniband(self) -> bool:
        return "infiniband" in self.network.lower()


def _seconds(row: dict, size: float, ranks: int) -> Optional[float]:
    for key in ("oop_time_us", "ip_time_us", "time_us"):
        if isinstance(row.get(key), (int, float)) and row[key] > 0:
            return float(row[key]) * 1e-6
    for key in ("oop_busbw_GBps", "ip_busbw_GBps", "busbw_GBps"):
        if isinstance(row.get(key), (int, float)) and row[key] > 0:
            return size * 2 * (ranks - 1) / ranks / (float(row[key]) * 1e9)
    return None


def load_curves(path: Union[str, Path] = NCCL_FILE) -> list[Curve]:
    """The all-reduce curves of `path` with a stated node count and numeric sizes (nccl-tests convention: time in
    microseconds, busbw in GB/s); records without them (a maintainer's figure of unstated size) are left out."""
    data = read_yaml(path)
    if not isinstance(data, list):
        raise UserError(f"{path}: must be a list of curve records")
    curves = []
    for index, rec in enumerate(data):
        if not isinstance(rec, dict) or not isinstance(rec.get("system"), dict):
            raise UserError(f"{path}: record {index}: needs a `system` mapping")
        rid = str(rec.get("id", f"#{index}"))
        system = rec["system"]
        nodes, per_node = system.get("nodes"), system.get("gpus_per_node")
        if not (isinstance(nodes, int) and isinstance(per_node, int)) or nodes < 2:
            continue
        ranks = int(system.get("total_ranks") or nodes * per_node)
        points = []
        for row in rec.get("data") or []:
            size = row.get("size_bytes") if isinstance(row, dict) else None
            if not isinstance(size, (int, float)) or isinstance(size, bool) or size <= 0:
                continue
            t = _seconds(row, float(size), ranks)
            if t is not None:
                points.append((float(size), t))
        if points:
            curves.append(Curve(rid, nodes, ranks, str(system.get("inter_node_network", "")), tuple(sorted(points))))
    return curves


def lines(curve: Curve) -> Optional[tuple[float, float, float]]:
    """(a, F, B) of the module docstring for one curve, or None when it has no latency point or fewer than two
    distinct sizes of at least 256 MiB (its bandwidth line is then not drawn through large messages)."""
    latency = [t for s, t in curve.points if s <= LATENCY_MAX_BYTES]
    large = [(s, t) for s, t in curve.points if s >= LARGE_MIN_BYTES][-LINE_POINTS:]
    if not latency or len({s for s, _ in large}) < MIN_POINTS:
        return None
    factor = 2 * (curve.ranks - 1) / curve.ranks
    xs, ts = [s * factor for s, _ in large], [t for _, t in large]
    mean_x, mean_t = statistics.fmean(xs), statistics.fmean(ts)
    slope = sum((x - mean_x) * (t - mean_t) for x, t in zip(xs, ts)) / sum((x - mean_x) ** 2 for x in xs)
    a = statistics.median(latency)
    return a, mean_t - slope * mean_x - a, 1.0 / slope


def fill_s(curve: Curve) -> Optional[float]:
    """F of one curve (`lines`), or None."""
    fitted = lines(curve)
    return fitted[1] if fitted else None


def shape_accuracy(curve: Curve, min_bytes: float = 64 * 1024,
                   fitted: Optional[tuple[float, float, float]] = None) -> Optional[tuple[float, float, int]]:
    """Mean accuracy 1 - |pred - meas| / meas over the curve's sizes >= min_bytes of the alpha-beta line
    a + x/B and of the link model a + x/B + min(x/B, F), both on the curve's own (a, F, B) (`lines`, unless given
    as `fitted`); and the point count."""
    fitted = fitted or lines(curve)
    if fitted is None:
        return None
    a, fill, bus = fitted
    factor = 2 * (curve.ranks - 1) / curve.ranks
    plain, with_fill = [], []
    for size, t in curve.points:
        if size >= min_bytes:
            b = size * factor / bus
            plain.append(1 - abs(a + b - t) / t)
            with_fill.append(1 - abs(a + b + min(b, fill) - t) / t)
    return (statistics.fmean(plain), statistics.fmean(with_fill), len(plain)) if plain else None


def fills(curves: list[Curve]) -> dict[str, float]:
    """curve id -> F, for the curves it can be read from."""
    return {c.id: f for c in curves if (f := fill_s(c)) is not None}


def main(argv=None) -> int:
    """Print F, the large-message bus bandwidth and the shape accuracy of every curve of the shipped file."""
    del argv
    for curve in load_curves():
        fitted = lines(curve)
        if fitted is None:
            print(f"{curve.id}: no latency point or fewer than two sizes >= 256 MiB; not read")
            continue
        a, fill, bus = fitted
        shape = shape_accuracy(curve, fitted=fitted)
        text = (f"{curve.id} ({curve.ranks} ranks, {curve.nodes} nodes): latency {a * 1e6:.1f} us, "
                f"fill {fill * 1e3:.2f} ms, bus bandwidth {bus / 1e9:.0f} GB/s")
        if shape and shape[2] >= 8:
            text += f"; sizes >= 64 KiB ({shape[2]}): alpha-beta {shape[0]:.1%}, with the fill {shape[1]:.1%}"
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
