"""What a chat template does with a reasoning model's thinking, asked once at load by rendering
two probe conversations (no model run): whether its generation prompt opens a ``<think>`` block
(DeepSeek-R1 distills, QwQ, Qwen3-*-Thinking-2507: the reply then thinks from its first token and
holds only ``…</think>``), and whether it drops an earlier reply's thinking from the history
(Qwen3's does, as its model card asks), which decides the default of "past thinking"
(`engine.core.chat.conversation.Conversation.messages`, drop_thinking).

Pure tokenizer work, no MLX. A template that fails on a probe says "no" (it renders as before).
"""

from __future__ import annotations

from typing import Any

from engine.core.thinking import THINK_CLOSE, THINK_OPEN

_THOUGHT, _ANSWER = "LOGITSCOPETHOUGHT", "LOGITSCOPEANSWER"


def opens_thinking(tokenizer: Any) -> bool:
    """Whether the generation prompt (the template's default) ends inside a ``<think>`` block."""
    text = _render(tokenizer, [{"role": "user", "content": "hello"}])
    return text is not None and text.rstrip().endswith(THINK_OPEN)


def drops_past_thinking(tokenizer: Any) -> bool:
    """Whether an earlier reply's ``<think>`` block is left out of the history it renders."""
    reply = f"{THINK_OPEN}\n{_THOUGHT}\n{THINK_CLOSE}\n\n{_ANSWER}"
    text = _render(tokenizer, [{"role": "user", "content": "hello"}, {"role": "assistant", "content": reply},
                               {"role": "user", "content": "and then"}])
    return text is not None and _ANSWER in text and _THOUGHT not in text


def _render(tokenizer: Any, messages: list[dict[str, str]]) -> str | None:
    if not getattr(tokenizer, "has_chat_template", False) and not getattr(tokenizer, "chat_template", None):
        return None
    try:
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    except Exception:  # noqa: BLE001 - a template that refuses the probe: no such behaviour assumed
        return None
    return text if isinstance(text, str) else None
