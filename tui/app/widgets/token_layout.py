"""Word wrap of a growing token text, kept line by line, so a new token costs O(its line).

Why: re-wrapping a streaming reply on every flush costs O(reply) per flush, and a 5,000-token
reply then makes the screen fall behind. Textual wraps each paragraph with rich's greedy
`divide_line`: the breaks before the last word of a paragraph never change when text is
appended, so `ParagraphWrap` keeps them and re-divides from that word only. `line_strip` then
renders one line exactly as `Content.render_strips` renders it inside a whole paragraph (the
tests compare both), so the screen looks the same as a full render.

Tabs are expanded as Textual expands them (`Content.expand_tabs`, before it wraps: to the next
multiple of 8 cells from the paragraph's start). As text is only ever appended, a tab's width
never changes once laid out; the layout's offsets are of the expanded text (`expand` maps an
offset in the joined token texts there), and a tab's spaces belong to its token.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import Callable, Sequence

from rich.cells import cell_len, chop_cells
from rich.segment import Segment
from textual.content import Content, Span
from textual.strip import Strip
from textual.style import Style

_WORD = re.compile(r"\s*\S+\s*")  # rich._wrap's word: the word, its spaces before and after
TAB_SIZE = 8  # Textual's for a widget's content (`Content._wrap_and_format`)


def expand_tabs(piece: str, column: int) -> tuple[str, list[tuple[int, int]]]:
    """`piece` with each tab made spaces up to the next tab stop, `piece` starting `column`
    cells into its paragraph: what `Content.expand_tabs` makes of it (a tab always takes at
    least one cell); and (offset in `piece`, spaces) for each tab."""
    parts = piece.split("\t")
    out: list[str] = []
    tabs: list[tuple[int, int]] = []
    offset = 0
    for number, part in enumerate(parts):
        out.append(part)
        column += cell_len(part)
        offset += len(part)
        if number < len(parts) - 1:
            spaces = TAB_SIZE - column % TAB_SIZE
            out.append(" " * spaces)
            tabs.append((offset, spaces))
            column += spaces
            offset += 1
    return "".join(out), tabs


def _place(word: str, start: int, offset: int, width: int, breaks: list[int]) -> int:
    """One step of rich's `divide_line`: put `word` (at `start`) after `offset` cells; the new offset."""
    length = cell_len(word.rstrip())
    if width - offset >= length:
        return offset + cell_len(word)
    if length > width:  # fold a word longer than a line
        pieces = chop_cells(word, width)
        for piece in pieces[:-1]:
            if start:
                breaks.append(start)
            start += len(piece)
        if start:
            breaks.append(start)
        return cell_len(pieces[-1])
    if offset and start:
        breaks.append(start)
        return cell_len(word)
    return offset


class ParagraphWrap:
    """`rich._wrap.divide_line(text, width)` for a text that only ever grows at its end."""

    def __init__(self, width: int) -> None:
        self.width = width
        self.breaks: list[int] = []
        self._resume = 0  # where the last word starts: appended text may still extend it
        self._offset = 0  # the cell offset before that word
        self._kept = 0  # how many breaks come before that word

    @property
    def stable(self) -> int:
        """How many first lines no appended text can change (they end before the last word)."""
        return self._kept

    def update(self, text: str) -> None:
        """Divide `text`, which extends the text of the previous call (or is the first)."""
        breaks = self.breaks
        del breaks[self._kept:]
        offset = self._offset
        match = _WORD.match(text, self._resume)
        while match is not None:
            start = match.start()
            self._resume, self._offset, self._kept = start, offset, len(breaks)
            offset = _place(match.group(0), start, offset, self.width, breaks)
            match = _WORD.match(text, match.end())


@dataclass
class _Paragraph:
    """Text between newlines, with the token each piece of it came from."""

    offset: int = 0  # where the paragraph starts in the joined (tab-expanded) token texts
    text: str = ""  # tabs expanded
    cells: int = 0  # the cell length of `text`
    starts: list[int] = field(default_factory=list)  # piece starts (pieces are never empty)
    ends: list[int] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    wrap: ParagraphWrap | None = None

    def add(self, piece: str, token: int) -> None:
        self.starts.append(len(self.text))
        self.text += piece
        self.cells += cell_len(piece)
        self.ends.append(len(self.text))
        self.tokens.append(token)

    def spans(self, start: int, end: int) -> list[tuple[int, int, int]]:
        """(start, end, token) of the pieces overlapping [start, end), clipped, relative to start."""
        first = bisect_right(self.ends, start)
        last = bisect_left(self.starts, end)
        return [(max(s, start) - start, min(e, end) - start, t)
                for s, e, t in zip(self.starts[first:last], self.ends[first:last], self.tokens[first:last])]


@dataclass(frozen=True)
class Line:
    """One wrapped line: `text` at offset `x` of paragraph `y`, and the token pieces on it."""

    text: str
    x: int
    y: int
    last: bool  # the paragraph's last line (its trailing spaces are kept)
    spans: list[tuple[int, int, int]]
    at: int = 0  # where the line starts in the joined token texts, tabs expanded


