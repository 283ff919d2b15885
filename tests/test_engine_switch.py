"""A model switch that fails keeps what worked (the old model, its cache); the engine counts a
conversation's tokens exactly as the next turn renders them."""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_helpers import reply, run

from engine.core.api import EngineError, Message, ModelLoadError, SamplingParams
from engine.local.client import Engine

GREEDY = SamplingParams(temperature=0.0, max_tokens=4)


async def test_a_failed_load_keeps_the_old_model_and_its_cache(chatml_model: Path, tmp_path: Path) -> None:
    eng = Engine()
    try:
        info = await eng.load(str(chatml_model))
        ask = [Message("user", "hi there")]
        _, first = await run(eng, ask, GREEDY)
        for missing in (tmp_path / "nothing-here", tmp_path):  # no folder; a folder with no model
            with pytest.raises(ModelLoadError):
                await eng.load(str(missing))
            assert eng.model == info
        _, again = await run(eng, [*ask, reply(first), Message("user", "more")], GREEDY)
        assert again.reused_tokens >= first.prompt_tokens  # the cache was kept too
    finally:
        await eng.close()


async def test_count_tokens_is_the_next_turns_prompt(chatml_model: Path, plain_model: Path) -> None:
    eng = Engine()
    try:
        with pytest.raises(EngineError, match="No model is loaded"):
            await eng.count_tokens([Message("user", "hi")])
        for model in (chatml_model, plain_model):  # with and without a chat template
            await eng.load(str(model))
            ask = [Message("system", "be brief"), Message("user", "hi there")]
            counted = await eng.count_tokens(ask)
            _, finished = await run(eng, ask, GREEDY)
            assert counted == finished.prompt_tokens
            follow = [*ask, reply(finished), Message("user", "and then?")]
            counted = await eng.count_tokens(follow)
            _, finished = await run(eng, follow, GREEDY)
            assert counted == finished.prompt_tokens
    finally:
        await eng.close()
