"""The CPU prefill paths (attention, SwiGLU): the same results as MLX's, taken only where they apply."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from engine_helpers import GREEDY, cold_logprobs, run, spy_threads

import mlx.core as mx
from engine.cpu import attention, fastmath, routing
from engine.core.api import Message
from engine.local.client import Engine


def _qkv(heads: int, kv_heads: int, n: int, length: int, dim: int = 16, dtype: Any = mx.float32) -> tuple[mx.array, ...]:
    key = mx.random.key(heads * 1000 + n * 10 + length)
    k1, k2, k3 = mx.random.split(key, 3)
    q = mx.random.normal((1, heads, n, dim), key=k1).astype(dtype)
    k = (2 * mx.random.normal((1, kv_heads, length, dim), key=k2)).astype(dtype)
    v = mx.random.normal((1, kv_heads, length, dim), key=k3).astype(dtype)
    return q, k, v


def _reference(q: mx.array, k: mx.array, v: mx.array, mask: Any) -> np.ndarray:
    out = mx.fast.scaled_dot_product_attention(q, k, v, scale=q.shape[-1] ** -0.5, mask=mask)
    return np.array(out.astype(mx.float32))


@pytest.mark.parametrize(("heads", "kv_heads", "n", "length"), [
    (4, 4, 7, 7),      # a fresh prompt
    (4, 4, 9, 300),    # a follow-up over a cache
    (6, 2, 12, 200),   # grouped-query heads
    (2, 1, 33, 33),    # many query blocks (block size forced small below)
])
@pytest.mark.parametrize("mask", ["causal", None, "bool", "additive"])
def test_matches_mlx_fused_attention(heads: int, kv_heads: int, n: int, length: int, mask: Any,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(attention, "BLOCK_SCORES", 64 * length)  # several blocks per call
    q, k, v = _qkv(heads, kv_heads, n, length)
    if mask in ("bool", "additive"):
        allowed = mx.random.uniform(shape=(n, length), key=mx.random.key(7)) < 0.7
        allowed = allowed | (mx.arange(length)[None] == length - 1)  # no row fully masked
        mask = allowed if mask == "bool" else mx.where(allowed, 0.0, -1e9)
    got = np.array(attention.prefill_attention(q, k, v, q.shape[-1] ** -0.5, mask))
    np.testing.assert_allclose(got, _reference(q, k, v, mask), atol=2e-6, rtol=1e-5)


def test_half_precision_inputs_keep_their_dtype_and_stay_close() -> None:
    q, k, v = _qkv(4, 2, 10, 120, dtype=mx.bfloat16)
    got = attention.prefill_attention(q, k, v, 0.25, "causal")
    assert got.dtype == mx.bfloat16
    np.testing.assert_allclose(np.array(got.astype(mx.float32)), _reference(q, k, v, "causal"), atol=3e-2)


def test_exp_is_accurate_and_flushes_the_far_tail_to_zero() -> None:
    x = np.concatenate([-np.geomspace(1e-8, 87, 20000), np.linspace(-87, 0, 20001), [0.0, -88.0, -1e4]])
    got = np.array(fastmath.exp_nonpositive(mx.array(x.astype(np.float32))), dtype=np.float64)
    want = np.exp(x.astype(np.float32).astype(np.float64))
    normal = x >= -87
    assert np.max(np.abs(got[normal] - want[normal]) / want[normal]) < 1e-6
    assert np.all(got[~normal] == 0.0)
    assert np.array(fastmath.exp_nonpositive(mx.array([-np.inf], dtype=mx.float32))).tolist() == [0.0]


class _Calls:
    def __init__(self) -> None:
        self.fast = 0
        self.original = 0

    def original_fn(self, q: mx.array, *args: Any, **kwargs: Any) -> mx.array:
        self.original += 1
        return q


def test_only_registered_threads_and_multi_token_calls_take_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _Calls()

    def counting(q: mx.array, *args: Any) -> mx.array:
        calls.fast += 1
        return q

    monkeypatch.setattr(attention, "prefill_attention", counting)
    wrapper = routing.ThreadRoute(calls.original_fn, attention.fast_sdpa_with(None), attention.handles_sdpa)
    q, k, v = _qkv(2, 2, 5, 5)
    one = q[:, :, :1]
    wrapper(q, k, v, None, 0.5, "causal")  # not registered yet
    wrapper.threads.add(threading.current_thread())
    wrapper(q, k, v, None, 0.5, "causal")
    wrapper(q, k, v, None, 0.5, None)
    wrapper(one, k, v, None, 0.5, None)  # decode: one query row
    wrapper(q, k, v, None, 0.5, "causal", sinks=mx.zeros((2,)))
    wrapper(q, k, v, type("Quantized", (), {"bits": 4})(), 0.5, "causal")
    wrapper(q, k, v, None, 0.5, mx.zeros((1, 2, 5, 5)))  # a per-head mask
    other = threading.Thread(target=lambda: wrapper(q, k, v, None, 0.5, "causal"))
    other.start()
    other.join()
    assert (calls.fast, calls.original) == (2, 6)


def test_install_wraps_loaded_model_modules_for_this_thread_only(chatml_model: Path) -> None:
    from mlx_lm.models import activations, base, llama
    from mlx_lm.utils import load

    load(str(chatml_model))  # imports the model's module
    uninstall = routing.install_cpu_routes()
    routes = {"scaled_dot_product_attention": base.scaled_dot_product_attention, "swiglu": activations.swiglu}
    for name, original in routes.items():
        route = getattr(llama, name)
        assert isinstance(route, routing.ThreadRoute) and route.original is original
        assert threading.current_thread() in route.threads
    assert base.scaled_dot_product_attention is routes["scaled_dot_product_attention"]  # the originals stay
    uninstall()
    for name in routes:
        assert threading.current_thread() not in getattr(llama, name).threads
        assert isinstance(getattr(llama, name), routing.ThreadRoute)  # stays: other engine threads may use it


@pytest.mark.parametrize("dtype", [mx.float32, mx.bfloat16])
def test_swiglu_matches_mlx_lm(dtype: Any) -> None:
    from mlx_lm.models import activations

    key1, key2 = mx.random.split(mx.random.key(3))
    gate = (6 * mx.random.normal((1, 9, 300), key=key1)).astype(dtype)
    gate = mx.concatenate([gate, mx.array([[[-200.0, 200.0, 0.0] * 100]], dtype=dtype)], axis=1)  # far tails
    x = mx.random.normal(gate.shape, key=key2).astype(dtype)
    got, want = fastmath.swiglu(gate, x), activations.swiglu(gate, x)
    assert got.dtype == want.dtype == dtype
    tolerance = 1e-5 if dtype == mx.float32 else 2e-2
    np.testing.assert_allclose(np.array(got.astype(mx.float32)), np.array(want.astype(mx.float32)),
                               rtol=tolerance, atol=tolerance)


def test_swiglu_route_takes_prefill_calls_only() -> None:
    handles = routing._handles_swiglu
    many, one = mx.zeros((1, 5, 8)), mx.zeros((1, 1, 8))
    assert handles(many, many) and not handles(one, one) and not handles(many, mx.zeros((1, 5, 4)))
    assert not handles(mx.zeros((1, 5, 8), dtype=mx.int32), mx.zeros((1, 5, 8), dtype=mx.int32))


async def test_engine_statistics_are_unchanged_by_the_fast_path(
    chatml_model: Path, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long prompt is prefilled through the fast path on the engine thread; its logprobs match
    an independent forward pass through MLX's own attention."""
    used = spy_threads(monkeypatch, attention, "prefill_attention")
    await engine.load(str(chatml_model))
    conversation = [Message("user", " ".join(["the cat sat on the mat and the dog ran"] * 20))]
    events, finished = await run(engine, conversation, GREEDY.with_changes(max_tokens=4))
    assert used and set(used) == {"logitscope-engine"}
    from mlx_lm.models import llama

    assert any(t.name == "logitscope-engine" for t in llama.swiglu.threads)  # SwiGLU took its fast path too
    reference = cold_logprobs(chatml_model, list(finished.prompt_ids))
    assert events[0].id == int(np.argmax(reference))
    assert events[0].logprob == pytest.approx(float(reference[events[0].id]), abs=1e-4)
    for candidate in events[0].candidates:
        assert candidate.logprob == pytest.approx(float(reference[candidate.id]), abs=1e-4)


async def test_switched_off_the_engine_keeps_mlx_attention(chatml_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    used: list[str] = []
    monkeypatch.setattr(attention, "prefill_attention", lambda *args: used.append("fast"))  # would break the turn
    engine = Engine(fast_layers=False)
    try:
        await engine.load(str(chatml_model))
        events, finished = await run(engine, [Message("user", "the cat sat on the mat")])
    finally:
        await engine.close()
    assert used == [] and finished.prompt_tokens > 1 and events
