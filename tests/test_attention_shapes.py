"""#22: the prefill attention fast path and the shapes it takes.

Latent-attention models (DeepSeek-V2, MiniCPM3, Youtu-LLM) give their value heads another size
than their query/key heads; the fast path computes them like MLX does, and its `handles` predicate
sends any layout it was not written for to mlx-lm's own path instead of failing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mlx.core as mx
import numpy as np
import pytest
from engine_helpers import GREEDY, run, spy_threads
from tinymodels import build_family

from engine.core.api import Message
from engine.local.client import Engine
from engine.cpu import attention


def _qkv(heads: int, kv_heads: int, n: int, length: int, d: int, dv: int) -> tuple[mx.array, mx.array, mx.array]:
    k1, k2, k3 = mx.random.split(mx.random.key(heads + n + length + dv), 3)
    return (mx.random.normal((1, heads, n, d), key=k1), 2 * mx.random.normal((1, kv_heads, length, d), key=k2),
            mx.random.normal((1, kv_heads, length, dv), key=k3))


@pytest.mark.parametrize(("heads", "kv_heads", "n", "length", "d", "dv"), [
    (4, 4, 7, 7, 24, 12),     # DeepSeek-V2 style: value heads smaller than query heads
    (4, 4, 9, 40, 24, 12),    # a follow-up over a cache
    (4, 2, 6, 6, 16, 32),     # grouped heads, value heads larger
])
@pytest.mark.parametrize("mask", ["causal", None, "bool"])
def test_value_heads_of_another_size_match_mlx(heads: int, kv_heads: int, n: int, length: int, d: int, dv: int,
                                               mask: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(attention, "BLOCK_SCORES", 8 * heads * length)  # several query blocks
    q, k, v = _qkv(heads, kv_heads, n, length, d, dv)
    if mask == "bool":
        mask = (mx.random.uniform(shape=(n, length), key=mx.random.key(5)) < 0.7) | (mx.arange(length) == 0)
    assert attention.handles_sdpa(q, k, v, None, d ** -0.5, mask)
    got = attention.prefill_attention(q, k, v, d ** -0.5, mask)
    want = mx.fast.scaled_dot_product_attention(q, k, v, scale=d ** -0.5, mask=mask)
    assert got.shape == want.shape == (1, heads, n, dv)
    np.testing.assert_allclose(np.array(got), np.array(want), atol=2e-6, rtol=1e-5)


def test_the_predicate_declines_every_layout_the_fast_path_does_not_assume() -> None:
    q, k, v = _qkv(4, 2, 5, 8, 16, 16)
    handles = attention.handles_sdpa
    assert handles(q, k, v, None, 0.25, "causal")
    declined = [
        (q[:, :3], k, v),                                   # query heads not a multiple of key heads
        (q, k[..., :8], v),                                 # query and key heads of different sizes
        (q, k, v[:, :1]),                                   # keys and values with different head counts
        (q, k, v[:, :, :7]),                                # keys and values of different lengths
        (mx.concatenate([q, q], axis=0), k, v),             # a batch the cache does not have
        (q.reshape(4, 5, 16), k, v),                        # not (B, H, N, D)
        (mx.zeros((1, 4, 9, 16)), k, v),                    # more queries than positions
        (q.astype(mx.int32), k.astype(mx.int32), v),        # integer inputs
    ]
    for args in declined:
        assert not handles(*args, None, 0.25, "causal")
    for mask in (mx.zeros((8,)), mx.zeros((3, 8)), mx.zeros((5, 7)), mx.zeros((1, 4, 5, 8)), mx.zeros((5, 8), mx.int32)):
        assert not handles(q, k, v, None, 0.25, mask)
    assert handles(q, k, v, None, 0.25, mx.zeros((1, 8))) and handles(q, k, v, None, 0.25, mx.ones((5, 8), mx.bool_))


async def test_a_latent_attention_model_takes_the_fast_path_on_the_engine_thread(
    tmp_path: Path, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MiniCPM3 (value heads 16, query heads 24) is computed by the fast path, not declined."""
    used = spy_threads(monkeypatch, attention, "prefill_attention")
    await engine.load(str(build_family(tmp_path / "minicpm3", "minicpm3")))
    events, finished = await run(engine, [Message("user", "the cat sat on the mat")], GREEDY.with_changes(max_tokens=2))
    assert events and finished.finish_reason in ("length", "stop")
    assert used and set(used) == {"logitscope-engine"}


def test_rope_route_declines_an_odd_rotary_size() -> None:
    """The fused rotation splits the rotated features in two halves: an odd size keeps MLX's path."""
    import mlx.nn as nn

    from engine.cpu.rope import handles_rope

    x = mx.zeros((1, 2, 5, 16))
    assert handles_rope(nn.RoPE(8), x, 0) and not handles_rope(nn.RoPE(7), x, 0)
