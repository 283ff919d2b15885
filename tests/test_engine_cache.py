"""The KV cache lives across turns exactly: reused turns equal cold runs, and only new ids are fed.

Cold runs come from mlx-lm's own `generate_step` on a fresh cache (see `engine_helpers`), so the
reference shares nothing with the engine's bookkeeping. Each turn also counts the ids actually fed
to the model, so "prefilled" is measured, not just reported.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from engine_helpers import GREEDY, cold_greedy, reply, run

from engine.core.api import Message, TurnFinished
from engine.local.client import Engine
from engine.local.prompt import common_prefix_len


@pytest.fixture
def fed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts of ids fed to the model's cache, one entry per forward call (engine thread only; a
    call without a cache, like the shape probe of `engine.local.lastrow` at load, feeds nothing)."""
    from mlx_lm.models import llama

    counts: list[int] = []
    original = llama.Model.__call__

    def counting(self: object, inputs: object, *args: object, **kwargs: object) -> object:
        cache = kwargs.get("cache", args[0] if args else None)
        if threading.current_thread().name == "logitscope-engine" and cache is not None:
            counts.append(int(inputs.shape[1]))  # type: ignore[attr-defined]
        return original(self, inputs, *args, **kwargs)

    monkeypatch.setattr(llama.Model, "__call__", counting)
    return counts


def reads(finished: TurnFinished) -> int:
    """Tokens read back in a turn: the new ones plus the stop token, if any."""
    return finished.generated_tokens + (finished.finish_reason == "stop")


def unfed(finished: TurnFinished) -> int:
    """1 when the turn's last token read was never fed: the last one the limit allowed (nothing
    would use its step) or a stop token read first (read before its step is built)."""
    return int(reads(finished) >= GREEDY.max_tokens or reads(finished) == 1 and finished.finish_reason == "stop")


def assert_fed_exactly(fed: list[int], finished: TurnFinished) -> None:
    """The model saw the new suffix once, then one id per token read but an unfed last one;
    nothing else."""
    assert sum(fed) == finished.prefilled_tokens + reads(finished) - unfed(finished)
    assert finished.reused_tokens + finished.prefilled_tokens == finished.prompt_tokens
    stop_fed = finished.finish_reason == "stop" and not unfed(finished)
    assert finished.context_used == finished.prompt_tokens + finished.generated_tokens + stop_fed
    fed.clear()


@pytest.mark.parametrize("flavour", ["chatml_model", "llama3_model", "plain_model"])
async def test_reused_turns_equal_cold_runs(
    flavour: str, request: pytest.FixtureRequest, engine: Engine, fed: list[int]
) -> None:
    path: Path = request.getfixturevalue(flavour)
    await engine.load(str(path))
    conversation = [Message("system", "be kind"), Message("user", "hello the cat")]
    previous: TurnFinished | None = None
    for turn in range(3):
        events, finished = await run(engine, conversation)
        assert [e.id for e in events] == list(finished.token_ids)
        assert list(finished.token_ids) == cold_greedy(path, finished.prompt_ids, GREEDY.max_tokens)
        assert_fed_exactly(fed, finished)
        if previous is None:
            assert finished.reused_tokens == 0
        else:
            history = list(previous.prompt_ids) + list(previous.token_ids)
            assert list(finished.prompt_ids[: len(history)]) == history
            stop_resupplied = previous.finish_reason == "stop" and flavour != "plain_model"
            assert finished.reused_tokens == len(history) + stop_resupplied - unfed(previous)
        conversation += [reply(finished), Message("user", f"and then {turn} dog")]
        previous = finished


async def test_regenerate_reuses_all_but_one_token(chatml_model: Path, engine: Engine, fed: list[int]) -> None:
    await engine.load(str(chatml_model))
    conversation = [Message("user", "hello the cat")]
    _, first = await run(engine, conversation)
    fed.clear()
    _, again = await run(engine, conversation)  # same conversation, without the reply
    assert again.prompt_ids == first.prompt_ids
    assert (again.reused_tokens, again.prefilled_tokens) == (first.prompt_tokens - 1, 1)
    assert again.token_ids == first.token_ids
    assert_fed_exactly(fed, again)


