"""`PlainInput`: a one-line `Input` whose pastes are defused (`tui.app.safe_text.pasted`).

Textual's Input draws what it holds raw, so a pasted ESC sequence would reach the terminal on
every repaint; a key press can never put one there, a paste can.
"""

from __future__ import annotations

from textual.events import Paste
from textual.widgets import Input

from tui.app.safe_text import pasted


class PlainInput(Input):
    """An Input for the dialogs: a value, a model folder or repo id."""

    def _on_paste(self, event: Paste) -> None:
        """Runs before Input's own handler (Textual calls each class's, subclass first)."""
        event.text = pasted(event.text)
