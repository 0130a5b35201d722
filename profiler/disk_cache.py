"""The on-disk cache of derived data (traced model graphs, large YAML inputs already parsed): each entry is a
plain JSON file `<folder>/<kind>/<key>.json`, never code, read back through profiler.inputs' JSON reader.

The key is a SHA-256 of everything the entry depends on, so a changed input misses instead of reading stale
data. A corrupt, stale or unreadable entry is ignored (and rewritten); a folder that cannot be written is not an
error. The folder is $PARAORACLE_CACHE, else $XDG_CACHE_HOME/paraoracle, else ~/.cache/paraoracle;
PARAORACLE_CACHE=off disables it.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Optional

from profiler.errors import UserError
from profiler.inputs import read_json  # inputs imports this module only when it parses a large YAML text


def cache_dir() -> Optional[Path]:
    value = os.environ.get("PARAORACLE_CACHE")
    if value == "off":
        return None
    if value:
        return Path(value)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "paraoracle"


def _entry(kind: str, key: str) -> Optional[Path]:
    folder = cache_dir()
    return folder / kind / f"{key}.json" if folder else None


def has(kind: str, key: str) -> bool:
    """Whether an entry exists under (kind, key) (it may still prove stale or corrupt when loaded)."""
    path = _entry(kind, key)
    return path is not None and path.is_file()


def load(kind: str, key: str, fmt: str, version: int) -> Any:
    """The payload stored under (kind, key) by `store` with this format and version, else None."""
    path = _entry(kind, key)
    if path is None or not path.is_file():
        return None
    try:
        doc = read_json(path)  # a planted FIFO, bomb or deep nesting is refused like any other input
        if doc.get("format") == fmt and doc.get("version") == version and doc.get("key") == key:
            return doc["payload"]
    except (UserError, OSError, ValueError, TypeError, KeyError, AttributeError):
        pass  # unreadable or stale: the caller derives it again and stores it anew
    return None


def store(kind: str, key: str, fmt: str, version: int, payload: Any) -> None:
    """Write the payload (JSON-able plain data) atomically under (kind, key); failures are silent."""
    path = _entry(kind, key)
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"format": fmt, "version": version, "key": key, "payload": payload}))
        os.replace(tmp, path)
    except (OSError, ValueError, TypeError):
        pass  # a read-only or full cache folder only costs the next call the work again
