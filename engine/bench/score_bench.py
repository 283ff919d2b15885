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


async def prefill_s(engine, messages: tuple[Message, ...]) -> tuple[float, int]:  # type: ignore[no-untyped-def]
    """Seconds from `generate` to the first token of a one-token greedy turn, and the prompt's length."""
    started = time.perf_counter()
    first = None
    async for event in engine.generate(GenerateRequest(messages, SamplingParams(temperature=0.0, max_tokens=1,
                                                                                 candidates=10))):
        if first is None:
            first = time.perf_counter()
        if isinstance(event, TurnFinished):
            return first - started, event.prompt_tokens
    raise RuntimeError("no TurnFinished")


async def score_s(engine, messages: tuple[Message, ...]) -> tuple[float, int]:  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    scored = await engine.score(ScoreRequest(messages, candidates=10))
    assert scored.reused_tokens <= 8, scored.reused_tokens  # a cold cache (the template's head at most)
    return time.perf_counter() - started, len(scored.ids)


async def bench(spec: str, rounds: int, words: int) -> None:
    from engine.factory import local_engine

    engine = local_engine()
    info = await engine.load(spec)
    print(f"loaded {info.name}", file=sys.stderr, flush=True)
    rng = random.Random(0)
    await prefill_s(engine, prompt(rng, words))  # warm-up: first-use costs (kernels, buffers)
    await score_s(engine, prompt(rng, words))
    times: dict[str, list[float]] = {"prefill": [], "score": []}
    ratios: list[float] = []
    length = 0
    for n in range(rounds):
        order = ("prefill", "score") if n % 2 == 0 else ("score", "prefill")
        got: dict[str, float] = {}
        for name in order:
            run = prefill_s if name == "prefill" else score_s
            got[name], length = await run(engine, prompt(rng, words))
            times[name].append(got[name])
            print(f"    round {n + 1} {name}: {got[name] * 1000:.1f} ms", file=sys.stderr, flush=True)
        ratios.append(got["score"] / got["prefill"])
    await engine.close()
    print(f"model {info.name} ({info.dtype}, {info.blas}); prompt ~{length} tokens; {rounds} rounds, alternating")
    for name, values in times.items():
        print(f"  {name:8s} median {statistics.median(values) * 1000:8.1f} ms  "
              f"({min(values) * 1000:.1f}-{max(values) * 1000:.1f})")
    print(f"  score / prefill: median {statistics.median(ratios):.3f}x ({min(ratios):.3f}-{max(ratios):.3f})")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m engine.bench.score_bench", description=__doc__.split("\n")[0])
    parser.add_argument("--shape", default="30m", help="a benchmark shape (engine.bench.shapes; default 30m)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--words", type=int, default=200, help="prompt words (200: ~1,000 tokens with the bench tokenizer)")
    parser.add_argument("--gguf", action="store_true", help="the same model as an F32 GGUF file, run by llama.cpp")
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
        asyncio.run(bench(spec, args.rounds, args.words))


if __name__ == "__main__":
    main()
