"""The thinking switch of reasoning models (Qwen3 and kin, `enable_thinking` in the template).

Thinking off renders the template's own "no thinking" generation prompt (an empty think block);
a template without the switch renders as it always did; and switching thinking between turns
never changes what the model saw before an earlier reply (each reply keeps its switch).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from engine_helpers import GREEDY
from mlx_lm.utils import load_tokenizer
from template_fixtures import family_model

from engine.core.api import GenerateRequest, Message, TurnFinished
from engine.local.client import Engine
from engine.local.prompt import TextEncoder, render_prompt, supports_thinking

SWITCHES = (None, True, False)
EMPTY_BLOCK = "<think>\n\n</think>\n\n"


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("thinking")


@pytest.fixture(scope="module")
def qwen3(root: Path) -> Any:
    return load_tokenizer(family_model(root, "bpe", "qwen3"))


def _template_ids(tok: Any, messages: list[Message], **options: Any) -> list[int]:
    dicts = [{"role": m.role, "content": m.text} for m in messages]
    return list(tok.apply_chat_template(dicts, tokenize=True, add_generation_prompt=True, **options))


def test_thinking_off_renders_the_templates_empty_think_block(qwen3: Any) -> None:
    messages = [Message("user", "hello the cat")]
    off = render_prompt(qwen3, messages, False, thinking=False)
    assert off == _template_ids(qwen3, messages, enable_thinking=False)
    assert qwen3.decode(off).endswith("<|im_start|>assistant\n" + EMPTY_BLOCK)
    default = _template_ids(qwen3, messages)
    assert render_prompt(qwen3, messages, False, thinking=True) == default
    assert render_prompt(qwen3, messages, False) == default and default != off


def test_a_template_without_the_switch_is_unaffected(root: Path) -> None:
    tok = load_tokenizer(family_model(root, "bpe", "chatml"))
    assert not supports_thinking(tok)
    messages = [Message("user", "hello the cat")]
    assert {tuple(render_prompt(tok, messages, False, thinking=t)) for t in SWITCHES} == {
        tuple(_template_ids(tok, messages))}


@pytest.mark.parametrize("second", SWITCHES)
@pytest.mark.parametrize("first", SWITCHES)
def test_the_history_stays_exact_whichever_way_thinking_is_switched(qwen3: Any, first: bool | None,
                                                                   second: bool | None) -> None:
    """Turn 2's prompt starts with turn 1's prompt and its reply's ids, and ends with the
    generation prompt turn 2 asked for."""
    encode = TextEncoder(qwen3)
    user1, user2 = Message("user", "hello the cat"), Message("user", "and then the dog")
    prompt1 = render_prompt(qwen3, [user1], False, encode, thinking=first)
    written = tuple(qwen3.encode("<think>\nhmm.\n</think>\n\n Paris is big.", add_special_tokens=False))
    history = [user1, Message("assistant", qwen3.decode(written), written, thinking=first), user2]
    prompt2 = render_prompt(qwen3, history, False, encode, thinking=second)
    assert prompt2[: len(prompt1) + len(written)] == prompt1 + list(written)
    tail = qwen3.decode(prompt2[len(prompt1) + len(written):])
    assert tail.endswith("assistant\n" + EMPTY_BLOCK) == (second is False)
    assert render_prompt(qwen3, history, False, thinking=second) == prompt2  # the cache changes nothing


async def test_a_turn_without_thinking_is_prompted_so_and_its_reply_reused(root: Path, engine: Engine) -> None:
    await engine.load(str(family_model(root, "bpe", "qwen3")))
    user1 = Message("user", "hello the cat")
    first = await _finished(engine, GenerateRequest((user1,), GREEDY, thinking=False))
    assert engine_text(first.prompt_ids, root).endswith(EMPTY_BLOCK)
    reply = Message("assistant", first.text, first.token_ids, thinking=False)
    second = await _finished(engine, GenerateRequest((user1, reply, Message("user", "and")), GREEDY, thinking=True))
    assert second.prompt_ids[: first.prompt_tokens + first.generated_tokens] == first.prompt_ids + first.token_ids
    assert not engine_text(second.prompt_ids, root).endswith(EMPTY_BLOCK)


def engine_text(ids: Any, root: Path) -> str:
    return load_tokenizer(family_model(root, "bpe", "qwen3")).decode(list(ids))


async def _finished(engine: Engine, request: GenerateRequest) -> TurnFinished:
    async for item in engine.generate(request):
        if isinstance(item, TurnFinished):
            return item
    raise AssertionError("the turn ended without a TurnFinished")


async def test_the_model_says_whether_its_template_has_the_switch(root: Path, engine: Engine) -> None:
    assert (await engine.load(str(family_model(root, "bpe", "qwen3")))).supports_thinking
    assert not (await engine.load(str(family_model(root, "bpe", "chatml")))).supports_thinking


async def test_counting_and_warming_render_the_switch_as_the_turn_does(root: Path, engine: Engine) -> None:
    await engine.load(str(family_model(root, "bpe", "qwen3")))
    user1 = Message("user", "hello the cat")
    first = await _finished(engine, GenerateRequest((user1,), GREEDY, thinking=False))
    assert await engine.count_tokens([user1], thinking=False) == first.prompt_tokens
    assert await engine.count_tokens([user1]) < first.prompt_tokens  # no empty think block
    history = (user1, Message("assistant", first.text, first.token_ids, thinking=False))
    warmed = await engine.prepare(history, "and", thinking=False)
    request = GenerateRequest((*history, Message("user", "and then")), GREEDY, thinking=False)
    second = await _finished(engine, request)
    assert warmed > first.prompt_tokens + first.generated_tokens and second.reused_tokens >= warmed
    assert second.prompt_tokens == await engine.count_tokens(request.messages, thinking=False)
