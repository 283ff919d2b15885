"""Hostile inputs at the engine's door: token ids from a file, a broken speed layer, a template
that never ends. Each is refused with one EngineError; the engine (and the caller) carry on."""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from pathlib import Path

import pytest
from engine_helpers import GREEDY, reply, run

from engine.api import EngineError, Message, check_token_ids
from engine.client import Engine


def test_check_token_ids_names_the_message_and_the_range() -> None:
    ok = (Message("user", "hi"), Message("assistant", "x", (0, 5, 399)))
    check_token_ids(ok, 400)
    for bad in (-3, 400, 100_000, 2**31, True, 1.0):
        messages = (Message("user", "hi"), Message("assistant", "x", (1, bad)))  # type: ignore[arg-type]
        with pytest.raises(EngineError, match=r"^Message 2 \(assistant\) holds token id .* not in 0\.\.399"):
            check_token_ids(messages, 400)


async def test_out_of_range_token_ids_are_refused_before_mlx_sees_them(chatml_model: Path, engine: Engine) -> None:
    info = await engine.load(str(chatml_model))
    _, first = await run(engine, [Message("user", "hello")])
    vocab = info.vocab_size
    for bad in (-3, vocab, 2**31, 999_999):
        answer = Message("assistant", "x", (*first.token_ids[:2], bad))
        for messages, branch in (([Message("user", "hello"), answer, Message("user", "more")], False),
                                 ([Message("user", "hello"), answer], True)):
            with pytest.raises(EngineError, match=f"token id {bad}, not in 0..{vocab - 1}"):
                await run(engine, messages, continue_last=branch)
            await engine.prepare(messages)  # the warm-up refuses quietly (its future gives 0)
    _, again = await run(engine, [Message("user", "hello")])  # the engine is still well
    assert again.token_ids == first.token_ids
