"""One turn's behaviour: statistics against an independent forward pass, stopping, cancelling,
live parameters, the context limit and seeded reproducibility."""

from __future__ import annotations

import asyncio
import math
import time
from pathlib import Path

import numpy as np
import pytest
from engine_helpers import GREEDY, cold_logits, cold_logprobs, log_softmax, reply, run
from tinymodels import with_extra_eos

from engine.core.api import ContextLimitError, GenerateRequest, Message, SamplingParams, TokenEvent, TurnFinished
from engine.local.client import Engine

HELLO = [Message("user", "hello the cat")]


@pytest.fixture
def slow_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every decode step takes 40 ms, so a test can act between two tokens."""
    from engine.local.session import Session

    original = Session.forward

    def slow(self: Session, ids: object) -> object:
        time.sleep(0.04)
        return original(self, ids)  # type: ignore[arg-type]

    monkeypatch.setattr(Session, "forward", slow)


def _check_stats(event: TokenEvent, logprobs: np.ndarray, sampled: np.ndarray) -> None:
    """One event against the reference raw distribution and the expected sampled one."""
    assert event.logprob == pytest.approx(logprobs[event.id], abs=1e-4)
    assert event.rank == 1 + int(np.sum(logprobs > logprobs[event.id] + 1e-6))
    assert event.entropy == pytest.approx(float(-np.sum(np.exp(logprobs) * logprobs)), abs=1e-4)
    assert event.sampled_prob == pytest.approx(sampled[event.id], abs=1e-5)
    best = np.argsort(-logprobs, kind="stable")[: len(event.candidates)]
    assert [c.id for c in event.candidates] == best.tolist()
    for c in event.candidates:
        assert c.logprob == pytest.approx(logprobs[c.id], abs=1e-4)
        assert c.sampled_prob == pytest.approx(sampled[c.id], abs=1e-5)


@pytest.mark.parametrize("temperature", [0.0, 0.8])
async def test_token_statistics_match_an_independent_forward_pass(
    chatml_model: Path, engine: Engine, temperature: float
) -> None:
    await engine.load(str(chatml_model))
    params = SamplingParams(temperature=temperature, max_tokens=8, candidates=6, seed=3)
    _, first = await run(engine, HELLO, params)  # so the measured turn runs on a reused cache
    conversation = [*HELLO, reply(first), Message("user", "and the dog")]
    events, finished = await run(engine, conversation, params)
    assert finished.reused_tokens > 0 and len(events) == 8
    pieces = {c.id: c.text for e in events for c in e.candidates}
    for i, event in enumerate(events):
        logprobs = cold_logprobs(chatml_model, finished.prompt_ids + finished.token_ids[:i])
        if temperature == 0.0:
            sampled = (np.arange(logprobs.size) == np.argmax(logprobs)).astype(float)
        else:
            scaled = np.exp((logprobs - logprobs.max()) / temperature)
            sampled = scaled / scaled.sum()
        _check_stats(event, logprobs, sampled)
        assert event.index == i and len(event.candidates) == 6
        assert event.piece == pieces.get(event.id, event.piece)
    assert finished.text.startswith("".join(e.text for e in events))


def _penalised_logprobs(logits: np.ndarray, window: list[int], params: SamplingParams) -> np.ndarray:
    """Independent reference of the penalties (CTRL repetition, presence, frequency) -> log softmax."""
    x = logits.astype(np.float64).copy()
    ids, counts = np.unique(np.array(window, dtype=np.int64), return_counts=True)
    x[ids] = np.where(x[ids] < 0, x[ids] * params.repetition_penalty, x[ids] / params.repetition_penalty)
    x[ids] -= params.presence_penalty + params.frequency_penalty * counts
    return log_softmax(x)


async def test_penalties_look_back_over_the_cached_history(chatml_model: Path, engine: Engine) -> None:
    """The window covers the whole conversation, including ids that sit in the reused cache."""
    await engine.load(str(chatml_model))
    _, first = await run(engine, HELLO)
    conversation = [*HELLO, reply(first), Message("user", "and the dog")]
    params = SamplingParams(temperature=0.0, max_tokens=6, candidates=6, repetition_penalty=1.7,
                            presence_penalty=0.4, frequency_penalty=0.3, repetition_context_size=40)
    events, finished = await run(engine, conversation, params)
    assert finished.reused_tokens > params.repetition_context_size // 2  # the window reaches into the cache
    for i, event in enumerate(events):
        ids = list(finished.prompt_ids + finished.token_ids[:i])
        logprobs = _penalised_logprobs(cold_logits(chatml_model, ids), ids[-40:], params)
        sampled = (np.arange(logprobs.size) == np.argmax(logprobs)).astype(float)
        _check_stats(event, logprobs, sampled)
    prompt_logits = cold_logits(chatml_model, list(finished.prompt_ids))  # one forward pass for both
    assert not np.allclose(log_softmax(prompt_logits),
                           _penalised_logprobs(prompt_logits, list(finished.prompt_ids)[-40:], params), atol=1e-3)


async def test_stops_on_any_stop_id_which_stays_cached(chatml_model: Path, tmp_path: Path, engine: Engine) -> None:
    await engine.load(str(chatml_model))
    _, free = await run(engine, HELLO)
    stop_id = free.token_ids[3]
    cut = free.token_ids.index(stop_id)
    await engine.load(str(with_extra_eos(chatml_model, tmp_path / "stops", stop_id)))
    events, stopped = await run(engine, HELLO)
    assert stopped.finish_reason == "stop"
    assert stopped.token_ids == free.token_ids[:cut] == tuple(e.id for e in events)
    assert stopped.context_used == stopped.prompt_tokens + cut + 1  # the stop id was fed, and kept
    _, next_turn = await run(engine, [*HELLO, reply(stopped), Message("user", "so")])
    assert next_turn.reused_tokens == stopped.prompt_tokens + cut


async def test_a_first_token_that_stops_is_not_fed(chatml_model: Path, tmp_path: Path, engine: Engine) -> None:
    """The first token is read before its step is built (time to first token), so a stop there
    leaves the cache exactly at the prompt, and the next turn still reuses all of it."""
    await engine.load(str(chatml_model))
    _, free = await run(engine, HELLO)
    await engine.load(str(with_extra_eos(chatml_model, tmp_path / "stops", free.token_ids[0])))
    events, stopped = await run(engine, HELLO)
    assert (stopped.finish_reason, events, stopped.token_ids) == ("stop", [], ())
    assert stopped.context_used == stopped.prompt_tokens
    _, next_turn = await run(engine, [*HELLO, Message("assistant", "", ()), Message("user", "so")])
    assert next_turn.reused_tokens >= stopped.prompt_tokens


async def test_cancel_stops_within_one_token_and_keeps_the_cache(
    chatml_model: Path, engine: Engine, slow_model: None
) -> None:
    await engine.load(str(chatml_model))
    seen: list[TokenEvent] = []
    finished: TurnFinished | None = None
    async for item in engine.generate(GenerateRequest(tuple(HELLO), GREEDY.with_changes(max_tokens=200))):
        if isinstance(item, TurnFinished):
            finished = item
        else:
            seen.append(item)
            if len(seen) == 3:
                engine.cancel()
                cancelled_at = 3
    assert finished is not None and finished.finish_reason == "cancelled"
    assert finished.generated_tokens <= cancelled_at + 1
    assert finished.token_ids == tuple(e.id for e in seen)
    _, after = await run(engine, [*HELLO, reply(finished), Message("user", "go on")])
    assert after.reused_tokens == finished.prompt_tokens + finished.generated_tokens


async def test_cancel_during_a_long_prefill_stops_between_chunks(
    chatml_model: Path, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long prompt is fed in chunks; a cancel lands between two of them, not after the prompt,
    and what was fed stays cached for the next turn."""
    import threading

    from mlx_lm.models import llama

    from engine.local import session as session_module

    monkeypatch.setattr(session_module, "PREFILL_CHUNK", 4)
    original = llama.Model.__call__

    def slow(self: object, inputs: object, *args: object, **kwargs: object) -> object:
        if threading.current_thread().name == "logitscope-engine" and kwargs.get("cache") is not None:
            time.sleep(0.03)
        return original(self, inputs, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(llama.Model, "__call__", slow)
    await engine.load(str(chatml_model))
    long = [Message("user", " ".join(["the cat sat on the mat"] * 12))]
    await run(engine, long)  # a cached history

    async def cancel_soon() -> None:
        await asyncio.sleep(0.15)
        engine.cancel()

    again = long + [Message("assistant", "no", ()), Message("user", " ".join(["a dog ran"] * 30))]
    task = asyncio.create_task(cancel_soon())
    events, cancelled = await run(engine, again)
    await task
    assert cancelled.finish_reason == "cancelled" and events == []
    assert cancelled.reused_tokens + cancelled.prefilled_tokens < cancelled.prompt_tokens  # stopped part-way
    assert cancelled.prefilled_tokens % 4 == 0  # whole chunks only
    assert cancelled.context_used == cancelled.reused_tokens + cancelled.prefilled_tokens
    _, after = await run(engine, again, GREEDY.with_changes(max_tokens=2))
    assert after.reused_tokens == cancelled.context_used  # the part fed before the cancel is reused


async def test_leaving_the_stream_early_cancels_the_turn(chatml_model: Path, engine: Engine, slow_model: None) -> None:
    await engine.load(str(chatml_model))
    stream = engine.generate(GenerateRequest(tuple(HELLO), GREEDY.with_changes(max_tokens=500)))
    async for _ in stream:
        break
    await stream.aclose()  # type: ignore[attr-defined]
    started = time.perf_counter()
    _, finished = await run(engine, HELLO)  # queued behind the abandoned turn
    assert time.perf_counter() - started < 5  # not 500 slow tokens later
    assert finished.finish_reason == "length"


async def test_set_params_applies_from_the_next_token(chatml_model: Path, engine: Engine, slow_model: None) -> None:
    await engine.load(str(chatml_model))
    params = GREEDY.with_changes(max_tokens=40, candidates=2)
    counts: list[int] = []
    finished: TurnFinished | None = None
    async for item in engine.generate(GenerateRequest(tuple(HELLO), params)):
        if isinstance(item, TurnFinished):
            finished = item
            break
        counts.append(len(item.candidates))
        if len(counts) == 2:
            engine.set_params(params.with_changes(candidates=4, max_tokens=6))
    assert finished is not None
    assert counts[:2] == [2, 2] and counts[-1] == 4  # same turn, no restart
    assert (finished.finish_reason, finished.generated_tokens) == ("length", 6)


async def test_context_limit(chatml_model: Path) -> None:
    engine = Engine(max_context=40)
    try:
        info = await engine.load(str(chatml_model))
        assert info.context_limit == 40
        too_long = [Message("user", "the cat sat on the mat and then it ran far away " * 3)]
        with pytest.raises(ContextLimitError, match="context limit is 40"):
            await run(engine, too_long)
        events, finished = await run(engine, HELLO, GREEDY.with_changes(max_tokens=500))
        assert finished.finish_reason == "length"
        assert finished.context_used == finished.prompt_tokens + len(events) == 40
        assert (finished.context_limit, finished.generated_tokens) == (40, 40 - finished.prompt_tokens)
        with pytest.raises(ContextLimitError):
            await run(engine, [*HELLO, reply(finished), Message("user", "more")])
        _, fresh = await run(engine, HELLO)  # still usable after a refusal
        assert fresh.generated_tokens > 0
    finally:
        await engine.close()


async def test_same_seed_and_params_reproduce_a_reply(chatml_model: Path, engine: Engine) -> None:
    await engine.load(str(chatml_model))
    params = SamplingParams(temperature=1.2, top_p=0.95, max_tokens=10, seed=1234)
    _, first = await run(engine, HELLO, params)
    _, again = await run(engine, HELLO, params)  # regenerate: cache reused
    other = Engine()
    try:
        await other.load(str(chatml_model))
        _, cold = await run(other, HELLO, params)  # another engine, cold cache
    finally:
        await other.close()
    assert first.token_ids == again.token_ids == cold.token_ids
    assert math.isfinite(first.decode_tps) and first.ttft_s > 0


async def test_turn_statistics_are_filled(chatml_model: Path, engine: Engine) -> None:
    await engine.load(str(chatml_model))
    _, finished = await run(engine, HELLO)
    assert finished.ttft_s > 0 and finished.prefill_tps > 0 and finished.decode_tps > 0
    assert finished.context_limit == 512 and finished.context_used == finished.prompt_tokens + 12


async def test_stories260k_if_present(engine: Engine) -> None:
    """A real tiny model (no chat template): plain continuation, reused on the next turn."""
    path = Path("/work/shared/models/stories260k")
    if not (path / "model.safetensors").exists():
        pytest.skip("stories260k is not available here")
    info = await engine.load(str(path))
    assert not info.has_chat_template
    events, first = await run(engine, [Message("user", "Once upon a time")], GREEDY.with_changes(max_tokens=20))
    assert first.text and all("\ufffd" not in e.text for e in events)
    _, second = await run(engine, [Message("user", "Once upon a time"), reply(first), Message("user", " The end")])
    # no template, so no stop id; the reply ended by length, so its last token was never fed
    assert first.finish_reason == "length"
    assert second.reused_tokens == first.prompt_tokens + first.generated_tokens - 1
