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

BAR_WIDTH = 12


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
        self.watch(self.app, "theme", lambda _: self.refresh(), init=False)

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
        variables = self.app.theme_variables
        table = Table.grid(padding=(0, 1))
        for _ in range(4):
            table.add_column()
        for i, cand in enumerate(token.candidates):
            p_raw = math.exp(cand.logprob)
            removed = cand.sampled_prob == 0
            colour = variables.get("prob-bar-removed" if removed else "prob-bar", "")
            key = str((i + 1) % 10) if i < 10 else " "
            mark = "▶" if cand.id == token.id else " "
            row_style = "reverse" if i == self.row and self.has_focus else ""
            label = Text(f"{key}{mark}{visible(cand.text)[:14]:<14}", style=row_style)
            raw_bar = Text(bar(p_raw, BAR_WIDTH), style=colour or "")
            sampled = Text(f"{p_raw:6.1%} " + ("  —  " if removed else f"s {cand.sampled_prob:5.1%}"),
                           style=variables.get("prob-bar-sampled", "") if not removed else "dim")
            table.add_row(label, raw_bar, sampled)
        if not token.candidates:
            table.add_row(Text("candidates are off (c/C to change)", style="dim"))
        return table

    def action_cursor(self, step: int) -> None:
        if self.token is not None and self.token.candidates:
            self.row = (self.row + step) % len(self.token.candidates)

    def action_choose(self) -> None:
        if self.token is not None and self.token.candidates:
            self.post_message(CandidateChosen(self.row))
