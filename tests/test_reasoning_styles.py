"""#30.5: reasoning models of every style. Templates that open ``<think>`` in the generation
prompt (QwQ, DeepSeek-R1 distills, Qwen3-*-Thinking-2507) and GPT-OSS's harmony channels fold like
Qwen3's ``<think>`` block; earlier replies' thinking goes "as the template renders it" (dropped
where it drops it) or as the exact cache; `run --thinking on|off`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mlx_lm.utils import load_tokenizer
from template_fixtures import family_model

from engine.core.api import Message, SamplingParams, TokenEvent
from engine.core.chat.conversation import Conversation, Node, Version
from engine.core.thinking import answer_of, holds_thinking
from engine.local.prompt import TextEncoder, render_prompt
from engine.local.reasoning import drops_past_thinking, opens_thinking
from engine.scripted import ScriptedEngine
from tui.app.widgets.thinking_fold import ThinkingBlock, thinking_block
from tui.headless import main

THOUGHT = "<think>\nhmm the cat.\n</think>\n\n"


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("reasoning")


def _tok(root: Path, family: str) -> Any:
    return load_tokenizer(family_model(root, "bpe", family))


def tokens(*texts: str) -> list[TokenEvent]:
    return [TokenEvent(i, i, t, t, 0.0, None, None, None, ()) for i, t in enumerate(texts)]


@pytest.mark.parametrize(("family", "opens", "drops"), [
    ("qwen3", False, True), ("qwq", True, True), ("r1", True, True), ("chatml", False, False)])
def test_each_templates_way_with_thinking_is_read_at_load(root: Path, family: str, opens: bool, drops: bool) -> None:
    tok = _tok(root, family)
    assert (opens_thinking(tok), drops_past_thinking(tok)) == (opens, drops)


def test_a_block_the_prompt_opened_folds_while_it_streams_and_once_it_is_done() -> None:
    streaming = tokens("hmm", " the", " cat")
    assert thinking_block(streaming, opened=True) == ThinkingBlock(3, False)  # "still thinking"
    done = tokens("hmm", " cat", "</think>", "\n\n", "Paris", ".")
    assert thinking_block(done, opened=True) == ThinkingBlock(4, True)
    assert thinking_block(done) == ThinkingBlock(4, True)  # a saved chat: found by its </think> alone
    assert thinking_block(tokens("a <think> b", "</think>", "c")) is None  # a <think> of its own: no block


def test_harmony_analysis_folds_before_the_final_channel() -> None:
    reply = tokens("<|channel|>", "analysis", "<|message|>", "User", " asks", ".", "<|end|>", "<|start|>",
                   "assistant", "<|channel|>", "final", "<|message|>", "Paris", ".")
    assert thinking_block(reply[:6]) == ThinkingBlock(6, False)
    assert thinking_block(reply) == ThinkingBlock(12, True)
    assert thinking_block(tokens("<|channel|>", "final", "<|message|>", "Paris")) is None


def test_thinking_in_a_replys_text_is_found_in_both_styles() -> None:
    assert holds_thinking(THOUGHT + "Paris") and holds_thinking("hmm\n</think>\n\nParis")
    assert not holds_thinking("Paris") and not holds_thinking("say <think> then </think>")
    assert answer_of(THOUGHT + "Paris") == "Paris"


def _chat(reply_ids: tuple[int, ...], text: str) -> Conversation:
    conversation = Conversation()
    conversation.append(Node("user", [Version("hello the cat")]))
    reply = Version(text, [TokenEvent(i, t, "", "", 0.0, None, None, None, ()) for i, t in enumerate(reply_ids)],
                    SamplingParams(), "stop")
    conversation.append(Node("assistant", [reply]))
    conversation.append(Node("user", [Version("and the dog")]))
    return conversation


@pytest.mark.parametrize("family", ["qwen3", "qwq", "r1"])
def test_past_thinking_as_the_template_renders_it_or_as_the_exact_cache(root: Path, family: str) -> None:
    tok = _tok(root, family)
    text = (THOUGHT if family == "qwen3" else THOUGHT.removeprefix("<think>\n")) + "Paris is big."
    ids = tuple(tok.encode(text, add_special_tokens=False))
    chat = _chat(ids, text)
    exact = chat.messages(model=None)
    assert exact[1].token_ids == ids  # the default of `messages`: the exact ids, thinking kept
    dropped = chat.messages(model=None, drop_thinking=True)
    assert dropped[1].token_ids is None and dropped[1].text == text
    encode = TextEncoder(tok)
    as_template = render_prompt(tok, dropped, False, encode)
    dicts = [{"role": m.role, "content": m.text} for m in dropped]
    assert as_template == list(tok.apply_chat_template(dicts, tokenize=True, add_generation_prompt=True))
    assert "hmm" not in tok.decode(as_template) and "Paris is big." in tok.decode(as_template)
    kept = render_prompt(tok, exact, False, encode)
    assert "hmm" in tok.decode(kept)  # exact cache: the reply as written, thinking and all


def test_a_reply_without_thinking_keeps_its_ids_either_way(root: Path) -> None:
    tok = _tok(root, "qwen3")
    ids = tuple(tok.encode("Paris is big.", add_special_tokens=False))
    assert _chat(ids, "Paris is big.").messages(drop_thinking=True)[1].token_ids == ids


class _Factory:
    def __init__(self) -> None:
        self.engines: list[ScriptedEngine] = []

    def __call__(self) -> ScriptedEngine:
        self.engines.append(ScriptedEngine(((THOUGHT, "Paris"), ("Sure",)), supports_thinking=True,
                                           drops_past_thinking=True))
        return self.engines[-1]


@pytest.mark.parametrize(("flag", "switch"), [(["--thinking", "off"], False), (["--thinking", "on"], True), ([], None)])
def test_run_takes_the_thinking_switch(flag: list[str], switch: bool | None, capsys: pytest.CaptureFixture[str],
                                       tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    factory = _Factory()
    assert main(["run", "--model", "m", "--prompt", "a", "--prompt", "b", *flag], engine_factory=factory) == 0
    requests = factory.engines[0].requests
    assert [r.thinking for r in requests] == [switch, switch]
    reply = requests[1].messages[1]
    assert reply.thinking == switch and reply.token_ids is None  # the template drops it: as text


async def test_the_loaded_model_says_how_its_template_thinks(root: Path) -> None:
    from engine.local.client import Engine
    engine = Engine()
    try:
        qwq = await engine.load(str(family_model(root, "bpe", "qwq")))
        assert qwq.opens_thinking and qwq.drops_past_thinking
        plain = await engine.load(str(family_model(root, "bpe", "chatml")))
        assert not plain.opens_thinking and not plain.drops_past_thinking
    finally:
        await engine.close()
