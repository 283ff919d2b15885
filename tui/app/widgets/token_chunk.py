"""`TokenChunk`: a run of a reply's tokens, drawn line by line from a cache.

Why not a `Static`: a Static re-renders and re-wraps all its text on every update, so each flush
of a streaming reply cost O(chunk), and a reply without newlines is one long chunk. Here a flush
re-wraps only the last line (`TokenLayout`), repaints only the lines that changed, and asks for
a layout only when the height changed; lines are rendered when the screen shows them and cached.
A cursor move re-renders the lines of the two tokens involved, and never changes the layout:
the cursor only restyles (a token that adds no text lights the character it is part of; a
blank token that ends a line shows a ``↵`` after the line's text, drawn over the empty cell).
Markdown highlighting (`set_marks`) is styles by text offset, under the tokens' own.

What the cache does not reproduce (a mouse text selection, unusual text CSS) falls back
to Textual's whole-text render of the same `Text`, which stays the reference for the rest.
"""

from __future__ import annotations

from bisect import bisect_left

from rich.segment import Segment
from rich.text import Text
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.style import Style
from textual.widget import Widget

from engine.core.api import TokenEvent
from tui.app.widgets.markdown_marks import Mark, Role
from tui.app.widgets.render import HeatPalette, cursor_cell, mark_style, render_tokens, token_display, token_style
from tui.app.widgets.token_layout import Line, TokenLayout, line_strip


