"""`TokenChunk`: a run of a reply's tokens, drawn line by line from a cache.

Why not a `Static`: a Static re-renders and re-wraps all its text on every update, so each flush
of a streaming reply cost O(chunk), and a reply without newlines is one long chunk. Here a flush
re-wraps only the last line (`TokenLayout`), repaints only the lines that changed, and asks for
a layout only when the height changed; lines are rendered when the screen shows them and cached.
A cursor move re-renders the lines of the two tokens involved.

What the cache does not reproduce (a mouse text selection, tabs, unusual text CSS) falls back
to Textual's whole-text render of the same `Text`, which stays the reference for the rest.
"""

from __future__ import annotations

from rich.text import Text
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.style import Style
from textual.widget import Widget

from engine.api import TokenEvent
from tui.widgets.render import HeatPalette, render_tokens, token_display, token_style
from tui.widgets.token_layout import TokenLayout, line_strip


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

    @property
    def end(self) -> int:
        return self.start + len(self._layout.texts)

    def grow(self, tokens: list[TokenEvent], end: int) -> None:
        """Add tokens [self.end, end) of `tokens` (the reply's growing list)."""
        self._tokens = tokens
        old_height = self._layout.height
        texts = [token_display(tokens[index], index == self.cursor) for index in range(self.end, end)]
        changed = self._layout.append(texts)
        for line in range(changed, max(old_height, self._layout.height)):
            self._strips.pop(line, None)
        if not self._layout.width or self._layout.height != old_height:
            self.refresh(layout=True)
        elif changed < old_height:
            self.refresh(Region(0, changed, self.size.width, old_height - changed))

    def set_cursor(self, cursor: int | None) -> None:
        """Move the cursor; only the lines of the tokens it leaves and enters are redrawn."""
        old, self.cursor = self.cursor, cursor
        for index in {old, cursor}:
            if index is not None and self.start <= index < self.end:
                self._restyle(index)

    def set_heat(self, heat: HeatPalette | None) -> None:
        self.heat = heat
        self._styles.clear()
        self._strips.clear()
        self.refresh()

    def lines_of(self, index: int) -> range:
        """The lines showing token `index` (empty before the first layout)."""
        return self._layout.lines_of(index - self.start)

    def _restyle(self, index: int) -> None:
        self._styles.pop(index, None)
        text = token_display(self._tokens[index], index == self.cursor)
        if text != self._layout.texts[index - self.start]:
            self._relayout(index, text)  # a selected blank token shows its glyphs: re-wrap
            return
        lines = self._layout.lines_of(index - self.start)
        for line in lines:
            self._strips.pop(line, None)
        self.refresh(*([Region(0, lines.start, self.size.width, len(lines))] if lines else []))

    def _relayout(self, index: int, text: str) -> None:
        texts = list(self._layout.texts)
        texts[index - self.start] = text
        width, self._layout = self._layout.width, TokenLayout()
        self._layout.append(texts)
        self._layout.set_width(width)
        self._strips.clear()
        self.refresh(layout=True)

    # --- Textual's side

    def _full_render(self) -> bool:
        """Whether to let Textual render the whole text (what the line cache does not mirror)."""
        styles = self.styles
        return (self.text_selection is not None or self._layout.tabs
                or styles.text_align not in ("left", "start") or styles.text_overflow != "fold"
                or styles.text_wrap != "wrap" or styles.line_pad != 0)

    def render(self) -> Text:
        """The whole chunk as one Text: the full render's input (and what a selection copies)."""
        return render_tokens(self._tokens[self.start:self.end], self.start, self.cursor, self.heat)

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
        if not 0 <= y < self._layout.height:
            return Strip.blank(width, base.rich_style)
        strip = self._strips.get(y)
        if strip is None:
            strip = self._strips[y] = line_strip(self._layout.line(y), width, base, self._style)
        return strip

    def _style(self, offset: int) -> Style:
        """The style of token `start + offset`, converted as Textual converts a Text's spans."""
        index = self.start + offset
        style = self._styles.get(index)
        if style is None:
            rich = token_style(self._tokens[index], index, index == self.cursor, self.heat)
            style = self._styles[index] = Style.from_rich_style(rich, self.app.ansi_theme)
        return style
