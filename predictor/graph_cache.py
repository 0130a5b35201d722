"""A disk cache of traced models: tracing ResNet-50 on the meta device takes seconds and needs torch, reading
its graph back takes milliseconds and needs neither.

An entry is plain JSON (`<cache>/graphs/<key>.json`), never code: the key is the SHA-256 of what the graph
depends on — the zoo model's name, its knobs and input shape, and the text of the code that builds and traces
it (the zoo and tracer sources) — so an edited model or tracer misses the cache instead of reading a stale
graph. User modules are not cached: their code may import anything, so no fingerprint covers it. A corrupt or unreadable entry is ignored and rewritten; a cache folder that
cannot be written is not an error. The folder is $PARAORACLE_CACHE, else $XDG_CACHE_HOME/paraoracle, else
~/.cache/paraoracle; PARAORACLE_CACHE=off disables it.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Callable, Iterable, Optional

from predictor.graph import Layer, ModelGraph
from profiler.errors import UserError
from profiler.inputs import read_json

FORMAT = "paraoracle-graph"
VERSION = 1
_PACKAGE = Path(__file__).resolve().parent
#: the code every zoo graph depends on
ZOO_SOURCES = tuple(sorted((_PACKAGE / "zoo").glob("*.py"))) + (_PACKAGE / "trace.py", _PACKAGE / "graph.py")
_TUPLE_FIELDS = ("input_shape", "output_shape", "weight_shape", "kernel", "stride", "padding", "inputs")


def cache_dir() -> Optional[Path]:
    value = os.environ.get("PARAORACLE_CACHE")
    if value == "off":
        return None
    if value:
        return Path(value)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "paraoracle"


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


def cached_graph(key: str, build: Callable[[], ModelGraph]) -> ModelGraph:
    """The graph stored under `key`, else build() (then stored)."""
    folder = cache_dir()
    path = folder / "graphs" / f"{key}.json" if folder else None
    if path is not None and path.is_file():
        try:
            doc = read_json(path)  # a planted FIFO, bomb or deep nesting is refused like any other input
            if doc.get("format") == FORMAT and doc.get("version") == VERSION and doc.get("key") == key:
                return from_json(doc["graph"])
        except (UserError, OSError, ValueError, TypeError, KeyError, AttributeError):
            pass  # unreadable or stale: trace again and rewrite it
    graph = build()
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"format": FORMAT, "version": VERSION, "key": key, "graph": to_json(graph)}))
            os.replace(tmp, path)
        except OSError:
            pass  # a read-only or full cache folder only costs the next call a trace
    return graph
