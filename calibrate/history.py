"""Many profiles of one machine over time: headline series per coefficient family and their change points.

Each family's headline value per profile is `drift.headline_value` over the points that every profile
containing that family measured (so a profile with extra or missing shapes does not move the series).
Change points (docs/drift.md, `profiler history`; PELT: Killick, Fearnhead & Eckley, JASA 2012) are
found with `ruptures` PELT on the log of the series, with noise scaled from the series itself, and kept
only where the level moves by at least `min_effect` (the same minimum effect `profiler drift` uses).
"""
from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from calibrate.drift import CATEGORY_LABELS, DEFAULT_MIN_EFFECT, PointKey, headline_value, points_of
from profiler.outputs import save_figure
from profiler.profile import Profile


@dataclass
class Series:
    """One family's headline value across profiles (ordered by `created`)."""

    family: str
    category: str
    kind: str  # "rate" or "latency"
    unit: str  # "FLOP/s", "B/s", "1/s" or "s"
    points: int  # benchmark points behind each value
    created: list[dt.datetime]
    values: list[float]
    change_points: list[int] = field(default_factory=list)  # index of the first profile of each new level

    def level_change(self, index: int) -> float:
        """Relative change of the median level across change point `index` (new / old - 1)."""
        bounds = [0, *self.change_points, len(self.values)]
        i = bounds.index(index)
        before = float(np.median(self.values[bounds[i - 1] : index]))
        after = float(np.median(self.values[index : bounds[i + 1]]))
        return after / before - 1.0


def parse_created(profile: Profile) -> dt.datetime:
    """`created` as an aware UTC datetime (naive timestamps are taken as UTC)."""
    stamp = dt.datetime.fromisoformat(profile.created.replace("Z", "+00:00"))
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=dt.timezone.utc)


def build_series(profiles: Sequence[Profile]) -> list[Series]:
    """Headline series of every family measured by at least two of the profiles (sorted by created)."""
    ordered = sorted(profiles, key=parse_created)
    all_points = [points_of(p.samples) for p in ordered]
    families: dict[str, list[int]] = {}
    for i, points in enumerate(all_points):
        for fam in {p.family for p in points.values()}:
            families.setdefault(fam, []).append(i)
    out = []
    for fam, members in sorted(families.items()):
        if len(members) < 2:
            continue
        keys: set[PointKey] = set.intersection(*({k for k, p in all_points[i].items() if p.family == fam} for i in members))
        if not keys:
            continue
        first = all_points[members[0]][next(iter(keys))]
        out.append(
            Series(
                family=fam,
                category=first.category,
                kind=first.kind,
                unit=first.unit,
                points=len(keys),
                created=[parse_created(ordered[i]) for i in members],
                values=[headline_value([all_points[i][k] for k in keys]) for i in members],
            )
        )
    spreads = [(parse_created(p), round_spread(p.samples)) for p in ordered]
    spreads = [(when, value) for when, value in spreads if value is not None]
    if len(spreads) >= 2:
        out.append(Series(family=ROUND_SPREAD_FAMILY, category="collective_spread", kind="latency", unit="x",
                          points=len(spreads), created=[w for w, _ in spreads], values=[v for _, v in spreads]))
    return out


#: the series of collectives repeated over time (`profiler calibrate --repeat-over`): how much slower their slow
#: rounds run than their fast ones
ROUND_SPREAD_FAMILY = "collectives: round-to-round spread (p95 / p5 of the rounds)"


def round_spread(samples) -> float | None:
    """The spread of one calibration's repeated collectives: for every point measured in several rounds, the 95th
    over the 5th percentile of its rounds' median times; their median over the points, preferring the inter-node
    points (the fabric) where there are some. None without repeated rounds."""
    rounds: dict[tuple, list[float]] = {}
    for s in samples:
        k = s.extra.get("round")
        if not isinstance(k, int) or isinstance(k, bool) or not s.times_s:
            continue
        group = s.params.get("group") if isinstance(s.params.get("group"), dict) else {}
        key = (s.benchmark, s.variant, str(s.params.get("size_bytes")), int(group.get("size", 0) or 0),
               int(group.get("nodes", 1) or 1))
        rounds.setdefault(key, []).append(float(np.median(s.times_s)))
    ratios = {key: float(np.percentile(v, 95) / max(np.percentile(v, 5), 1e-300))
              for key, v in rounds.items() if len(v) >= 2}
    inter = [r for key, r in ratios.items() if key[4] > 1]
    chosen = inter or list(ratios.values())
    return float(np.median(chosen)) if chosen else None


