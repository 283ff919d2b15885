"""engine.cpu.rope and engine.cpu.norms: MLX's CPU fallbacks, fused, bit for bit, and routed only where they apply."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from engine_helpers import spy_threads

import mlx.core as mx
import mlx.nn as nn
from engine.cpu import routing
from engine.cpu.norms import MAX_ROWS, handles_rms_norm, rms_norm
from engine.cpu.rope import RopeTables, handles_rope


@pytest.mark.parametrize(("dims", "width", "base", "scale", "offset", "length", "dtype"), [
    (16, 16, 10000.0, 1.0, 0, 9, mx.float32),          # a fresh prompt
    (16, 16, 1e6, 1.0, 3000, 5, mx.float32),           # a follow-up deep in the context (qwen's base)
    (16, 16, 10000.0, 1.0, 41, 1, mx.float32),         # a decode step
    (8, 16, 10000.0, 0.5, 17, 7, mx.float32),          # partial rotary dims, scaled positions
    (16, 16, 500000.0, 1.0, 30000, 3, mx.bfloat16),    # half precision, far positions
])
def test_rope_is_bit_identical_to_mlx(dims: int, width: int, base: float, scale: float, offset: int,
                                      length: int, dtype: Any) -> None:
    module = nn.RoPE(dims, base=base, scale=scale)
    x = mx.random.normal((1, 3, length, width), key=mx.random.key(offset + length)).astype(dtype)
    assert handles_rope(module, x, offset)
    want = mx.fast.rope(x, dims, traditional=False, base=base, scale=scale, offset=offset)
    got = RopeTables().rope(module, x, offset)
    assert got.dtype == want.dtype and mx.array_equal(got, want).item()


def test_rope_tables_are_shared_within_a_pass_and_replaced_after() -> None:
    tables = RopeTables()
    first = tables.get(5, 10, 16, 10000.0, 1.0, mx.float32)
    assert tables.get(5, 10, 16, 10000.0, 1.0, mx.float32) is first  # the next layer: no recompute
    moved = tables.get(1, 15, 16, 10000.0, 1.0, mx.float32)  # the next step
    assert moved is not first and moved[0].shape == (1, 8)


def test_rope_route_leaves_other_layouts_to_mlx() -> None:
    x = mx.zeros((1, 2, 4, 16))

    class Scaled(nn.RoPE):  # a subclass may change the maths
        pass

    assert not handles_rope(nn.RoPE(16, traditional=True), x, 0)
    assert not handles_rope(Scaled(16), x, 0)
    assert not handles_rope(nn.RoPE(16), x, mx.array([3]))  # per-sequence offsets
    assert not handles_rope(nn.RoPE(16), mx.zeros((2, 4, 16)), 0)


@pytest.mark.parametrize(("shape", "dtype"), [((1, 1, 24), mx.float32), ((1, 16, 24), mx.float32),
                                              ((2, 3, 40), mx.bfloat16)])
def test_rms_norm_is_bit_identical_to_mlx(shape: tuple[int, ...], dtype: Any) -> None:
    module = nn.RMSNorm(shape[-1], eps=1e-5)
    module.weight = mx.random.normal((shape[-1],), key=mx.random.key(1)).astype(dtype)
    x = (3 * mx.random.normal(shape, key=mx.random.key(2))).astype(dtype)
    assert handles_rms_norm(module, x)
    want = mx.fast.rms_norm(x, module.weight, 1e-5)
    got = rms_norm(module, x)
    assert got.dtype == want.dtype and mx.array_equal(got, want).item()


def test_rms_norm_route_takes_decode_sized_calls_of_plain_norms_only() -> None:
    module = nn.RMSNorm(8)

    class Gemma(nn.RMSNorm):  # e.g. a (1 + weight) variant
        pass

    assert handles_rms_norm(module, mx.zeros((1, MAX_ROWS, 8)))
    assert not handles_rms_norm(module, mx.zeros((1, MAX_ROWS + 1, 8)))  # prefill: MLX's ops are faster
    assert not handles_rms_norm(module, mx.zeros((1, 1, 8), dtype=mx.bfloat16))  # dtype differs from weight
    assert not handles_rms_norm(Gemma(8), mx.zeros((1, 1, 8)))


def test_layer_routes_serve_registered_threads_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Install on a worker thread: its calls go to the fused versions, this thread's do not."""
    from engine.cpu import norms

    seen = spy_threads(monkeypatch, norms, "rms_norm_compiled")
    module, x = nn.RMSNorm(8), mx.arange(8, dtype=mx.float32).reshape(1, 1, 8)
    mx.eval(module.parameters(), x)
    results: dict[str, mx.array] = {}

    def worker() -> None:
        with mx.stream(mx.new_stream(mx.cpu)):  # MLX streams belong to a thread
            uninstall = routing.install_cpu_routes()
            results["routed"] = module(x)
            uninstall()
            results["after"] = module(x)
            mx.eval(results["routed"], results["after"])

    thread = threading.Thread(target=worker, name="route-test")
    thread.start()
    thread.join()
    assert isinstance(nn.RMSNorm.__call__.route, routing.ThreadRoute)  # type: ignore[attr-defined]
    assert isinstance(nn.RoPE.__call__.route, routing.ThreadRoute)  # type: ignore[attr-defined]
    plain = module(x)
    assert seen == ["route-test"]  # not the uninstalled call, not this thread's
    assert mx.array_equal(results["routed"], plain).item() and mx.array_equal(results["after"], plain).item()


def test_rope_tables_are_kept_per_thread() -> None:
    tables = RopeTables()
    mine = tables.get(4, 0, 16, 10000.0, 1.0, mx.float32)
    theirs: list[tuple[mx.array, mx.array]] = []

    def other() -> None:
        with mx.stream(mx.new_stream(mx.cpu)):
            theirs.append(tables.get(4, 0, 16, 10000.0, 1.0, mx.float32))

    worker = threading.Thread(target=other)
    worker.start()
    worker.join()
    assert theirs[0] is not mine  # built on the other thread's stream, not borrowed
    assert tables.get(4, 0, 16, 10000.0, 1.0, mx.float32) is mine  # and ours is still cached
