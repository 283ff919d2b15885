"""#33.1-3 on the MLX engine: every token read gets a generated token's statistics, teacher-forced,
equal to an independent mlx-lm forward pass over the same ids (1e-4), cold and when the history
comes from the cache; probes; perplexities; the chat's cache survives a probe."""

from __future__ import annotations

import math
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest
from engine_helpers import GREEDY, reference, reply, run

from engine.core.api import (
    ContextLimitError,
    EngineError,
    Message,
    ProbeRequest,
    Scored,
    ScoreRequest,
)
from engine.local.client import Engine
from test_nonfinite import nan_model  # noqa: F401 - fixture

CHAT = (Message("system", "you are a cat"), Message("user", "hello the cat, how are the dogs today?"))


def cold_rows(path: Path, ids: list[int]) -> np.ndarray:
    """log softmax of every row of one cache-free mlx-lm forward pass over `ids`, in float64."""
    model, _ = reference(path)
    logits = np.array(model(mx.array(ids)[None])[0].astype(mx.float32)).astype(np.float64)
    m = logits.max(axis=-1, keepdims=True)
    return logits - (m + np.log(np.exp(logits - m).sum(axis=-1, keepdims=True)))


def check_against(scored: Scored, rows: np.ndarray, candidates: int) -> None:
    """Every scored token against the reference rows (row i-1 predicts position i)."""
    assert [t.index for t in scored.tokens] == list(range(1, len(scored.ids)))
    for token in scored.tokens:
        lp = rows[token.index - 1]
        assert token.id == scored.ids[token.index]
        assert token.logprob == pytest.approx(lp[token.id], abs=1e-4)
        assert token.rank == 1 + int(np.sum(lp > lp[token.id] + 1e-6))
        assert token.entropy == pytest.approx(float(-np.sum(np.exp(lp) * lp)), abs=1e-4)
        assert token.sampled_prob is None
        best = np.argsort(-lp, kind="stable")[:candidates]
        assert len(token.candidates) == candidates
        assert sorted(c.id for c in token.candidates) == sorted(best.tolist()) or \
            [round(c.logprob, 4) for c in token.candidates] == [round(float(lp[i]), 4) for i in best]
        for c in token.candidates:
            assert c.logprob == pytest.approx(lp[c.id], abs=1e-4) and c.sampled_prob is None


async def test_a_chat_scored_cold_equals_an_independent_forward_pass(chatml_model: Path, engine: Engine) -> None:
    info = await engine.load(str(chatml_model))
    assert info.abilities.scoring and info.abilities.probes
    scored = await engine.score(ScoreRequest(CHAT, candidates=5))
    assert scored.reused_tokens == 0
    check_against(scored, cold_rows(chatml_model, list(scored.ids)), 5)
    system, user = scored.messages
    texts = "".join(t.text for t in scored.tokens[user.start - 1:user.end - 1])
    assert texts.strip() == CHAT[1].text and system.end <= user.start
    own = [t.logprob for t in scored.tokens[user.start - 1:user.end - 1]]
    assert user.perplexity == pytest.approx(math.exp(-sum(own) / len(own)))
    both = [t.logprob for m in scored.messages for t in scored.tokens[m.start - 1:m.end - 1]]
    assert scored.perplexity == pytest.approx(math.exp(-sum(both) / len(both)))


