"""The storage section of `profiler calibrate` (`--only storage --path DIR --readers N`): how fast this node reads
training samples from the file system under DIR (docs/calibration.md#storage, docs/method.md §19a).

In a temporary folder under DIR (removed afterwards, also on Ctrl-C) it writes `small` files of an ImageNet JPEG's
size and one `large` file per reader, then times N reader threads reading all of them, cold (dropped from the page
cache with posix_fadvise after fsync) and warm. One node cannot measure what every node of a job shares:
calibrate.storage_fit records those figures as unknown on a shared file system. A bad DIR (missing, not a folder,
read-only, not writable) is a one-line UserError before anything is written.
"""
from __future__ import annotations

import errno
import os
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Optional

from profiler.errors import UserError
from profiler.profile import Sample

#: bytes of one small file: an ImageNet training JPEG's mean size (predictor.at_scale.IMAGENET: 147.8 GB / 1,281,167)
SMALL_FILE_BYTES = 115_000
#: (small files, large file bytes, timed calls per variant): full and --quick
SIZES = {False: (2048, 256 * 2**20, 5), True: (64, 4 * 2**20, 3)}
READ_CHUNK_BYTES = 2**20
MAX_READERS = 1024
#: file systems every node of a cluster mounts from the same servers (their aggregate figures are shared)
SHARED_FILESYSTEMS = ("nfs", "nfs4", "lustre", "gpfs", "beegfs", "cephfs", "ceph", "glusterfs", "fuse.glusterfs",
                      "panfs", "wekafs", "orangefs", "pvfs2", "cifs", "smb3", "fuse.sshfs", "9p", "virtiofs")


def filesystem_of(path: Path) -> str:
    """The file system type /proc/mounts gives the mount holding `path` (its longest mount point), "unknown"
    where that cannot be read."""
    try:
        lines = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return "unknown"
    target = os.path.realpath(path)
    best, kind = "", "unknown"
    for line in lines:
        fields = line.split()
        if len(fields) < 3:
            continue
        mount = fields[1].replace("\\040", " ")
        inside = target == mount or target.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) > len(best):
            best, kind = mount, fields[2]
    return kind


def check_path(path: str | os.PathLike) -> Path:
    """DIR for the storage benchmark, or a one-line UserError: missing, not a folder, read-only, not writable."""
    place = Path(path)
    if not os.path.exists(place):
        raise UserError(f"--path {path}: no such folder")
    if not os.path.isdir(place):
        raise UserError(f"--path {path}: not a folder (give the folder whose file system to measure)")
    try:
        probe = tempfile.mkdtemp(prefix=".paraoracle-probe-", dir=place)
    except OSError as err:
        if err.errno == errno.EROFS:
            raise UserError(f"--path {path}: read-only file system (the benchmark writes its files there)") from None
        if err.errno in (errno.EACCES, errno.EPERM):
            raise UserError(f"--path {path}: not writable by this user (the benchmark writes its files there)") from None
        raise UserError(f"--path {path}: cannot create a folder there: {err.strerror or err}") from None
    os.rmdir(probe)
    return place


def _write(path: Path, size: int, seed: int) -> None:
    block = (seed.to_bytes(8, "little") * (READ_CHUNK_BYTES // 8 + 1))[:READ_CHUNK_BYTES]
    with open(path, "wb") as f:
        left = size
        while left > 0:
            n = min(left, len(block))
            f.write(block[:n])
            left -= n
        f.flush()
        os.fsync(f.fileno())


def drop_from_cache(files: list[Path]) -> bool:
    """Ask the kernel to drop each file's (clean) pages from the page cache; False where it cannot be asked."""
    if not hasattr(os, "posix_fadvise"):
        return False
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    return True


def _read_share(files: list[Path]) -> int:
    buffer = bytearray(READ_CHUNK_BYTES)
    view = memoryview(buffer)
    total = 0
    for path in files:
        with open(path, "rb", buffering=0) as f:
            while True:
                n = f.readinto(view)
                if not n:
                    break
                total += n
    return total


def read_all(files: list[Path], readers: int) -> float:
    """Seconds for `readers` threads to read every file once (reader r takes files r, r + readers, ...)."""
    shares = [files[r::readers] for r in range(readers)]
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=readers) as pool:
        list(pool.map(_read_share, shares))
    return time.perf_counter() - started


def measure_storage(path: str | os.PathLike, readers: int, quick: bool, device: str = "cpu",
                    sink: Optional[Callable[[Sample], None]] = None) -> list[Sample]:
    """The four variants' samples (module docstring), each passed to sink as it is measured."""
    if not 1 <= readers <= MAX_READERS:
        raise UserError(f"--readers {readers}: expected 1..{MAX_READERS}")
    place = check_path(path)
    kind = filesystem_of(place)
    small_count, large_bytes, repeats = SIZES[bool(quick)]
    work = Path(tempfile.mkdtemp(prefix="paraoracle-storage-", dir=place))
    samples: list[Sample] = []
    try:
        small = [work / f"small-{i:05d}.bin" for i in range(small_count)]
        large = [work / f"large-{i:04d}.bin" for i in range(readers)]
        try:
            for i, f in enumerate(small):
                _write(f, SMALL_FILE_BYTES, i)
            for i, f in enumerate(large):
                _write(f, large_bytes, 100_000 + i)
        except OSError as err:
            raise UserError(f"--path {path}: writing the benchmark's files failed: {err.strerror or err}") from None
        for label, files, size in (("small", small, SMALL_FILE_BYTES), ("large", large, large_bytes)):
            for state in ("cold", "warm"):
                times, dropped = [], True
                if state == "warm":
                    read_all(files, readers)  # into the cache
                for _ in range(repeats):
                    if state == "cold":
                        dropped = drop_from_cache(files)
                    times.append(max(read_all(files, readers), 1e-9))
                sample = Sample(benchmark="storage", variant=f"{label}_{state}", device=device, dtype="uint8",
                                threads=readers,
                                params={"files": len(files), "file_bytes": size, "readers": readers, "filesystem": kind},
                                times_s=times, bytes_moved=float(len(files) * size),
                                extra={"path": str(place), "cache_dropped": dropped if state == "cold" else False})
                samples.append(sample)
                if sink is not None:
                    sink(sample)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return samples
