"""The host CPU's last-level cache size, read from sysfs (no torch): the memory benchmarks size their arrays
from it, the compute benchmarks their rotating arenas and cold-call evictions."""
from __future__ import annotations

from pathlib import Path

DEFAULT_LLC_BYTES = 32 * 2**20


def cpu_last_level_cache_bytes(sysfs: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> int:
    """Size of the highest-level CPU cache from sysfs (e.g. '32768K'); DEFAULT_LLC_BYTES when unreadable."""
    best_level, best_bytes = -1, DEFAULT_LLC_BYTES
    for index in sorted(sysfs.glob("index*")):
        try:
            level = int((index / "level").read_text())
            text = (index / "size").read_text().strip()
        except (OSError, ValueError):
            continue
        units = {"K": 2**10, "M": 2**20, "G": 2**30}
        size = int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)
        if level > best_level:
            best_level, best_bytes = level, size
    return best_bytes
