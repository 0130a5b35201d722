"""The one predicted-vs-measured scatter plot the validation reports draw (log-log, one colour per group, the
y = x line), written through profiler.outputs.save_figure (atomic, refuses what it must not overwrite)."""
from __future__ import annotations

from typing import Mapping, Optional, Sequence

from profiler.outputs import save_figure


def predicted_vs_measured(groups: Mapping[str, Sequence[tuple[float, float]]], path: str, *, xlabel: str,
                          ylabel: str, title: Optional[str] = None, point_size: int = 22) -> None:
    """groups: label -> [(measured_s, predicted_s), ...]."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 6))
    for label, pts in sorted(groups.items()):
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], label=label, s=point_size)
    values = [v for pts in groups.values() for p in pts for v in p]
    if values:
        lo, hi = min(values) / 1.5, max(values) * 1.5
        ax.plot([lo, hi], [lo, hi], color="grey", lw=1, ls="--", label="predicted = measured")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)
