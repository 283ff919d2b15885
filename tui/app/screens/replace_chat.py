"""Ask before the live conversation is lost: replaced (a new chat, a resumed one) while the
library cannot keep it, or cut (a delete).

A chat is normally committed to the conversation library before it is replaced, and nothing is
asked. When the library cannot take it (locked, read-only, damaged), or when the live chat itself
is cut (the library follows the live chat, so it would not keep the old version), going on without
a word would lose it for good: this dialog offers to keep a copy first (a chat of its own in the
library, else a rescue file the next start imports), to drop it, or to change nothing.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Label

from tui.app.bindings import bindings_for
from tui.app.safe_text import literal
from tui.app.screens.dialogs import Dialog

SAVE, DISCARD = "save", "discard"


class ReplaceChatDialog(Dialog):
    """Dismisses with SAVE, DISCARD or None (Esc, Cancel: keep the chat as it is)."""

    AUTO_FOCUS = f"#{SAVE}"  # Enter saves: the choice that loses nothing

    DEFAULT_CSS = "ReplaceChatDialog Label { width: 100%; height: auto; }"  # long lines wrap, never clip
    BINDINGS = bindings_for("replace")

    def __init__(self, action: str, messages: int) -> None:
        """`action`: what replaces the chat ("Start a new chat"); `messages`: how long it is."""
        super().__init__()
        self.action, self.messages = action, messages

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(literal(f"{self.action}? The chat as it is now ({self.messages} messages) would be "
                                 "kept nowhere."))
            yield Label("S keeps a copy first (in the library, else a file), D discards it, Esc keeps it.",
                        classes="hint")
            with Horizontal():
                yield Button("Cancel", id="cancel")
                yield Button("Discard", id=DISCARD, variant="error")
                yield Button("Save and continue", id=SAVE, variant="primary")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id if event.button.id in (SAVE, DISCARD) else None)

    def action_choose(self, choice: str) -> None:
        self.dismiss(choice)

    def action_cancel(self) -> None:
        self.dismiss(None)
