"""Rendering conversations to ids: template text, exact reply ids spliced in, plain models."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mlx_lm.utils import load_tokenizer

from engine.core.api import EngineError, Message
from engine.local.prompt import TextEncoder, common_prefix_len, render_prompt


def _tokenizer(path: Path) -> Any:
    return load_tokenizer(path)


def test_common_prefix_len() -> None:
    assert common_prefix_len([], [1, 2]) == 0
    assert common_prefix_len([1, 2, 3], [1, 2, 3]) == 3
    assert common_prefix_len([1, 2, 3], [1, 2]) == 2
    assert common_prefix_len([1, 9, 3], [1, 2, 3]) == 1
    assert common_prefix_len([5], [6]) == 0


@pytest.mark.parametrize("flavour", ["chatml_model", "llama3_model"])
def test_template_render_matches_tokenizing_the_template(flavour: str, request: pytest.FixtureRequest) -> None:
    """When a reply's ids are its canonical tokenization, splicing changes nothing."""
    tok = _tokenizer(request.getfixturevalue(flavour))
    texts = [("system", "be kind"), ("user", "hello cat"), ("assistant", "the dog sat"), ("user", "and then?")]
    messages = [
        Message(role, text, tuple(tok.encode(text, add_special_tokens=False)) if role == "assistant" else None)
        for role, text in texts
    ]
    expected = tok.apply_chat_template(
        [{"role": r, "content": t} for r, t in texts], tokenize=True, add_generation_prompt=True
    )
    assert render_prompt(tok, messages, continue_last=False) == list(expected)


def test_reply_ids_are_spliced_verbatim_never_retokenized(chatml_model: Path) -> None:
    tok = _tokenizer(chatml_model)
    odd_ids = tuple(tok.encode("h", add_special_tokens=False) + tok.encode("ello", add_special_tokens=False))
    assert list(odd_ids) != tok.encode("hello", add_special_tokens=False)  # not the canonical split
    messages = [Message("user", "hi"), Message("assistant", "hello", odd_ids), Message("user", "more")]
    ids = render_prompt(tok, messages, continue_last=False)
    head = tok.encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False)
    assert ids[: len(head)] == head
    assert tuple(ids[len(head) : len(head) + len(odd_ids)]) == odd_ids
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    assert ids[len(head) + len(odd_ids)] == im_end  # special-token text parses to its id


def test_text_that_looks_like_a_reply_marker_is_tokenized_whole(tmp_path: Path) -> None:
    """The markers that stand in for replies carry a random nonce; a user's text that imitates one
    (another nonce) is ordinary text, tokenized in one piece with what surrounds it."""
    import json

    from engine.bench.folders import write_tokenizer

    write_tokenizer(tmp_path, 32000)  # byte pairs merge: where text is cut changes its ids
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    tok = _tokenizer(tmp_path)
    marker = "LOGITSCOPE0123456789abREPLY0END"
    text = f"a{marker}a"
    cut = [i for part in ("a", marker, "a") for i in tok.encode(part, add_special_tokens=False)]
    assert cut != tok.encode(text, add_special_tokens=False)  # so splitting at the look-alike would show
    texts = [("user", "hi"), ("assistant", "yo"), ("user", text)]
    messages = [Message("user", "hi"), Message("assistant", "yo", tuple(tok.encode("yo", add_special_tokens=False))),
                Message("user", text)]
    expected = tok.apply_chat_template([{"role": r, "content": t} for r, t in texts], tokenize=True,
                                       add_generation_prompt=True)
    assert render_prompt(tok, messages, continue_last=False) == list(expected)


def test_continue_last_appends_the_partial_reply(llama3_model: Path) -> None:
    tok = _tokenizer(llama3_model)
    history = [Message("user", "hello cat")]
    partial = Message("assistant", "", (300, 301, 7))
    ids = render_prompt(tok, [*history, partial], continue_last=True)
    assert ids == render_prompt(tok, history, continue_last=False) + [300, 301, 7]
    assert ids[0] == tok.bos_token_id  # the template's {{ bos_token }} text became the bos id


