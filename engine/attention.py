"""Prefill attention for MLX's CPU backend: the maths of `mx.fast.scaled_dot_product_attention`,
2-3x faster when many prompt tokens attend to a long cache.

Why: on the CPU, MLX's fused attention falls back to matmul + softmax, and the Linux wheel's
softmax computes every exponential with scalar code and library `fma` calls (~15 ns each). A
prefill of N new tokens over L cached positions needs heads x N x L of them: a 50-token follow-up
over 1,000 cached tokens spent two thirds of its prefill there (BENCHMARKS.md). Here the scores
come from the same BLAS matmul, and the exponential is a compiled polynomial made only of
multiply-adds and integer shifts, which the C++ compiler vectorizes: ~4x cheaper, and accurate to
~3e-7 relative (MLX's own exp: ~2e-6). Queries are processed in blocks whose scores stay in the
L2 cache (the per-score cost triples once they do not), and a causal block only scores the keys
its queries can see, which halves the work of a fresh prompt.

How it is wired: mlx-lm's model modules call the `scaled_dot_product_attention` they imported
from `mlx_lm.models.base`. `install_prefill_attention` swaps that name, in each loaded model
module, for a `PrefillAttention` that takes this path only on the threads registered with it,
for multi-token calls (decode keeps MLX's path: one query row gains nothing) with a plain or
causal mask; anything else (quantized caches, attention sinks, per-head masks) goes to the
original. Other threads in the process (a benchmark's plain mlx-lm, say) are never affected.
"""

from __future__ import annotations

import sys
import threading
import weakref
from typing import Any, Callable

import mlx.core as mx

# Scores per block: 256k float32 = 1 MiB, which stays in a typical L2 cache.
BLOCK_SCORES = 262_144

_MAGIC = 12582912.0  # 1.5 * 2**23: adding it rounds a float32 to an integer, held in the low bits
_LOG2E = 1.4426950408889634
_LN2_HI, _LN2_LO = 0.693145751953125, 1.428606765330187e-06


def _exp_nonpositive(x: mx.array) -> mx.array:
    """``exp(x)`` for x <= 0 (and -inf): ``2**n * exp(r)`` with n = round(x / ln 2).

    Unlike `engine.sampling.exp` there is no floor or clip (each becomes a library call that
    stops vectorization): n comes from the magic-number rounding, 2**n from the same bits, and
    values below e**-87 (including -inf, whose intermediate NaNs are discarded) flush to 0.
    """
    shifted = x * _LOG2E + _MAGIC
    n = shifted - _MAGIC
    r = x - n * _LN2_HI - n * _LN2_LO
    poly = 1.0 + r * (1.0 + r * (0.5 + r * (1 / 6 + r * (1 / 24 + r * (1 / 120 + r * (1 / 720))))))
    scale = mx.view((mx.view(shifted, mx.int32) - (0x4B400000 - 127)) << 23, mx.float32)
    return mx.where(x < -87.0, 0.0, poly * scale)


# Not shapeless (`view` needs known shapes): a new score shape costs a ~0.4 ms retrace, once per
# prefill call; the fused C++ kernel itself is built once per machine and cached on disk by MLX.
_exp = mx.compile(_exp_nonpositive)


def prefill_attention(
    queries: mx.array, keys: mx.array, values: mx.array, scale: float, mask: str | mx.array | None
) -> mx.array:
    """Softmax(q k^T * scale + mask) v for (B, H, N, D) queries and (B, Hkv, L, D) keys/values.

    Grouped-query heads are folded (each key head serves H / Hkv query heads) without copying
    the cache. `mask` is None, "causal" (the N queries are the last N of the L positions), or an
    array broadcastable to (N, L): boolean (True = may attend) or additive.
    """
    b, h, n, d = queries.shape
    kv_heads, length = keys.shape[1], keys.shape[2]
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
        scores = (block @ k.swapaxes(-1, -2)).astype(mx.float32).reshape(b, kv_heads, group, stop - start, seen)
        if causal:
            allowed = mx.arange(length - n + start, length - n + stop)[:, None] >= mx.arange(seen)[None]
            scores = mx.where(allowed, scores, -mx.inf)
        elif mask is not None:
            assert not isinstance(mask, str)
            part = mask[..., start:stop, :] if mask.shape[-2] == n else mask
            scores = mx.where(part, scores, -mx.inf) if part.dtype == mx.bool_ else scores + part
        weights = _exp(scores - mx.max(scores, axis=-1, keepdims=True))
        total = mx.sum(weights, axis=-1, keepdims=True)
        mixed = weights.astype(values.dtype).reshape(b, kv_heads, group * (stop - start), seen) @ v
        outputs.append(mixed.reshape(b, kv_heads, group, stop - start, d) / total.astype(values.dtype))
    out = outputs[0] if len(outputs) == 1 else mx.concatenate(outputs, axis=3)
    return out.reshape(b, h, n, d)


def _handles(queries: mx.array, cache: Any, mask: Any, sinks: Any) -> bool:
    """Whether a call is one `prefill_attention` computes exactly like the original."""
    if queries.shape[2] < 2 or sinks is not None or hasattr(cache, "bits"):
        return False
    if mask is None or (isinstance(mask, str) and mask == "causal"):
        return True
    return isinstance(mask, mx.array) and mask.ndim <= 2


class PrefillAttention:
    """Stands in for mlx-lm's `scaled_dot_product_attention` in a model module."""

    def __init__(self, original: Callable[..., mx.array]) -> None:
        """`original`: the function it replaces, used for every call it does not handle."""
        self.original = original
        # Threads (not idents: the OS reuses those) that take the fast path; a finished thread drops out.
        self.threads: weakref.WeakSet[threading.Thread] = weakref.WeakSet()

    def __call__(
        self, queries: mx.array, keys: mx.array, values: mx.array, cache: Any, scale: float,
        mask: Any, sinks: Any = None,
    ) -> mx.array:
        if threading.current_thread() in self.threads and _handles(queries, cache, mask, sinks):
            return prefill_attention(queries, keys, values, scale, mask)
        return self.original(queries, keys, values, cache, scale=scale, mask=mask, sinks=sinks)


def install_prefill_attention() -> Callable[[], None]:
    """Route this thread's multi-token attention in every loaded mlx-lm model module through
    `prefill_attention`; returns the function that routes it back. CPU only (no-op elsewhere).

    Call after the model is loaded (its module must be imported) on the thread that runs it.
    """
    if mx.default_device() != mx.cpu:
        return lambda: None
    from mlx_lm.models import base

    thread = threading.current_thread()
    wrappers: list[PrefillAttention] = []
    for name, module in list(sys.modules.items()):
        if not name.startswith("mlx_lm.models.") or module is None or module is base:
            continue
        current = getattr(module, "scaled_dot_product_attention", None)
        if current is base.scaled_dot_product_attention:
            current = PrefillAttention(current)
            setattr(module, "scaled_dot_product_attention", current)
        if isinstance(current, PrefillAttention):
            current.threads.add(thread)
            wrappers.append(current)

    def uninstall() -> None:
        for wrapper in wrappers:
            wrapper.threads.discard(thread)

    return uninstall
