"""The layout of the framework benchmark's cold-code chains (profiler.bench_framework.measure_cold), shared with
their fit (calibrate.framework) without importing torch: which tiny layers, in which orders, and how many of
them follow a layer of another type."""
from __future__ import annotations

#: the chains' layer types: shape-preserving modules on a (COLD_BATCH, *COLD_MAP) tensor
COLD_LAYERS = ("conv", "batchnorm", "relu", "maxpool", "avgpool")
COLD_REPEATS = 6
COLD_BATCH = 8
COLD_MAP = (8, 4, 4)  # channels, height, width
COLD_ORDERS = ("cycled", "grouped")
COLD_VARIANTS = ("cold_forward", "cold_step")


def cold_order(order: str) -> list[str]:
    """The layer types of a cold-code chain in `order`: cycled (conv, batchnorm, relu, ... repeated) or grouped
    (every conv, then every batchnorm, ...)."""
    if order == "cycled":
        return list(COLD_LAYERS) * COLD_REPEATS
    return [kind for kind in COLD_LAYERS for _ in range(COLD_REPEATS)]


def cold_transitions(order: str) -> int:
    """Layers of the chain that follow a layer of another type (the first counts: the step's loop ran before)."""
    kinds = cold_order(order)
    return sum(1 for i, kind in enumerate(kinds) if i == 0 or kinds[i - 1] != kind)
