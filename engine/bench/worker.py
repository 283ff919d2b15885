"""One benchmark configuration in a fresh process: ``python -m engine.bench.worker '<json>'``.

Why a subprocess: the fast BLAS must be loaded before MLX is imported, and cannot be unloaded,
so "BLAS on vs off" needs two processes; doing every per-config measurement this way also keeps
one config's allocator cache and thread state from leaking into the next.

Config keys: shape ("30m", "qwen0.5b", ...), blas (bool), threads (OpenBLAS threads, or null),
dtype (a compute dtype setting), prompt (tokens), decode (tokens), prefill_step, cache_limit_mb
(null = MLX default), dequant_prefill, keep_bytes, two_stream and fast_prefill (the fast
paths of engine.dtype, engine.parallel and engine.routing), budget_s (stop decoding early past this). Prints one JSON line: prefill
tok/s, decode tok/s, the active BLAS and dtype.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from engine.blas import enable_fast_blas


def run(config: dict[str, Any]) -> dict[str, Any]:
    """Measure plain mlx-lm ``generate_step`` prefill and decode speed for one configuration."""
    if config.get("threads"):
        os.environ["OPENBLAS_NUM_THREADS"] = str(config["threads"])
    blas = enable_fast_blas(enabled=bool(config.get("blas", True)))
    import mlx.core as mx  # only now: the BLAS choice above must come first

    from engine.bench.shapes import build_model, shape_named
    from engine.dtype import apply_compute_dtype, choose_compute_dtype, enable_dequantized_prefill

    if config.get("cache_limit_mb") is not None:
        mx.set_cache_limit(int(config["cache_limit_mb"]) * 2**20)
    model = build_model(shape_named(config["shape"]))
    dtype = apply_compute_dtype(model, choose_compute_dtype(config.get("dtype", "auto"), mx.default_device()))
    if config.get("dequant_prefill"):
        enable_dequantized_prefill(model, keep_bytes=int(config.get("keep_bytes", 0)))
    if config.get("two_stream"):
        from engine.parallel import enable_two_stream_decode

        enable_two_stream_decode(model)
    if config.get("fast_prefill"):
        from engine.routing import install_cpu_routes

        install_cpu_routes()
    result = _generate(model, config)
    return {**result, "blas": blas.reason if blas.active else "reference BLAS",
            "blas_active": blas.active, "dtype": dtype, "config": config}


def _generate(model: Any, config: dict[str, Any]) -> dict[str, Any]:
    """Prefill a random prompt, then decode with temp 0.7 / top-p 0.9 until done or out of budget."""
    import mlx.core as mx
    from mlx_lm.generate import generate_step
    from mlx_lm.sample_utils import make_sampler

    vocab = int(model.args.vocab_size)
    prompt = mx.random.randint(0, vocab, (int(config.get("prompt", 128)),), key=mx.random.key(1))
    sampler = make_sampler(temp=0.7, top_p=0.9)
    _warm_up(model, sampler, vocab)
    budget = float(config.get("budget_s", 30.0))
    start = time.perf_counter()
    first = None
    count = 0
    for _ in generate_step(prompt, model, max_tokens=int(config.get("decode", 64)), sampler=sampler,
                           prefill_step_size=int(config.get("prefill_step", 2048))):
        now = time.perf_counter()
        if first is None:
            first = now
        count += 1
        if now - first > budget:
            break
    end = time.perf_counter()
    assert first is not None
    return {"prefill_tps": prompt.size / (first - start), "ttft_s": first - start,
            "decode_tps": (count - 1) / (end - first) if count > 1 else 0.0, "decoded": count}


def _warm_up(model: Any, sampler: Any, vocab: int) -> None:
    """A few steps first, so one-time costs (kernel set-up, allocator growth) are not timed."""
    import mlx.core as mx
    from mlx_lm.generate import generate_step

    for _ in generate_step(mx.array([1, 2, 3, 4] * 4), model, max_tokens=4, sampler=sampler):
        pass


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    print(json.dumps(run(json.loads(args[0]))), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
