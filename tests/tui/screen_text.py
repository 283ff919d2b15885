"""Read what a headless app shows, as plain text lines (for asserting on the screen)."""

from __future__ import annotations

from textual.app import App


def screen_text(app: App[object]) -> str:
    """The whole screen as text, one line per row (what a user would read)."""
    strips = app.screen._compositor.render_strips()
    return "\n".join(strip.text.rstrip() for strip in strips)
