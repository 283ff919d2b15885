"""How much memory this process holds and the system could still give: plain OS facts, read by
the CPU layer's copy plan and by the app before it opens a second model beside the first."""

from __future__ import annotations

import os
from pathlib import Path


def resident_bytes() -> int:
    """This process's resident memory now (0 where the platform does not say)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return pages * int(os.sysconf("SC_PAGE_SIZE"))
    except (OSError, ValueError, IndexError, AttributeError):
        return 0


def available_bytes() -> int:
    """Memory the system could give now: /proc/meminfo's MemAvailable, within a cgroup's limit.

    0 where the platform says neither (then no copy is kept).
    """
    free = _meminfo_available()
    room = _cgroup_room()
    return min(free, room) if room is not None else free


def _meminfo_available() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return 0


def _cgroup_room() -> int | None:
    """What this process's cgroup v2 memory limit leaves (None: no limit, or no cgroup v2)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
        own = next(line[3:] for line in lines if line.startswith("0::"))
        folder = Path("/sys/fs/cgroup") / own.lstrip("/")
        limit = (folder / "memory.max").read_text().strip()
        if limit == "max":
            return None
        return max(int(limit) - int((folder / "memory.current").read_text()), 0)
    except (OSError, ValueError, StopIteration):
        return None
