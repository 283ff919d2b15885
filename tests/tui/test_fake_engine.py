"""The scripted engine keeps the EngineAPI promises the TUI relies on."""

from __future__ import annotations

import asyncio
import math

import pytest

from engine_helpers import turn
from engine.core.api import EngineAPI, EngineError, GenerateRequest, Message, ModelLoadError, SamplingParams, TokenEvent
from engine.scripted import ScriptedEngine, ScriptedToken




def _ask(text: str = "hi", **params: object) -> GenerateRequest:
    return GenerateRequest((Message("user", text),), SamplingParams(**params))  # type: ignore[arg-type]


async def test_is_an_engine_api_and_replays_script() -> None:
    engine = ScriptedEngine([["a", ScriptedToken("b", 0.3, (("c", 0.6),))]])
    assert isinstance(engine, EngineAPI)
    with pytest.raises(EngineError):
        await turn(engine, _ask())
    await engine.load("demo")
    tokens, done = await turn(engine, _ask(candidates=5))
    assert [t.text for t in tokens] == ["a", "b"] and done.text == "ab"
    b = tokens[1]
    assert b.rank == 2 and math.isclose(math.exp(b.logprob), 0.3)
    assert [c.text for c in b.candidates] == ["c", "b"]  # best first
    assert math.isclose(sum(c.sampled_prob for c in b.candidates), 1.0)
    assert done.finish_reason == "stop" and done.generated_tokens == 2


async def test_greedy_and_candidates_off() -> None:
    engine = ScriptedEngine([[ScriptedToken("b", 0.3, (("c", 0.6),))]])
    await engine.load("demo")
    tokens, _ = await turn(engine, _ask(temperature=0.0, candidates=0))
    assert tokens[0].sampled_prob == 0.0 and tokens[0].candidates == ()


async def test_max_tokens_cancel_and_set_params() -> None:
    engine = ScriptedEngine([["x"] * 50], token_delay=0.001)
    await engine.load("demo")
    _, done = await turn(engine, _ask(max_tokens=3))
    assert done.finish_reason == "length" and done.generated_tokens == 3
    seen = 0
    async for event in engine.generate(_ask()):
        if isinstance(event, TokenEvent):
            seen += 1
            if seen == 2:
                engine.set_params(SamplingParams(temperature=1.5))
            if seen == 5:
                engine.cancel()
        else:
            assert event.finish_reason == "cancelled" and event.generated_tokens == 5
    temps = [p.temperature for p in engine.params_seen[3:]]
    assert temps[:2] == [0.7, 0.7] and temps[2:] == [1.5, 1.5, 1.5]


async def test_continue_last_and_cache_reuse() -> None:
    engine = ScriptedEngine([["a", "b", "c", "d"]])
    await engine.load("demo")
    tokens, first = await turn(engine, _ask())
    prefix = Message("assistant", "ab", (tokens[0].id, tokens[1].id))
    request = GenerateRequest((Message("user", "hi"), prefix), SamplingParams(), continue_last=True)
    more, done = await turn(engine, request)
    assert [t.index for t in more] == [2, 3]
    assert done.token_ids[:2] == prefix.token_ids and done.text == "abcd"
    assert done.reused_tokens > 0 and done.reused_tokens + done.prefilled_tokens == done.prompt_tokens


async def test_load_error_and_close() -> None:
    engine = ScriptedEngine(load_error="no such model")
    progress: list[float | None] = []
    with pytest.raises(ModelLoadError, match="no such model"):
        await engine.load("x", on_progress=lambda p: progress.append(p.fraction))
    assert progress[-1] == 1.0
    await engine.close()
    await engine.close()  # idempotent
    with pytest.raises(EngineError):
        await turn(engine, _ask())
    await asyncio.sleep(0)


async def test_a_reply_held_after_its_first_token_waits_for_release() -> None:
    engine = ScriptedEngine([["a", "b", "c"]], hold_after=1)
    await engine.load("demo")
    stream = engine.generate(_ask())
    first = await stream.__anext__()
    assert isinstance(first, TokenEvent) and first.text == "a"
    later = asyncio.ensure_future(stream.__anext__())
    await asyncio.sleep(0.05)
    assert not later.done()  # held
    engine.release()
    assert (await later).text == "b"
    rest = [event async for event in stream]
    assert rest[-1].text == "abc" and rest[-1].finish_reason == "stop"
