"""Where a reasoning model's ``<think>…</think>`` block ends in a reply, for folding it.

Why by token: the fold hides whole tokens (the reply's tokens stay the reply's, each still
inspectable once unfolded), so the block ends after the token that completes ``</think>`` and the
whitespace-only tokens right after it (the blank lines before the answer).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from engine.core.api import TokenEvent

OPEN, CLOSE = "<think>", "</think>"


@dataclass(frozen=True)
class ThinkingBlock:
    """Tokens [0, end) are the thinking; `closed`: its ``</think>`` has arrived."""

    end: int
    closed: bool

    def label(self, folded: bool) -> str:
        """The one dim line that stands for the block (data-free: only a count)."""
        state = "" if self.closed else " (still thinking)"
        if folded:
            return f"▸ thinking… {self.end} tokens{state}  (z unfolds)"
        return f"▾ thinking: {self.end} tokens{state}  (z folds)"


def thinking_block(tokens: Sequence[TokenEvent]) -> ThinkingBlock | None:
    """The reply's leading thinking block, or None when the reply does not open with one."""
    text = ""
    end = None
    for index, token in enumerate(tokens):
        text += token.text
        if end is None:
            head = text.lstrip()
            if not (head.startswith(OPEN) or OPEN.startswith(head)):
                return None
            if CLOSE in head:
                end = index + 1
        elif token.text.strip():
            break
        else:
            end = index + 1
    if end is not None:
        return ThinkingBlock(end, True)
    return ThinkingBlock(len(tokens), False) if text.lstrip().startswith(OPEN) else None
