"""Untrusted text (model tokens, file and folder names, config values, saved conversations, error
messages quoting any of them) as something a widget can show: literally, never as markup, with
every terminal control character made visible (`engine.settings.printable`).

Widgets and screens build their content from untrusted strings only through `literal`; the app's
`notify` does the same for every notification. Textual reads a plain `str` given to a `Label`, a
`Static`, a border title or a toast as markup, where ``[/]`` raises `MarkupError` (the app dies)
and ``[bold]x[/]`` silently loses its brackets; a `Content` is never parsed.
"""

from __future__ import annotations

from textual.content import Content

from engine.settings import printable

__all__ = ["literal", "printable"]


def literal(text: str, style: str = "") -> Content:
    """`text` exactly as it is, controls made visible, in one optional `style`."""
    return Content.styled(printable(text), style) if style else Content(printable(text))
