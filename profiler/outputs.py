"""Writing the files the tools produce: checked before any work, never clobbered by accident, atomic.

- check_output(path, flag, force, suffixes): before a command starts measuring or predicting, refuse an
  output that cannot be written (missing folder, read-only, a name longer than the file system allows,
  a directory or a device in its place) or that exists when --force was not given.
- write_atomic(path, data): a temporary file in the same folder, fsynced, then renamed over the target, so
  a reader sees the old file or the new one, never half of one. The file gets the mode an ordinary
  open() would give it (the user's umask), or keeps the mode of the file it replaces. Temporary files
  left by an interrupted earlier write of the same path are removed first.
"""
from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from profiler.errors import UserError

_TMP_SUFFIX = ".tmp"


def _folder(path: Path) -> Path:
    return path.parent if str(path.parent) else Path(".")


def _name_limits(folder: Path) -> tuple[int, int]:
    try:
        return os.pathconf(folder, "PC_NAME_MAX"), os.pathconf(folder, "PC_PATH_MAX")
    except (OSError, ValueError, AttributeError):
        return 255, 4096


def check_writable(path: Path | str, flag: str = "--out") -> Path:
    """Fail early (before any benchmark runs) when `path` cannot be written."""
    if not str(path) or "\0" in str(path):
        raise UserError(f"{flag} {str(path)!r}: not a valid file name")
    path = Path(path)
    folder = _folder(path)
    name_max, path_max = _name_limits(folder if os.path.isdir(folder) else Path("."))
    if any(len(os.fsencode(part)) > name_max for part in path.parent.parts):  # before any stat: ENAMETOOLONG
        raise UserError(f"{flag} {path}: a folder name in it is longer than the {name_max} bytes the file system allows")
    if len(os.fsencode(path.name)) > name_max - 24:  # room for the temporary file's prefix and suffix
        raise UserError(f"{flag} {path}: file name longer than {name_max - 24} bytes")
    if len(os.fsencode(str(path.absolute()))) >= path_max - 24:
        raise UserError(f"{flag} {path}: path longer than {path_max - 24} bytes")
    if not os.path.isdir(folder):
        raise UserError(f"{flag} {path}: folder '{folder}' does not exist")
    if path.is_dir():
        raise UserError(f"{flag} {path}: is a folder, expected a file path")
    if path.exists() and not stat.S_ISREG(path.stat().st_mode):
        raise UserError(f"{flag} {path}: exists and is not a regular file; refusing to replace it")
    try:  # a real write probe: os.access says yes to root even on read-only mounts
        fd, probe = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".probe", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise UserError(f"{flag} {path}: not writable ({err.strerror})") from None
    if path.exists() and not os.access(path, os.W_OK):
        raise UserError(f"{flag} {path}: not writable")
    return path


def check_output(path: Path | str, flag: str = "--out", force: bool = False,
                 suffixes: tuple[str, ...] | None = None) -> Path:
    """check_writable, plus: an existing file is refused unless `force`; the name must end in one of
    `suffixes` (case-insensitive) when they are given."""
    path = Path(path)
    if suffixes and path.suffix.lower() not in suffixes:
        raise UserError(f"{flag} {path}: expected a file name ending in {', '.join(suffixes)}")
    check_writable(path, flag)
    if path.exists() and not force:
        raise UserError(f"{flag} {path}: file exists; pass --force to overwrite it")
    return path


def same_file(a: Path | str, b: Path | str) -> bool:
    """True when two paths name one file (the same inode, or the same resolved path when either is missing)."""
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return os.path.abspath(a) == os.path.abspath(b)


def _umask_mode() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def _remove_stray_temporaries(path: Path) -> None:
    """Temporaries of an interrupted write_atomic of this path whose writer is no longer running."""
    prefix = f".{path.name}."
    try:
        names = os.listdir(_folder(path))
    except OSError:
        return
    for name in names:
        if not (name.startswith(prefix) and name.endswith(_TMP_SUFFIX)):
            continue
        pid = name[len(prefix):-len(_TMP_SUFFIX)].split("-", 1)[0]
        if pid.isdigit() and _alive(int(pid)):
            continue  # another process is writing this path right now
        try:
            os.unlink(_folder(path) / name)
        except OSError:
            pass  # gone already, or not ours to remove: it is only a leftover, the write goes on


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def write_atomic(path: Path | str, data: str | bytes) -> None:
    """Write text or bytes to path via a temp file in the same folder + rename, so readers never see half
    a file; UserError (one line) when it cannot be written."""
    path = Path(path)
    folder = _folder(path)
    if not os.path.isdir(folder):
        raise UserError(f"{path}: folder '{folder}' does not exist")
    _remove_stray_temporaries(path)
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        mode = _umask_mode()
    payload = data.encode() if isinstance(data, str) else data
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}-", suffix=_TMP_SUFFIX, dir=folder)
    except OSError as err:
        raise UserError(f"{path}: cannot write ({err.strerror})") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), mode)
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as err:
        Path(tmp).unlink(missing_ok=True)
        raise UserError(f"{path}: cannot write ({err.strerror or type(err).__name__})") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


PLOT_SUFFIXES = (".png", ".pdf", ".svg")


def save_figure(fig, path: Path | str, **savefig_options) -> None:
    """A matplotlib figure written atomically, in the format its suffix names (.png, .pdf or .svg)."""
    import io

    path = Path(path)
    fmt = path.suffix.lower().lstrip(".")
    if f".{fmt}" not in PLOT_SUFFIXES:
        raise UserError(f"{path}: plots are written as {', '.join(PLOT_SUFFIXES)}")
    buffer = io.BytesIO()
    fig.savefig(buffer, format=fmt, **savefig_options)
    write_atomic(path, buffer.getvalue())
