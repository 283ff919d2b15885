"""The vectorized C kernels (engine.cpu.native): the same maths as MLX, wired into prefill only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mlx.core as mx
from engine.cpu import attention, cbuild, fastmath, native, routing


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> native.NativeKernels:
    if cbuild.compiler() is None:
        pytest.skip("no C compiler here")
    loaded, reason = native.load(tmp_path_factory.mktemp("cache"))
    assert loaded is not None, reason
    return loaded


def _silu_times(gate: np.ndarray, x: np.ndarray) -> np.ndarray:
    g = gate.astype(np.float64)
    return g / (1.0 + np.exp(-g)) * x.astype(np.float64)


def test_swiglu_matches_float64_and_the_compiled_mlx_version(kernels: native.NativeKernels) -> None:
    rng = np.random.default_rng(0)
    gate = np.concatenate([rng.normal(0, 4, 3000), [0.0, -0.0, 88.0, -88.0, 200.0, -200.0, 1e-30]]).astype(np.float32)
    x = rng.normal(0, 1, gate.size).astype(np.float32)
    got = np.array(kernels.swiglu(mx.array(gate), mx.array(x)), dtype=np.float64)
    want = _silu_times(gate, x)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-30)
    compiled = np.array(fastmath.swiglu(mx.array(gate), mx.array(x)), dtype=np.float64)
    np.testing.assert_allclose(got, compiled, rtol=1e-6, atol=1e-30)


def test_swiglu_reads_lazy_and_strided_inputs(kernels: native.NativeKernels) -> None:
    base = mx.random.normal((6, 10), key=mx.random.key(1))
    gate = (base * 2).T  # lazy, and a transposed (non-contiguous) view once evaluated
    x = mx.random.normal((10, 6), key=mx.random.key(2))
    got = kernels.swiglu(gate, x)
    assert got.shape == (10, 6) and got.dtype == mx.float32
    np.testing.assert_allclose(np.array(got), _silu_times(np.array(gate), np.array(x)), rtol=2e-6, atol=1e-7)


def _softmax_reference(scores: np.ndarray, visible: np.ndarray) -> np.ndarray:
    s = np.where(visible, scores.astype(np.float64), -np.inf)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize(("leading", "period", "cols", "first"), [
    ((3,), 3, 40, 37),        # three queries at the end of 40 positions (a follow-up block)
    ((2, 4, 5), 5, 9, 2),     # grouped heads: rows repeat the block's 5 queries
    ((7,), 7, 70, -1),        # no mask: every column
    ((2, 3), 3, 300, 100),    # a middle block of a longer prompt: columns past a row's own are cut
])
def test_softmax_rows_in_place_with_causal_blocks(kernels: native.NativeKernels, leading: tuple[int, ...],
                                                  period: int, cols: int, first: int) -> None:
    rng = np.random.default_rng(cols)
    values = rng.normal(0, 6, (*leading, cols)).astype(np.float32)
    scores = mx.array(values) * 1.0  # an array this test owns
    result = kernels.softmax_rows_(scores, first, period)
    assert result is scores
    query = np.arange(int(np.prod(leading))).reshape(leading) % period
    visible = np.arange(cols) <= (first + query[..., None]) if first >= 0 else np.ones(values.shape, bool)
    got = np.array(scores)
    np.testing.assert_allclose(got, _softmax_reference(values, visible), rtol=2e-6, atol=1e-12)
    assert np.all(got[~np.broadcast_to(visible, got.shape)] == 0.0)


def test_softmax_refuses_arrays_it_cannot_write(kernels: native.NativeKernels) -> None:
    with pytest.raises(ValueError, match="contiguous float32"):
        kernels.softmax_rows_(mx.zeros((4, 3)).T)


@pytest.mark.parametrize(("heads", "kv_heads", "n", "length"), [(4, 4, 7, 7), (6, 2, 12, 200), (2, 1, 33, 33)])
@pytest.mark.parametrize("mask", ["causal", None])
def test_attention_with_kernels_matches_mlx(kernels: native.NativeKernels, heads: int, kv_heads: int, n: int,
                                            length: int, mask: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(attention, "BLOCK_SCORES", 64 * length)  # several blocks per call
    k1, k2, k3 = mx.random.split(mx.random.key(heads + n), 3)
    q = mx.random.normal((1, heads, n, 16), key=k1)
    k, v = 2 * mx.random.normal((1, kv_heads, length, 16), key=k2), mx.random.normal((1, kv_heads, length, 16), key=k3)
    got = attention.prefill_attention(q, k, v, 0.25, mask, kernels)
    want = mx.fast.scaled_dot_product_attention(q, k, v, scale=0.25, mask=mask)
    np.testing.assert_allclose(np.array(got), np.array(want), atol=2e-6, rtol=1e-5)


def test_attention_with_kernels_keeps_array_masks_on_mlx(kernels: native.NativeKernels,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    used: list[tuple[Any, ...]] = []
    monkeypatch.setattr(native.NativeKernels, "softmax_rows_", lambda self, *args: used.append(args))
    q, k, v = (mx.random.normal((1, 2, 5, 8), key=mx.random.key(i)) for i in range(3))
    allowed = mx.arange(5)[None] <= mx.arange(5)[:, None]
    got = attention.prefill_attention(q, k, v, 0.3, allowed, kernels)
    want = mx.fast.scaled_dot_product_attention(q, k, v, scale=0.3, mask=allowed)
    np.testing.assert_allclose(np.array(got), np.array(want), atol=2e-6)
    assert used == []


def test_attention_with_kernels_on_half_precision_inputs(kernels: native.NativeKernels) -> None:
    q, k, v = (mx.random.normal((1, 4, 6, 16), key=mx.random.key(i)).astype(mx.bfloat16) for i in range(3))
    got = attention.prefill_attention(q, k, v, 0.25, "causal", kernels)
    assert got.dtype == mx.bfloat16
    want = mx.fast.scaled_dot_product_attention(q.astype(mx.float32), k.astype(mx.float32), v.astype(mx.float32),
                                                scale=0.25, mask="causal")
    np.testing.assert_allclose(np.array(got.astype(mx.float32)), np.array(want), atol=3e-2)


def test_swiglu_with_falls_back_for_other_dtypes_and_without_kernels(kernels: native.NativeKernels) -> None:
    calls: list[str] = []

    def fallback(gate: mx.array, x: mx.array) -> mx.array:
        calls.append(str(gate.dtype))
        return gate * x

    assert native.swiglu_with(None, fallback) is fallback
    chosen = native.swiglu_with(kernels, fallback)
    gate = mx.random.normal((16, native.SWIGLU_MIN_VALUES // 16), key=mx.random.key(3))
    np.testing.assert_allclose(np.array(chosen(gate, gate)), _silu_times(np.array(gate), np.array(gate)), rtol=2e-6)
    assert calls == []
    chosen(gate.astype(mx.bfloat16), gate.astype(mx.bfloat16))
    chosen(gate[:15], gate[:15])  # one row short of the size where C pays
    assert calls == ["mlx.core.bfloat16", "mlx.core.float32"]


def test_off_switch_and_failed_builds_are_one_line_reasons(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(native.ENV_SWITCH, "0")
    assert native.load(tmp_path) == (None, "off (LOGITSCOPE_NATIVE_KERNELS=0)")
    monkeypatch.delenv(native.ENV_SWITCH)
    monkeypatch.setenv("CC", "/bin/false")
    loaded, reason = native.load(tmp_path / "empty")
    assert loaded is None and reason.startswith("off: false could not build it") and "\n" not in reason
    monkeypatch.setenv("CC", str(tmp_path / "missing-cc"))
    assert native.load(tmp_path / "empty") == (None, "off: no C compiler found (set CC, or install gcc)")


def test_routes_use_the_kernels_when_they_load(kernels: native.NativeKernels, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native, "process_kernels", lambda: kernels)
    routes = routing._routes()  # noqa: SLF001 - what install_cpu_routes would install
    swiglu = routes["swiglu"][1]
    assert swiglu is not fastmath.swiglu
    used: list[int] = []
    original = native.NativeKernels.swiglu
    monkeypatch.setattr(native.NativeKernels, "swiglu", lambda self, g, x: used.append(1) or original(self, g, x))
    big = mx.ones((16, native.SWIGLU_MIN_VALUES // 16))
    swiglu(big, big)
    assert used == [1]
    monkeypatch.setattr(native, "process_kernels", lambda: None)
    assert routing._routes()["swiglu"][1] is fastmath.swiglu  # noqa: SLF001


@pytest.mark.parametrize(("rows", "cols", "first_visible", "period"), [
    (1, 1, 0, 1), (3, 17, -1, 1), (5, 33, 28, 5), (12, 40, 10, 4), (7, 9, 30, 7), (64, 257, 100, 16),
])
def test_kernels_write_only_inside_their_buffers(kernels: native.NativeKernels, rows: int, cols: int,
                                                 first_visible: int, period: int) -> None:
    """Called directly on the middle of a guarded buffer: every value around it stays untouched
    (the vectorized clones handle the tails of rows whose length is no multiple of their width)."""
    guard = 64
    rng = np.random.default_rng(rows * cols)
    scores = np.full(guard + rows * cols + guard, 7.25, dtype=np.float32)
    scores[guard:-guard] = rng.normal(0, 3, rows * cols)
    address = scores.ctypes.data + guard * scores.itemsize
    kernels.library.logitscope_softmax_rows_f32(address, rows, cols, first_visible, period)
    assert np.all(scores[:guard] == 7.25) and np.all(scores[-guard:] == 7.25)
    np.testing.assert_allclose(scores[guard:-guard].reshape(rows, cols).sum(axis=1), 1.0, rtol=1e-5)
    n = rows * cols
    gate, x = rng.normal(0, 3, n).astype(np.float32), rng.normal(0, 1, n).astype(np.float32)
    out = np.full(guard + n + guard, 7.25, dtype=np.float32)
    kernels.library.logitscope_swiglu_f32(gate.ctypes.data, x.ctypes.data, out.ctypes.data + guard * 4, n)
    assert np.all(out[:guard] == 7.25) and np.all(out[-guard:] == 7.25)
    np.testing.assert_allclose(out[guard:-guard], _silu_times(gate, x), rtol=2e-6, atol=1e-30)


def test_attention_falls_back_to_mlx_when_the_scores_cannot_be_written(kernels: native.NativeKernels,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: Any, *args: Any) -> mx.array:
        raise ValueError("native kernels write only contiguous float32 arrays in place")

    monkeypatch.setattr(native.NativeKernels, "softmax_rows_", refuse)
    q, k, v = (mx.random.normal((1, 2, 6, 8), key=mx.random.key(10 + i)) for i in range(3))
    got = attention.prefill_attention(q, k, v, 0.3, "causal", kernels)
    want = mx.fast.scaled_dot_product_attention(q, k, v, scale=0.3, mask="causal")
    np.testing.assert_allclose(np.array(got), np.array(want), atol=2e-6)