async def test_a_turn_at_its_length_limit_feeds_no_step_after_its_last_token(
    chatml_model: Path, engine: Engine, fed: list[int]
) -> None:
    """No decode step runs for a token nothing will use (it would delay the next turn), and the
    next turn prefills that token with its own suffix."""
    await engine.load(str(chatml_model))
    conversation = [Message("user", "hello the cat")]
    _, one = await run(engine, conversation, GREEDY.with_changes(max_tokens=1))
    assert (one.finish_reason, one.generated_tokens) == ("length", 1)
    assert fed == [one.prompt_tokens]  # the prompt's one pass, and nothing after it
    assert one.context_used == one.prompt_tokens + 1
    fed.clear()
    _, follow = await run(engine, [*conversation, reply(one), Message("user", "and the dog")])
    assert follow.reused_tokens == one.prompt_tokens  # the reply's token was not in the cache
    assert follow.prompt_ids[: one.prompt_tokens + 1] == one.prompt_ids + one.token_ids
    assert list(follow.token_ids) == cold_greedy(chatml_model, follow.prompt_ids, GREEDY.max_tokens)
    assert_fed_exactly(fed, follow)


async def test_edit_last_user_message_reuses_up_to_the_edit(chatml_model: Path, engine: Engine, fed: list[int]) -> None:
    await engine.load(str(chatml_model))
    history = [Message("user", "hello the cat")]
    _, first = await run(engine, history)
    history.append(reply(first))
    _, second = await run(engine, [*history, Message("user", "the dog sat on the mat")])
    fed.clear()
    _, edited = await run(engine, [*history, Message("user", "the dog ran away")])
    assert edited.reused_tokens == common_prefix_len(second.prompt_ids, edited.prompt_ids)
    assert edited.reused_tokens > first.prompt_tokens + first.generated_tokens  # the whole history
    assert list(edited.token_ids) == cold_greedy(chatml_model, edited.prompt_ids, GREEDY.max_tokens)
    assert_fed_exactly(fed, edited)


async def test_branch_on_a_candidate_continues_from_the_divergence(
    llama3_model: Path, engine: Engine, fed: list[int]
) -> None:
    await engine.load(str(llama3_model))
    conversation = [Message("user", "hello the cat")]
    events, first = await run(engine, conversation)
    i = 4
    alternative = events[i].candidates[1].id  # the model's second choice at position i
    assert alternative != first.token_ids[i]
    branch = Message("assistant", "", first.token_ids[:i] + (alternative,))
    fed.clear()
    branch_events, branched = await run(engine, [*conversation, branch], continue_last=True)
    assert branched.reused_tokens == first.prompt_tokens + i
    assert branched.prefilled_tokens == 1
    assert [e.index for e in branch_events] == list(range(i + 1, i + 1 + len(branch_events)))
    assert branched.token_ids[: i + 1] == branch.token_ids
    new = list(branched.token_ids[i + 1 :])
    assert new == cold_greedy(llama3_model, branched.prompt_ids, GREEDY.max_tokens)
    assert_fed_exactly(fed, branched)


async def test_non_trimmable_cache_rewinds_to_a_snapshot_never_wrong(
    window_model: Path, engine: Engine, fed: list[int]
) -> None:
    """A sliding-window layer's RotatingKVCache cannot be trimmed once it wrapped: a regenerate
    goes back to the snapshot taken where the reply started (tests/test_cache_snapshots.py)."""
    await engine.load(str(window_model))
    conversation = [Message("user", "once upon a time there lived a little bird")]
    _, first = await run(engine, conversation)
    assert first.prompt_tokens > 12  # past the window: the rotating cache has wrapped
    fed.clear()
    _, again = await run(engine, conversation)  # regenerate needs a trim
    assert (again.reused_tokens, again.prefilled_tokens) == (again.prompt_tokens - 1, 1)
    assert list(again.token_ids) == cold_greedy(window_model, again.prompt_ids, GREEDY.max_tokens)
    assert again.token_ids == first.token_ids
    assert_fed_exactly(fed, again)
    _, appended = await run(engine, [*conversation, reply(again), Message("user", "more")])
    # appending needs no trim (a length-ended reply's last token is prefilled with the new message)
    assert appended.reused_tokens == again.prompt_tokens + again.generated_tokens - unfed(again)
