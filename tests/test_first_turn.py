"""The first turn after a load starts from a warm engine (#31.4): the once-per-model work (the CPU
layer's float32 copies, the first call of every kernel a turn uses) is done inside the load under a
progress line, and the cache holds what every first prompt starts with, as a later turn's would.
The speed itself is the benchmark's to report (docs/benchmarks-history.md, round 9)."""

from __future__ import annotations

from pathlib import Path

from engine.core.api import GenerateRequest, LoadProgress, Message, SamplingParams
from engine.local.client import Engine
from engine_helpers import turn


async def test_the_load_warms_up_and_the_first_turn_reuses_the_prompt_start(chatml_model: Path) -> None:
    engine = Engine()
    news: list[LoadProgress] = []
    try:
        await engine.load(str(chatml_model), on_progress=news.append)
        assert any(n.message.startswith("warming up") for n in news)
        _, done = await turn(engine, GenerateRequest((Message("user", "Tell me a story"),),
                                                     SamplingParams(max_tokens=3, seed=1)))
        assert done.reused_tokens > 0  # the template's start, cached during the load
        assert done.reused_tokens < done.prompt_tokens
    finally:
        await engine.close()


async def test_the_warm_up_leaves_no_trace_in_what_the_first_turn_writes(chatml_model: Path) -> None:
    """The same seed gives the same reply whether the engine was warmed or not (a fresh engine
    and one that already ran a turn on another message)."""
    request = GenerateRequest((Message("user", "Once upon"),), SamplingParams(max_tokens=6, seed=5))
    first, second = Engine(), Engine()
    try:
        await first.load(str(chatml_model))
        tokens_a, _ = await turn(first, request)
        await second.load(str(chatml_model))
        await turn(second, GenerateRequest((Message("user", "Something else"),), SamplingParams(max_tokens=4, seed=9)))
        tokens_b, _ = await turn(second, request)
        assert [t.id for t in tokens_a] == [t.id for t in tokens_b]
        assert [round(t.logprob, 4) for t in tokens_a] == [round(t.logprob, 4) for t in tokens_b]
    finally:
        await first.close()
        await second.close()
