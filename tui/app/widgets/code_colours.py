"""Fenced code coloured by its language (#30.6), as more Markdown marks: ranges, never a re-layout.

Pygments (which Rich, and so Textual, already depend on) lexes the block's body when the fence
names a language it knows; each keyword, string, comment, number and definition name becomes a
mark the token view styles in place, over the block's "code" colour. A mark never crosses a
line end (the token view looks marks up per line). Pure: no Textual, tested on strings.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from pygments.lexer import Lexer  # type: ignore[import-untyped]
from pygments.lexers import get_lexer_by_name  # type: ignore[import-untyped]
from pygments.token import Comment, Keyword, Name, Number, String, _TokenType  # type: ignore[import-untyped]
from pygments.util import ClassNotFound  # type: ignore[import-untyped]

SyntaxRole = Literal["kw", "str", "comment", "num", "name"]
MAX_CODE = 20_000  # characters lexed per block: a huge block stays one colour, never slow

_ROLES: tuple[tuple[_TokenType, SyntaxRole], ...] = (
    (Comment, "comment"), (String, "str"), (Number, "num"), (Keyword, "kw"),
    (Name.Function, "name"), (Name.Class, "name"), (Name.Builtin, "name"), (Name.Decorator, "name"),
)


@lru_cache(maxsize=64)
def _lexer(language: str) -> Lexer | None:
    """The lexer a fence's language names ("python", "py", "js", ...), or None."""
    if not language:
        return None
    try:
        return get_lexer_by_name(language, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return None


def _role(kind: _TokenType) -> SyntaxRole | None:
    return next((role for parent, role in _ROLES if kind in parent), None)


def syntax_marks(code: str, at: int, language: str) -> list[tuple[int, int, SyntaxRole]]:
    """Marks for `code` (a block's body, at offset `at` of the reply), [] for an unknown language."""
    lexer = _lexer(language.lower())
    if lexer is None or not code or len(code) > MAX_CODE:
        return []
    marks: list[tuple[int, int, SyntaxRole]] = []
    for offset, kind, value in lexer.get_tokens_unprocessed(code):
        role = _role(kind)
        if role is None or not value:
            continue
        start = at + offset
        for part in value.split("\n"):  # one mark per line
            if part.strip():
                marks.append((start, start + len(part), role))
            start += len(part) + 1
    return marks
