"""Rendering a whole conversation to the exact token ids the model is conditioned on.

Why not just `apply_chat_template(tokenize=True)`: an assistant reply must enter the prompt as the
very ids that were generated (and sit in the KV cache), never as a re-tokenization of its text,
which can differ (BPE merges across the reply, a sampled token that is not the canonical split).
And it must follow exactly the prompt it was written after: many templates render a reply in the
history differently from the generation prompt it answered (Llama-2 and Mistral add a space and
trim, Falcon and OpenChat add a space after the role, Qwen3 strips the thinking block). So the
prompt is built as the conversation grew (`_render_with_template`): the first prompt as the
template renders it, then each reply's ids, then the template's text after that reply (found by
rendering the reply as a unique sentinel) up to the next generation prompt. Every text run after
the first is tokenized as it would be in place (`TextEncoder.continued`). The rule is documented
for callers in `engine/core/api.py` (`Message`).

Pure tokenizer work: no MLX here, so it is testable anywhere and cheap to import.
"""

from __future__ import annotations

import re
import secrets
from collections import OrderedDict
from functools import partial
from typing import Any, Callable, Sequence

from engine.core.api import EngineError, Message, check_token_ids
from engine.core.text import error_line
from engine.core.thinking import holds_thinking


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two id sequences (the reusable part of a cache)."""
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


class TextEncoder:
    """A tokenizer's `encode` for text runs, remembering the most recent ones (and the template
    texts the runs come from, `rendered`).

    Why: every turn renders the whole conversation again (a template may change earlier text), so
    the same user messages and template pieces are tokenized turn after turn; only the newest one
    is new. A tokenizer call costs ~50 us even for a short run: rendering a 1,000-token, 9-message
    chat took 0.47 ms a turn, growing with every message; with the runs remembered, 0.10 ms.

    Runs that continue a prompt (`continued`) are tokenized as they would be in place, inside the
    whole text: SentencePiece-style tokenizers (Metaspace, ``add_dummy_prefix``) put a ``▁`` at
    the start of every separately encoded text, an id the whole text never has there.
    """

    def __init__(self, tokenizer: Any, capacity: int = 512) -> None:
        self.tokenizer = tokenizer
        self.capacity = capacity
        self._known: OrderedDict[tuple[str, bool], tuple[int, ...]] = OrderedDict()
        self._rendered: OrderedDict[tuple[object, ...], str] = OrderedDict()
        self.stop_texts = _stop_texts(tokenizer)
        self.supports_thinking = supports_thinking(tokenizer)
        self._prefixes = self._adds_prefix()

    def _adds_prefix(self) -> bool:
        """Whether separately encoded text gains a leading id: "b" alone and after a newline."""
        try:
            return self._encode("\nb")[-1:] != self._encode("b")
        except Exception:  # noqa: BLE001 - a tokenizer that cannot say: its turns report what fails
            return False

    def __call__(self, text: str) -> list[int]:
        """The ids of `text` at the start of a prompt, without special tokens added (exactly what
        the tokenizer gives)."""
        return self._remembered(text, False)

    def continued(self, text: str) -> list[int]:
        """The ids of `text` where it follows other text: as the tokenizer would tokenize it in
        place, with no start-of-text ``▁``."""
        return self._remembered(text, True)

    def rendered(self, key: tuple[object, ...], render: Callable[[], str]) -> str:
        """The template text `render()` gives, remembered under `key` (what it depends on).

        Why: a turn renders the history up to each reply again (`_runs_after_replies`), a
        template call per reply; all but the newest gave the same text last turn.
        """
        text = self._rendered.get(key)
        if text is None:
            text = self._rendered[key] = render()
            if len(self._rendered) > self.capacity:
                self._rendered.popitem(last=False)
        else:
            self._rendered.move_to_end(key)
        return text

    def _remembered(self, text: str, continued: bool) -> list[int]:
        if not text:
            return []
        key = (text, continued)
        ids = self._known.get(key)
        if ids is None:
            ids = tuple(self._in_place(text) if continued else self._encode(text))
            self._known[key] = ids
            if len(self._known) > self.capacity:
                self._known.popitem(last=False)
        else:
            self._known.move_to_end(key)
        return list(ids)

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def _in_place(self, text: str) -> list[int]:
        """`text` tokenized after an anchor whose own ids are then removed, so nothing is
        prefixed; an anchor that merges with the text is not used (the next one is tried)."""
        if not self._prefixes:
            return self._encode(text)
        for anchor in _ANCHORS:
            head = self._encode(anchor)
            ids = self._encode(anchor + text)
            if ids[: len(head)] == head:
                return ids[len(head) :]
        return self._encode(text)


_ANCHORS = ("\n", "a", "0")  # short texts that rarely merge with what follows them


def _stop_texts(tokenizer: Any) -> tuple[str, ...]:
    """The texts of the tokens that end a reply (where the template writes them, they follow it)."""
    ids = list(getattr(tokenizer, "eos_token_ids", None) or [])
    eos = getattr(tokenizer, "eos_token_id", None)
    ids += [eos] if isinstance(eos, int) else []
    try:
        tokens = [tokenizer.convert_ids_to_tokens(int(i)) for i in ids]
    except Exception:  # noqa: BLE001 - a tokenizer without the lookup: no stop token is moved
        return ()
    return tuple(t for t in tokens if isinstance(t, str) and t)


def supports_thinking(tokenizer: Any) -> bool:
    """Whether the chat template has a thinking switch (mentions ``enable_thinking``).

    Why only then: a template without the switch ignores the option, and one that reads an
    undefined variable differently (``is defined``) must render as it always did.
    """
    template = getattr(tokenizer, "chat_template", None)
    texts = template.values() if isinstance(template, dict) else [template]
    return any(isinstance(text, str) and "enable_thinking" in text for text in texts)


def render_prompt(
    tokenizer: Any, messages: Sequence[Message], continue_last: bool, encode: TextEncoder | None = None,
    thinking: bool | None = None,
) -> list[int]:
    """The ids of the whole conversation, ready for the model to write the next reply token.

    `tokenizer` is mlx-lm's TokenizerWrapper (or a Hugging Face tokenizer); `encode`, the same
    tokenizer's remembering encoder, which a caller rendering turn after turn keeps. With
    ``continue_last`` the last (assistant) message is continued: the conversation before it is
    rendered with the generation prompt and the partial reply's ids are appended. `thinking` is
    the new reply's thinking switch (`GenerateRequest.thinking`); each earlier reply's
    generation prompt uses that reply's own `Message.thinking`.
    """
    check_conversation(messages, continue_last)
    encode = encode if encode is not None else TextEncoder(tokenizer)
    head = messages[:-1] if continue_last else messages
    final = messages[-1].thinking if continue_last else thinking
    if getattr(tokenizer, "has_chat_template", False):
        ids = _render_with_template(tokenizer, head, encode, final)
    else:
        ids = _render_plain(tokenizer, head, encode)
    if continue_last:
        ids.extend(message_ids(encode, messages[-1]))
    return ids


def admitted_ids(
    tokenizer: Any, messages: Sequence[Message], continue_last: bool, vocab_size: int,
    encode: TextEncoder | None = None, thinking: bool | None = None,
) -> list[int]:
    """`render_prompt`'s ids, every one checked against the model's embedding table: the door
    every id passes on its way to a forward pass (a turn, a branch, a preview row, a warm-up).

    Why all of them and not only the ids a message carries: the template and the tokenizer make
    ids too, and a model folder is data. A tokenizer whose added special token has id 512 on a
    512-row embedding sent 512 to MLX, which indexes without a bound check: the turn ran on
    whatever memory lay past the table (once blamed on "NaN logits"). Sampled ids need no check:
    they index the logits row. One EngineError line names the id and the vocabulary size.
    """
    check_token_ids(messages, vocab_size)  # a message's own ids: the error names the message
    ids = render_prompt(tokenizer, messages, continue_last, encode, thinking)
    if ids and (min(ids) < 0 or max(ids) >= vocab_size):  # two C loops: ~0.1 ms for 8k ids
        bad = next(i for i in ids if not 0 <= i < vocab_size)
        raise EngineError(f"The model's chat template or tokenizer gives token id {bad}, outside the "
                          f"vocabulary of {vocab_size} ids (0..{vocab_size - 1}) that its embedding holds: "
                          "the model folder's tokenizer does not match its weights.")
    return ids


def check_conversation(messages: Sequence[Message], continue_last: bool) -> None:
    """Refuse a conversation that cannot be continued the way the request asks (one clear line)."""
    if not messages:
        raise EngineError("The conversation is empty: send at least one message.")
    last = messages[-1].role
    if continue_last and last != "assistant":
        raise EngineError(f"Only an assistant message can be continued; the last message is from the {last}.")
    if not continue_last and last == "assistant":
        raise EngineError("The conversation already ends with a reply: send a user message or continue it.")


def message_ids(encode: TextEncoder, message: Message) -> list[int]:
    """A message's own ids where it continues a prompt: the exact generated ids for a reply,
    else its text tokenized in place."""
    if message.token_ids is not None:
        return list(message.token_ids)
    return encode.continued(message.text)


def _render_with_template(
    tokenizer: Any, messages: Sequence[Message], encode: TextEncoder, final: bool | None
) -> list[int]:
    """Chat-template rendering that keeps what the model saw when it wrote each reply.

    The prompt is built the way the conversation grew: the prompt the first reply was written
    after (the template's own rendering up to there, tokenized whole), that reply's exact ids,
    then the template's text after that reply up to the next generation prompt, the next reply's
    ids, and so on. What a template renders *before* an earlier reply in the history (a space,
    trimmed content, a stripped thinking block, another role header) is never used: the model
    did not see it. A template that renders a reply somewhere it cannot be found (dropped,
    repeated) falls back to splicing the whole rendering (`_render_spliced`).

    Each generation prompt is rendered with the thinking switch of the reply that followed it
    (`final` for the one this turn answers), so toggling thinking keeps the history exact.

    A reply given as text only (no ids) that holds a thinking block is the one exception: the
    caller asked for it "as the template renders it" (`Conversation.messages`, drop_thinking),
    so the whole conversation is rendered by the template, that reply from its text.
    """
    replies = [i for i, message in enumerate(messages) if message.role == "assistant"]
    if not replies:
        return encode(_render_text(tokenizer, messages, {}, _options(encode, final)))
    as_text = {i for i in replies if messages[i].token_ids is None and holds_thinking(messages[i].text)}
    if as_text:  # "as the template renders it": it may drop that thinking (Qwen3 does)
        return _render_spliced(tokenizer, messages, encode, final, as_text)
    try:
        runs = _runs_after_replies(tokenizer, messages, replies, encode, final)
    except _NotExact:
        return _render_spliced(tokenizer, messages, encode, final)
    head = messages[: replies[0]]
    options = _options(encode, messages[replies[0]].thinking)
    ids = encode(encode.rendered(_key("head", head, options), lambda: _render_text(tokenizer, head, {}, options)))
    for index, after in zip(replies, runs):
        ids.extend(message_ids(encode, messages[index]))
        ids.extend(encode.continued(after))
    return ids


class _NotExact(Exception):
    """The template's history cannot be cut at a reply (the reply dropped, repeated or first)."""


def _runs_after_replies(
    tokenizer: Any, messages: Sequence[Message], replies: list[int], encode: TextEncoder, final: bool | None
) -> list[str]:
    """For each reply, the text the template puts after it up to the next reply's generation
    prompt (the last: up to this turn's), with the stop token moved right after the reply."""
    if replies[0] == 0:
        raise _NotExact  # no generation prompt came before the first reply
    ends = [*replies[1:], len(messages)]
    options = [_options(encode, messages[end].thinking if end < len(messages) else final) for end in ends]
    try:
        return [encode.rendered(_key("after", messages[:end], opts),
                                partial(_run_after, tokenizer, messages[:end], encode, opts))
                for end, opts in zip(ends, options)]
    except Exception as error:  # noqa: BLE001 - a template refusing a shorter chat: the whole one decides
        raise _NotExact from error


def _options(encode: TextEncoder, thinking: bool | None) -> dict[str, Any]:
    """The template options for a generation prompt: the thinking switch where the template has
    one and a choice was made, else none (the template's default)."""
    return {"enable_thinking": thinking} if thinking is not None and encode.supports_thinking else {}


def _key(kind: str, messages: Sequence[Message], options: dict[str, Any]) -> tuple[object, ...]:
    """What a rendering of `messages` depends on: roles and texts, not the replies' texts (a
    reply renders as its sentinel) nor their ids, and the template options."""
    return (kind, tuple(sorted(options.items())), *((m.role, None if m.role == "assistant" else m.text)
                                                    for m in messages))


def _run_after(tokenizer: Any, messages: Sequence[Message], encode: TextEncoder, options: dict[str, Any]) -> str:
    """The text after the last reply of `messages` (the generation prompt included)."""
    nonce = secrets.token_hex(6)
    sentinels = {i: f"LOGITSCOPE{nonce}REPLY{i}END" for i, m in enumerate(messages) if m.role == "assistant"}
    parts = _render_text(tokenizer, messages, sentinels, options).split(sentinels[max(sentinels)])
    if len(parts) != 2 or f"LOGITSCOPE{nonce}" in parts[1]:
        raise _NotExact
    return _stop_token_first(parts[1], encode.stop_texts)


def _stop_token_first(text: str, stops: Sequence[str]) -> str:
    """`text` without the whitespace a template puts between a reply and its stop token.

    Why: a model that ends its reply writes the stop token right after its last token; a
    template such as Llama-2's renders ``' ' + eos_token`` there, a space the model never wrote.
    """
    stripped = text.lstrip()
    return stripped if any(stop and stripped.startswith(stop) for stop in stops) else text


def _render_text(
    tokenizer: Any, messages: Sequence[Message], sentinels: dict[int, str], options: dict[str, Any]
) -> str:
    """The template's text for `messages` with the generation prompt; the replies listed in
    `sentinels` rendered as their sentinel instead of their text; `options` (`_options`) passed
    to the template."""
    dicts = [{"role": m.role, "content": sentinels.get(i, m.text)} for i, m in enumerate(messages)]
    try:
        text = tokenizer.apply_chat_template(dicts, tokenize=False, add_generation_prompt=True, **options)
    except EngineError:  # the watchdog's "ran for over 5 s", already naming the template
        raise
    except Exception as error:  # noqa: BLE001 - a stranger's program: its raise_exception, a Jinja error
        # Said as the template's, not as "Generation failed": the model's files are what to fix.
        raise EngineError(f"The model's chat template failed: {error_line(error)}") from None
    if not isinstance(text, str):
        raise EngineError("The model's chat template did not render to text.")
    return text


def _render_spliced(
    tokenizer: Any, messages: Sequence[Message], encode: TextEncoder, final: bool | None,
    as_text: frozenset[int] | set[int] = frozenset(),
) -> list[int]:
    """The whole conversation rendered once, each reply's ids spliced where its sentinel stands
    (for templates whose history cannot be cut at each reply); the replies in `as_text` are
    given to the template as their text, rendered its way."""
    nonce = secrets.token_hex(6)
    sentinels = {i: f"LOGITSCOPE{nonce}REPLY{i}END" for i, m in enumerate(messages)
                 if m.role == "assistant" and i not in as_text}
    spliced = {sentinels[i]: message_ids(encode, messages[i]) for i in sentinels}
    return _splice(encode, _render_text(tokenizer, messages, sentinels, _options(encode, final)), spliced)


# Any sentinel, whatever its nonce: one pattern compiled once (a per-call one cost ~0.1 ms a turn).
_SENTINEL = re.compile("(LOGITSCOPE[0-9a-f]{12}REPLY\\d+END)")


def _splice(encode: TextEncoder, text: str, spliced: dict[str, list[int]]) -> list[int]:
    """Tokenize the rendered text between sentinels and put each reply's ids where it stood.

    A template that drops or repeats a message is respected: each sentinel found is replaced.
    Text that only looks like a sentinel (another nonce) stays in its text run, tokenized whole.
    """
    ids: list[int] = []
    run: list[str] = []
    for part in _SENTINEL.split(text):
        if part not in spliced:
            run.append(part)
            continue
        ids.extend(encode.continued("".join(run)) if ids else encode("".join(run)))
        ids.extend(spliced[part])
        run = []
    ids.extend(encode.continued("".join(run)) if ids else encode("".join(run)))
    return ids


PLAIN_SEPARATOR = "\n\n"  # between a model without a chat template's turns (README, "GGUF files")


def _render_plain(tokenizer: Any, messages: Sequence[Message], encode: TextEncoder) -> list[int]:
    """A model without a chat template continues plain text: bos, the first message, then each
    message after it. A reply continues the text it answers directly (that is what such a model
    does); any other message starts after `PLAIN_SEPARATOR`, so a new question is never glued
    to the end of the last reply ("...the capital of France isAnd Italy?")."""
    bos = getattr(tokenizer, "bos_token_id", None)
    ids: list[int] = [bos] if bos is not None else []
    first = messages[0]
    ids.extend(encode(first.text) if first.token_ids is None else first.token_ids)
    for message in messages[1:]:
        if message.role == "assistant":
            ids.extend(message_ids(encode, message))
        else:
            ids.extend(encode.continued(PLAIN_SEPARATOR + message.text))
    return ids
