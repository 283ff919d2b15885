"""`GgufEngine`: the `EngineAPI` for GGUF files, run in-process by llama.cpp.

It is `engine.local.client.Engine` (the same asyncio facade, the same commands) with a
`engine.gguf.worker.GgufWorker` behind it. Importing this module imports neither MLX nor llama.cpp.
"""

from __future__ import annotations

import os

from engine.core.api import EngineError
from engine.local.client import Engine
from engine.local.worker import EngineWorker

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


class GgufEngine(Engine):
    """Local inference on a GGUF file through llama.cpp, with the MLX engine's exact contract;
    any other spec loads an MLX model exactly as `Engine` does (one engine thread for both)."""

    def __init__(self, max_context: int = 0, *, threads: int = 0, fast_blas: bool = True, compute_dtype: str = "auto",
                 fast_layers: bool = True, kv_cache_dir: str = "") -> None:
        """`threads`: llama.cpp's threads (0 = `default_threads`); the rest as `Engine`'s, for the
        MLX models this engine loads as well (every spec that is not a ``.gguf`` file)."""
        super().__init__(max_context, fast_blas=fast_blas, compute_dtype=compute_dtype, fast_layers=fast_layers,
                         kv_cache_dir=kv_cache_dir)
        self.threads = threads or default_threads()

    def _ensure_worker(self) -> EngineWorker:
        """The GGUF worker, started lazily like the MLX one."""
        if self._closed:
            raise EngineError("The engine is closed.")
        if self._worker is None:
            from engine.gguf.worker import GgufWorker

            self._worker = GgufWorker(self._options, self.threads)
        return self._worker
