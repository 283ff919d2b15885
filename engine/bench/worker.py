"""One benchmark configuration in a fresh process: ``python -m engine.bench.worker '<json>'``.

Why a subprocess: the fast BLAS must be loaded before MLX is imported, and cannot be unloaded,
so "BLAS on vs off" needs two processes; doing every per-config measurement this way also keeps
one config's allocator cache and thread state from leaking into the next.

Config keys: shape ("30m", "qwen0.5b", ...), blas (bool), threads (OpenBLAS threads, or null),
gemv_forward (bool, default off: engine.cpu.gemv_forward), dtype (a compute dtype setting), prompt
(tokens), decode (tokens), prefill_step, cache_limit_mb (null = MLX default), dequant_prefill,
keep_bytes, two_stream and fast_layers (single fast paths of engine.cpu.unpacked, engine.cpu.parallel and
engine.cpu.routing, for experiments), engine_tuning (bool: all of them exactly as the engine applies
them, `engine.cpu.CpuLayer.tune`, unpacked weights kept ahead), budget_s (stop decoding early
past this), and engine (bool: time logitscope's own Engine, which applies every fast path
itself, instead of plain mlx-lm). Prints one JSON
line: prefill tok/s, decode tok/s, the active BLAS and dtype.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

from engine.cpu.blas import enable_fast_blas
from engine.cpu.gemv_forward import ENV_SWITCH as GEMV_SWITCH


def run(config: dict[str, Any]) -> dict[str, Any]:
    """Measure prefill and decode speed for one configuration: plain mlx-lm's ``generate_step``
    on the configured model, or (``engine``) logitscope's Engine on the same shape."""
    if config.get("threads"):
        os.environ["OPENBLAS_NUM_THREADS"] = str(config["threads"])
    os.environ[GEMV_SWITCH] = "1" if config.get("gemv_forward") else "0"
    blas = enable_fast_blas(enabled=bool(config.get("blas", True)))
    import mlx.core as mx  # only now: the BLAS choice above must come first

    if config.get("engine"):
        return {**asyncio.run(_engine_generate(config)), "blas": blas.reason, "blas_active": blas.active,
                "config": config}

    from engine.bench.shapes import build_model, shape_named
    from engine.cpu.unpacked import enable_dequantized_prefill
    from engine.local.precision import apply_compute_dtype, choose_compute_dtype

    if config.get("cache_limit_mb") is not None:
        mx.set_cache_limit(int(config["cache_limit_mb"]) * 2**20)
    model = build_model(shape_named(config["shape"]))
    dtype = apply_compute_dtype(model, choose_compute_dtype(config.get("dtype", "auto"), mx.default_device()))
    if config.get("dequant_prefill"):
        enable_dequantized_prefill(model, keep_bytes=int(config.get("keep_bytes", 0)))
    if config.get("two_stream"):
        from engine.cpu.parallel import enable_two_stream_decode

        enable_two_stream_decode(model)
    if config.get("fast_layers"):
        from engine.cpu.routing import install_cpu_routes

        install_cpu_routes()
    if config.get("engine_tuning"):
        from engine.cpu import CpuLayer, CpuSwitches

        layer = CpuLayer(blas.reason, blas.active, CpuSwitches(fast_layers=True))
        layer.tune(model)
        layer.after_load(model, lambda: False)
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


async def _engine_generate(config: dict[str, Any]) -> dict[str, Any]:
    """The same measurement through logitscope's Engine: a chat prompt of `prompt` tokens (or
    just over), then decoding with 10 candidates per token; a turn at that length warms up first."""
    import tempfile
    from pathlib import Path

    from engine.core.api import GenerateRequest, Message
    from engine.bench.folders import write_model_folder
    from engine.bench.shapes import build_model, shape_named
    from engine.bench.turns import engine_turn, params
    from engine.local.client import Engine

    shape = shape_named(config["shape"])
    with tempfile.TemporaryDirectory() as folder:
        write_model_folder(Path(folder), shape, build_model(shape))
        engine = Engine(compute_dtype=str(config.get("dtype", "auto")))
        try:
            info = await engine.load(folder)
            size = int(config.get("prompt", 128))
            # Warm up at the measured prompt length (new shapes cost a one-time trace), other text.
            await engine_turn(engine, GenerateRequest((Message("user", _text_of_tokens(folder, size, 0)),), params(8, 0)))
            text = _text_of_tokens(folder, size, 1)
            turn = await engine_turn(engine, GenerateRequest((Message("user", text),),
                                                             params(int(config.get("decode", 64)), 1)))
        finally:
            await engine.close()
    prompt = turn.finished.prompt_tokens
    return {"prefill_tps": prompt / turn.ttft_s, "ttft_s": turn.ttft_s, "decode_tps": turn.decode_tps,
            "decoded": len(turn.tokens), "prompt_tokens": prompt, "dtype": info.dtype}


def _text_of_tokens(folder: str, tokens: int, seed: int) -> str:
    """Random words whose chat prompt is `tokens` long (or just over), with the folder's tokenizer:
    the shortest such text, by bisection on its length in characters."""
    import random

    from transformers import AutoTokenizer

    from engine.bench.turns import words

    tokenizer = AutoTokenizer.from_pretrained(folder)

    def prompt_tokens(chars: int) -> int:
        message = [{"role": "user", "content": words(chars, random.Random(seed))}]
        return len(tokenizer.apply_chat_template(message, add_generation_prompt=True, return_dict=False))

    low, high = 1, 8 * tokens  # a character is at most one token, a token at most 8 characters here
    while low < high:
        middle = (low + high) // 2
        low, high = (low, middle) if prompt_tokens(middle) >= tokens else (middle + 1, high)
    return words(low, random.Random(seed))


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
