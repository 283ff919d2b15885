"""Where a reasoning model's thinking ends in a reply, for folding it: a ``<think>…</think>``
block, one the prompt opened (the reply holds only ``…</think>``), or GPT-OSS's harmony analysis
channel before its final one (the styles: `engine.core.thinking`).

Why by token: the fold hides whole tokens (the reply's tokens stay the reply's, each still
inspectable once unfolded), so the block ends after the token that completes its end marker and
the whitespace-only tokens right after it (the blank lines before the answer).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from engine.core.api import TokenEvent
from engine.core.thinking import HARMONY, HARMONY_FINAL, OPENED_BY_PROMPT, STYLES, THINK_OPEN, Style

@dataclass(frozen=True)
class ThinkingBlock:
    """Tokens [0, end) are the thinking; `closed`: its end marker has arrived."""

    end: int
    closed: bool

    def label(self, folded: bool) -> str:
        """The one dim line that stands for the block (data-free: only a count)."""
        state = "" if self.closed else " (still thinking)"
        if folded:
            return f"▸ thinking… {self.end} tokens{state}  (z unfolds)"
        return f"▾ thinking: {self.end} tokens{state}  (z folds)"


def thinking_block(tokens: Sequence[TokenEvent], opened: bool = False) -> ThinkingBlock | None:
    """The reply's leading thinking block, or None when the reply does not open with one.

    `opened`: the generation prompt ended inside a ``<think>`` (the model's template opens it),
    so the reply is thinking from its first token, "still thinking" until ``</think>``. Without
    it, such a reply is still found once its ``</think>`` has arrived (a saved chat, a finished
    reply): no ``<think>`` before it.
    """
    style = OPENED_BY_PROMPT if opened else None
    text = ""
    for index, token in enumerate(tokens):
        text += token.text
        if style is None:
            head = text.lstrip()
            style = _style_of(head)
            if style is None:
                if head and not any(s.open.startswith(head) for s in STYLES):
                    return _opened_by_prompt(tokens)
                continue
        if style.close in text:
            return ThinkingBlock(_after_blank(tokens, index + 1), True)
    if style is None:
        return None
    return ThinkingBlock(len(tokens), False)


def _style_of(head: str) -> Style | None:
    """The style a reply's first text opens, None while undecided or none (a harmony reply that
    opens straight on its final channel thinks nothing)."""
    for style in STYLES:
        if head.startswith(style.open):
            if style is HARMONY and (head.startswith(HARMONY_FINAL) or HARMONY_FINAL.startswith(head)):
                return None
            return style
    return None


def _opened_by_prompt(tokens: Sequence[TokenEvent]) -> ThinkingBlock | None:
    """A finished ``…</think>`` reply whose ``<think>`` was the prompt's (none before its close)."""
    text = ""
    for index, token in enumerate(tokens):
        text += token.text
        if OPENED_BY_PROMPT.close in text:
            return None if THINK_OPEN in text else ThinkingBlock(_after_blank(tokens, index + 1), True)
    return None


def _after_blank(tokens: Sequence[TokenEvent], end: int) -> int:
    """`end` moved past the whitespace-only tokens that follow the block."""
    while end < len(tokens) and not tokens[end].text.strip():
        end += 1
    return end
