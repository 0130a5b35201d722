"""The traced-graph disk cache: hits return the same graph without torch, misses on changed code, and a corrupt
entry is traced again."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from predictor.api import load_model
from predictor.graph_cache import cache_key, cached_graph, from_json, to_json

ROOT = Path(__file__).resolve().parents[2]


def test_round_trip_is_exact():
    graph = load_model("small_cnn2d")
    assert from_json(json.loads(json.dumps(to_json(graph)))) == graph


def test_hit_miss_and_corruption(tmp_path, monkeypatch):
    monkeypatch.setenv("PARAORACLE_CACHE", str(tmp_path))
    graph = load_model("small_cnn2d")
    calls = []
    build = lambda: calls.append(1) or graph
    src = tmp_path / "model.py"
    src.write_text("v1")
    key = cache_key("zoo:x", {"width": 4}, None, [src])
    assert cached_graph(key, build) == graph and cached_graph(key, build) == graph and len(calls) == 1
    src.write_text("v2")  # the code changed: another key, traced again
    assert cache_key("zoo:x", {"width": 4}, None, [src]) != key
    (tmp_path / "graphs" / f"{key}.json").write_text("{ not json")
    assert cached_graph(key, build) == graph and len(calls) == 2  # corrupt entry: traced again and rewritten
    assert json.loads((tmp_path / "graphs" / f"{key}.json").read_text())["key"] == key


def test_cache_off_and_unwritable(tmp_path, monkeypatch):
    monkeypatch.setenv("PARAORACLE_CACHE", "off")
    assert load_model("small_cnn2d").layers
    locked = tmp_path / "ro"
    locked.mkdir()
    locked.chmod(0o500)
    monkeypatch.setenv("PARAORACLE_CACHE", str(locked))
    try:
        assert load_model("small_cnn2d").layers  # nothing written, no error
    finally:
        locked.chmod(0o700)


@pytest.mark.slow  # two Python processes
def test_a_cached_zoo_graph_loads_without_torch(tmp_path):
    env = dict(os.environ, PARAORACLE_CACHE=str(tmp_path))
    code = ("import sys; from predictor.api import load_model; g = load_model('resnet50', image=64, width=8); "
            "print(len(g.layers), 'torch' in sys.modules)")
    first = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=ROOT)
    second = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=ROOT)
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert first.stdout.split()[0] == second.stdout.split()[0]
    assert first.stdout.split()[1] == "True" and second.stdout.split()[1] == "False"


def test_models_traced_ahead_in_workers_are_the_graphs_load_model_traces(tmp_path):
    """trace_ahead forks only before torch is imported, hence a fresh interpreter; a pytest process has torch."""
    code = ("import json, os, sys; from predictor.api import trace_ahead, load_model; "
            "models = [('small_cnn2d', {'width': 4}), ('small_cnn2d', {'width': 6}), ('small_cnn2d', {'width': 4}), "
            "('small_cnn2d', {'nope': 1})]; "
            "n = trace_ahead(models, workers=2); again = trace_ahead(models, workers=2); "
            "ahead = [load_model('small_cnn2d', width=w) for w in (4, 6)]; os.environ['PARAORACLE_CACHE'] = 'off'; "
            "fresh = [load_model('small_cnn2d', width=w) for w in (4, 6)]; "
            "print(json.dumps([n, again, ahead == fresh]))")
    env = dict(os.environ, PARAORACLE_CACHE=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    # two models traced (the repeat is one model; the unknown knob fails there and is left for load_model to
    # report); the second call finds both cached; the graphs read back equal fresh traces
    assert json.loads(done.stdout) == [2, 0, True]
    assert len(list((tmp_path / "graphs").glob("*.json"))) == 2
