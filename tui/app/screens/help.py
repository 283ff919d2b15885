"""The help screen: what the numbers mean, then every key, its binding id (for `[keys]` in
config.toml) and what it does.

The numbers come first: a key list says how to reach a number, not what "sampled 0.4%" means.
"""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import DataTable, Label, Static

from tui.app.bindings import bindings_for, key_table
from tui.app.safe_text import printable

# Two lines each, in the words of engine/core/api.py's definitions.
NUMBERS = (
    ("p raw", "the model's own probability of the token, before temperature",
     "and filters. Heatmap (F3) and bars show it; u: % or log p."),
    ("sampled", "its probability where it was drawn from: after temperature,",
     "top-k, top-p and min-p. — : a filter removed it."),
    ("rank", "its place among all tokens by p raw: 1 = the favourite.",
     "Above 1: sampling picked a less likely token than the top."),
    ("entropy", "how spread p raw is, in nats: 0 = sure, 0.69 = a coin flip,",
     "2.3 = ten equal choices. F3 twice colours tokens by it."),
)

_WHERE = {"app": "anywhere", "screen": "chat", "input": "input", "transcript": "transcript",
          "candidates": "candidates", "params": "parameters", "dialog": "dialogs", "text_dialog": "text dialogs",
          "messages": "message picker", "picker": "model picker", "library": "library", "replace": "keep-it dialog",
          "help": "help"}


class HelpScreen(ModalScreen[None]):
    """A table of bindings with the user's keymap applied."""

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > Vertical { width: 95%; height: 90%; border: thick $primary; background: $surface; }
    HelpScreen DataTable { height: 1fr; }
    HelpScreen #numbers-box { height: auto; max-height: 60%; scrollbar-size-vertical: 1; }
    HelpScreen #numbers { height: auto; padding: 0 1 1 1; }
    HelpScreen #problems { height: auto; padding: 0 1 1 1; color: $warning; }
    """
    BINDINGS = bindings_for("help")

    def __init__(self, keymap: dict[str, str], problems: list[str] | None = None) -> None:
        """`problems`: the config's problem lines, listed first (start-up shows only one toast)."""
        super().__init__()
        self.keymap = keymap
        self.problems = problems or []

    def compose(self) -> ComposeResult:
        with Vertical():
            with VerticalScroll(id="numbers-box"):  # a small terminal scrolls it, the keys stay
                if self.problems:
                    yield Static(problems_text(self.problems), id="problems")
                yield Static(numbers_text(), id="numbers")
            yield Label(" Keys — rebind any of them by id in \\[keys] of config.toml. Esc closes.")
            yield DataTable(zebra_stripes=True, cursor_type="row")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("key", "action", "where", "binding id")
        for binding_id, key, description, where in key_table(self.keymap):
            table.add_row(key_display(self.app, key), description, _WHERE.get(where, where), binding_id)
        table.focus()


def problems_text(problems: list[str]) -> Text:
    """The config's problems, one per line: they quote the user's files, so shown literally."""
    text = Text(f"Config problems ({len(problems)})", style="bold")
    for line in problems:
        text.append(f"\n• {printable(line)}")
    return text


def key_display(app: App[object], keys: str) -> str:
    """Keys as the footer shows them (``^q``, ``[``, ``⏎``), not Textual's names
    (``ctrl+q``, ``left_square_bracket``); several keys joined with `` / ``."""
    return " / ".join(app.get_key_display(Binding(key.strip(), "")) for key in keys.split(",") if key.strip())


def numbers_text() -> Group:
    """The numbers, each name bold in a column of its own and its text wrapping beside it."""
    table = Table.grid(padding=(0, 2))
    table.add_column(justify="right", style="bold", no_wrap=True)
    table.add_column(ratio=1)
    for name, first, second in NUMBERS:
        table.add_row(name, f"{first}\n{second}")
    return Group(Text("What the numbers mean", style="bold"), table)
