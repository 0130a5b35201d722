"""profiler.inputs: the one reader of user files (special files, size caps, UTF-8, plain YAML/JSON only)."""
from __future__ import annotations

import glob
import json
import os

import pytest
import yaml

from profiler import inputs
from profiler.errors import UserError
from profiler.profile import load_profile

BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n"


@pytest.mark.parametrize("text, needle", [
    (BOMB, "aliases"),
    ("a: !!python/object/apply:os.system ['true']\n", "tag '!!python/object/apply:os.system'"),
    ("a: !!binary aGk=\n", "tag '!!binary'"),
    ("a: !custom 1\n", "tag"),
    ("a: " + "9" * 5000 + "\n", "integer literal of 5000"),
    ("[" * 200 + "]" * 200, "nested more than"),
    ("[" * 5000 + "]" * 5000, "nesting depth"),
    ("a: 1\na: 2\n", ":2: duplicate key 'a'"),
    ("a: [1\n", "not valid YAML"),
])
def test_hostile_yaml_is_one_line_error(text, needle):
    with pytest.raises(UserError, match=needle.replace("[", r"\[").replace("(", r"\(")) as err:
        inputs.parse_yaml(text, "f.yaml")
    assert str(err.value).startswith("f.yaml") and "\n" not in str(err.value)


def test_yaml_is_plain_data():
    assert inputs.parse_yaml("created: 2024-01-01T00:00:00\n<<: {a: 1}\nb: =\n", "f") == \
        {"created": "2024-01-01T00:00:00", "<<": {"a": 1}, "b": "="}


@pytest.mark.parametrize("text, needle", [
    ('{"a": ' + "1" * 5000 + "}", "integer literal"),
    ("[" * 100000 + "]" * 100000, "nested more than"),
    ('{"a": 1, "a": 2}', "duplicate key"),
    ('{"a": ', "f.json:1: not valid JSON"),
])
def test_hostile_json_is_one_line_error(text, needle):
    with pytest.raises(UserError, match=needle):
        inputs.parse_json(text, "f.json")


def test_special_files_are_refused_without_blocking(tmp_path):
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    loop = tmp_path / "loop.yaml"
    loop.symlink_to(loop)
    big = tmp_path / "big.yaml"
    with open(big, "wb") as handle:
        handle.truncate(inputs.MAX_BYTES["suite"] + 1)
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"a: caf\xe9\n")
    for path, needle in [(fifo, "FIFO"), ("/dev/zero", "device"), (tmp_path, "directory"), (loop, "symbolic link loop"),
                         (tmp_path / "missing.yaml", "no such file"), (tmp_path / ("x" * 300), "name too long"),
                         (big, "larger than"), (bad, "byte 0xe9 at offset 6")]:
        with pytest.raises(UserError, match=needle):
            inputs.read_yaml(path, "suite")


@pytest.mark.parametrize("path", sorted(glob.glob("calibrate/profiles/*.yaml") + glob.glob("tests/data/*.yaml")))
def test_shipped_profiles_and_fixtures_still_load(path):
    from calibrate.coefficients import parse_coefficients

    profile = load_profile(path)
    assert profile.machine.hostname
    if profile.coefficients:  # the physical constraints hold for every shipped number
        parse_coefficients(profile.coefficients, path)



@pytest.mark.parametrize("text, needle", [
    ("a:\n  b: [1, 2, 1.0e+308]\n", "field 'a.b.2': 1e+308"),
    ("a: {b: -.inf}\n", "field 'a.b': -inf"),
    ("a: [.nan]\n", "field 'a.0': nan"),
    ("a: {c: 5.0e-324}\n", "field 'a.c': 5e-324"),
    ("a: 1000000000000000000000000000000000\n", "field 'a': 1000000000000000000000000000000000"),
])
def test_yaml_numbers_out_of_range_are_refused_naming_the_field(text, needle):
    with pytest.raises(UserError, match="out of range") as err:
        inputs.parse_yaml(text, "f.yaml")
    assert needle in str(err.value) and str(err.value).startswith("f.yaml: ")


@pytest.mark.parametrize("text, needle", [
    ('{"a": [1, 1e999]}', "field 'a.1': inf"), ('{"a": {"b": NaN}}', "field 'a.b': nan"),
    ('{"a": -Infinity}', "field 'a': -inf"), ('[{"t": 1e-31}]', "field '0.t': 1e-31"),
])
def test_json_numbers_out_of_range_are_refused_naming_the_field(text, needle):
    with pytest.raises(UserError, match="out of range") as err:
        inputs.parse_json(text, "f.json", line=3)
    assert needle in str(err.value) and str(err.value).startswith("f.json:3: ")


def test_numbers_in_range_pass_unchanged():
    doc = {"a": [0, 0.0, 1e-30, -1e30, 4.08e-19, 1e18, True, None], "b": {"c": -2.5}}
    assert inputs.parse_yaml(yaml.safe_dump(doc), "f.yaml") == doc
    assert inputs.parse_json(json.dumps(doc), "f.json") == doc