async def test_a_history_from_the_cache_scores_exactly_and_is_not_read_again(chatml_model: Path, engine: Engine) -> None:
    await engine.load(str(chatml_model))
    first = await engine.score(ScoreRequest(CHAT, candidates=4))
    _, done = await run(engine, CHAT, GREEDY)  # the turn reuses the scored prompt
    assert done.reused_tokens == len(done.prompt_ids) - 1
    longer = (*CHAT, reply(done), Message("user", "and the cat again"))
    again = await engine.score(ScoreRequest(longer, candidates=4))
    assert again.reused_tokens >= len(first.ids) - 2  # the first chat's rows were kept
    assert again.ids[:len(first.ids) - 1] == first.ids[:-1]
    check_against(again, cold_rows(chatml_model, list(again.ids)), 4)
    same = await engine.score(ScoreRequest(longer, candidates=4))
    assert same.reused_tokens == len(same.ids) - 1 and same.tokens == again.tokens
    edited = (*CHAT, Message("assistant", "the dog is here"), Message("user", "and the cat again"))
    changed = await engine.score(ScoreRequest(edited, candidates=2))  # fewer candidates: rows reused
    check_against(changed, cold_rows(chatml_model, list(changed.ids)), 2)
    reply_span = changed.messages[2]
    assert "".join(t.text for t in changed.tokens[reply_span.start - 1:reply_span.end - 1]).strip() == "the dog is here"


async def test_a_plain_text_is_scored_from_its_first_token(chatml_model: Path, engine: Engine) -> None:
    await engine.load(str(chatml_model))
    _, tokenizer = reference(chatml_model)
    text = "the cat sat on the mat and the dog ran away. " * 3
    scored = await engine.score(ScoreRequest(text=text, candidates=3))
    assert list(scored.ids) == list(tokenizer.encode(text))
    rows = cold_rows(chatml_model, list(scored.ids))
    check_against(scored, rows, 3)
    nll = [-rows[i - 1][scored.ids[i]] for i in range(1, len(scored.ids))]
    assert scored.perplexity == pytest.approx(math.exp(sum(nll) / len(nll)), rel=1e-4)
    assert scored.messages == ()


