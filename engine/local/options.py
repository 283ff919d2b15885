"""How the engine thread sets MLX up, fixed for the thread's life (`EngineOptions`).

Kept apart from the worker so that a model loader (`engine.local.loaders`) can read the options
without importing the thread that runs it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EngineOptions:
    """How the engine thread sets MLX up; fixed for the thread's life.

    `fast_blas` must be decided before MLX is imported (see `engine.cpu.blas`), which is why it is
    an option of the thread rather than of a model load.
    """

    max_context: int = 0  # cap below the model's own context; 0 = the model's limit
    fast_blas: bool = True  # preload OpenBLAS on Linux CPUs (engine.cpu.blas)
    compute_dtype: str = "auto"  # see engine.local.precision.choose_compute_dtype
    fast_layers: bool = True  # CPU prompt attention and SwiGLU, fused RoPE and RMSNorm (engine.cpu.routing)
    kv_cache_dir: str = ""  # keep recent histories' KV caches here (engine.local.kvdisk); "" = off
    kv_cache_mb: int = 2048  # the size cap of that folder
    warm_on_load: bool = True  # run a short turn inside the load (engine.local.firstturn); tests of a cold cache turn it off
