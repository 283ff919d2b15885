"""RMS normalisation for MLX's CPU backend: the same ops as MLX's fallback, fused by `mx.compile`.

Why: MLX has no CPU kernel for `mx.fast.rms_norm`; it runs a fallback of six separate ops
(square, mean, add, rsqrt, two multiplies). A decode step of a small model is bound by how many
ops it dispatches (~9 us each on the CPU stream), and a llama layer normalises twice, so a
30M model spends ~100 dispatches per token here. Compiled, the elementwise ops around the mean
fuse: three dispatches, and the same float32 operations in the same order (bit-identical in
tests). It takes decode-sized calls of plain `mlx.nn.RMSNorm` modules (on many rows MLX's own
ops are faster); wired in by `engine.cpu.routing`.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import mlx.nn as nn


def _rms_norm(x: mx.array, weight: mx.array, eps: float) -> mx.array:
    """MLX's `fast.rms_norm` fallback, op for op, for `x` in the weight's dtype: float32 inside."""
    x32 = x.astype(mx.float32)
    normed = x32 * mx.rsqrt(mx.mean(mx.square(x32), axis=-1, keepdims=True) + mx.array(eps, dtype=mx.float32))
    return normed.astype(x.dtype) * weight


rms_norm_compiled = mx.compile(_rms_norm)  # eps is a constant of each trace (one per model)


def rms_norm(module: nn.RMSNorm, x: mx.array) -> mx.array:
    """`nn.RMSNorm.__call__` for the calls `handles_rms_norm` accepts."""
    return rms_norm_compiled(x, module["weight"], float(module.eps))


# Above this many rows MLX's own ops are faster than the compiled kernel (a 128-token prefill of a
# 30M llama: 0.21 vs 0.19 ms per norm); below, the saved dispatches win (decode: 0.024 vs 0.049 ms).
MAX_ROWS = 16


def handles_rms_norm(module: Any, x: mx.array) -> bool:
    """Plain `nn.RMSNorm` modules on a few rows (decode) of floating inputs of the weight's dtype."""
    return type(module) is nn.RMSNorm and x.ndim >= 1 and x.size <= MAX_ROWS * x.shape[-1] \
        and mx.issubdtype(x.dtype, mx.floating) and x.dtype == module["weight"].dtype
