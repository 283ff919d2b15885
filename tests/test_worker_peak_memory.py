"""A bench worker's peak memory is its own (`engine.bench.memory_worker.peak_rss_bytes`).

On Linux ``ru_maxrss`` keeps the parent's resident size at the fork through the exec: a bench
process holding 574 MB (the bandwidth probe's buffer) made every format's worker report 574 MB."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

PROBE = "from engine.bench.memory_worker import peak_rss_bytes; print(peak_rss_bytes())"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the inherited ru_maxrss is Linux's")
def test_a_worker_does_not_report_its_parents_memory() -> None:
    held = np.ones(300 * 2**18, dtype=np.float32)  # 300 MB, touched
    assert held.sum() > 0
    shown = int(subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout)
    assert 1e6 < shown < 250e6  # the worker's own interpreter and imports, not the parent's 300 MB
