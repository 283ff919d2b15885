"""What scoring a prompt costs next to prefilling it (#33): ``python -m engine.bench.score_bench``.

The real `Engine` loads a random-weight model at a benchmark shape (`engine.bench.shapes`, written
as an ordinary folder, or converted to an F32 GGUF file with ``--gguf``). Each round, on a cold
cache (a new prompt of random words, so nothing but the template's first ids is shared), it
times, alternating which goes first:

- **prefill**: a one-token turn on the prompt, from the `generate` call to its first token
  (what a user waits for before a reply: the prefill with the last-row head, and one sampling);
- **score**: `EngineAPI.score` of the same conversation with 10 candidates per token (the same
  prefill with the output head on every row, and each row's statistics).

Reports medians, min-max and the per-round ratio score / prefill. Not a test: a measurement, noisy
on a shared machine (say so with the numbers).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from engine.core.api import GenerateRequest, Message, SamplingParams, ScoreRequest, TurnFinished

WORDS = ("cat", "dog", "house", "tree", "river", "blue", "small", "runs", "over", "the", "a", "and", "quickly")


def prompt(rng: random.Random, words: int) -> tuple[Message, ...]:
    return (Message("user", " ".join(rng.choice(WORDS) for _ in range(words))),)


async def prefill_s(engine, messages: tuple[Message, ...]) -> tuple[float, float, int]:  # type: ignore[no-untyped-def]
    """Seconds from `generate` to the first token of a one-token greedy turn (wall clock, and CPU
    time of the whole process), and the prompt's length."""
    started, cpu = time.perf_counter(), time.process_time()
    async for event in engine.generate(GenerateRequest(messages, SamplingParams(temperature=0.0, max_tokens=1,
                                                                                 candidates=10))):
        if isinstance(event, TurnFinished):  # a one-token turn: its finish follows its token at once
            return time.perf_counter() - started, time.process_time() - cpu, event.prompt_tokens
    raise RuntimeError("no TurnFinished")


async def score_s(engine, messages: tuple[Message, ...]) -> tuple[float, float, int]:  # type: ignore[no-untyped-def]
    started, cpu = time.perf_counter(), time.process_time()
    scored = await engine.score(ScoreRequest(messages, candidates=10))
    assert scored.reused_tokens <= 8, scored.reused_tokens  # a cold cache (the template's head at most)
    return time.perf_counter() - started, time.process_time() - cpu, len(scored.ids)


async def bench(spec: str, rounds: int, words: int) -> None:
    from engine.factory import local_engine

    engine = local_engine()
    info = await engine.load(spec)
    print(f"loaded {info.name}", file=sys.stderr, flush=True)
    rng = random.Random(0)
    await prefill_s(engine, prompt(rng, words))  # warm-up: first-use costs (kernels, buffers)
    await score_s(engine, prompt(rng, words))
    wall: dict[str, list[float]] = {"prefill": [], "score": []}
    cpu: dict[str, list[float]] = {"prefill": [], "score": []}
    ratios: list[float] = []
    length = 0
    for n in range(rounds):
        order = ("prefill", "score") if n % 2 == 0 else ("score", "prefill")
        for name in order:
            run = prefill_s if name == "prefill" else score_s
            seconds, used, length = await run(engine, prompt(rng, words))
            wall[name].append(seconds)
            cpu[name].append(used)
            print(f"    round {n + 1} {name}: {seconds * 1000:.1f} ms wall, {used * 1000:.1f} ms cpu",
                  file=sys.stderr, flush=True)
        ratios.append(wall["score"][-1] / wall["prefill"][-1])
    await engine.close()
    print(f"model {info.name} ({info.dtype}, {info.blas}); prompt ~{length} tokens; {rounds} rounds, alternating")
    for name in wall:
        print(f"  {name:8s} wall: min {min(wall[name]) * 1000:8.1f} ms, median {statistics.median(wall[name]) * 1000:8.1f} "
              f"(max {max(wall[name]) * 1000:.1f});  process cpu: min {min(cpu[name]) * 1000:8.1f} ms, "
              f"median {statistics.median(cpu[name]) * 1000:8.1f}")
    print(f"  score / prefill: wall per round median {statistics.median(ratios):.3f}x ({min(ratios):.3f}-{max(ratios):.3f}); "
          f"min / min {min(wall['score']) / min(wall['prefill']):.3f}x; "
          f"cpu median / median {statistics.median(cpu['score']) / statistics.median(cpu['prefill']):.3f}x")


