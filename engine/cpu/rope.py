"""Rotary position embedding for prefill on MLX's CPU backend, with the tables computed once.

Why: MLX has no CPU kernel for `mx.fast.rope`; it runs a fallback of plain ops that, on every
call, recomputes the cosines and sines of every position (scalar library calls, ~15 ns each)
and then rotates the input in five separate passes. A prefill calls it twice per layer (queries
and keys) with the same positions, so a 128-token prompt of a 30M llama recomputed the same
tables 16 times: 0.32 ms per call. Here the tables are computed once per forward pass, by the
same ops in the same order as MLX's fallback (so they are the same numbers), and the rotation
is one compiled kernel: 0.09 ms per call.

It takes the calls of plain `mlx.nn.RoPE` modules (what mlx-lm's llama, qwen2, mistral and
others build when a config has no rope scaling) with the default half-split layout and an
integer offset; everything else (traditional layout, scaled variants with their own class,
per-sequence offsets) keeps MLX's path. Wired in by `engine.cpu.routing` like the attention.
"""

from __future__ import annotations

import math
import threading
from typing import Any

import mlx.core as mx
import mlx.nn as nn


def _rotate(x: mx.array, cos: mx.array, sin: mx.array) -> mx.array:
    """MLX's non-traditional rotation of the first 2 * cos.shape[-1] features; the rest pass."""
    half = cos.shape[-1]
    x1, x2 = x[..., :half], x[..., half : 2 * half]
    parts = [x1 * cos - x2 * sin, x1 * sin + x2 * cos]
    if x.shape[-1] > 2 * half:
        parts.append(x[..., 2 * half :])
    return mx.concatenate(parts, axis=-1)


rotate = mx.compile(_rotate)


class RopeTables:
    """The cosines and sines of the latest positions asked for, kept for the next calls.

    One forward pass asks for the same (length, offset, ...) in every layer; the next pass asks
    for new positions and replaces them. Kept per thread: each engine thread has its own stream,
    and two engines in one process must not swap each other's tables.
    """

    def __init__(self) -> None:
        self._latest = threading.local()  # .entry: (key, (cos, sin))

    def get(self, length: int, offset: int, dims: int, base: float, scale: float,
            dtype: mx.Dtype) -> tuple[mx.array, mx.array]:
        """(cos, sin), each (length, dims // 2), exactly as MLX's rope fallback computes them."""
        key = (length, offset, dims, base, scale, dtype)
        entry = getattr(self._latest, "entry", None)
        if entry is None or entry[0] != key:
            half = dims // 2
            positions = (mx.arange(length, dtype=mx.float32) + mx.array(offset, dtype=mx.int32)) \
                * mx.array(scale, dtype=mx.float32)
            inv_freqs = mx.exp(mx.arange(0, -half, -1, dtype=mx.float32)
                               * mx.array(math.log(base) / half, dtype=mx.float32))
            theta = positions[:, None] * inv_freqs
            entry = (key, (mx.cos(theta).astype(dtype), mx.sin(theta).astype(dtype)))
            self._latest.entry = entry
        tables: tuple[mx.array, mx.array] = entry[1]
        return tables

    def rope(self, module: nn.RoPE, x: mx.array, offset: int = 0) -> mx.array:
        """`nn.RoPE.__call__` for the calls `handles_rope` accepts."""
        cos, sin = self.get(x.shape[-2], offset, module.dims, module.base, module.scale, x.dtype)
        return rotate(x, cos, sin)


def handles_rope(module: Any, x: mx.array, offset: Any = 0) -> bool:
    """Prefill calls of a plain, half-split `nn.RoPE` with an integer offset (see the module doc)."""
    return (type(module) is nn.RoPE and not module.traditional and isinstance(offset, int)
            and x.ndim == 4 and module.dims % 2 == 0 and module.dims <= x.shape[-1]
            and mx.issubdtype(x.dtype, mx.floating))
