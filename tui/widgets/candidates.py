"""The candidates panel: for one token, what else the model considered, and how likely each was.

Dumb on purpose: the screen sets `token`; Enter on a row posts `CandidateChosen` up.
"""

from __future__ import annotations

import math

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from engine.api import TokenEvent
from tui.bindings import bindings_for
from tui.messages import CandidateChosen
from tui.widgets.render import bar, visible

BAR_WIDTH = 10
CHARS = 12  # of a candidate's text


class CandidatesPanel(Widget, can_focus=True):
    """Top candidates of the selected token with raw and sampled probability bars."""

    DEFAULT_CSS = """
    CandidatesPanel { height: 1fr; border: round $border-blurred; padding: 0 1; }
    CandidatesPanel:focus { border: round $border; }
    """
    BINDINGS = bindings_for("candidates")

    token: reactive[TokenEvent | None] = reactive(None)
    row: reactive[int] = reactive(0)
    streaming: reactive[bool] = reactive(False)

    def on_mount(self) -> None:
        self.border_title = "candidates"
        self.watch(self.app, "theme", self._theme_changed, init=False)

    def _theme_changed(self) -> None:
        self.refresh()  # bar colours come from the theme's variables

    def watch_token(self, token: TokenEvent | None) -> None:
        if token is None or self.row >= len(token.candidates):
            self.row = 0

    def render(self) -> RenderableType:
        token = self.token
        if token is None:
            return Text("Select a token: Esc to leave the input, then ←/→ (or click a token).", style="dim")
        return Group(self._summary(token), Text(""), self._table(token))

    def _summary(self, token: TokenEvent) -> Text:
        """The chosen token's numbers, named as api.py defines them."""
        p_raw = math.exp(token.logprob)
        text = Text()
        text.append(f"#{token.index} ", style="dim")
        text.append(f"{visible(token.text or token.piece)!s}", style="bold")
        text.append(f"\np raw {p_raw:6.1%}  sampled {token.sampled_prob:6.1%}")
        text.append(f"\nrank {token.rank}  entropy {token.entropy:.2f} nats")
        if self.streaming:
            text.append("  (newest)", style="italic dim")
        return text

    def _table(self, token: TokenEvent) -> Table:
        """key, token, raw bar, raw %, sampled % (— when a filter removed the candidate)."""
        variables = self.app.theme_variables
        table = Table.grid(padding=(0, 1))
        for justify in ("left", "left", "left", "right", "right"):
            table.add_column(justify=justify)  # type: ignore[arg-type]
        table.add_row("", "", "", Text("raw", style="dim"), Text("sampled", style="dim"))
        for i, cand in enumerate(token.candidates):
            p_raw = math.exp(cand.logprob)
            removed = cand.sampled_prob == 0
            chosen = cand.id == token.id
            key = str((i + 1) % 10) if i < 10 else " "
            row_style = "reverse" if i == self.row and self.has_focus else ""
            label_style = f"bold {variables.get('chosen-token', '')}" if chosen else ""
            table.add_row(
                Text(key + ("▶" if chosen else " "), style=row_style),
                Text(f"{visible(cand.text)[:CHARS]:<{CHARS}}", style=f"{label_style} {row_style}".strip()),
                Text(bar(p_raw, BAR_WIDTH), style=variables.get("prob-bar-removed" if removed else "prob-bar", "")),
                Text(f"{p_raw:.1%}"),
                Text("—" if removed else f"{cand.sampled_prob:.1%}",
                     style="dim" if removed else variables.get("prob-bar-sampled", "")),
            )
        if not token.candidates:
            table.add_row("", Text("candidates are off (c/C to change)", style="dim"))
        return table

    def action_cursor(self, step: int) -> None:
        if self.token is not None and self.token.candidates:
            self.row = (self.row + step) % len(self.token.candidates)

    def action_choose(self) -> None:
        if self.token is not None and self.token.candidates:
            self.post_message(CandidateChosen(self.row))
