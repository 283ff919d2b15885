"""How many threads llama.cpp runs with when the user does not say."""

from __future__ import annotations

import os

ENV_THREADS = "LOGITSCOPE_GGUF_THREADS"


def default_threads(cpus: int | None = None) -> int:
    """llama.cpp's thread count unless the user sets one: ``LOGITSCOPE_GGUF_THREADS``, else half
    the CPUs this process may use (`cpus`: that count, read when None), from 1 to 8.

    Why half: besides llama.cpp's threads, a GGUF turn keeps two others busy, the statistics
    thread (`engine.gguf.decoder`) and the caller's (the TUI drawing each token). Measured on an
    idle 2-core machine (`logitscope bench --sections gguf`): llama.cpp's bare loop ran 1.23x
    (30M) and 1.32x (Qwen2.5-0.5B shape) faster on 2 threads than on 1, but ours ran 0.44x and
    0.86x, because llama.cpp's threads wait for each other at every operation and one of them
    then shares a core. Half the CPUs is also llama.cpp's own default on machines with two
    hardware threads per core (it counts physical cores); 8 caps it where more stop paying.
    """
    raw = os.environ.get(ENV_THREADS, "").strip()
    if raw.isdigit() and int(raw) > 0:
        return int(raw)
    return max(1, min(8, (cpus if cpus is not None else _usable_cpus()) // 2))


def _usable_cpus() -> int:
    """The CPUs this process may run on (a container's or `taskset`'s limit included)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS has no affinity call
        return os.cpu_count() or 1
