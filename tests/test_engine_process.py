"""The engine in a process of its own (`engine.process`): what the app sees through it is what it
sees in-process, and the process boundary adds no way to lose a reply or wait forever.

The mechanics run on the scripted engine inside the child (no weights, no MLX import); one test
runs a real tiny model on both sides and compares every number.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest

from engine.core.api import (
    NO_MODEL, EngineError, GenerateRequest, Message, ModelLoadError, SamplingParams, TokenEvent, TurnFinished,
)
from engine.process import LocalSetup, ProcessEngine, ScriptedSetup
from engine.scripted import ScriptedEngine

LONG = [[f"w{i} " for i in range(400)]]
ASK = GenerateRequest((Message("user", "Hello there"),), SamplingParams(max_tokens=400))


async def _events(engine: object, request: GenerateRequest = ASK) -> list[object]:
    return [event async for event in engine.generate(request)]  # type: ignore[attr-defined]


async def test_a_turn_through_the_process_is_the_in_process_turn() -> None:
    """Every event crosses whole: the same tokens, candidates and closing record as in-process."""
    here = ScriptedEngine()
    there = ProcessEngine(ScriptedSetup())
    try:
        assert (await there.load("demo")) == (await here.load("demo"))
        request = GenerateRequest((Message("user", "Hi"),), SamplingParams(max_tokens=30, seed=7))
        ours, theirs = await _events(here, request), await _events(there, request)
        assert [e for e in theirs if isinstance(e, TokenEvent)] == [e for e in ours if isinstance(e, TokenEvent)]
        assert isinstance(theirs[-1], TurnFinished) and theirs[-1].finish_reason == ours[-1].finish_reason  # type: ignore[attr-defined]
        assert await there.count_tokens([Message("user", "one two three")]) == \
            await here.count_tokens([Message("user", "one two three")])
        assert await there.token_ids("one two") == await here.token_ids("one two")
    finally:
        await there.close()


async def test_load_progress_and_a_refused_load_keep_their_kind() -> None:
    """Progress reaches the caller's callback; a failed load raises ModelLoadError (not a bare
    EngineError), and the model loaded before it stays."""
    engine = ProcessEngine(ScriptedSetup({"load_error": None}))
    try:
        seen: list[str] = []
        await engine.load("demo", on_progress=lambda progress: seen.append(progress.message))
        assert seen and engine.model is not None
    finally:
        await engine.close()
    failing = ProcessEngine(ScriptedSetup({"load_error": "no such model: nope"}))
    try:
        with pytest.raises(ModelLoadError, match="no such model"):
            await failing.load("nope")
        assert failing.model is None
        with pytest.raises(EngineError, match="No model"):
            await failing.count_tokens([Message("user", "hi")])
    finally:
        await failing.close()


async def test_cancel_and_live_parameters_reach_the_running_turn() -> None:
    """A parameter change mid-reply is applied (and recorded) there; cancel ends the turn as
    "cancelled" within a token or two, not at its end."""
    engine = ProcessEngine(ScriptedSetup({"replies": LONG, "token_delay": 0.005}))
    try:
        await engine.load("demo")
        stream = engine.generate(ASK)
        tokens = 0
        finished = None
        async for event in stream:
            if isinstance(event, TurnFinished):
                finished = event
                break
            tokens += 1
            if tokens == 5:
                engine.set_params(SamplingParams(max_tokens=400, temperature=0.3))
            if tokens == 20:
                engine.cancel()
        assert finished is not None and finished.finish_reason == "cancelled"
        assert tokens < 40
        assert finished.params_changes and finished.params_changes[0][1].temperature == 0.3
    finally:
        await engine.close()


async def test_leaving_a_reply_early_stops_it_in_the_process() -> None:
    """Breaking out of the iteration stops the turn there: the next turn starts at once and
    does not queue behind 400 tokens of a reply nobody reads."""
    engine = ProcessEngine(ScriptedSetup({"replies": LONG, "token_delay": 0.01}))
    try:
        await engine.load("demo")
        async for event in engine.generate(ASK):
            break
        started = time.perf_counter()
        events = await _events(engine, GenerateRequest(ASK.messages, SamplingParams(max_tokens=3)))
        assert isinstance(events[-1], TurnFinished) and events[-1].finish_reason == "length"
        assert time.perf_counter() - started < 2.0  # 400 tokens at 10 ms would be 4 s
    finally:
        await engine.close()


async def test_a_dead_engine_process_fails_what_waits_and_the_next_load_starts_a_new_one() -> None:
    """Killed mid-reply (the OOM killer, a crash in native code): the reply's reader gets one line
    saying so, the model is gone, and loading again works in a fresh process."""
    engine = ProcessEngine(ScriptedSetup({"replies": LONG, "token_delay": 0.01}))
    try:
        await engine.load("demo")
        first_pid = engine.pid
        assert first_pid is not None
        told: list[str] = []
        engine.on_lost(told.append)
        with pytest.raises(EngineError, match="engine process ended .*killed by signal 9"):
            async for event in engine.generate(ASK):
                if isinstance(event, TokenEvent) and event.index == 3:
                    os.kill(first_pid, signal.SIGKILL)
        assert engine.model is None
        await asyncio.sleep(0.1)
        assert told == [] and "killed by signal 9" in engine.lost  # the waiting reply said it, once
        with pytest.raises(EngineError, match=NO_MODEL.split(":")[0]):
            await engine.count_tokens([Message("user", "hi")])  # a fresh process: nothing loaded
        await engine.load("demo")
        assert engine.pid not in (None, first_pid) and engine.lost == ""
        assert isinstance((await _events(engine, GenerateRequest(ASK.messages, SamplingParams(max_tokens=2))))[-1],
                          TurnFinished)
    finally:
        await engine.close()


async def test_a_model_lost_while_idle_is_told_once_with_its_reason() -> None:
    """Nobody waits on the process when it dies between replies: the watcher hears it on its
    own loop, once; a cache warm-up in flight (whose failure nobody is shown) does not count as
    a waiting call; closing the engine later is no loss."""
    engine = ProcessEngine(ScriptedSetup())
    try:
        await engine.load("demo")
        told: list[str] = []
        engine.on_lost(told.append)
        warming = engine.prepare([Message("user", "hi")], "draft")
        os.kill(engine.pid, signal.SIGKILL)  # type: ignore[arg-type]
        for _ in range(300):
            if told:
                break
            await asyncio.sleep(0.01)
        assert len(told) == 1 and "killed by signal 9" in told[0] and told[0] == engine.lost
        assert isinstance(await warming, int) and engine.model is None
    finally:
        await engine.close()
    assert len(told) == 1


async def test_close_never_waits_on_a_stuck_engine_process() -> None:
    """A process that does not answer (stopped here) is killed after the bound, and close returns."""
    engine = ProcessEngine(ScriptedSetup())
    await engine.load("demo")
    pid = engine.pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    import engine.process.client as client

    started = time.perf_counter()
    original, client.CLOSE_WAIT_S = client.CLOSE_WAIT_S, 0.5
    try:
        await engine.close()
    finally:
        client.CLOSE_WAIT_S = original
    assert time.perf_counter() - started < 3.0
    await asyncio.sleep(0.2)
    assert engine.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with pytest.raises(EngineError, match="closed"):
        await engine.load("demo")


async def test_the_engine_process_is_out_of_the_terminals_reach() -> None:
    """Its own session: a Ctrl+C or a hangup sent to the terminal's process group is the app's to
    handle (it saves the chat first), never a second, silent death of the engine."""
    engine = ProcessEngine(ScriptedSetup())
    try:
        await engine.load("demo")
        assert engine.pid is not None
        assert os.getsid(engine.pid) != os.getsid(0)
        assert os.getpgid(engine.pid) != os.getpgid(0)
    finally:
        await engine.close()


async def test_closing_ends_the_process() -> None:
    engine = ProcessEngine(ScriptedSetup())
    await engine.load("demo")
    pid = engine.pid
    await engine.close()
    assert engine.pid is None and engine.model is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # type: ignore[arg-type]


@pytest.mark.slow
async def test_a_real_model_in_the_process_gives_the_numbers_it_gives_in_process(chatml_model: Path) -> None:
    """The local engine run in the child: the same tokens, probabilities, ranks, entropies and
    candidates, bit for bit, as on the app's own engine thread (same model, seed and settings).
    MLX's own BLAS on both sides: this process imported MLX before any engine (building the
    model), so its engine cannot put OpenBLAS under MLX, and the two would differ in the last bits."""
    from engine.core.settings import ModelConfig
    from engine.factory import local_engine

    config = ModelConfig(fast_blas=False)
    request = GenerateRequest((Message("user", "Tell me a story"),),
                              SamplingParams(max_tokens=24, temperature=0.8, top_p=0.9, seed=3))
    here = local_engine(config)
    there = ProcessEngine(LocalSetup(config, disk_cache=False))
    try:
        assert (await there.load(str(chatml_model))) == (await here.load(str(chatml_model)))
        ours = [e for e in await _events(here, request) if isinstance(e, TokenEvent)]
        theirs = [e for e in await _events(there, request) if isinstance(e, TokenEvent)]
        assert len(ours) == 24 and theirs == ours
    finally:
        await asyncio.gather(here.close(), there.close())


async def test_previews_and_stages_through_the_process_are_the_in_process_ones() -> None:
    """What-if previews stream across whole (every row's tokens, then the closing record), and a
    stage view and a score come back as the in-process engine gives them."""
    from engine.core.api import PreviewRequest, ScoreRequest, StageRequest

    here = ScriptedEngine()
    there = ProcessEngine(ScriptedSetup())
    try:
        await here.load("demo")
        await there.load("demo")
        first = [e for e in await _events(here, GenerateRequest(ASK.messages, SamplingParams(max_tokens=4)))
                 if isinstance(e, TokenEvent)]
        await _events(there, GenerateRequest(ASK.messages, SamplingParams(max_tokens=4)))
        partial = Message("assistant", first[0].text, (first[0].id,))
        request = PreviewRequest(ASK.messages + (partial,), tuple(c.id for c in first[1].candidates[:3]), tokens=4)
        ours = [e async for e in here.preview(request)]
        theirs = [e async for e in there.preview(request)]
        assert theirs == ours and len(ours) > 1
        score = ScoreRequest(ASK.messages)
        assert await there.score(score) == await here.score(score)
        stage = StageRequest(ASK.messages, (first[0].id,), SamplingParams(max_tokens=4),
                             tuple(c.id for c in first[0].candidates[:3]))
        assert await there.stages(stage) == await here.stages(stage)
    finally:
        await there.close()
