"""Warming the cache while the user types: the next turn reuses exactly what was prefilled.

The warmed turn's reply is checked against mlx-lm's own cold run, so a warm-up that left wrong
keys or values in the cache (or wrong bookkeeping) fails here, not only a slow one.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_helpers import GREEDY, cold_greedy, reply, run

from engine.core.api import Message
from engine.local.client import Engine
from engine.local.warmup import WARM_CHUNK

HELLO = [Message("system", "be kind"), Message("user", "hello the cat")]
LONG_TEXT = " ".join(["the cat sat on the mat and the dog ran far away"] * 30)


async def _history(path: Path) -> list[Message]:
    """A short conversation with a real reply, produced by a separate engine."""
    other = Engine()
    try:
        await other.load(str(path))
        _, first = await run(other, HELLO)
    finally:
        await other.close()
    return [*HELLO, reply(first)]


@pytest.mark.parametrize("flavour", ["chatml_model", "llama3_model", "plain_model"])
async def test_a_warmed_conversation_is_reused_by_the_next_turn(
    flavour: str, request: pytest.FixtureRequest, engine: Engine
) -> None:
    path: Path = request.getfixturevalue(flavour)
    history = await _history(path)
    await engine.load(str(path))
    warmed = await engine.prepare(history)
    assert warmed > 0
    _, finished = await run(engine, [*history, Message("user", "and then the dog")])
    assert finished.reused_tokens == warmed  # every warmed id was the prompt's own
    assert finished.prefilled_tokens == finished.prompt_tokens - warmed < 16  # the new message and its template
    assert list(finished.token_ids) == cold_greedy(path, finished.prompt_ids, GREEDY.max_tokens)


async def test_warming_an_already_cached_conversation_feeds_nothing(chatml_model: Path, engine: Engine) -> None:
    await engine.load(str(chatml_model))
    _, first = await run(engine, HELLO)
    history = [*HELLO, reply(first)]
    again = await engine.prepare(history)
    assert again == await engine.prepare(history) > first.prompt_tokens  # the cached reply is reused
    _, follow = await run(engine, [*history, Message("user", "more")])
    assert follow.reused_tokens == again


async def test_another_branch_is_warmed_from_where_it_parts(chatml_model: Path, engine: Engine) -> None:
    """Flipping to another version of an earlier message: the cache is cut at the divergence and
    the other branch's history prefilled, so the next turn on it starts warm."""
    await engine.load(str(chatml_model))
    _, first = await run(engine, HELLO)
    branch_a = [*HELLO, reply(first), Message("user", "tell me of the dog")]
    _, second = await run(engine, branch_a)
    branch_b = [*HELLO, reply(first), Message("user", "the bird sat on the mat"), Message("assistant", "it sang")]
    warmed = await engine.prepare(branch_b)
    _, follow = await run(engine, [*branch_b, Message("user", "and then")])
    assert follow.reused_tokens == warmed > second.prompt_tokens - 6  # beyond the shared history
    assert list(follow.token_ids) == cold_greedy(chatml_model, follow.prompt_ids, GREEDY.max_tokens)


async def test_a_turn_sent_during_a_warm_up_stops_it_between_chunks_and_reuses_its_work(
    chatml_model: Path, engine: Engine
) -> None:
    await engine.load(str(chatml_model))
    history = [Message("system", "be kind"), Message("user", LONG_TEXT), Message("assistant", "yes")]
    warming = engine.prepare(history)
    _, finished = await run(engine, [*history, Message("user", "and then")])  # queued at once
    warmed = warming.result()  # settled before the turn ran
    assert warmed < finished.prompt_tokens - 8 and warmed % WARM_CHUNK == 0  # it stopped early
    assert finished.reused_tokens == warmed
    assert list(finished.token_ids) == cold_greedy(chatml_model, finished.prompt_ids, GREEDY.max_tokens)


async def test_nothing_is_warmed_without_a_model_or_past_the_context_limit(chatml_model: Path) -> None:
    engine = Engine(max_context=40)
    try:
        assert await engine.prepare(HELLO) == 0  # no thread, no model
        await engine.load(str(chatml_model))
        _, first = await run(engine, HELLO, GREEDY.with_changes(max_tokens=2))
        assert await engine.prepare([Message("user", LONG_TEXT), Message("assistant", "yes")]) == 0
        _, again = await run(engine, HELLO, GREEDY.with_changes(max_tokens=2))
        assert again.reused_tokens == first.prompt_tokens - 1  # the cache was left as it was
    finally:
        await engine.close()
    assert await engine.prepare(HELLO) == 0  # closed


async def test_a_draft_being_typed_is_read_ahead(chatml_model: Path, engine: Engine) -> None:
    """A long message pasted in is prefilled while the question after it is still being written."""
    history = await _history(chatml_model)
    await engine.load(str(chatml_model))
    warmed = await engine.prepare(history, draft=LONG_TEXT)
    _, finished = await run(engine, [*history, Message("user", LONG_TEXT + " and then what did the cat do")])
    assert finished.reused_tokens == warmed  # all of it was this prompt's own
    assert finished.prefilled_tokens < 20  # the question and the template around it
    assert list(finished.token_ids) == cold_greedy(chatml_model, finished.prompt_ids, GREEDY.max_tokens)
