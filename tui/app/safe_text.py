"""Untrusted text (model tokens, file and folder names, config values, saved conversations, error
messages quoting any of them) as something a widget can show: literally, never as markup, with
every terminal control character made visible (`engine.core.settings.printable`).

Widgets and screens build their content from untrusted strings only through `literal`; the app's
`notify` does the same for every notification. Textual reads a plain `str` given to a `Label`, a
`Static`, a border title or a toast as markup, where ``[/]`` raises `MarkupError` (the app dies)
and ``[bold]x[/]`` silently loses its brackets; a `Content` is never parsed.
"""

from __future__ import annotations

from textual.content import Content

from engine.core.settings import printable

__all__ = ["literal", "pasted", "printable"]


def literal(text: str, style: str = "") -> Content:
    """`text` exactly as it is, controls made visible, in one optional `style`."""
    return Content.styled(printable(text), style) if style else Content(printable(text))


def pasted(text: str) -> str:
    """A paste, as an input should take it: line ends from other systems (CRLF, CR) become
    newlines, every other control character is made visible. Textual's TextArea and Input
    draw what they hold raw, and a paste is the one way a control character gets in (a key
    press arrives as a key, never as ESC)."""
    return printable(text.replace("\r\n", "\n").replace("\r", "\n"))
