"""Large YAML inputs are parsed once and read back from the disk cache as checked JSON: the same data, a changed
file misses, a tampered or corrupt entry is ignored, and keys JSON cannot keep are never cached."""
from pathlib import Path

import pytest

from profiler import inputs
from profiler.errors import UserError



@pytest.fixture(autouse=True)
def _small_threshold(monkeypatch):
    """Texts of a few kB stand for the megabyte profiles the cache is for (the parse is what costs)."""
    monkeypatch.setattr(inputs, "CACHE_YAML_CHARS", 2000)


def _big_yaml(value: str = "0.125", extra: str = "") -> str:
    rows = "\n".join(f"  - {{name: row{i}, time_s: {value}, sizes: [1, 2.5e-3, {i}], ok: true, note: null}}"
                     for i in range(60))
    return f"schema: 1\n{extra}rows:\n{rows}\n"


def _entries(folder: Path) -> list[Path]:
    return sorted((folder / "yaml").glob("*.json")) if (folder / "yaml").is_dir() else []


def test_a_long_file_is_cached_and_read_back_equal(tmp_path, monkeypatch):
    monkeypatch.setenv("PARAORACLE_CACHE", str(tmp_path))
    text = _big_yaml()
    assert len(text) >= inputs.CACHE_YAML_CHARS
    first = inputs.parse_yaml(text, "big.yaml")
    assert len(_entries(tmp_path)) == 1
    second = inputs.parse_yaml(text, "big.yaml")
    assert second == first and second["rows"][59]["sizes"] == [1, 2.5e-3, 59]
    assert isinstance(second["rows"][0]["sizes"][0], int) and second["rows"][0]["note"] is None
    changed = inputs.parse_yaml(_big_yaml("0.25"), "big.yaml")  # another text: another entry, not the old data
    assert changed["rows"][0]["time_s"] == 0.25 and len(_entries(tmp_path)) == 2


def test_short_files_and_cache_off_write_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("PARAORACLE_CACHE", str(tmp_path))
    assert inputs.parse_yaml("a: 1\n", "small.yaml") == {"a": 1}
    assert _entries(tmp_path) == []
    monkeypatch.setenv("PARAORACLE_CACHE", "off")
    assert inputs.parse_yaml(_big_yaml(), "big.yaml")["schema"] == 1


def test_a_tampered_or_corrupt_entry_is_ignored_and_rewritten(tmp_path, monkeypatch):
    monkeypatch.setenv("PARAORACLE_CACHE", str(tmp_path))
    text = _big_yaml()
    expected = inputs.parse_yaml(text, "big.yaml")
    [entry] = _entries(tmp_path)
    good = entry.read_text()
    for bad in (good.replace('"time_s": 0.125', '"time_s": 1e999', 1),  # out of range: refused by the JSON reader
                good.replace('"format": "paraoracle-parsed-yaml"', '"format": "other"'),
                "{ not json"):
        entry.write_text(bad)
        assert inputs.parse_yaml(text, "big.yaml") == expected
        assert entry.read_text() == good


def test_integer_keys_are_not_cached_and_bad_text_still_fails(tmp_path, monkeypatch):
    monkeypatch.setenv("PARAORACLE_CACHE", str(tmp_path))
    data = inputs.parse_yaml(_big_yaml(extra="7: seven\n"), "big.yaml")
    assert data[7] == "seven" and _entries(tmp_path) == []
    with pytest.raises(UserError, match="big.yaml:.*duplicate key 'schema'"):
        inputs.parse_yaml(_big_yaml(extra="schema: 2\n"), "big.yaml")
    with pytest.raises(UserError, match="out of range"):
        inputs.parse_yaml(_big_yaml("1.0e+999"), "big.yaml")
    assert _entries(tmp_path) == []