def detect_change_points(values: Sequence[float], min_effect: float = DEFAULT_MIN_EFFECT, min_size: int = 2) -> list[int]:
    """Indices where a new level starts. PELT (l2 cost) on log(values) with a BIC-like penalty
    2 * sigma^2 * log(n), sigma from the median absolute successive difference (robust to the level shifts
    themselves); a change point survives only if the medians of the segments around it differ by at least
    min_effect. Fewer than 2 * min_size values: no change points."""
    import ruptures  # imported here: only history needs it

    y = np.log(np.asarray(values, dtype=float))
    n = len(y)
    if n < 2 * min_size:
        return []
    sigma = 1.4826 * float(np.median(np.abs(np.diff(y)))) / math.sqrt(2)
    sigma = max(sigma, math.log1p(min_effect) / 4)  # a perfectly flat series still needs a real step
    penalty = 2 * sigma**2 * math.log(n)
    ends = ruptures.Pelt(model="l2", min_size=min_size, jump=1).fit(y.reshape(-1, 1)).predict(pen=penalty)
    starts = [e for e in ends[:-1]]
    kept: list[int] = []
    for idx in starts:
        prev = kept[-1] if kept else 0
        nxt = next((s for s in starts if s > idx), n)
        step = math.exp(float(np.median(y[idx:nxt])) - float(np.median(y[prev:idx]))) - 1
        if abs(step) >= min_effect:
            kept.append(idx)
    return kept


def with_change_points(series: Sequence[Series], min_effect: float = DEFAULT_MIN_EFFECT) -> list[Series]:
    for s in series:
        s.change_points = detect_change_points(s.values, min_effect)
    return list(series)


# ---------------------------------------------------------------------------------------------- plot

_SCALES = {"FLOP/s": (1e9, "GFLOP/s"), "B/s": (1e9, "GB/s"), "1/s": (1.0, "calls/s"), "s": (1e-6, "µs"),
           "x": (1.0, "x (slow / fast round)")}


def panel_of(s: Series) -> tuple[str, str]:
    """(panel title, y-axis label) for a series: one panel per coefficient family category and unit."""
    _, unit_label = _SCALES[s.unit]
    title = CATEGORY_LABELS.get(s.category, s.category)
    if s.category == "compute" and s.unit == "B/s":
        title = "memory-bound layers: bandwidth (bytes moved)"
    return title, unit_label


def plot_history(series: Sequence[Series], path: str, title: str) -> None:
    """One panel per coefficient family; a line per family member; change points marked by dashed
    vertical lines and the size of the step. Dates on a shared x axis (UTC)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    panels: dict[tuple[str, str], list[Series]] = {}
    for s in series:
        panels.setdefault(panel_of(s), []).append(s)
    fig, axes = plt.subplots(len(panels), 1, figsize=(11, 3.2 * len(panels) + 0.8), sharex=True, squeeze=False)
    for ax, ((panel_title, unit_label), members) in zip(axes[:, 0], panels.items()):
        lows, highs = [], []
        for s in members:
            scale = _SCALES[s.unit][0]
            y = [v / scale for v in s.values]
            lows.append(min(y))
            highs.append(max(y))
            (line,) = ax.plot(s.created, y, marker="o", markersize=4, linewidth=1.4, label=s.family)
            for idx in s.change_points:
                when = s.created[idx - 1] + (s.created[idx] - s.created[idx - 1]) / 2
                ax.axvline(when, color=line.get_color(), linestyle="--", linewidth=1.2, alpha=0.8)
                ax.annotate(
                    f"{s.level_change(idx):+.0%}",
                    xy=(when, y[idx]),
                    xytext=(4, 0),
                    textcoords="offset points",
                    color=line.get_color(),
                    fontsize=9,
                    fontweight="bold",
                )
        low, high = min(lows), max(highs)
        if high / max(low, 1e-300) > 20:
            ax.set_yscale("log")
        else:  # show at least a 20% band so that noise of a few 0.1% does not look like a cliff
            ax.set_ylim(min(low * 0.97, high * 0.8), high * 1.05)
        ax.set_title(panel_title, fontsize=11, loc="left")
        ax.set_ylabel(unit_label)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    bottom = axes[-1, 0]
    locator = mdates.AutoDateLocator(minticks=3, maxticks=10)
    bottom.xaxis.set_major_locator(locator)
    bottom.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=dt.timezone.utc))
    bottom.set_xlabel("profile created (UTC); dashed line = change point, label = step in level")
    fig.suptitle(title, fontsize=12)
    fig.tight_layout()
    save_figure(fig, path, dpi=110, bbox_inches="tight")
    plt.close(fig)
