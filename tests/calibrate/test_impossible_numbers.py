"""Numbers that cannot be true are refused when a profile is loaded, naming the field and the rule."""
from __future__ import annotations

import copy

import pytest

from calibrate.coefficients import parse_coefficients
from profiler.errors import UserError
from profiler.inputs import read_yaml
from profiler.profile import dump_yaml, load_profile

FIXTURE = "tests/data/drift_quick_cpu_profile.yaml"
CONV = "conv2d/fwd/float32"


@pytest.fixture(scope="module")
def base():
    return read_yaml(FIXTURE)


def _set(data, path, value):
    *head, last = path
    for key in head:
        data = data[key]
    data[last] = value


COEFFICIENT_CASES = [
    (["compute", CONV, "launch_s", "value"], float("nan"), "launch_s.value"),
    (["compute", CONV, "launch_s", "low"], -1e-3, "launch_s"),
    (["compute", CONV, "peak_per_s"], -5.0, "peak_per_s"),
    (["compute", CONV, "peak_per_s"], float("inf"), "peak_per_s"),
    (["compute", CONV, "time_scale"], {"value": 0.0, "low": 0.0, "high": 0.0}, "time_scale"),
    (["compute", CONV, "time_scale"], {"value": 1.0, "low": 2.0, "high": 3.0}, "low <= value <= high"),
    (["compute", CONV, "efficiency", "trees", 0, "feature", 0], 99, "outside the"),
    (["compute", CONV, "efficiency", "trees", 0, "children_left", 0], 0, "later nodes"),
    (["compute", CONV, "efficiency", "trees", 0, "children_right", 0], 10 ** 6, "later nodes"),
    (["compute", CONV, "efficiency", "trees", 0, "value"], [], "equal length"),
    (["compute", CONV, "efficiency", "gp"], {"train_x": [[1.0, 2.0]], "alpha": [1.0, 2.0], "length_scales": [1.0, 1.0],
                                             "amplitude": 1.0, "y_mean": 0.0, "y_std": 1.0}, "training rows"),
    (["memory", "device/copy", "segments", 0, "bandwidth_bytes_per_s", "value"], -1.0, "bandwidth_bytes_per_s"),
    (["memory", "device/copy", "segments", 0, "alpha_s"], {"value": -1.0, "low": -1.0, "high": -1.0}, "alpha_s"),
    (["host_threads"], 0, "host_threads"),
]


@pytest.mark.parametrize("path, value, needle", COEFFICIENT_CASES)
def test_impossible_coefficient_is_refused_with_its_path(base, path, value, needle):
    data = copy.deepcopy(base)
    if path[0] == "memory" and "device/copy" not in data["coefficients"]["memory"]:
        path = ["memory", next(iter(data["coefficients"]["memory"]))] + path[2:]
    _set(data["coefficients"], path, value)
    with pytest.raises(UserError, match="field 'coefficients") as err:
        parse_coefficients(data["coefficients"], "p.yaml")
    assert needle in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("field, value", [("bus_bandwidth_bytes_per_s", -1e9), ("bus_bandwidth_bytes_per_s", 0.0),
                                          ("base_latency_s", -1e-6), ("step_latency_s", float("nan"))])
def test_impossible_link_is_refused(base, field, value):
    data = copy.deepcopy(base)
    exact = lambda v: {"value": v, "low": v, "high": v}
    link = {"base_latency_s": exact(1e-5), "step_latency_s": exact(1e-6), "bus_bandwidth_bytes_per_s": exact(1e10)}
    link[field] = exact(value)
    data["coefficients"]["links"] = {"allreduce": {"intra": link}}
    with pytest.raises(UserError, match=f"coefficients.links.allreduce.intra.{field}"):
        parse_coefficients(data["coefficients"], "p.yaml")


@pytest.mark.parametrize("path, value, needle", [
    (["machine", "cpu_cores"], -4, "machine.cpu_cores"),
    (["machine", "nodes"], 0, "machine.nodes"),
    (["machine", "memory_bytes"], 0, "machine.memory_bytes"),
    (["machine", "device_memory_bytes"], float("inf"), "machine.device_memory_bytes"),
    (["created"], "yesterday-ish", "created"),
    (["samples", 0, "times_s", 0], float("nan"), "samples.0.times_s.0"),
    (["samples", 0, "times_s", 0], 0.0, "samples.0.times_s.0"),
    (["samples", 0, "times_s", 0], -1e-3, "samples.0.times_s.0"),
])
def test_impossible_machine_or_sample_is_refused(base, tmp_path, path, value, needle):
    data = copy.deepcopy(base)
    _set(data, path, value)
    out = tmp_path / "p.yaml"
    out.write_text(dump_yaml(data))
    with pytest.raises(UserError, match=needle) as err:
        load_profile(out)
    assert str(out) in str(err.value)


def test_the_fixture_itself_loads(base):
    assert parse_coefficients(load_profile(FIXTURE).coefficients).compute