def test_model_without_template_continues_plain_text(plain_model: Path) -> None:
    """A reply continues the text it answers; each later message starts after a blank line
    (`PLAIN_SEPARATOR`, README "GGUF files"), never glued to the reply ("...a timeand there")."""
    from engine.local.prompt import PLAIN_SEPARATOR, TextEncoder

    tok = _tokenizer(plain_model)
    assert not tok.has_chat_template and PLAIN_SEPARATOR == "\n\n"
    messages = [Message("user", "once upon"), Message("assistant", " a time", (11, 12)), Message("user", "and there")]
    ids = render_prompt(tok, messages, continue_last=False)
    once = tok.encode("once upon", add_special_tokens=False)
    there = TextEncoder(tok).continued("\n\nand there")
    assert ids == [tok.bos_token_id, *once, 11, 12, *there]
    assert tok.decode(ids[1:]).endswith("\n\nand there")
    two = render_prompt(tok, [Message("system", "Stories."), Message("user", "once upon")], continue_last=False)
    assert tok.decode(two[1:]) == "Stories.\n\nonce upon"


@pytest.mark.parametrize(
    ("messages", "continue_last", "words"),
    [
        ((), False, "empty"),
        ((Message("user", "hi"),), True, "Only an assistant message"),
        ((Message("user", "hi"), Message("assistant", "yo", (5,))), False, "already ends with a reply"),
    ],
)
def test_bad_conversations_are_refused_in_one_line(
    chatml_model: Path, messages: tuple[Message, ...], continue_last: bool, words: str
) -> None:
    tok = _tokenizer(chatml_model)
    with pytest.raises(EngineError, match=words) as info:
        render_prompt(tok, messages, continue_last)
    assert "\n" not in str(info.value)


class _CountingTokenizer:
    """A tokenizer whose text encodings are counted (everything else is the real one's)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.encoded: list[str] = []

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        self.encoded.append(text)
        return list(self.inner.encode(text, add_special_tokens=add_special_tokens))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.mark.parametrize("flavour", ["chatml_model", "llama3_model", "plain_model"])
def test_a_kept_encoder_renders_the_same_ids_and_tokenizes_only_new_text(
    flavour: str, request: pytest.FixtureRequest
) -> None:
    """Turn after turn, a session's encoder gives exactly a fresh render's ids, and the tokenizer
    sees only text it has not seen before (the newest message and the template around it)."""
    tok = _CountingTokenizer(_tokenizer(request.getfixturevalue(flavour)))
    encode = TextEncoder(tok)
    conversation = [Message("system", "be kind"), Message("user", "hello cat")]
    for turn in range(4):
        ids = render_prompt(tok, conversation, False, encode)
        assert ids == render_prompt(tok.inner, conversation, False)
        if turn:
            new_text = conversation[-1].text
            assert tok.encoded and all(new_text in text for text in tok.encoded)  # only runs with the new message
        tok.encoded.clear()
        reply_ids = tuple(tok.inner.encode(f"the dog {turn}", add_special_tokens=False))
        conversation += [Message("assistant", f"the dog {turn}", reply_ids), Message("user", f"and then {turn}?")]
    ids[0] = -1  # the caller owns the list it got: the encoder's memory is untouched
    assert render_prompt(tok, conversation[:-2], False, encode) == render_prompt(tok.inner, conversation[:-2], False)


def test_the_encoder_forgets_the_least_recently_used_text_beyond_its_capacity(chatml_model: Path) -> None:
    tok = _CountingTokenizer(_tokenizer(chatml_model))
    encode = TextEncoder(tok, capacity=2)
    tok.encoded.clear()  # the encoder's one probe at construction (does this tokenizer prefix runs?)
    for text in ("one", "two", "one", "three", "one", "two"):
        assert encode(text) == tok.inner.encode(text, add_special_tokens=False)
    assert tok.encoded == ["one", "two", "three", "two"]  # "two" was the oldest when "three" came
    assert encode("") == [] and tok.encoded[-1] == "two"  # empty text never reaches the tokenizer
