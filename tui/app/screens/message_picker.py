"""Pick one message of the visible conversation (to edit and resend, or to delete with what
follows): one row per message, newest last and highlighted, its start shown literally."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option

from engine.core.chat.conversation import Node
from tui.app.bindings import bindings_for
from engine.core.text import shortened
from tui.app.safe_text import literal, printable
from tui.app.screens.dialogs import Dialog

PREVIEW = 60  # characters of each message shown in its row


def row_text(number: int, node: Node) -> str:
    """"3  you: the first line of the message…" (untrusted text: made printable)."""
    text = node.version.reply_text().strip().replace("\n", " ")
    short = shortened(text, PREVIEW, say_cut=False)
    who = "you" if node.role == "user" else node.role
    return printable(f"{number:>3}  {who}: {short}")


class MessagePicker(Dialog):
    """Dismisses with the index (into `nodes`) of the chosen message, or None (Esc)."""

    DEFAULT_CSS = "MessagePicker Label { width: 100%; height: auto; }"  # long lines wrap, never clip
    BINDINGS = bindings_for("messages")

    def __init__(self, title: str, nodes: list[Node]) -> None:
        """`nodes`: the messages the user may choose from, in conversation order."""
        super().__init__()
        self.title_text, self.choices = title, nodes

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(literal(f"{self.title_text}  (Enter chooses, Esc cancels)"))
            # literal: an OptionList reads a str prompt as markup ("[/]" in a message crashed it)
            yield OptionList(*[Option(literal(row_text(n + 1, node))) for n, node in enumerate(self.choices)])

    def on_mount(self) -> None:
        self.call_after_refresh(self._start_at_the_newest)  # the list may not be mounted yet

    def _start_at_the_newest(self) -> None:
        options = self.query_one(OptionList)
        options.highlighted = len(self.choices) - 1
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option_index)

    def action_cancel(self) -> None:
        self.dismiss(None)


__all__ = ["MessagePicker", "row_text"]
