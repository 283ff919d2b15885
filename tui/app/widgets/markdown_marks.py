"""Markdown highlighting of a reply's exact text: where each construct is, never a re-layout.

Why not a Markdown renderer: it re-wraps paragraphs, turns ``-`` into ``•``, hides ``**`` and
adds margins, so the reply reflowed the moment the token cursor entered it (the token view shows
the model's text as it is). Here the text stays exactly as the model wrote it, character for
character; this module only says which ranges are a heading, bold, code, a list marker..., and
the token view styles them in place. The markers stay, dimmed.

Line by line, as Markdown's blocks are; only a code fence carries over from one line to the
next. Pure: no Textual, so it is tested on strings.
"""

from __future__ import annotations

import re
from typing import Literal

from engine.core.chat.code_blocks import code_blocks
from tui.app.widgets.code_colours import syntax_marks

Role = Literal["marker", "heading", "strong", "emph", "code", "bullet", "quote", "link",
               "kw", "str", "comment", "num", "name"]  # the last five: fenced code by language
Mark = tuple[int, int, Role]  # [start, end) of the text, and what it is

_FENCE = re.compile(r" {0,3}(```+|~~~+)")
_HEADING = re.compile(r" {0,3}(#{1,6})(?:[ \t]|$)")
_RULE = re.compile(r" {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_QUOTE = re.compile(r" {0,3}>")
_BULLET = re.compile(r"[ \t]*([-*+]|\d{1,9}[.)])(?=[ \t])")
# Inline spans are at most SPAN characters long: each unclosed opener then costs O(SPAN), not
# O(line) (a 15,000-character line of "*a " took 0.5 s to search unbounded).
SPAN = 300
_CODE = re.compile(r"(`+)(?=[^`])(.{1,%d}?)(?<=[^`])\1(?!`)" % SPAN)
_STRONG = re.compile(r"(\*\*|__)(?=\S)(.{1,%d}?)(?<=\S)\1" % SPAN)
_EMPH = re.compile(r"(?<![*\w])\*(?=[^\s*])(.{1,%d}?)(?<=[^\s*])\*(?!\*)"
                   r"|(?<![_\w])_(?=[^\s_])(.{1,%d}?)(?<=[^\s_])_(?![_\w])" % (SPAN, SPAN))
_LINK = re.compile(r"\[([^\]\n]{1,%d})\]\(([^)\s]{1,%d})\)" % (SPAN, SPAN))
MASK = "\x00"  # stands in for a code span's characters while the other inline marks are found


def markdown_marks(text: str) -> list[Mark]:
    """Every construct's range in `text`, in the order they should be applied (inner last)."""
    marks: list[Mark] = []
    fence: str | None = None
    start = 0
    for line in text.split("\n"):
        fence = _line_marks(line, start, fence, marks)
        start += len(line) + 1
    for block in code_blocks(text):  # after the lines' "code": the language's colours go over it
        marks.extend(syntax_marks(text[block.start:block.end], block.start, block.language))
    return marks


def _line_marks(line: str, at: int, fence: str | None, marks: list[Mark]) -> str | None:
    """Marks of one line starting at offset `at`; returns the fence still open after it."""
    opened = _FENCE.match(line)
    if fence is not None:
        closes = opened is not None and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence)
        marks.append((at, at + len(line), "marker" if closes else "code"))
        return None if closes else fence
    if opened is not None:
        marks.append((at, at + len(line), "marker"))
        return opened.group(1)
    if _RULE.match(line):
        marks.append((at, at + len(line), "marker"))
        return None
    heading = _HEADING.match(line)
    if heading is not None:
        marks.append((at, at + heading.end(1), "marker"))
        marks.append((at + heading.end(1), at + len(line), "heading"))
    body = _block_marks(line, at, marks) if heading is None else heading.end(1)
    _inline_marks(line, at, body, marks)
    return None


def _block_marks(line: str, at: int, marks: list[Mark]) -> int:
    """A quote's ``>`` and a list item's bullet; returns where the line's inline text starts."""
    body = 0
    quote = _QUOTE.match(line)
    if quote is not None:
        marks.append((at, at + quote.end(), "marker"))
        marks.append((at + quote.end(), at + len(line), "quote"))
        body = quote.end()
    bullet = _BULLET.match(line, body)
    if bullet is not None:
        marks.append((at + bullet.start(1), at + bullet.end(1), "bullet"))
        body = bullet.end()
    return body


def _inline_marks(line: str, at: int, body: int, marks: list[Mark]) -> None:
    """Code spans first (nothing inside them is Markdown), then links, bold and italics."""
    masked = line
    for code in _CODE.finditer(line, body):
        ticks = len(code.group(1))
        marks.append((at + code.start(), at + code.start() + ticks, "marker"))
        marks.append((at + code.start() + ticks, at + code.end() - ticks, "code"))
        marks.append((at + code.end() - ticks, at + code.end(), "marker"))
        masked = masked[:code.start()] + MASK * (code.end() - code.start()) + masked[code.end():]
    for link in _LINK.finditer(masked, body):
        marks.append((at + link.start(), at + link.start(1), "marker"))
        marks.append((at + link.start(1), at + link.end(1), "link"))
        marks.append((at + link.end(1), at + link.end(), "marker"))
    for pattern, role in ((_STRONG, "strong"), (_EMPH, "emph")):
        for found in pattern.finditer(masked, body):
            inner = 2 if role == "strong" else 1
            marks.append((at + found.start(), at + found.start() + inner, "marker"))
            marks.append((at + found.start() + inner, at + found.end() - inner, role))  # type: ignore[arg-type]
            marks.append((at + found.end() - inner, at + found.end(), "marker"))
