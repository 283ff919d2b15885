"""The GGUF engine's decode path (`engine.gguf.decoder`, `engine.gguf.sidethread`): the prompt's
last chunk and the first token in one llama.cpp call, statistics and events on the side thread,
in order, and any failure there reaching the caller as one line with the engine still usable."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest
from engine_helpers import GREEDY, run
from test_gguf import CHAT, gguf_engine, needs_llama, pair  # noqa: F401 - fixtures

from engine.core.api import EngineError, GenerateRequest, SamplingParams, TokenEvent, TurnFinished
from engine.local.client import Engine
from engine.gguf.sidethread import SideThread


@needs_llama
async def test_prompt_and_first_token_take_one_llama_decode(gguf_engine: Engine,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A short prompt is one forward pass: before, its last id went alone through a second
    one (a whole decode step, which made prefill 0.53x llama.cpp's on the Qwen2.5-0.5B shape)."""
    import llama_cpp

    sizes: list[int] = []
    real = llama_cpp.llama_decode

    def spying(ctx: object, batch: llama_cpp.llama_batch) -> int:
        sizes.append(batch.n_tokens)
        return int(real(ctx, batch))

    monkeypatch.setattr(llama_cpp, "llama_decode", spying)
    _, done = await run(gguf_engine, CHAT, GREEDY)
    assert sizes[0] == done.prefilled_tokens and set(sizes[1:]) == {1}  # the prompt's new part: one pass


@needs_llama
async def test_sampled_tokens_equal_the_mlx_engine_s_for_a_seed(pair: tuple[Path, Path], gguf_engine: Engine) -> None:
    """The numpy twin draws as the MLX sampler does: same seed and parameters, same reply."""
    params = SamplingParams(temperature=1.0, top_p=0.9, min_p=0.02, seed=21, max_tokens=12, candidates=4)
    mlx_engine = Engine()
    try:
        await mlx_engine.load(str(pair[0]))
        theirs, mlx_done = await run(mlx_engine, CHAT, params)
    finally:
        await mlx_engine.close()
    ours, done = await run(gguf_engine, CHAT, params)
    assert done.token_ids == mlx_done.token_ids
    for a, b in zip(ours, theirs, strict=True):
        assert a.sampled_prob == pytest.approx(b.sampled_prob, abs=1e-3)
        assert [c.id for c in a.candidates] == [c.id for c in b.candidates]


@needs_llama
async def test_a_failure_in_the_statistics_reaches_the_caller(gguf_engine: Engine,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    import engine.gguf.decoder as decoder

    _, clean = await run(gguf_engine, CHAT, GREEDY)
    real, calls = decoder.statistics, []

    def failing(draw: object) -> list[float]:
        calls.append(threading.current_thread().name)
        if len(calls) == 3:
            raise ValueError("broken statistics")
        return real(draw)

    monkeypatch.setattr(decoder, "statistics", failing)
    with pytest.raises(EngineError, match="broken statistics"):
        await run(gguf_engine, CHAT, GREEDY)
    assert set(calls) == {"logitscope-stats"}
    monkeypatch.setattr(decoder, "statistics", real)
    _, again = await run(gguf_engine, CHAT, GREEDY)
    assert again.token_ids == clean.token_ids


@needs_llama
async def test_events_arrive_in_order_then_the_finish(gguf_engine: Engine) -> None:
    """Posted from the side thread, to a reader slower than the engine: nothing overtakes."""
    seen: list[object] = []
    async for item in gguf_engine.generate(GenerateRequest(CHAT, SamplingParams(temperature=0.0, max_tokens=20))):
        seen.append(item)
        await asyncio.sleep(0.005)
    events = [e for e in seen if isinstance(e, TokenEvent)]
    assert isinstance(seen[-1], TurnFinished) and len(events) == len(seen) - 1
    assert [e.index for e in events] == list(range(len(events)))
    assert tuple(e.id for e in events) == seen[-1].token_ids


@needs_llama
async def test_closing_ends_the_side_thread(pair: tuple[Path, Path]) -> None:
    from engine.factory import local_engine

    engine = local_engine()
    await engine.load(str(pair[1]))
    await run(engine, CHAT, GREEDY)
    assert any(t.name == "logitscope-stats" for t in threading.enumerate())
    await engine.close()
    deadline = time.monotonic() + 5
    while any(t.name == "logitscope-stats" for t in threading.enumerate()) and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert not any(t.name == "logitscope-stats" for t in threading.enumerate())


def test_side_thread_runs_jobs_in_order_and_returns_their_results() -> None:
    thread = SideThread("test-side")
    try:
        seen: list[int] = []
        for i in range(50):
            thread.post(seen.append, i)
        assert thread.submit(len, "four").get() == 4
        thread.drain()
        assert seen == list(range(50))
    finally:
        thread.close()


def test_side_thread_failures_are_never_lost() -> None:
    thread = SideThread("test-side")
    try:
        with pytest.raises(ZeroDivisionError):
            thread.submit(lambda x: 1 / x, 0).get()
        thread.post(lambda x: 1 / x, 0)  # nobody waits: the next drain raises it, once
        with pytest.raises(ZeroDivisionError):
            thread.drain()
        thread.drain()
    finally:
        thread.close()


def test_a_closed_side_thread_refuses_work_and_close_never_waits() -> None:
    thread = SideThread("test-side")
    release = threading.Event()
    thread.post(lambda _: release.wait(10), None)  # a stuck job
    started = time.monotonic()
    thread.close()
    assert time.monotonic() - started < 1
    with pytest.raises(RuntimeError):
        thread.post(print, "late")
    release.set()


@needs_llama
def test_more_ids_than_a_batch_are_split_never_an_abort(pair: tuple[Path, Path]) -> None:
    """llama.cpp asserts ``n_tokens <= n_batch`` and its assert aborts the whole process: the
    model splits longer runs itself, and refuses a bare call over the batch with one line."""
    from engine.gguf.model import LlamaModel

    model = LlamaModel(pair[1], 64, 1, batch=8)
    try:
        cache = model.make_cache()
        ids = list(range(5, 25))
        whole = model.feed(ids, cache).copy()
        assert cache[0].offset == 20
        cache = model.make_cache()
        for at in range(0, 20, 3):
            part = model.feed(ids[at:at + 3], cache).copy()
        assert abs(whole - part).max() < 1e-4
        with pytest.raises(EngineError, match="1 to 8 tokens at a time, not 9"):
            model.decode(ids[:9])
    finally:
        model.close()
