"""Turning what the user types into the library's filter: FTS5 where the database has it,
LIKE otherwise, always also matching the title (a renamed chat is found by its new name)."""

from __future__ import annotations

from typing import Any

MAX_TERMS = 12  # more words than this narrow nothing further; each costs a MATCH term


def terms(query: str) -> list[str]:
    """The words typed, in order, at most `MAX_TERMS`; quotes and operators are just text."""
    return query.split()[:MAX_TERMS]


def fts_expression(words: list[str]) -> str:
    """Every word as a quoted prefix term, all required: `"tok"* "cand"*`. Quoting makes FTS5
    syntax (AND, NEAR, ", *, :) in the typed text plain words, never an error."""
    return " ".join('"' + w.replace('"', '""') + '"*' for w in words)


def like_pattern(word: str) -> str:
    """`%word%` with LIKE's own wildcards escaped (ESCAPE '\\')."""
    return "%" + word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def where_clause(query: str, fts: bool) -> tuple[str, list[Any]]:
    """SQL after `WHERE deleted IS NULL AND ` and its parameters; ("1", []) for an empty query."""
    words = terms(query)
    if not words:
        return "1", []
    title = " AND ".join("title LIKE ? ESCAPE '\\'" for _ in words)
    title_args = [like_pattern(w) for w in words]
    if fts:
        body = "rowid IN (SELECT rowid FROM conversations_fts WHERE conversations_fts MATCH ?)"
        return f"({body} OR ({title}))", [fts_expression(words), *title_args]
    text = " AND ".join("(text LIKE ? ESCAPE '\\' OR title LIKE ? ESCAPE '\\')" for _ in words)
    return f"({text})", [p for w in words for p in (like_pattern(w), like_pattern(w))]
