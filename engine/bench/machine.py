"""Where a benchmark ran: CPU, cores, load, versions, BLAS and compute dtype.

Numbers from a different machine, or from a loaded one, are not comparable; the report says so
up front instead of leaving the reader to guess.
"""

from __future__ import annotations

import os
import platform
from importlib import metadata
from pathlib import Path
from typing import Any

PACKAGES = ("mlx", "mlx-lm", "textual")


def cpu_model() -> str:
    """The CPU's marketing name (Linux /proc/cpuinfo, else what `platform` knows)."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def describe(blas: str, compute_dtype: str) -> dict[str, Any]:
    """The report's header: one flat dict of plain values."""
    try:
        load = "%.2f %.2f %.2f" % os.getloadavg()
    except OSError:
        load = "unknown"
    return {
        "cpu": cpu_model(),
        "cores": usable_cores(),
        "load average at start": load,
        "platform": platform.platform(terse=True),
        **versions(),
        "blas": blas,
        "compute dtype": compute_dtype,
    }
