"""Ask before the live conversation is replaced (a new chat, a resumed one).

Until there is a conversation library, replacing a chat without a word lost it for good (after
Ctrl+L then Ctrl+Q the chat that was live was in no file). This dialog offers to keep it in a
file of its own first, to drop it, or to change nothing.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Label

from tui.safe_text import literal
from tui.screens.dialogs import Dialog

SAVE, DISCARD = "save", "discard"


class ReplaceChatDialog(Dialog):
    """Dismisses with SAVE, DISCARD or None (Esc, Cancel: keep the chat as it is)."""

    AUTO_FOCUS = f"#{SAVE}"  # Enter saves: the choice that loses nothing

    DEFAULT_CSS = "ReplaceChatDialog Label { width: 100%; height: auto; }"  # long lines wrap, never clip
    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="replace.cancel", tooltip="Keep the current chat"),
        Binding("s", "choose('save')", "Save", id="replace.save", tooltip="Save the chat to a file, then go on"),
        Binding("d", "choose('discard')", "Discard", id="replace.discard", tooltip="Drop the chat and go on"),
    ]

    def __init__(self, action: str, messages: int) -> None:
        """`action`: what replaces the chat ("Start a new chat"); `messages`: how long it is."""
        super().__init__()
        self.action, self.messages = action, messages

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(literal(f"{self.action}? The current chat ({self.messages} messages) is not saved."))
            yield Label("S saves it to a file first, D discards it, Esc keeps it.", classes="hint")
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
