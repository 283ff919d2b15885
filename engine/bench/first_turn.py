"""`python -m engine.bench.first_turn MODEL [--turns N]`: the first turn after a load against the
next ones (#31.4), one line per turn, in a fresh process (the first turn is what a fresh process
pays). Each turn is a new one-message chat of the same length, so the cache helps each of them
alike: only with what every prompt starts with."""

from __future__ import annotations

import argparse
import asyncio
import json
import time

from engine.core.api import GenerateRequest, Message, SamplingParams
from engine.bench.turns import engine_turn
from engine.factory import local_engine


async def measure(model: str, turns: int) -> dict[str, object]:
    engine = local_engine()
    try:
        start = time.perf_counter()
        await engine.load(model)
        load_s = time.perf_counter() - start
        ttft_ms = []
        for n in range(turns):
            request = GenerateRequest((Message("user", f"hello number {n} tell me a story about things"),),
                                      SamplingParams(max_tokens=2, seed=n, candidates=10))
            ttft_ms.append((await engine_turn(engine, request)).ttft_s * 1e3)  # type: ignore[arg-type]
        return {"model": model, "load_s": load_s, "ttft_ms": ttft_ms}
    finally:
        await engine.close()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m engine.bench.first_turn")
    parser.add_argument("model")
    parser.add_argument("--turns", type=int, default=4)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(measure(args.model, args.turns))))


if __name__ == "__main__":
    main()
