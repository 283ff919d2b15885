"""Regenerate, branch and edit on caches that cannot be trimmed read only the new turn's ids.

Mamba-2 and a Mamba-2/attention hybrid (Granite-4-H) fold the whole history into a recurrent
state, and a wrapped sliding window has overwritten what a trim would need: before snapshots,
each rewind rebuilt the cache from the first token. Every turn here is checked three ways: the
ids actually fed to the model are counted, the reused and prefilled counts are exact, and the
tokens equal a cold run of the same conversation on a fresh engine (the rebuild path).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from engine_helpers import GREEDY, reply, run
from test_engine_cache import assert_fed_exactly, unfed
from tinymodels import build_family

from engine.core.api import Message, TurnFinished
from engine.local.client import Engine
from engine.local.snapshots import SNAPSHOTS

HISTORY_WORDS = "the cat sat on the mat and then it was happy the dog ran far away once upon a time".split()


@pytest.fixture(scope="module")
def ssm_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ssm")


@pytest.fixture
def fed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Ids fed to the model's cache per forward call on the engine thread, for every family here."""
    from mlx_lm.models import granitemoehybrid, llama, mamba2

    counts: list[int] = []
    for module in (granitemoehybrid, llama, mamba2):
        original = module.Model.__call__

        def counting(self: object, inputs: Any, *args: object, _original: Any = original, **kwargs: object) -> object:
            cache = kwargs.get("cache", args[0] if args else None)
            if threading.current_thread().name == "logitscope-engine" and cache is not None:
                counts.append(int(inputs.shape[1]))
            return _original(self, inputs, *args, **kwargs)

        monkeypatch.setattr(module.Model, "__call__", counting)
    return counts


def long_message(words: int = 860) -> str:
    """A user message of about a thousand tokens on the tiny tokenizer."""
    return " ".join(HISTORY_WORDS[i % len(HISTORY_WORDS)] + ("," if i % 9 == 8 else "") for i in range(words))


async def cold(path: Path, messages: list[Message], continue_last: bool = False) -> TurnFinished:
    """The same turn on a fresh engine: the whole prompt prefilled from the first token."""
    engine = Engine(warm_on_load=False)
    try:
        await engine.load(str(path))
        _, finished = await run(engine, messages, continue_last=continue_last)
        return finished
    finally:
        await engine.close()


@pytest.mark.slow
@pytest.mark.parametrize("family", ["mamba2", "granitemoehybrid"])
async def test_rewinds_after_a_long_history_prefill_only_the_new_turn(
    ssm_root: Path, engine: Engine, fed: list[int], family: str
) -> None:
    path = build_family(ssm_root / family, family, max_position_embeddings=4096)
    await engine.load(str(path))
    conversation = [Message("user", long_message())]
    _, first = await run(engine, conversation)
    assert first.prompt_tokens >= 1000
    conversation += [reply(first), Message("user", "and then the dog")]
    fed.clear()
    _, second = await run(engine, conversation)
    assert second.reused_tokens >= first.prompt_tokens  # a follow-up appends: nothing to rewind
    assert_fed_exactly(fed, second)

    _, again = await run(engine, conversation)  # regenerate: back to where the reply starts
    assert (again.reused_tokens, again.prefilled_tokens) == (second.prompt_tokens - 1, 1)
    assert again.token_ids == second.token_ids
    assert_fed_exactly(fed, again)

    branch = Message("assistant", "", second.token_ids[:2] + (second.token_ids[2] + 1,))
    _, branched = await run(engine, [*conversation, branch], continue_last=True)
    assert (branched.reused_tokens, branched.prefilled_tokens) == (second.prompt_tokens - 1, 1 + 3)
    assert_fed_exactly(fed, branched)

    edited = [*conversation[:-1], Message("user", "and then the bird")]
    _, changed = await run(engine, edited)  # edit the newest message: back to where its turn starts
    assert changed.reused_tokens == second.reused_tokens
    assert changed.prefilled_tokens == changed.prompt_tokens - second.reused_tokens < 20
    assert_fed_exactly(fed, changed)
    await engine.prepare([*edited, reply(changed)], draft="the cat sat on")  # warm while typing
    fed.clear()
    sent = [*edited, reply(changed), Message("user", "the dog ran")]  # not what the draft began with
    _, typed = await run(engine, sent)  # back to where the warm-up started: the end of the last reply
    assert typed.reused_tokens == changed.prompt_tokens + changed.generated_tokens - unfed(changed)
    assert_fed_exactly(fed, typed)
    # the rebuild path (a fresh engine) gives the same tokens: the restored state is the right one
    assert branched.token_ids == (await cold(path, [*conversation, branch], continue_last=True)).token_ids
    assert changed.token_ids == (await cold(path, edited)).token_ids


async def test_a_wrapped_window_regenerates_from_its_snapshot_and_rebuilds_before_it(
    window_model: Path, engine: Engine, fed: list[int]
) -> None:
    """A rewind to before every snapshot (an edit of the first message) still starts over."""
    await engine.load(str(window_model))
    conversation = [Message("user", "once upon a time there lived a little bird")]
    _, first = await run(engine, conversation)
    assert first.prompt_tokens > 12  # past the window: the rotating cache has wrapped
    fed.clear()
    _, again = await run(engine, conversation)
    assert (again.reused_tokens, again.prefilled_tokens) == (again.prompt_tokens - 1, 1)
    assert again.token_ids == first.token_ids
    assert_fed_exactly(fed, again)
    edited = [Message("user", "twice upon a time there lived a little bird")]
    _, rebuilt = await run(engine, edited)
    assert (rebuilt.reused_tokens, rebuilt.prefilled_tokens) == (0, rebuilt.prompt_tokens)
    assert_fed_exactly(fed, rebuilt)
    assert rebuilt.token_ids == (await cold(window_model, edited)).token_ids


async def test_snapshots_stay_few_and_a_trimmable_cache_keeps_none(
    window_model: Path, chatml_model: Path, engine: Engine
) -> None:
    kept: list[list[int]] = []
    for path in (window_model, chatml_model):
        await engine.load(str(path))
        conversation = [Message("user", "once upon a time there lived a little bird")]
        for turn in range(4):
            _, finished = await run(engine, conversation, GREEDY.with_changes(max_tokens=3))
            conversation += [reply(finished), Message("user", f"and then {turn}")]
        kept.append(engine._worker._session.snapshots.positions)  # type: ignore[union-attr]
    assert len(kept[0]) == SNAPSHOTS and kept[0] == sorted(kept[0])
    assert kept[1] == []
