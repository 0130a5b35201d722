"""The profiles shipped with the package: `calibrate/profiles/*.yaml`, package data read with importlib.resources.

They live in `calibrate` because calibrate writes the published ones (`python -m calibrate.published`) and every
reader comes later in the pipeline (predictor, paraoracle) or is calibrate itself, so no stage imports a later one.
A profile is named by a path or, when no such file exists, by its shipped name with or without `.yaml`
(`v100-dgx1-8gpu.published`, `h200.yaml`).
"""
from __future__ import annotations

import atexit
import contextlib
import os
from importlib import resources
from pathlib import Path

from profiler.errors import UserError

_EXTRACTED = contextlib.ExitStack()  # files extracted from a zipped install live until the process exits
atexit.register(_EXTRACTED.close)


def shipped_profiles_dir() -> Path:
    """The folder of the shipped profiles, on the file system (extracted once if the package is zipped).
    The one place their location is built: every reader and `python -m calibrate.published` go through it."""
    folder = resources.files("calibrate").joinpath("profiles")
    if isinstance(folder, Path):
        return folder
    return Path(_EXTRACTED.enter_context(resources.as_file(folder)))


def shipped_profiles(pattern: str = "*.yaml") -> list[Path]:
    """The shipped profile files matching `pattern`, sorted by name."""
    return sorted(shipped_profiles_dir().glob(pattern))


def shipped_profile_names() -> list[str]:
    """Names a user may give for a shipped profile (the file names without `.yaml`)."""
    return [p.name.removesuffix(".yaml") for p in shipped_profiles()]


def shipped_profile(name: str) -> Path | None:
    """The shipped profile called `name` (`v100-dgx1-8gpu.published` or `...published.yaml`), else None."""
    if not name or os.sep in name or (os.altsep and os.altsep in name) or name in (".", ".."):
        return None
    file = name if name.endswith(".yaml") else f"{name}.yaml"
    path = shipped_profiles_dir() / file
    return path if path.is_file() else None


def resolve_profile(name_or_path: str | os.PathLike, flag: str = "--profile") -> Path:
    """A profile path as given when it exists, else the shipped profile of that name; a one-line UserError
    listing the shipped names when it is neither."""
    path = Path(name_or_path)
    if os.path.exists(path):  # os.path: a name too long for the file system is not there (Path.exists raises)
        return path
    shipped = shipped_profile(str(name_or_path))
    if shipped is not None:
        return shipped
    raise UserError(f"{flag} {str(name_or_path)[:200]}: no such profile file and no shipped profile of that name "
                    f"(shipped: {', '.join(shipped_profile_names()) or 'none'})")
