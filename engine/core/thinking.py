"""How reasoning models mark their thinking in a reply, in every style met so far: one place that
the prompt renderer (which earlier replies hold thinking a template may drop) and the TUI's fold
(which tokens to hide) both read.

Styles:
- ``<think>…</think>`` written by the model (Qwen3 with thinking on);
- ``…</think>`` only, the ``<think>`` being the last text of the generation prompt (DeepSeek-R1
  distills, QwQ, Qwen3-*-Thinking-2507): the reply opens inside the block;
- GPT-OSS's harmony channels: ``<|channel|>analysis<|message|>…<|end|>`` messages before the
  ``<|channel|>final<|message|>`` answer.
"""

from __future__ import annotations

from dataclasses import dataclass

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
HARMONY_OPEN = "<|channel|>"  # a harmony reply opens with a channel; `HARMONY_FINAL` starts the answer
HARMONY_FINAL = "<|channel|>final<|message|>"


@dataclass(frozen=True)
class Style:
    """One way of marking thinking: `open` starts the block ("" where the prompt opened it),
    `close` ends it (the answer follows)."""

    open: str
    close: str


THINK_TAGS = Style(THINK_OPEN, THINK_CLOSE)
OPENED_BY_PROMPT = Style("", THINK_CLOSE)
HARMONY = Style(HARMONY_OPEN, HARMONY_FINAL)
STYLES = (THINK_TAGS, HARMONY)  # the styles a reply shows by its own first text


def holds_thinking(text: str) -> bool:
    """Whether a reply's text holds a closed ``<think>`` block (opened by it or by the prompt): a
    chat template that drops earlier turns' thinking drops this. Harmony replies are not meant:
    their templates take the thinking as a separate field, not inside the content."""
    close = text.find(THINK_CLOSE)
    if close < 0:
        return False
    before = text[:close]
    return before.lstrip().startswith(THINK_OPEN) or THINK_OPEN not in before


def answer_of(text: str) -> str:
    """The answer after a reply's thinking block (the whole text when it holds none)."""
    if not holds_thinking(text):
        return text
    return text.split(THINK_CLOSE, 1)[1].lstrip("\n")
