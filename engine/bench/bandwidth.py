"""How fast this machine reads memory: the bound a decode step cannot beat.

A decode step of a small model reads every weight it uses once per token, so ``tok/s x bytes
read per token`` can never pass the memory's read bandwidth; how close a format comes (its
"% of the bandwidth bound") says how much of its time goes to anything else (the quantized
kernels' arithmetic, Python, the statistics). Measured here as numpy sums over a buffer far
larger than the caches, one slice per thread (numpy lets go of the GIL while it sums), the best
of a few passes: a read-only stream, as a mat-vec is.
"""

from __future__ import annotations

import os
import threading
import time

import numpy as np

BUFFER_BYTES = 512 * 2**20


def read_bandwidth(threads: int | None = None, passes: int = 5) -> float:
    """Bytes per second summed by `threads` threads (default: the CPUs this process may use)."""
    if threads is None:
        threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    count = max(1, threads)
    data = np.ones(BUFFER_BYTES // 4, dtype=np.float32)
    slices = np.array_split(data, count)
    best = 0.0
    for _ in range(passes):
        workers = [threading.Thread(target=np.sum, args=(part,)) for part in slices]
        start = time.perf_counter()
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        best = max(best, data.nbytes / (time.perf_counter() - start))
    return best


def share_of_bound(tokens_per_s: float, bytes_per_token: float, bandwidth: float) -> float:
    """Percent of the bandwidth bound a decode speed reaches."""
    return 100.0 * tokens_per_s * bytes_per_token / bandwidth if bandwidth > 0 else 0.0
