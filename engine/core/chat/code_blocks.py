"""Fenced code blocks of a reply (#30.6): what "copy the code block" copies and what the
transcript colours by language.

Pure string work, the same fence rule as the transcript's Markdown marks (a line opening with
three or more backticks or tildes; closed by a line of at least as many of the same). A block
never closed (a reply cut short) runs to the end of the text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from engine.core.chat.conversation import Conversation, Node

_FENCE = re.compile(r" {0,3}(```+|~~~+)[ \t]*([^\s`]*)")
Cursor = tuple[Node, int] | None


@dataclass(frozen=True)
class CodeBlock:
    """One fenced block: [start, end) of its body in the text (the lines between the fences),
    and the language named after the opening fence ("" when none)."""

    start: int
    end: int
    language: str


def code_blocks(text: str) -> list[CodeBlock]:
    """Every fenced block of `text`, in order."""
    blocks: list[CodeBlock] = []
    fence: str | None = None
    language, body = "", 0
    at = 0
    for line in text.split("\n"):
        opened = _FENCE.match(line)
        if fence is None and opened is not None:
            fence, language, body = opened.group(1), opened.group(2).lower(), at + len(line) + 1
        elif fence is not None and opened is not None and opened.group(1)[0] == fence[0] \
                and len(opened.group(1)) >= len(fence) and not opened.group(2):
            blocks.append(CodeBlock(body, max(body, at - 1), language))
            fence = None
        at += len(line) + 1
    if fence is not None:
        blocks.append(CodeBlock(min(body, len(text)), len(text), language))
    return blocks


def code_block_text(conversation: Conversation, cursor: Cursor) -> str | None:
    """The code of the block holding the token cursor; with no cursor in a block, the last block
    of the reply holding the cursor, else of the last reply that has one (None: no block)."""
    if cursor is not None:
        node, index = cursor
        tokens = node.version.tokens or []
        text = "".join(t.text for t in tokens)
        offset = sum(len(t.text) for t in tokens[:index])
        blocks = code_blocks(text)
        inside = [b for b in blocks if b.start <= offset < max(b.end, b.start + 1)]
        chosen = inside[0] if inside else (blocks[-1] if blocks else None)
        if chosen is not None:
            return text[chosen.start:chosen.end]
    for node in reversed(conversation.path()):
        if node.role != "assistant":
            continue
        text = node.version.reply_text()
        blocks = code_blocks(text)
        if blocks:
            return text[blocks[-1].start:blocks[-1].end]
    return None