def bench_session(folder: str, rounds: int, words: int) -> None:
    """The same comparison one level down, on this thread, without the engine's thread and queue:
    a `Session` loaded as the engine loads it (compute dtype, speed layer, last-row head), a fresh
    cache each time; prefill = the turn's own steps (`split_prompt`, `prefill`, the last chunk's
    last-row logits), score = `ensure_scored` with 10 candidates. Many short alternating rounds, so
    the minimum (the run least disturbed by other work on the machine) is meaningful."""
    import mlx.core as mx
    from mlx_lm.utils import load

    from engine.local.backend import speed_layer
    from engine.local.lastrow import install_last_row_head
    from engine.local.precision import apply_compute_dtype
    from engine.local.scoring import ensure_scored
    from engine.local.session import Session

    speed = speed_layer(True, True)
    model, tokenizer = load(folder)[:2]
    apply_compute_dtype(model, "float32")
    speed.tune(model)
    session = Session(model, tokenizer, 1 << 20, mx.new_stream(mx.default_device()), install_last_row_head(model),
                      sampler_exp=speed.sampler_exp)
    rng = random.Random(0)

    def prefill(ids: list[int]) -> None:
        session.reset_cache()
        with mx.stream(session.stream):
            before, last = session.split_prompt(ids)
            session.prefill(before)
            mx.eval(session.forward(mx.array(list(last), dtype=mx.int32)))

    def score(ids: list[int]) -> None:
        session.reset_cache()
        with mx.stream(session.stream):
            ensure_scored(session, ids, 10)

    times: dict[str, list[float]] = {"prefill": [], "score": []}
    cpu: dict[str, list[float]] = {"prefill": [], "score": []}
    ids: list[int] = []
    for n in range(rounds + 1):
        for name, run in ((("prefill", prefill), ("score", score)) if n % 2 == 0 else (("score", score), ("prefill", prefill))):
            ids = session.prompt(prompt(rng, words), False)
            started, used = time.perf_counter(), time.process_time()
            run(ids)
            if n:  # the first round warms up
                times[name].append(time.perf_counter() - started)
                cpu[name].append(time.process_time() - used)
    print(f"session level, 30M-shape folder {folder}; prompt ~{len(ids)} tokens; {rounds} rounds, alternating")
    for name, values in times.items():
        print(f"  {name:8s} wall min {min(values) * 1000:8.1f} ms, median {statistics.median(values) * 1000:8.1f} "
              f"(max {max(values) * 1000:.1f}); process cpu min {min(cpu[name]) * 1000:8.1f} ms, "
              f"median {statistics.median(cpu[name]) * 1000:8.1f} (max {max(cpu[name]) * 1000:.1f})")
    print(f"  score / prefill: wall min / min {min(times['score']) / min(times['prefill']):.3f}x, "
          f"median / median {statistics.median(times['score']) / statistics.median(times['prefill']):.3f}x; "
          f"cpu min / min {min(cpu['score']) / min(cpu['prefill']):.3f}x, "
          f"median / median {statistics.median(cpu['score']) / statistics.median(cpu['prefill']):.3f}x")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m engine.bench.score_bench", description=__doc__.split("\n")[0])
    parser.add_argument("--shape", default="30m", help="a benchmark shape (engine.bench.shapes; default 30m)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--words", type=int, default=200, help="prompt words (200: ~1,000 tokens with the bench tokenizer)")
    parser.add_argument("--gguf", action="store_true", help="the same model as an F32 GGUF file, run by llama.cpp")
    parser.add_argument("--session", action="store_true", help="measure on a Session in this thread (less noise)")
    parser.add_argument("--weights-dtype", default="float32", choices=("float32", "bfloat16"))
    args = parser.parse_args()
    from engine.factory import speed_layer

    speed_layer(True, True)  # the fast BLAS loads before this process imports MLX (building the model)
    from dataclasses import replace

    from engine.bench.folders import write_model_folder
    from engine.bench.shapes import build_model, shape_named

    shape = replace(shape_named(args.shape), dtype=args.weights_dtype)
    with tempfile.TemporaryDirectory() as scratch:
        spec = str(write_model_folder(Path(scratch) / shape.name, shape, build_model(shape)))
        if args.gguf:
            from engine.gguf.convert import convert_folder

            spec = str(convert_folder(Path(spec), Path(scratch) / f"{shape.name}.gguf"))
        if args.session:
            bench_session(spec, args.rounds, args.words)
        else:
            asyncio.run(bench(spec, args.rounds, args.words))


if __name__ == "__main__":
    main()
