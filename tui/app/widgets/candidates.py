"""The candidates panel: for one token, what else the model considered, and how likely each was.

Dumb on purpose: the screen sets `token`; Enter on a row posts `CandidateChosen` up.
"""

from __future__ import annotations

import math

from rich.cells import set_cell_size
from rich.console import Group, RenderableType
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from engine.core.api import StageView, TokenEvent
from engine.core.forks import ForkRule
from tui.app.bindings import bindings_for
from tui.app.messages import CandidateBias, CandidateChosen
from tui.app.widgets.render import bar, log_text, percent, safe_log, visible
from tui.app.widgets.stage_table import last_offset, stage_table
from tui.app.widgets.text_grid import grid_text

BAR_WIDTH = 10
NUMBER_WIDTHS = (6, 7)  # the raw and sampled columns: "100.0%", "sampled" (a scrolled list keeps its columns)
FIXED_COLUMNS = 19  # key and marker, the two numbers, the gaps between the five columns
CHARS = 12  # of a candidate's text
SUMMARY_ROWS = 3  # the token, its probabilities, its rank and entropy
UNKNOWN = "—"  # a number a filter made 0 in the sampled column, or one a remote server does not send


class CandidatesPanel(Widget, can_focus=True):
    """Top candidates of the selected token with raw and sampled probability bars."""

    DEFAULT_CSS = """
    CandidatesPanel { height: 1fr; border: round $border-blurred; padding: 0 1; }
    CandidatesPanel:focus { border: round $border; }
    """
    BINDINGS = bindings_for("candidates")

    _top = 0  # the first candidate shown when not all fit
    token: reactive[TokenEvent | None] = reactive(None)
    row: reactive[int] = reactive(0)
    streaming: reactive[bool] = reactive(False)
    logprobs: reactive[bool] = reactive(False)  # natural-log probabilities instead of percent
    forks: reactive[ForkRule] = reactive(ForkRule)  # a fork is marked in the summary (#33.4)
    probe: reactive[str] = reactive("")  # the last probe's line at this token (#33.2)
    # The stage view (#32.3): each candidate's probability after every stage, for `token`; the
    # screen fills `stage_view` (or says why not in `stage_note`) when the engine answers.
    stages: reactive[bool] = reactive(False)
    stage_view: reactive[StageView | None] = reactive(None)
    stage_note: reactive[str] = reactive("")
    stage_offset: reactive[int] = reactive(0)

    def on_mount(self) -> None:
        self.border_title = "candidates"

    def watch_stages(self, stages: bool) -> None:
        self.border_title = "stages" if stages else "candidates"
        self.watch(self.app, "theme", self._theme_changed, init=False)

    def _theme_changed(self) -> None:
        self.refresh()  # bar colours come from the theme's variables

    def watch_token(self, token: TokenEvent | None) -> None:
        self.probe = ""  # it was asked at the token shown before
        if token is None or self.row >= len(token.candidates):
            self.row = 0

    def watch_row(self, row: int) -> None:
        """Scroll the list just enough that the cursor's row shows."""
        self._top = min(self._top, row)
        self._top = max(self._top, row - max(1, self._room()) + 1)

    def render(self) -> RenderableType:
        token = self.token
        if token is None:
            return Text("Select a token: Esc to leave the input (Shift+Tab while a reply streams: Esc "
                        "stops it), then ←/→, or click a token.", style="dim")
        if self.stages:
            return self._stages(token)
        spacer = [Text("")] if self.size.height >= self._summary_rows() + 2 + len(token.candidates) else []
        probe = [Text(f"probe {self.probe}", style="italic", no_wrap=True, overflow="ellipsis")] if self.probe else []
        return Group(self._summary(token), *probe, *spacer, self._table(token))

    def _stages(self, token: TokenEvent) -> RenderableType:
        """The stage view of `token`: a head line, then the table or the one line saying why not."""
        head = Text()
        head.append(f"#{token.index} ", style="dim")
        head.append(visible(token.piece or token.text), style="bold")
        view = self.stage_view
        if view is None or view.token != token.id:
            head.append(f"\n{self.stage_note or 'recomputing each stage…'}", style="italic dim")
            return head
        head.append("  after each stage (recomputed)", style="dim")
        chosen = self.app.theme_variables.get("chosen-token", "")
        return Group(head, stage_table(view, token, self.row, self.size.width, self.stage_offset, self.logprobs,
                                       chosen, self.has_focus, self.size.height - 1))

    def _room(self) -> int:
        """How many candidate rows fit under the numbers and the column heads."""
        return self.size.height - self._summary_rows() - 1

    def _summary_rows(self) -> int:
        return SUMMARY_ROWS + (1 if self.probe else 0)

    def _window(self, count: int) -> range:
        """The candidates shown: all that fit, from `_top`, which keeps the cursor's row in."""
        room = max(1, self._room())
        self._top = max(0, min(self._top, count - room))
        return range(self._top, min(count, self._top + room))

    def _summary(self, token: TokenEvent) -> Text:
        """The chosen token's numbers, named as api.py defines them. A small probability shows
        its value (``3.2e-5``), never ``0.0%``: this token *was* drawn. The token is its piece,
        as its row below and `logitscope run --json` write it: a byte of a split character is
        ``\\xa9`` here while the reply shows the whole character."""
        text = Text()
        text.append(f"#{token.index} ", style="dim")
        text.append(f"{visible(token.piece or token.text)!s}", style="bold")
        sampled = token.sampled_prob
        if self.logprobs:
            shown = UNKNOWN if sampled is None else log_text(safe_log(sampled))
            text.append(f"\nlog p raw {log_text(token.logprob):>6}  sampled {shown}")
        else:
            shown = UNKNOWN if sampled is None else percent(sampled, precise=True)
            raw = percent(math.exp(token.logprob), precise=True)
            text.append(f"\np raw {raw:>6}  sampled {shown}")  # steady while it streams
        rank = UNKNOWN if token.rank is None else str(token.rank)
        entropy = UNKNOWN if token.entropy is None else f"{token.entropy:.2f} nats"
        text.append(f"\nrank {rank}  entropy {entropy}")
        if self.forks.is_fork(token):
            text.append("  fork", style="bold")
        if self.streaming:
            text.append("  (newest)", style="italic dim")
        return text

    def _number(self, p: float, logprob: float) -> str:
        """One cell of the table, in the panel's unit."""
        return log_text(logprob) if self.logprobs else percent(p)

    def _table(self, token: TokenEvent) -> Text:
        """key, token, raw bar, raw, sampled (— when a filter removed the candidate), as a grid
        (`grid_text`: a Rich table cost 20 ms a frame while it followed a stream)."""
        variables = self.app.theme_variables
        rows: list[list[Text | str]] = []
        heads = ("log raw", "log smp") if self.logprobs else ("raw", "sampled")
        window = self._window(len(token.candidates))
        chars, bar_width = self._widths()
        rows.append(["", Text(self._more(window, len(token.candidates)), style="dim"), "",
                     Text(heads[0], style="dim"), Text(heads[1], style="dim")])
        for i in window:
            cand = token.candidates[i]
            p_raw = math.exp(cand.logprob)
            removed = cand.sampled_prob == 0  # a filter removed it (None: unknown, remote)
            chosen = cand.id == token.id
            key = str((i + 1) % 10) if i < 10 else " "
            row_style = "reverse" if i == self.row and self.has_focus else ""
            label_style = f"bold {variables.get('chosen-token', '')}" if chosen else ""
            sampled = (UNKNOWN if removed or cand.sampled_prob is None
                       else self._number(cand.sampled_prob, safe_log(cand.sampled_prob)))
            rows.append([
                Text(key + ("▶" if chosen else " "), style=row_style),
                Text(set_cell_size(visible(cand.text), chars), style=f"{label_style} {row_style}".strip()),
                Text(bar(p_raw, bar_width), style=variables.get("prob-bar-removed" if removed else "prob-bar", "")),
                Text(self._number(p_raw, cand.logprob)),
                Text(sampled, style="dim" if sampled == UNKNOWN else variables.get("prob-bar-sampled", "")),
            ])
        if not token.candidates:
            rows.append(["", Text("candidates are off (c/C to change)", style="dim")])
        return grid_text(rows, ("left", "left", "left", "right", "right"), (2, chars, bar_width, *NUMBER_WIDTHS))

    @staticmethod
    def _more(window: range, count: int) -> str:
        """The scroll hint in the head row: how many candidates are above and below."""
        above, below = window.start, count - window.stop
        return " ".join(part for part in (f"▲{above}" if above else "", f"▼{below}" if below else "") if part)

    def _widths(self) -> tuple[int, int]:
        """(text, bar) widths that fit the panel: the bar narrows first, then the text."""
        spare = self.size.width - FIXED_COLUMNS
        if spare >= CHARS + BAR_WIDTH:
            return CHARS, BAR_WIDTH
        chars = max(4, min(CHARS, spare - 4))
        return chars, max(0, spare - chars)

    def action_cursor(self, step: int) -> None:
        if self.token is not None and self.token.candidates:
            self.row = (self.row + step) % len(self.token.candidates)

    def action_stage_page(self, step: int) -> None:
        """In the stage view: the next or previous stage columns (those after "model")."""
        if self.stages and self.stage_view is not None:
            self.stage_offset = max(0, min(self.stage_offset + step, last_offset(self.stage_view, self.size.width)))

    def action_choose(self) -> None:
        if self.token is not None and self.token.candidates:
            self.post_message(CandidateChosen(self.row))

    def action_bias(self, step: float | None) -> None:
        """Ban (None) or raise/lower the highlighted candidate's logit from the next token on."""
        if self.token is not None and self.token.candidates:
            self.post_message(CandidateBias(self.row, step))

    def action_choose_at(self, position: int) -> None:
        """A digit: the candidate it prints beside, as from the transcript."""
        if self.token is not None and position >= len(self.token.candidates):
            self.notify(f"This token has {len(self.token.candidates)} candidates.", severity="warning", timeout=4)
        else:
            self.row = position
            self.post_message(CandidateChosen(position))

    def action_focus_input(self) -> None:
        self.screen.focus_next("ChatInput")

