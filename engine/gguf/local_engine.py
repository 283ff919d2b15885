"""`local_engine`: the engine for models on this machine (`engine.local.client.Engine` with
llama.cpp's loader beside MLX's), as every front end gets it.

Here, in the layer that adds GGUF to the local engine, rather than in `engine.factory`: the
engine process (`engine.process.setup`) builds the same engine, and the factory imports the
process package. Importing this imports neither MLX nor llama.cpp.
"""

from __future__ import annotations

from engine.core.api import EngineAPI
from engine.core.settings import ModelConfig


def local_engine(model: ModelConfig = ModelConfig(), *, threads: int | None = None, disk_cache: bool = False,
                 warm_on_load: bool = True, threads_in_use: bool = False) -> EngineAPI:
    """The engine for models on this machine, whatever the first one is: MLX folders, hub repos
    and the demo through mlx-lm, ``.gguf`` files through llama.cpp, on one engine thread, so the
    model picker can switch from the demo to a GGUF file and back in one session (a GGUF file
    without the [gguf] extra is refused at load, in one line saying how to install it).
    `threads`: llama.cpp's (None: [model] gguf_threads; 0: automatic, measured at each load
    unless LOGITSCOPE_GGUF_THREADS says). `threads_in_use`: automatic threads are chosen again
    on the user's first replies, where a screen draws them (`engine.gguf.tuner`; the app)."""
    from engine.core.settings import kv_cache_dir
    from engine.gguf.loader import GgufLoader
    from engine.gguf.threads import env_threads
    from engine.local.client import Engine

    chosen = model.gguf_threads if threads is None else threads
    return Engine(max_context=model.max_context, fast_blas=model.fast_blas, compute_dtype=model.compute_dtype,
                  fast_layers=model.fast_layers, kv_cache_dir=kv_cache_dir() if disk_cache else "",
                  loaders=(GgufLoader(chosen or env_threads(), threads_in_use),), warm_on_load=warm_on_load)
