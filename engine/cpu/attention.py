"""Prefill attention for MLX's CPU backend: the maths of `mx.fast.scaled_dot_product_attention`,
2-3x faster when many prompt tokens attend to a long cache.

Why: on the CPU, MLX's fused attention falls back to matmul + softmax, and the Linux wheel's
softmax computes every exponential with scalar code and library `fma` calls (~15 ns each). A
prefill of N new tokens over L cached positions needs heads x N x L of them: a 50-token follow-up
over 1,000 cached tokens spent two thirds of its prefill there (docs/benchmarks-history.md). Here the scores
come from the same BLAS matmul, and the exponential is a compiled polynomial made only of
multiply-adds and integer shifts (`engine.cpu.fastmath`), with no library calls: ~4x
cheaper, and accurate to ~3e-7 relative (MLX's own exp: ~2e-6). Queries are processed in blocks whose scores stay in the
L2 cache (the per-score cost triples once they do not), and a causal block only scores the keys
its queries can see, which halves the work of a fresh prompt. Where `engine.cpu.native` builds, the
softmax of each block (mask, maximum, exponentials, sum, scaling) is one vectorized C pass
instead: a 1,079-token prompt of the 2M bench model got its first token in 125 ms instead of
313 (docs/benchmarks-history.md, section 0).

How it is wired (`engine.cpu.routing`): mlx-lm's model modules call the
`scaled_dot_product_attention` they imported from `mlx_lm.models.base`; on the engine thread,
multi-token calls (decode keeps MLX's path: one query row gains nothing) with a plain or causal
mask come here; anything else (quantized caches, attention sinks, per-head masks) goes to the
original.
"""

from __future__ import annotations

from typing import Any, Callable

import mlx.core as mx

from engine.cpu.fastmath import exp_nonpositive
from engine.cpu.native import NativeKernels

# Scores per block: 256k float32 = 1 MiB, which stays in a typical L2 cache.
BLOCK_SCORES = 262_144

