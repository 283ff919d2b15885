"""`GgufEngine`: the `EngineAPI` for GGUF files, run in-process by llama.cpp.

It is `engine.client.Engine` (the same asyncio facade, the same commands) with a
`engine.gguf.worker.GgufWorker` behind it. Importing this module imports neither MLX nor llama.cpp.
"""

from __future__ import annotations

import os

from engine.api import EngineError
from engine.client import Engine
from engine.worker import EngineWorker

ENV_THREADS = "LOGITSCOPE_GGUF_THREADS"


def default_threads() -> int:
    """llama.cpp's thread count unless the user sets one: ``LOGITSCOPE_GGUF_THREADS``, else 1.

    Why 1: on a 2-core machine shared with other work, llama.cpp's threads wait for each other
    at every operation; one thread measured several times faster than two (issue #20).
    """
    raw = os.environ.get(ENV_THREADS, "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else 1


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
