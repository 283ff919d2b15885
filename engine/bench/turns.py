"""Engine benchmarks: decode speed against plain mlx-lm, warm vs cold TTFT, and branching.

The real `Engine` (its thread, its cache bookkeeping, 10 candidates per token) runs against
mlx-lm's own `generate_step` on the same weights in the same compute dtype, in one process,
alternating, so both see the same machine state. Timings are wall-clock as a caller sees them:
from the `generate` call to the first `TokenEvent` (TTFT), and first to last token (decode).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any

from engine.core.api import EngineAPI, GenerateRequest, Message, SamplingParams, TokenEvent, TurnFinished
from engine.local.client import Engine

LETTERS = "abcdefghijklmnopqrstuvwxyz"


@dataclass(frozen=True)
class TurnTiming:
    ttft_s: float
    decode_tps: float  # 0.0 for a one-token turn
    tokens: tuple[TokenEvent, ...]
    finished: TurnFinished


@dataclass
class Contenders:
    """An Engine and the same folder loaded plainly with mlx-lm, for like-for-like comparisons."""

    engine: Engine
    model: Any  # the plain mlx-lm model
    tokenizer: Any
    dtype: str


async def open_contenders(folder: str) -> Contenders:
    """Load `folder` into a fresh Engine and, plainly, into this thread in the engine's dtype."""
    from mlx_lm.utils import load

    from engine.local.precision import COMPUTE_DTYPES, apply_compute_dtype

    engine = Engine()
    info = await engine.load(folder)
    loaded = load(folder)
    model, tokenizer = loaded[0], loaded[1]
    dtype = apply_compute_dtype(model, info.dtype if info.dtype in COMPUTE_DTYPES else "model")
    return Contenders(engine, model, tokenizer, dtype)


async def engine_turn(engine: EngineAPI, request: GenerateRequest) -> TurnTiming:
    """Run one turn and time it as a caller sees it."""
    start = time.perf_counter()
    first = end = 0.0
    events: list[TokenEvent] = []
    finished: TurnFinished | None = None
    async for event in engine.generate(request):
        now = time.perf_counter()
        if isinstance(event, TokenEvent):
            first = first or now
            events.append(event)
        else:
            finished, end = event, now
    assert finished is not None and events, "a turn produced no tokens"
    rate = (len(events) - 1) / (end - first) if len(events) > 1 and end > first else 0.0
    return TurnTiming(first - start, rate, tuple(events), finished)


def plain_decode_tps(contenders: Contenders, messages: tuple[Message, ...], tokens: int, seed: int) -> float:
    """mlx-lm's `generate_step` with the same sampler settings (temp 0.7, top-p 0.9)."""
    import mlx.core as mx
    from mlx_lm.generate import generate_step
    from mlx_lm.sample_utils import make_sampler

    prompt = contenders.tokenizer.apply_chat_template([{"role": m.role, "content": m.text} for m in messages],
                                                      add_generation_prompt=True)
    mx.random.seed(seed)
    first = 0.0
    count = 0
    for _ in generate_step(mx.array(prompt), contenders.model, max_tokens=tokens,
                           sampler=make_sampler(temp=0.7, top_p=0.9)):
        first = first or time.perf_counter()
        count += 1
    return (count - 1) / (time.perf_counter() - first)


def words(chars: int, rng: random.Random) -> str:
    """Random lowercase words: the bench tokenizer spends one token per character on them."""
    out: list[str] = []
    while sum(len(w) + 1 for w in out) < chars:
        out.append("".join(rng.choice(LETTERS) for _ in range(rng.randint(2, 8))))
    return " ".join(out)[:chars]


def history(tokens: int, vocab: int, tokenizer: Any, rng: random.Random, exchanges: int = 4) -> tuple[Message, ...]:
    """A conversation of about `tokens` tokens; replies carry their ids, as the app sends them."""
    per_reply = max(8, tokens // exchanges - 60)
    messages: list[Message] = []
    for _ in range(exchanges):
        ids = tuple(rng.randrange(256, vocab - 3) for _ in range(per_reply))
        messages += [Message("user", words(48, rng)), Message("assistant", tokenizer.decode(list(ids)), ids)]
    return tuple(messages)


def params(max_tokens: int, seed: int) -> SamplingParams:
    return SamplingParams(temperature=0.7, top_p=0.9, candidates=10, max_tokens=max_tokens, seed=seed)
