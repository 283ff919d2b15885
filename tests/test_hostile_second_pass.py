"""Hostile inputs, second pass (issue #29, items 1-11): each case fails on the code before its fix."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from engine_helpers import run

from engine.core.api import EngineError, Message, PreviewRequest, SamplingParams
from engine.local.client import Engine


# --- 1. every id that reaches a forward pass is checked at the door -------------------------------

def _with_token_past_the_table(source: Path, folder: Path) -> tuple[Path, int]:
    """A copy of `source` whose tokenizer gains a special token one past the embedding's last row
    and whose chat template writes it into every prompt: the model's own files make the bad id."""
    from transformers import AutoTokenizer

    shutil.copytree(source, folder)
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|extra|>"]})
    extra = tokenizer.convert_tokens_to_ids("<|extra|>")
    tokenizer.chat_template = "<|extra|>" + tokenizer.chat_template
    tokenizer.save_pretrained(str(folder))
    return folder, extra


async def test_template_token_past_the_embedding_is_refused_at_the_door(
        chatml_model: Path, tmp_path: Path, engine: Engine) -> None:
    folder, extra = _with_token_past_the_table(chatml_model, tmp_path / "extra")
    info = await engine.load(str(folder))
    assert extra == info.vocab_size  # one past the last row
    door = f"token id {extra}.*vocabulary of {info.vocab_size}"
    with pytest.raises(EngineError, match=door):  # a turn
        await run(engine, [Message("user", "hello")])
    with pytest.raises(EngineError, match=door):  # a branch (a continued reply)
        await run(engine, [Message("user", "hello"), Message("assistant", "x", (5, 6))], continue_last=True)
    request = PreviewRequest((Message("user", "hello"), Message("assistant", "x", (5, 6))), (7, 8), 3,
                             SamplingParams(temperature=0.0))
    with pytest.raises(EngineError, match=door):  # a preview
        async for _ in engine.preview(request):
            pass
    assert await engine.prepare([Message("user", "hello"), Message("assistant", "x", (5, 6))]) == 0  # a warm-up
