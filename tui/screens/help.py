"""The help screen: every key, its binding id (for `[keys]` in config.toml) and what it does."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Label

from tui.bindings import key_table

_WHERE = {"app": "anywhere", "screen": "chat", "input": "input", "transcript": "transcript",
          "candidates": "candidates", "params": "parameters"}


class HelpScreen(ModalScreen[None]):
    """A table of bindings with the user's keymap applied."""

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > Vertical { width: 95%; height: 90%; border: thick $primary; background: $surface; }
    HelpScreen DataTable { height: 1fr; }
    """
    BINDINGS = [Binding("escape,f1,q", "app.pop_screen", "Close", id="help.close", tooltip="Close help")]

    def __init__(self, keymap: dict[str, str]) -> None:
        super().__init__()
        self.keymap = keymap

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(" Keys — rebind any of them by id in \\[keys] of config.toml. Esc closes.")
            yield DataTable(zebra_stripes=True, cursor_type="row")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("key", "action", "where", "binding id")
        for binding_id, key, description, where in key_table(self.keymap):
            table.add_row(key, description, _WHERE.get(where, where), binding_id)
        table.focus()
