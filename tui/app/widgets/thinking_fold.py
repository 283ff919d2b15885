"""Where a reasoning model's thinking ends in a reply, for folding it: a ``<think>…</think>``
block, one the prompt opened (the reply holds only ``…</think>``), or GPT-OSS's harmony analysis
channel before its final one (the styles: `engine.core.thinking`).

Why by token: the fold hides whole tokens (the reply's tokens stay the reply's, each still
inspectable once unfolded), so the block ends after the token that completes its end marker and
the whitespace-only tokens right after it (the blank lines before the answer).
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from itertools import accumulate
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
    style: Style | None = OPENED_BY_PROMPT if opened else None
    first, text = 0, ""  # the token that decided the style (its close may be in it)
    if style is None:
        for first, token in enumerate(tokens):  # the reply's first text decides (a few tokens)
            text += token.text
            head = text.lstrip()
            style = _style_of(head)
            if style is not None:
                break
            if head and not any(s.open.startswith(head) for s in STYLES):
                return _opened_by_prompt(tokens)
        if style is None:
            return None
    found = _find(tokens, style.close)
    if found is None:
        return ThinkingBlock(len(tokens), False)
    return ThinkingBlock(_after_blank(tokens, max(first, found) + 1), True)


def _find(tokens: Sequence[TokenEvent], marker: str, before: str = "") -> int | None:
    """The token that completes the first `marker` in the reply's text, None if none does or
    `before` occurs ahead of it. One search of the joined text, so a streaming reply's check
    costs O(reply) a flush (it added a token at a time and searched the text so far: O(reply²),
    ~1 ms a flush at 4,000 tokens, which held a fast stream to ~250 tok/s)."""
    joined = "".join([token.text for token in tokens])
    found = joined.find(marker)
    if found < 0 or (before and before in joined[:found + len(marker)]):
        return None
    return bisect_left(list(accumulate(len(token.text) for token in tokens)), found + len(marker))


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
    found = _find(tokens, OPENED_BY_PROMPT.close, before=THINK_OPEN)
    return None if found is None else ThinkingBlock(_after_blank(tokens, found + 1), True)


def _after_blank(tokens: Sequence[TokenEvent], end: int) -> int:
    """`end` moved past the whitespace-only tokens that follow the block."""
    while end < len(tokens) and not tokens[end].text.strip():
        end += 1
    return end
