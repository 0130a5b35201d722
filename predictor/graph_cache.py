"""A disk cache of traced models: tracing ResNet-50 on the meta device takes seconds and needs torch, reading
its graph back takes milliseconds and needs neither.

An entry is plain JSON (`<cache>/graphs/<key>.json`), never code: the key is the SHA-256 of what the graph
depends on — the zoo model's name, its knobs and input shape, and the text of the code that builds and traces
it (the zoo and tracer sources) — so an edited model or tracer misses the cache instead of reading a stale
graph. User modules are not cached: their code may import anything, so no fingerprint covers it. Entries
live in profiler.disk_cache's folder ($PARAORACLE_CACHE; off disables it).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Callable, Iterable

from predictor.graph import Layer, ModelGraph
from profiler import disk_cache

FORMAT = "paraoracle-graph"
VERSION = 2  # 2: the graph under "payload" (profiler.disk_cache)
_PACKAGE = Path(__file__).resolve().parent
#: the code every zoo graph depends on
ZOO_SOURCES = tuple(sorted((_PACKAGE / "zoo").glob("*.py"))) + (_PACKAGE / "trace.py", _PACKAGE / "graph.py")
_TUPLE_FIELDS = ("input_shape", "output_shape", "weight_shape", "kernel", "stride", "padding", "dilation", "inputs")


def fingerprint(paths: Iterable[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(str(Path(path).name).encode())
        digest.update(Path(path).read_bytes())
    return digest.hexdigest()


def cache_key(reference: str, knobs: dict, input_shape, sources: Iterable[Path]) -> str:
    text = json.dumps({"ref": reference, "knobs": knobs, "shape": list(input_shape) if input_shape else None,
                       "code": fingerprint(sources), "version": VERSION}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def to_json(graph: ModelGraph) -> dict:
    return {"name": graph.name, "input_shape": list(graph.input_shape), "unsupported": list(graph.unsupported),
            "layers": [{k: (list(v) if isinstance(v, tuple) else v) for k, v in layer.__dict__.items()}
                       for layer in graph.layers]}


def from_json(data: dict) -> ModelGraph:
    """A ModelGraph from to_json's output; ValueError/TypeError/KeyError on anything malformed."""
    layers = []
    for raw in data["layers"]:
        fields = dict(raw)
        for key in _TUPLE_FIELDS:
            fields[key] = tuple(fields.get(key, ()))
        layers.append(Layer(**fields))
    for layer in layers:
        if not isinstance(layer.name, str) or not isinstance(layer.op, str) or not all(
                isinstance(d, int) for d in layer.input_shape + layer.output_shape):
            raise ValueError("malformed layer")
    return ModelGraph(name=str(data["name"]), input_shape=tuple(int(d) for d in data["input_shape"]),
                      layers=tuple(layers), unsupported=tuple(str(u) for u in data.get("unsupported", ())))


def is_cached(key: str) -> bool:
    """Whether an entry is stored under `key` (it may still prove stale when read)."""
    return disk_cache.has("graphs", key)


def cached_graph(key: str, build: Callable[[], ModelGraph]) -> ModelGraph:
    """The graph stored under `key`, else build() (then stored)."""
    payload = disk_cache.load("graphs", key, FORMAT, VERSION)
    if payload is not None:
        try:
            return from_json(payload)
        except (ValueError, TypeError, KeyError, AttributeError):
            pass  # malformed: trace again and rewrite it
    graph = build()
    disk_cache.store("graphs", key, FORMAT, VERSION, to_json(graph))
    return graph
