"""The multi-line chat input: Enter sends, Shift+Enter / Ctrl+J insert a newline, Up/Down on the
first/last line recall earlier messages (like a shell). A pause in typing is announced
(`DraftPaused`), so the engine can read a long message before it is sent."""

from __future__ import annotations

from textual import on
from textual.events import Paste
from textual.timer import Timer
from textual.widgets import TextArea

from tui.app.bindings import bindings_for
from tui.app.messages import DraftPaused, Submitted
from tui.app.safe_text import pasted

DRAFT_PAUSE_S = 0.4  # typing stopped this long: the draft is worth reading ahead
PLACEHOLDER = "Message the model · Enter sends · Ctrl+J new line"


class ChatInput(TextArea):
    """A TextArea that posts `Submitted` and keeps what was sent (`sent`) for recall."""

    DEFAULT_CSS = """
    ChatInput { height: auto; min-height: 3; max-height: 10; border: tall $border-blurred; }
    ChatInput:focus { border: tall $border; }
    """
    BINDINGS = bindings_for("input")

    def __init__(self, **kwargs: object) -> None:
        super().__init__(soft_wrap=True, show_line_numbers=False, placeholder=PLACEHOLDER,
                         **kwargs)  # type: ignore[arg-type]
        self.sent: list[str] = []
        self._history_at: int | None = None  # index into history while recalling
        self._draft = ""
        self._pause: Timer | None = None  # restarted by every edit; fires DraftPaused

    def _on_paste(self, event: Paste) -> None:
        """Defuse a paste (`tui.app.safe_text.pasted`) before TextArea's own handler, which Textual
        calls after this one, inserts it: an ESC in it never reaches the terminal, now or when
        it is shown as a sent message."""
        event.text = pasted(event.text)

    def action_send(self) -> None:
        """Send once the keys typed before Enter are in the text.

        The binding is a priority one, so the app runs it as soon as Enter arrives, while
        characters typed just before it (a fast typist, a pasted line, tmux send-keys) may still
        wait in this widget's queue; queueing the send behind them keeps every character.
        """
        self.call_later(self._send_now)

    def _send_now(self) -> None:
        text = self.text.strip()
        if not text:
            return
        if not self.sent or self.sent[-1] != text:
            self.sent.append(text)
        self._history_at = None
        self.clear()
        self.post_message(Submitted(text))

    @on(TextArea.Changed)
    def _edited(self, event: TextArea.Changed) -> None:
        """Restart the pause timer: only a draft left alone for `DRAFT_PAUSE_S` is announced."""
        if event.text_area is not self:
            return
        if self._pause is not None:
            self._pause.stop()
        self._pause = self.set_timer(DRAFT_PAUSE_S, self._paused) if self.text.strip() else None

    def _paused(self) -> None:
        self._pause = None
        self.post_message(DraftPaused(self.text))

    def action_newline(self) -> None:
        self.insert("\n")

    def action_history(self, step: int) -> None:
        """Recall history on the edge line; elsewhere Up/Down move the cursor as usual."""
        row = self.cursor_location[0]
        on_edge = row == 0 if step < 0 else row == self.document.line_count - 1
        if not on_edge or not self.sent:
            self.action_cursor_up() if step < 0 else self.action_cursor_down()
            return
        if self._history_at is None:
            if step > 0:
                return
            self._draft, self._history_at = self.text, len(self.sent)
        self._history_at = max(0, self._history_at + step)
        if self._history_at >= len(self.sent):
            self._history_at = None
            self.load_text(self._draft)
        else:
            self.load_text(self.sent[self._history_at])
        self.move_cursor(self.document.end)

    def action_leave(self) -> None:
        """Escape: hand focus to the transcript, to inspect tokens."""
        self.screen.focus_next("Transcript")
