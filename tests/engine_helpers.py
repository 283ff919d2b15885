"""Test helpers for the engine: run a turn, and independent references computed without it.

The references use mlx-lm directly on this (the test's) thread with a fresh cache each time, so
they share nothing with the engine's cache bookkeeping, prompt splicing or sampler.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

import mlx.core as mx
import numpy as np
from mlx_lm.generate import generate_step
from mlx_lm.utils import load

from engine.core.api import GenerateRequest, Message, SamplingParams, TokenEvent, TurnFinished

GREEDY = SamplingParams(temperature=0.0, max_tokens=12, candidates=5)


async def run(
    engine: Any, messages: Sequence[Message], params: SamplingParams = GREEDY, *, continue_last: bool = False
) -> tuple[list[TokenEvent], TurnFinished]:
    """One whole turn: its token events and the closing record."""
    return await turn(engine, GenerateRequest(tuple(messages), params, continue_last))


async def turn(engine: Any, request: GenerateRequest) -> tuple[list[TokenEvent], TurnFinished]:
    """One whole turn of any `EngineAPI` (local, remote, GGUF, scripted): its token events and the
    closing record."""
    events: list[TokenEvent] = []
    async for item in engine.generate(request):
        if isinstance(item, TurnFinished):
            return events, item
        events.append(item)
    raise AssertionError("the turn ended without a TurnFinished")


def reply(finished: TurnFinished) -> Message:
    """The assistant message a caller appends after a turn (exact ids, no stop token)."""
    return Message("assistant", finished.text, finished.token_ids)


@lru_cache(maxsize=8)
def reference(path: Path) -> tuple[Any, Any]:
    """The model and tokenizer loaded independently of the engine (once per folder)."""
    return load(str(path))


def cold_greedy(path: Path, prompt_ids: Sequence[int], max_tokens: int) -> list[int]:
    """Greedy ids from a fresh cache via mlx-lm's own generate_step, cut at the first stop id."""
    model, tokenizer = reference(path)
    out: list[int] = []
    for token, _ in generate_step(mx.array(list(prompt_ids)), model, max_tokens=max_tokens):
        if int(token) in tokenizer.eos_token_ids:
            break
        out.append(int(token))
    return out


def cold_logits(path: Path, ids: Sequence[int]) -> np.ndarray:
    """The logits after `ids`, from a single cache-free forward pass."""
    model, _ = reference(path)
    return np.array(model(mx.array(list(ids))[None])[0, -1, :].astype(mx.float32))


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """log softmax in float64 (an independent reference of the engine's logprobs)."""
    x = logits.astype(np.float64)
    return x - (x.max() + np.log(np.exp(x - x.max()).sum()))


def cold_logprobs(path: Path, ids: Sequence[int]) -> np.ndarray:
    """log softmax of the logits after `ids`, from a single cache-free forward pass."""
    return log_softmax(cold_logits(path, ids))


def spy_threads(monkeypatch: Any, owner: Any, name: str) -> list[str]:
    """Wrap `owner.name` so each call records the calling thread's name; returns that list."""
    import threading

    real = getattr(owner, name)
    seen: list[str] = []

    def spying(*args: Any) -> Any:
        seen.append(threading.current_thread().name)
        return real(*args)

    monkeypatch.setattr(owner, name, spying)
    return seen