async def test_long_texts_are_scored_in_chunks(chatml_model: Path, engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of 16 rows (the smallest) give the same rows as one pass."""
    from engine.local import scorerows

    from engine.local.session import Session

    monkeypatch.setattr(scorerows, "CHUNK_FLOATS", 1)
    fed: list[int] = []
    original = Session.rows

    def rows(self: Session, ids: list[int], cache: object = None) -> object:
        fed.append(len(ids))
        return original(self, ids, cache)  # type: ignore[arg-type]

    monkeypatch.setattr(Session, "rows", rows)
    await engine.load(str(chatml_model))
    text = " ".join(["the cat and the dog"] * 12)
    scored = await engine.score(ScoreRequest(text=text, candidates=2))
    assert len(scored.ids) > 40 and max(fed) == scorerows.MIN_ROWS and sum(fed) == len(scored.ids)
    check_against(scored, cold_rows(chatml_model, list(scored.ids)), 2)


async def test_probes_read_any_phrase_at_any_position(chatml_model: Path, engine: Engine) -> None:
    await engine.load(str(chatml_model))
    scored = await engine.score(ScoreRequest(CHAT, candidates=3))
    user = scored.messages[1]
    position = user.start + 2
    ids = list(scored.ids[:position])
    _, tokenizer = reference(chatml_model)
    results = await engine.probe(ProbeRequest(ScoreRequest(CHAT), position, (" the dog", " zebra")))
    for result in results:
        rows = cold_rows(chatml_model, ids + list(result.ids))
        expected = [rows[position - 1 + j][t] for j, t in enumerate(result.ids)]
        assert result.logprobs == pytest.approx(expected, abs=1e-4)
        assert result.logprob == pytest.approx(sum(expected), abs=1e-4)
        first = rows[position - 1]
        assert result.first_rank == 1 + int(np.sum(first > first[result.ids[0]] + 1e-6))
    # the token that is there: its probe equals its score
    there = scored.tokens[position - 1]
    same = await engine.probe(ProbeRequest(ScoreRequest(CHAT), position, (tokenizer.decode([there.id]),)))
    if same[0].ids == (there.id,):
        assert same[0].logprob == pytest.approx(there.logprob, abs=1e-5) and same[0].first_rank == there.rank
    # the chat's cache and its rows are untouched: scoring again reads nothing
    again = await engine.score(ScoreRequest(CHAT, candidates=3))
    assert again.reused_tokens == len(again.ids) - 1


async def test_bad_scores_and_probes_are_one_line(chatml_model: Path, tmp_path: Path) -> None:
    engine = Engine(max_context=64)
    try:
        with pytest.raises(EngineError, match="No model"):
            await engine.score(ScoreRequest(CHAT))
        await engine.load(str(chatml_model))
        with pytest.raises(ContextLimitError, match="context limit is 64"):
            await engine.score(ScoreRequest(text="the cat " * 200))
        with pytest.raises(EngineError, match="past the text"):
            await engine.probe(ProbeRequest(ScoreRequest(CHAT), 10_000, ("cat",)))
        with pytest.raises(EngineError, match="empty"):
            await engine.score(ScoreRequest(text=""))
        scored = await engine.score(ScoreRequest(CHAT, candidates=1))  # still works afterwards
        assert len(scored.tokens) == len(scored.ids) - 1
    finally:
        await engine.close()


async def test_a_turn_asked_to_score_keeps_its_prompt_s_rows(chatml_model: Path, engine: Engine) -> None:
    """GenerateRequest.score_candidates: the turn's own prefill keeps the statistics, so scoring the
    chat afterwards reads only the reply again, and the rows equal a cold pass."""
    from engine.core.api import GenerateRequest

    await engine.load(str(chatml_model))
    request = GenerateRequest(CHAT, GREEDY, score_candidates=3)
    events = []
    async for item in engine.generate(request):
        events.append(item)
    done = events[-1]
    assert done.reused_tokens == 0 and done.prefilled_tokens == len(done.prompt_ids)
    plain = await run(engine, (Message("user", "something else entirely"),), GREEDY)  # noqa: F841 - moves the cache
    again = [item async for item in engine.generate(request)][-1]
    assert again.finish_reason == done.finish_reason and again.token_ids == done.token_ids
    chat = (*CHAT, reply(again))
    scored = await engine.score(ScoreRequest(chat, candidates=3, continue_last=True))
    assert scored.reused_tokens >= len(again.prompt_ids) - 2  # only the reply (and the last prompt id) read again
    check_against(scored, cold_rows(chatml_model, list(scored.ids)), 3)


async def test_a_scoring_turn_is_cancelled_like_any_turn(chatml_model: Path, engine: Engine) -> None:
    from engine.core.api import GenerateRequest

    await engine.load(str(chatml_model))
    stream = engine.generate(GenerateRequest(CHAT, GREEDY, score_candidates=2))
    engine.cancel()
    items = [item async for item in stream]
    assert items[-1].finish_reason == "cancelled"
    assert (await engine.score(ScoreRequest(CHAT, candidates=2))).tokens  # the engine goes on


async def test_a_sliding_window_model_scores_as_its_own_cache_computes(window_model: Path, engine: Engine) -> None:
    """A 12-token window (RotatingKVCache): rows equal mlx-lm fed one token at a time through its
    own cache (where the window applies), cold and after a turn (a wrapped cache is read again)."""
    from mlx_lm.models.cache import make_prompt_cache

    await engine.load(str(window_model))
    long = (Message("user", "hello the cat, how are the dogs today? " * 3),)

    def stepwise(ids: tuple[int, ...]) -> np.ndarray:
        model, _ = reference(window_model)
        cache = make_prompt_cache(model)
        rows = [np.array(model(mx.array([[i]]), cache=cache)[0, -1].astype(mx.float32)) for i in ids]
        logits = np.stack(rows).astype(np.float64)
        m = logits.max(-1, keepdims=True)
        return logits - (m + np.log(np.exp(logits - m).sum(-1, keepdims=True)))

    scored = await engine.score(ScoreRequest(long, candidates=2))
    assert len(scored.ids) > 24
    check_against(scored, stepwise(scored.ids), 2)
    _, done = await run(engine, long, GREEDY)
    again = await engine.score(ScoreRequest((*long, reply(done)), candidates=2, continue_last=True))
    check_against(again, stepwise(again.ids), 2)


async def test_a_cancelled_score_leaves_exact_rows_for_the_next(chatml_model: Path, engine: Engine,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The caller leaves mid-way (the app starts a turn): what was fed stays cached with its rows,
    and the next score is exact and reads only the rest."""
    import asyncio

    from engine.local import scorerows
    from engine.local.session import Session

    monkeypatch.setattr(scorerows, "CHUNK_FLOATS", 1)  # 16 rows a pass: many passes
    original = Session.rows
    started = asyncio.Event()
    loop = asyncio.get_running_loop()

    def slow(self: Session, ids: list[int], cache: object = None) -> object:
        loop.call_soon_threadsafe(started.set)
        import time
        time.sleep(0.2)
        return original(self, ids, cache)  # type: ignore[arg-type]

    monkeypatch.setattr(Session, "rows", slow)
    await engine.load(str(chatml_model))
    text = " ".join(["the cat and the dog"] * 12)
    task = asyncio.create_task(engine.score(ScoreRequest(text=text, candidates=2)))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    scored = await engine.score(ScoreRequest(text=text, candidates=2))
    assert 0 < scored.reused_tokens < len(scored.ids) - 1
    check_against(scored, cold_rows(chatml_model, list(scored.ids)), 2)


async def test_nan_logits_end_a_score_in_one_line_and_the_engine_goes_on(nan_model: Path, engine: Engine) -> None:
    await engine.load(str(nan_model))
    with pytest.raises(EngineError, match="NaN logits"):
        await engine.score(ScoreRequest(CHAT, candidates=2))
    with pytest.raises(EngineError, match="NaN"):  # and again: the cache was dropped, nothing half-kept
        await engine.score(ScoreRequest(CHAT, candidates=2))


def test_a_message_not_found_at_the_start_adds_nothing_to_the_chat_s_perplexity() -> None:
    """A span (0, 0) (a first message the template does not show verbatim) owns no token: the
    slice tokens[0:-1] once counted nearly every token of the chat for it."""
    from engine.core.api import TokenEvent
    from engine.local.scoring import _own

    tokens = tuple(TokenEvent(i, i, "x", "x", -1.0, None, 1, 0.0, ()) for i in range(1, 6))
    assert _own(tokens, 0, 0) == () and _own(tokens, 0, 1) == ()
    assert [t.index for t in _own(tokens, 0, 3)] == [1, 2] and [t.index for t in _own(tokens, 2, 4)] == [2, 3]


async def test_a_warm_up_for_a_scored_chat_is_reused_by_its_scoring_turn(chatml_model: Path, engine: Engine) -> None:
    """The app scores the chat (`score_candidates` on every turn) and warms the cache while the
    user types (`prepare`). A warm-up without the rows' statistics was thrown away by the scoring
    turn (it reads cached positions without statistics again): in the app the first message after
    a load reused 0 of its 32 prompt tokens (SmolLM2). Warmed with the same candidates, the turn
    reuses it, and its statistics are those of a cold pass."""
    from engine.core.api import GenerateRequest

    await engine.load(str(chatml_model))
    draft = CHAT[-1].text[:20]
    warmed = await engine.prepare(CHAT[:-1], draft, score_candidates=3)
    assert warmed > 0
    done = [item async for item in engine.generate(GenerateRequest(CHAT, GREEDY, score_candidates=3))][-1]
    # all but the draft's last id (the whole message may tokenize it otherwise) and the row
    # before the first new position (fed again for its row): was 0
    assert done.reused_tokens >= warmed - 2
    chat = (*CHAT, reply(done))
    scored = await engine.score(ScoreRequest(chat, candidates=3, continue_last=True))
    check_against(scored, cold_rows(chatml_model, list(scored.ids)), 3)