def prefill_attention(
    queries: mx.array, keys: mx.array, values: mx.array, scale: float, mask: str | mx.array | None,
    kernels: NativeKernels | None = None,
) -> mx.array:
    """Softmax(q k^T * scale + mask) v for (B, H, N, D) queries, (B, Hkv, L, D) keys and
    (B, Hkv, L, Dv) values; the result is (B, H, N, Dv).

    Dv may differ from D: latent-attention models (DeepSeek-V2, MiniCPM3, Youtu-LLM) give their
    value heads another size than their query and key heads. Grouped-query heads are folded
    (each key head serves H / Hkv query heads) without copying the cache. `mask` is None,
    "causal" (the N queries are the last N of the L positions), or an array broadcastable to
    (N, L): boolean (True = may attend) or additive. With `kernels` (`engine.cpu.native`), the
    softmax of a causal or unmasked block runs in vectorized C. `handles_sdpa` checks every one
    of these shapes before a model's call comes here.
    """
    b, h, n, d = queries.shape
    kv_heads, length, dv = keys.shape[1], keys.shape[2], values.shape[-1]
    group = h // kv_heads
    q = (queries * scale).reshape(b, kv_heads, group, n, d)
    rows = max(1, BLOCK_SCORES // max(1, b * h * length))
    causal = isinstance(mask, str)
    outputs = []
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        seen = length - n + stop if causal else length  # a causal block never sees later keys
        k, v = keys[..., :seen, :], values[..., :seen, :]
        block = q[..., start:stop, :].reshape(b, kv_heads, group * (stop - start), d)  # one matmul per key head
        scores = (block @ k.swapaxes(-1, -2)).astype(mx.float32)
        weights = _native_softmax(kernels, scores, length - n + start if causal else -1, stop - start) \
            if kernels is not None and (causal or mask is None) else None
        if weights is not None:
            mixed = weights.astype(values.dtype) @ v
        else:
            mixed = _masked_softmax_times(scores.reshape(b, kv_heads, group, stop - start, seen), v, mask,
                                          (length - n + start, n, start, stop))
        outputs.append(mixed.reshape(b, kv_heads, group, stop - start, dv))
    out = outputs[0] if len(outputs) == 1 else mx.concatenate(outputs, axis=3)
    return out.reshape(b, h, n, dv)


def _native_softmax(kernels: NativeKernels, scores: mx.array, first_visible: int, period: int) -> mx.array | None:
    """The kernels' in-place softmax of `scores` (an array this module made and holds alone), or
    None when MLX laid it out in a way C cannot write (then the MLX path computes it)."""
    try:
        return kernels.softmax_rows_(scores, first_visible, period)
    except ValueError:
        return None


def _masked_softmax_times(scores: mx.array, v: mx.array, mask: str | mx.array | None,
                          block: tuple[int, int, int, int]) -> mx.array:
    """softmax(scores + mask) @ v in MLX ops for (B, Hkv, group, rows, seen) scores.

    `block` is (the first query's position, N, the block's first and past-last query index).
    The division by the row sums comes after the product with `v` (D values per row, not seen).
    """
    b, kv_heads, group, rows, seen = scores.shape
    first, n, start, stop = block
    if isinstance(mask, str):
        allowed = mx.arange(first, first + rows)[:, None] >= mx.arange(seen)[None]
        scores = mx.where(allowed, scores, -mx.inf)
    elif mask is not None:
        part = mask[..., start:stop, :] if mask.shape[-2] == n else mask
        scores = mx.where(part, scores, -mx.inf) if part.dtype == mx.bool_ else scores + part
    weights = exp_nonpositive(scores - mx.max(scores, axis=-1, keepdims=True))
    total = mx.sum(weights, axis=-1, keepdims=True)
    mixed = weights.astype(v.dtype).reshape(b, kv_heads, group * rows, seen) @ v
    return mixed.reshape(b, kv_heads, group, rows, -1) / total.astype(v.dtype)


def fast_sdpa_with(kernels: NativeKernels | None) -> Callable[..., mx.array]:
    """`prefill_attention` with the signature of mlx-lm's `scaled_dot_product_attention`."""

    def fast_sdpa(queries: mx.array, keys: mx.array, values: mx.array, cache: Any = None, scale: float = 1.0,
                  mask: Any = None, sinks: Any = None) -> mx.array:
        del cache, sinks  # `handles_sdpa` only lets calls through where neither matters
        return prefill_attention(queries, keys, values, scale, mask, kernels)

    return fast_sdpa


def handles_sdpa(
    queries: mx.array, keys: mx.array, values: mx.array, cache: Any = None, scale: float = 1.0,
    mask: Any = None, sinks: Any = None,
) -> bool:
    """Whether a call is one `prefill_attention` computes exactly like the original.

    Every shape `prefill_attention` assumes is checked here, so a model laid out in a way it
    was not written for (a family never tested) keeps mlx-lm's own path instead of failing.
    """
    if sinks is not None or hasattr(cache, "bits") or not _shapes_fit(queries, keys, values):
        return False
    if mask is None or (isinstance(mask, str) and mask == "causal"):
        return True
    return isinstance(mask, mx.array) and _mask_fits(mask, queries.shape[2], keys.shape[2])


def _shapes_fit(queries: mx.array, keys: mx.array, values: mx.array) -> bool:
    """(B, H, N, D) queries with N >= 2, (B, Hkv, L, D) keys and (B, Hkv, L, Dv) values of a
    floating dtype, H a multiple of Hkv and N <= L (the queries are the last N positions)."""
    if not all(isinstance(a, mx.array) and a.ndim == 4 for a in (queries, keys, values)):
        return False
    (b, h, n, d), (kb, kv_heads, length, kd), (vb, v_heads, v_length, _) = queries.shape, keys.shape, values.shape
    return (n >= 2 and b == kb == vb and kv_heads == v_heads > 0 and h % kv_heads == 0 and d == kd
            and length == v_length and n <= length
            and all(mx.issubdtype(a.dtype, mx.floating) for a in (queries, keys, values)))


def _mask_fits(mask: mx.array, n: int, length: int) -> bool:
    """A boolean or additive (N or 1, L or 1) mask: per-head and batched masks keep MLX's path."""
    return (mask.ndim == 2 and mask.shape[0] in (1, n) and mask.shape[1] in (1, length)
            and (mask.dtype == mx.bool_ or mx.issubdtype(mask.dtype, mx.floating)))