class TokenLayout:
    """Token texts split into paragraphs at newlines and wrapped at one width.

    Appending re-wraps only the last line of the last paragraph and what follows. As in
    `render_tokens`, a text that ends with a newline shows no empty line after it.
    """

    def __init__(self) -> None:
        self.texts: list[str] = []  # the text shown for each token, in order
        self.chars = 0  # the length of the joined texts, tabs expanded
        self.width = 0  # 0: not laid out yet
        self._joined = 0  # the length of the joined texts as given
        self._tab_at: list[int] = []  # where each tab is in the joined texts as given
        self._tab_extra: list[int] = []  # the cells all tabs up to this one add (beyond their own)
        self._paragraphs = [_Paragraph()]
        self._lines: list[tuple[int, int]] = []  # (paragraph, start offset) of every line
        self._first: list[int] = []  # the index in _lines of each paragraph's first line
        self._where: list[tuple[int, int]] = []  # (paragraph, offset) where each token starts

    @property
    def height(self) -> int:
        paragraphs = self._paragraphs
        trailing = len(paragraphs) > 1 and not paragraphs[-1].text  # after a final newline
        return len(self._lines) - trailing

    def append(self, texts: list[str]) -> int:
        """Add tokens' texts; returns the first line that changed (all lines from it may have)."""
        touched = len(self._paragraphs) - 1
        for text in texts:
            self._add(text)
        return self._relayout(touched)

    def set_width(self, width: int) -> bool:
        """Wrap everything again at `width`; False when it already was."""
        if width == self.width:
            return False
        self.width = width
        for paragraph in self._paragraphs:
            paragraph.wrap = None
        self._relayout(0)
        return True

    def expand(self, offset: int) -> int:
        """An offset in the joined token texts as given, in the layout's (tabs expanded)."""
        before = bisect_left(self._tab_at, offset)
        return offset + (self._tab_extra[before - 1] if before else 0)

    def lines_of(self, token: int) -> range:
        """The lines holding some of `token`'s text (empty when not laid out)."""
        if not self.width or not 0 <= token < len(self._where):
            return range(0)
        first = self._line_at(*self._where[token])
        if token + 1 < len(self._where):
            paragraph, offset = self._where[token + 1]
            end = self._line_at(paragraph, max(0, offset - 1))
        else:
            end = len(self._lines) - 1
        return range(first, end + 1)

    def line(self, y: int) -> Line:
        paragraph_index, start = self._lines[y]
        paragraph = self._paragraphs[paragraph_index]
        last = y + 1 >= len(self._lines) or self._lines[y + 1][0] != paragraph_index
        end = len(paragraph.text) if last else self._lines[y + 1][1]
        return Line(paragraph.text[start:end], start, paragraph_index, last, paragraph.spans(start, end),
                    paragraph.offset + start)

    def _add(self, text: str) -> None:
        token = len(self.texts)
        self.texts.append(text)
        self._where.append((len(self._paragraphs) - 1, len(self._paragraphs[-1].text)))
        at, joined = self.chars, self._joined
        for number, piece in enumerate(text.split("\n")):
            if number:
                at, joined = at + 1, joined + 1  # the newline
                self._paragraphs.append(_Paragraph(at))
            if piece:
                paragraph = self._paragraphs[-1]
                shown = piece
                if "\t" in piece:
                    shown, tabs = expand_tabs(piece, paragraph.cells)
                    extra = self._tab_extra[-1] if self._tab_extra else 0
                    for offset, spaces in tabs:
                        extra += spaces - 1
                        self._tab_at.append(joined + offset)
                        self._tab_extra.append(extra)
                paragraph.add(shown, token)
                at, joined = at + len(shown), joined + len(piece)
        self.chars, self._joined = at, joined

    def _line_at(self, paragraph: int, offset: int) -> int:
        breaks = self._paragraphs[paragraph].wrap.breaks  # type: ignore[union-attr]
        return self._first[paragraph] + bisect_right(breaks, offset)

    def _relayout(self, touched: int) -> int:
        """Re-wrap paragraphs from `touched` on; returns the first line that may have changed.

        Lines of `touched` before the one where its last word starts stay as they are.
        """
        if not self.width:
            return 0
        if touched < len(self._first):
            paragraph = self._paragraphs[touched]
            stable = paragraph.wrap.stable if paragraph.wrap is not None else 0
            changed = self._first[touched] + stable
            del self._lines[changed:]
            del self._first[touched + 1:]
            self._wrap(touched, stable)
            touched += 1
        else:
            changed = len(self._lines)
        for index in range(touched, len(self._paragraphs)):
            self._first.append(len(self._lines))
            self._wrap(index, 0)
        return changed

    def _wrap(self, index: int, stable: int) -> None:
        """Divide paragraph `index` and list its lines from line `stable` on."""
        paragraph = self._paragraphs[index]
        if paragraph.wrap is None:
            paragraph.wrap = ParagraphWrap(self.width)
        paragraph.wrap.update(paragraph.text)
        starts = paragraph.wrap.breaks[stable - 1:] if stable else [0, *paragraph.wrap.breaks]
        self._lines.extend((index, start) for start in starts)


def line_strip(line: Line, width: int, base: Style, style_of: Callable[[int], Style],
               marks: Sequence[tuple[int, int, Style]] = ()) -> Strip:
    """One line as Textual renders it in a paragraph (left aligned, folded, tabs expanded).

    Mirrors `Content._wrap_and_format` and `_FormattedLine.to_strip`: a line that is not its
    paragraph's last loses its trailing spaces, each segment carries its (x, y) offset for
    text selection. `style_of(token)` is the style of a token's pieces; `marks` are styles by
    offset in the joined token texts (Markdown highlighting), under the tokens' own.
    """
    at, upto = line.at, line.at + len(line.text)
    spans = [Span(max(start, at) - at, min(stop, upto) - at, style) for start, stop, style in marks
             if start < upto and stop > at]
    spans += [Span(start, end, style_of(token)) for start, end, token in line.spans]
    content = Content(line.text, spans, strip_control_codes=False)
    if not line.last:
        content = content.rstrip()
    content = content.truncate(width).rstrip_end(width)
    segments: list[Segment] = []
    x = line.x
    for text, style in content.render(base, end=""):
        segments.append(Segment(text, (base + style).rich_style_with_offset(x, line.y)))
        x += len(text)
    return Strip(segments, content.cell_length)
