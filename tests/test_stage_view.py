"""The stage view command (`EngineAPI.stages`, `engine.local.stagerows`): one token's distribution
after each stage, recomputed by the engine from a forward pass over the prompt and the reply and
a replay of the turn's chain (its parameters, seed and state). What it shows must be what drew the
token: the final column equals the sampled probabilities the turn reported, the raw log
probabilities the ones it reported, and the replay draws the stored token. Both engines (MLX, and
llama.cpp on a tiny F32 GGUF); the chat's cache is left as it was. Issue #32.3.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from typing import Any

import pytest
from engine_helpers import run
from tinymodels import build_model

from engine.core.api import EngineError, Message, SamplingParams, StageRequest, StageView, TokenEvent
from engine.local.client import Engine
from engine.local.stageview import rows_needed, timeline

ASK = (Message("user", "hello there, how are you today?"),)
EXTENDED = SamplingParams(temperature=1.3, top_k=30, top_p=0.9, min_p=0.02, xtc_probability=0.7, xtc_threshold=0.05,
                          top_n_sigma=2.0, logit_bias=((4, 2.0),), repetition_penalty=1.3, seed=8, max_tokens=8,
                          candidates=8)
CLASSIC = SamplingParams(temperature=0.9, top_k=12, top_p=0.8, repetition_penalty=1.2, seed=5, max_tokens=8,
                         candidates=8)
MIROSTAT = SamplingParams(temperature=1.0, mirostat=2, mirostat_tau=3.0, seed=3, max_tokens=8, candidates=8)
HAVE_LLAMA = importlib.util.find_spec("llama_cpp") is not None and importlib.util.find_spec("gguf") is not None


def request_for(events: list[TokenEvent], index: int, params: SamplingParams) -> StageRequest:
    return StageRequest(ASK, tuple(e.id for e in events[:index + 1]), params,
                        tuple(c.id for c in events[index].candidates))


def check_view(view: StageView, event: TokenEvent) -> None:
    """The view equals what the turn reported for `event` (its own draw), stage by stage consistent."""
    assert view.token == event.id
    assert view.stages[0][0] == "model" and view.stages[-1][0] == "final"
    final = dict(zip(view.candidates, view.stages[-1][1]))
    logprobs = dict(zip(view.candidates, view.logprobs))
    for cand in event.candidates:
        assert final[cand.id] == pytest.approx(cand.sampled_prob, abs=1e-5)
        if math.isfinite(cand.logprob):
            assert logprobs[cand.id] == pytest.approx(cand.logprob, abs=1e-4)
    assert final[event.id] > 0.0
    for k, cid in enumerate(view.candidates):  # removed exactly where the final says 0
        assert (view.removed_by[k] != "") == (final[cid] == 0.0), (cid, view.removed_by[k])


@pytest.mark.parametrize("params", [EXTENDED, CLASSIC, MIROSTAT], ids=["extended", "classic", "mirostat"])
async def test_the_stage_view_is_what_drew_each_token(chatml_model: Path, engine: Any, params: SamplingParams) -> None:
    await engine.load(str(chatml_model))
    events, done = await run(engine, ASK, params)
    assert len(events) >= 5
    for index in (0, 4, len(events) - 1):
        view = await engine.stages(request_for(events, index, params))
        check_view(view, events[index])
    if params is EXTENDED:
        view = await engine.stages(request_for(events, 4, params))
        names = [name for name, _ in view.stages]
        assert names[:3] == ["model", "logit bias", "penalties"] and "top-nσ" in names
        assert any(view.removed_by)  # a filter removed some listed candidate: the marks are exercised
    again, redone = await run(engine, ASK, params)  # the chat's cache is as the turn left it
    assert [e.id for e in again] == [e.id for e in events] and redone.reused_tokens >= done.prompt_tokens - 1


async def test_a_replay_that_differs_is_refused_in_one_line(chatml_model: Path, engine: Any) -> None:
    """Another seed is another computation: the view says so rather than showing its numbers."""
    await engine.load(str(chatml_model))
    params = EXTENDED.with_changes(max_tokens=16)
    events, _ = await run(engine, ASK, params)
    other, _ = await run(engine, ASK, params.with_changes(seed=99))
    first = next(i for i, (a, b) in enumerate(zip(events, other)) if a.id != b.id)
    for index in (first, len(events) - 1):  # at the token itself, and at a later one
        with pytest.raises(EngineError) as error:
            await engine.stages(request_for(events, index, params.with_changes(seed=99)))
        assert "\n" not in str(error.value) and "does not match" in str(error.value)


async def test_bad_requests_are_one_line(chatml_model: Path, engine: Any) -> None:
    with pytest.raises(EngineError, match="No model"):
        await engine.stages(StageRequest(ASK, (1,), EXTENDED, ()))
    await engine.load(str(chatml_model))
    for bad in (StageRequest(ASK, (), EXTENDED, ()), StageRequest(ASK, (10**9,), EXTENDED, ()),
                StageRequest(ASK, (1,), EXTENDED.with_changes(seed=None), ())):
        with pytest.raises(EngineError) as error:
            await engine.stages(bad)
        assert "\n" not in str(error.value)


def test_the_timeline_applies_each_change_from_its_token() -> None:
    a, b = SamplingParams(temperature=0.5), SamplingParams(temperature=0.9, mirostat=2)
    plan = timeline(a, [(3, b)], 5)
    assert plan == [a, a, a, b, b]
    assert rows_needed(plan) == [3, 4]  # mirostat's mu follows every draw it made
    assert rows_needed(timeline(a, [], 4)) == [3]  # otherwise only the token's own row


@pytest.mark.skipif(not HAVE_LLAMA, reason="llama-cpp-python is not installed")
@pytest.mark.parametrize("params", [EXTENDED, CLASSIC], ids=["extended", "classic"])
async def test_the_gguf_engine_s_stage_view(tmp_path: Path, params: SamplingParams) -> None:
    from engine.gguf import GgufLoader
    from engine.gguf.convert import convert_folder

    path = convert_folder(build_model(tmp_path / "chatml", "chatml", seed=5), tmp_path / "chatml-f32.gguf")
    engine = Engine(0, loaders=(GgufLoader(1),))
    try:
        await engine.load(str(path))
        events, done = await run(engine, ASK, params)
        for index in (0, len(events) - 1):
            check_view(await engine.stages(request_for(events, index, params)), events[index])
        again, _ = await run(engine, ASK, params)  # the chat's sequence was left as it was
        assert [e.id for e in again] == [e.id for e in events]
    finally:
        await engine.close()



async def _turn_with_a_change(engine: Any, after: int) -> tuple[list[TokenEvent], Any, SamplingParams, SamplingParams]:
    from engine.core.api import GenerateRequest, TurnFinished

    start = SamplingParams(temperature=1.0, seed=5, max_tokens=12, candidates=5, xtc_probability=0.9,
                           xtc_threshold=0.02)
    later = start.with_changes(temperature=0.0)
    events: list[TokenEvent] = []
    async for event in engine.generate(GenerateRequest(ASK, start)):
        if isinstance(event, TurnFinished):
            return events, event, start, later
        events.append(event)
        if len(events) == after:
            engine.set_params(later)
    raise AssertionError("no TurnFinished")


async def test_the_turn_says_from_which_token_a_change_applied(chatml_model: Path, engine: Any) -> None:
    """The bug: the app recorded a mid-reply change at the number of tokens it had seen, but the
    engine had already sampled the next one (pipelining) with the old parameters, so the record
    was a token early and the stage view could not replay that token. The engine now says where
    each change applied (`TurnFinished.params_changes`), and the replay agrees at every token."""
    await engine.load(str(chatml_model))
    events, done, start, later = await _turn_with_a_change(engine, 4)
    assert done.params_changes is not None and len(done.params_changes) == 1
    at, params = done.params_changes[0]
    assert params == later and at >= 4
    assert events[at].sampled_prob == 1.0 and events[at - 1].sampled_prob < 1.0  # greedy from there on
    for index in range(len(events)):
        request = StageRequest(ASK, tuple(e.id for e in events[:index + 1]), start,
                               tuple(c.id for c in events[index].candidates), done.params_changes)
        check_view(await engine.stages(request), events[index])


@pytest.mark.skipif(not HAVE_LLAMA, reason="llama-cpp-python is not installed")
async def test_the_gguf_turn_says_where_a_change_applied(tmp_path: Path) -> None:
    from engine.gguf import GgufLoader
    from engine.gguf.convert import convert_folder

    path = convert_folder(build_model(tmp_path / "chatml", "chatml", seed=5), tmp_path / "chatml-f32.gguf")
    engine = Engine(0, loaders=(GgufLoader(1),))
    try:
        await engine.load(str(path))
        events, done, start, later = await _turn_with_a_change(engine, 4)
        assert done.params_changes is not None and [p for _, p in done.params_changes] == [later]
        for index in range(len(events)):
            request = StageRequest(ASK, tuple(e.id for e in events[:index + 1]), start,
                                   tuple(c.id for c in events[index].candidates), done.params_changes)
            check_view(await engine.stages(request), events[index])
    finally:
        await engine.close()
