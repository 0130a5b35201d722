"""Where `profiler calibrate` writes: the output path rules. Nothing is ever silently overwritten.

- `--out DIR` (an existing folder): `DIR/<hostname>-<UTC timestamp>.yaml` (a `-2`, `-3`... suffix if that
  name is taken within the same second).
- `--out FILE` that exists: refused unless `--force`.
- Interrupted or failed runs write what they measured to `<path>.partial`.
"""
from __future__ import annotations

import datetime as _dt
import os
import re
from pathlib import Path
from typing import Optional

from profiler.errors import UserError
from profiler.profile import check_writable


def timestamped_name(hostname: str, now: Optional[_dt.datetime] = None) -> str:
    """`<hostname>-<YYYYmmddTHHMMSSZ>.yaml`, the hostname reduced to file-name-safe characters."""
    now = now or _dt.datetime.now(_dt.timezone.utc)
    host = re.sub(r"[^A-Za-z0-9._-]+", "_", hostname) or "host"
    return f"{host}-{now.strftime('%Y%m%dT%H%M%SZ')}.yaml"


def resolve_out(out: str | Path, hostname: str, force: bool, now: Optional[_dt.datetime] = None) -> Path:
    """The file a calibration will write, checked writable before any benchmark runs (UserError otherwise)."""
    path = Path(out)
    if os.path.isdir(path):  # os.path: a name too long for the file system is "no", checked by check_writable
        name = timestamped_name(hostname, now)
        path = path / name
        suffix = 2
        while os.path.exists(path):
            path = path.with_name(f"{name[:-len('.yaml')]}-{suffix}.yaml")
            suffix += 1
    elif os.path.exists(path) and not force:
        raise UserError(f"--out {path}: file exists; pass --force to overwrite it, or give a folder "
                        "to get a new timestamped file")
    return check_writable(path)


def partial_path(path: Path) -> Path:
    """Where the samples of an interrupted or failed run go."""
    return path.with_name(path.name + ".partial")