class TokenChunk(Widget):
    """Tokens [start, end) of a reply; `grow` adds tokens, `set_cursor`/`set_heat` restyle."""

    DEFAULT_CSS = "TokenChunk { height: auto; }"

    def __init__(self, start: int, cursor: int | None = None, heat: HeatPalette | None = None) -> None:
        super().__init__()
        self.start = start
        self.cursor = cursor
        self.heat = heat
        self._tokens: list[TokenEvent] = []
        self._layout = TokenLayout()
        self._styles: dict[int, Style] = {}  # by token index, made when a line needs them
        self._strips: dict[int, Strip] = {}  # by line, valid for `_base` and the layout's width
        self._base: Style | None = None
        self._lit: int | None = None  # the token the cursor lights (see `cursor_cell`)
        self._given_marks: list[Mark] = []  # Markdown ranges in the joined texts
        self._marks: list[Mark] = []  # the same in the layout's offsets (tabs expanded), by start
        self._mark_starts: list[int] = []
        self._mark_styles: dict[Role, Style] = {}

    @property
    def end(self) -> int:
        return self.start + len(self._layout.texts)

    def grow(self, tokens: list[TokenEvent], end: int) -> None:
        """Add tokens [self.end, end) of `tokens` (the reply's growing list)."""
        self._tokens = tokens
        self.settle(tokens)
        old_height = self._layout.height
        texts = [token_display(tokens[index]) for index in range(self.end, end)]
        changed = self._layout.append(texts)
        if self.cursor is not None and self.start <= self.cursor < end:
            self._light()  # the cursor's character may have just been completed
        for line in range(changed, max(old_height, self._layout.height)):
            self._strips.pop(line, None)
        if not self._layout.width or self._layout.height != old_height:
            self.refresh(layout=True)
        elif changed < old_height:
            self.refresh(Region(0, changed, self.size.width, old_height - changed))

    def settle(self, tokens: list[TokenEvent]) -> None:
        """Lay out again if the last token's text changed: a finished reply's last token takes
        what the stream held back (`Version.settle`), after it may have been drawn."""
        self._tokens = tokens
        if self.end > self.start and token_display(tokens[self.end - 1]) != self._layout.texts[-1]:
            self._relayout(self.end - 1)

    def set_cursor(self, cursor: int | None) -> None:
        """Move the cursor; only the lines of the tokens it leaves and enters are redrawn."""
        old, self.cursor = self.cursor, cursor
        for index in {old, cursor}:
            if index is not None and self.start <= index < self.end:
                self._restyle(index)
        self._light()

    def set_marks(self, marks: list[Mark]) -> None:
        """Markdown ranges, offsets in this chunk's joined texts; only styles change."""
        self._given_marks = marks
        self._place_marks()
        self._mark_styles.clear()
        self._strips.clear()
        self.refresh()

    def _place_marks(self) -> None:
        """The marks in the layout's offsets (a tab is wider there than in the texts)."""
        expand = self._layout.expand
        self._marks = sorted(((expand(start), expand(end), role) for start, end, role in self._given_marks),
                             key=lambda mark: mark[0])
        self._mark_starts = [mark[0] for mark in self._marks]

    def _light(self) -> None:
        """Restyle the token the cursor lights, when it is another than the cursor's own."""
        cursor = self.cursor
        inside = cursor is not None and self.start <= cursor < self.end
        lit = cursor_cell(self._tokens, cursor, self.end) if inside and cursor is not None else None
        old, self._lit = self._lit, lit
        for index in {old, lit} - {None, cursor}:
            if index is not None and self.start <= index < self.end:
                self._restyle(index)

    def set_heat(self, heat: HeatPalette | None) -> None:
        self.heat = heat
        self._styles.clear()
        self._mark_styles.clear()
        self._strips.clear()
        self.refresh()

    def lines_of(self, index: int) -> range:
        """The lines showing token `index` (empty before the first layout)."""
        return self._layout.lines_of(index - self.start)

    def _restyle(self, index: int) -> None:
        self._styles.pop(index, None)
        lines = self._layout.lines_of(index - self.start)
        for line in lines:
            self._strips.pop(line, None)
        self.refresh(*([Region(0, lines.start, self.size.width, len(lines))] if lines else []))

    def _relayout(self, index: int) -> None:
        """Lay the chunk out again with token `index`'s text changed."""
        texts = list(self._layout.texts)
        texts[index - self.start] = token_display(self._tokens[index])
        width, self._layout = self._layout.width, TokenLayout()
        self._layout.append(texts)
        self._layout.set_width(width)
        self._place_marks()
        self._strips.clear()
        self.refresh(layout=True)

    # --- Textual's side

    def _full_render(self) -> bool:
        """Whether to let Textual render the whole text (what the line cache does not mirror)."""
        styles = self.styles
        return (self.text_selection is not None
                or styles.text_align not in ("left", "start") or styles.text_overflow != "fold"
                or styles.text_wrap != "wrap" or styles.line_pad != 0)

    def render(self) -> Text:
        """The whole chunk as one Text: the full render's input (and what a selection copies)."""
        marks = [(start, end, self._mark_style(role).rich_style) for start, end, role in self._given_marks]
        return render_tokens(self._tokens[self.start:self.end], self.start, self._lit, self.heat, marks)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        if width <= 0 or self._full_render():
            return super().get_content_height(container, viewport, width)
        if self._layout.set_width(width):
            self._strips.clear()
        return self._layout.height

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if width <= 0 or self._full_render():
            return super().render_line(y)
        if self._layout.set_width(width):  # a width the layout was not asked about: its height may differ
            self._strips.clear()
            self.refresh(layout=True)
        base = self.visual_style
        if base != self._base:
            self._base = base
            self._strips.clear()
            self._styles.clear()
            self._mark_styles.clear()
        if not 0 <= y < self._layout.height:
            return Strip.blank(width, base.rich_style)
        strip = self._strips.get(y)
        if strip is None:
            line = self._layout.line(y)
            strip = self._strips[y] = line_strip(line, width, base, self._style, self._line_marks(line))
        return self._with_return_glyph(y, strip, width, base)

    def _with_return_glyph(self, y: int, strip: Strip, width: int, base: Style) -> Strip:
        """A ``↵`` after line `y`'s text when the cursor is on a blank token whose newline ends
        that line (else the cursor would sit on nothing), drawn only where the cell is free."""
        cursor = self.cursor
        if cursor is None or not self.start <= cursor < self.end or strip.cell_length >= width:
            return strip
        text = self._layout.texts[cursor - self.start]
        lines = self._layout.lines_of(cursor - self.start)
        if "\n" not in text or text.strip() or not lines or lines.start != y:
            return strip
        glyph = Segment("↵", (base + self._style(cursor - self.start)).rich_style)
        return Strip([*strip, glyph], strip.cell_length + 1)

    def _line_marks(self, line: Line) -> list[tuple[int, int, Style]]:
        """The Markdown marks that may touch `line`: those starting in its paragraph before the
        line ends (a mark never crosses a newline), as Textual styles."""
        upto = line.at + len(line.text)
        first = bisect_left(self._mark_starts, line.at - line.x)
        last = bisect_left(self._mark_starts, upto, first)
        return [(start, end, self._mark_style(role)) for start, end, role in self._marks[first:last]]

    def _mark_style(self, role: Role) -> Style:
        style = self._mark_styles.get(role)
        if style is None:
            rich = mark_style(role, self.app.theme_variables, colours=self.heat is None)
            style = self._mark_styles[role] = Style.from_rich_style(rich, self.app.ansi_theme)
        return style

    def _style(self, offset: int) -> Style:
        """The style of token `start + offset`, converted as Textual converts a Text's spans."""
        index = self.start + offset
        style = self._styles.get(index)
        if style is None:
            rich = token_style(self._tokens[index], index, index == self._lit, self.heat)
            style = self._styles[index] = Style.from_rich_style(rich, self.app.ansi_theme)
        return style
