"""The incremental token layout: rich's word wrap resumed from the last word, and lines drawn
exactly as Textual draws the whole text; plus the streaming view built on it, in the app."""

from __future__ import annotations

import random
from typing import Any

import pytest
from rich._wrap import divide_line
from rich.text import Text
from rich.style import Style as RichStyle
from textual.color import Color
from textual.content import Content
from textual.strip import Strip
from textual.style import Style
from textual.visual import RenderOptions, Visual

from engine.core.api import TokenEvent
from engine.scripted import ScriptedEngine
from tui.app import messages as msg
from tui.app.widgets import token_chunk, token_layout
from tui.app.widgets.message_views import AssistantView
from tui.app.widgets.markdown_marks import markdown_marks
from tui.app.widgets.render import HeatPalette, mark_style, render_tokens, token_display, token_style
from tui.app.widgets.token_layout import ParagraphWrap, TokenLayout, line_strip
from tui.app.widgets.transcript import Transcript
from tui_helpers import SIZE, screen_text, send

PIECES = ["a", "bb", " ", "  ", "\n", "ccc", "dddddddddddddddd", "é", "漢字", " x", "y ", "\n\n", "",
          " long-word-here", ".", ",", "   ", "\r", "\u200b", "\t", "a\tb", "\t\t", "漢\t", "\tx\n\t"]
MARKDOWN = ["**", "`", "# ", "- ", "*", "_"]
VARIABLES = {"markdown-h1-color": "#ff8800", "text-accent": "#88ff00", "text-primary": "#0088ff"}
HEAT = HeatPalette(Color.parse("#6b2230"), Color.parse("#5a4716"), Color.parse("#1d4a2c"))
BASE = Style(foreground=Color.parse("#ddeeff"), background=Color.parse("#112233"))


def _token(index: int, text: str, rng: random.Random) -> TokenEvent:
    return TokenEvent(index, index, text, text, -rng.random() * 4, 0.5, 1, 0.1, ())


def _marks(tokens: list[TokenEvent]) -> list[tuple[int, int, RichStyle]]:
    """The Markdown marks of the tokens' joined text, as the chunk styles them."""
    return [(a, b, mark_style(role, VARIABLES)) for a, b, role in markdown_marks("".join(map(token_display, tokens)))]


def _reference(tokens: list[TokenEvent], width: int, cursor: int | None, heat: HeatPalette | None) -> list[Strip]:
    """What a Static showing `render_tokens` draws: Textual's own wrap of the whole text."""
    content = Content.from_rich_text(render_tokens(tokens, 0, cursor, heat, _marks(tokens)))
    options = RenderOptions(lambda s: s if isinstance(s, Style) else Style.parse(s), {})
    return content.render_strips(width, None, BASE, options)


def _incremental(layout: TokenLayout, tokens: list[TokenEvent], width: int, cursor: int | None,
                 heat: HeatPalette | None) -> list[Strip]:
    styles = [Style.from_rich_style(token_style(t, i, i == cursor, heat)) for i, t in enumerate(tokens)]
    marks = [(layout.expand(a), layout.expand(b), Style.from_rich_style(style)) for a, b, style in _marks(tokens)]
    return [line_strip(layout.line(y), width, BASE, styles.__getitem__, marks) for y in range(layout.height)]


def _segments(strips: list[Strip]) -> list[list[Any]]:
    """Each line cell by cell: its character, style, token and the text offset a click there
    selects from (how it is cut into segments is not drawn: an expanded tab is one segment
    with its text here, two where Textual joined the tab's part and the next)."""
    lines: list[list[Any]] = []
    for strip in strips:
        cells: list[Any] = []
        for segment in strip:
            meta = dict(segment.style.meta) if segment.style is not None else {}
            x, y = meta.pop("offset", (None, None))
            plain = segment.style.clear_meta_and_links() if segment.style is not None else None
            for index, char in enumerate(segment.text):
                cells.append((char, plain, sorted(meta.items()), None if x is None else (x + index, y)))
        lines.append([*cells, strip.cell_length])
    return lines


def test_paragraph_wrap_matches_rich_divide_line_as_text_grows() -> None:
    rng = random.Random(7)
    for _ in range(2000):
        width = rng.randint(1, 12)
        wrap, text = ParagraphWrap(width), ""
        for _ in range(rng.randint(1, 12)):
            text += rng.choice(PIECES).replace("\n", " ")
            wrap.update(text)
            assert wrap.breaks == divide_line(text, width), (text, width)


def test_lines_render_exactly_like_textuals_whole_text_render() -> None:
    """Tokens appended in batches, a cursor (on blank tokens too), heat, Markdown marks, then
    another width."""
    rng = random.Random(11)
    for _ in range(600):
        width, tokens, layout = rng.randint(1, 14), [], TokenLayout()
        cursor, heat = rng.choice([None, 0, 2, 5]), rng.choice([None, HEAT])
        if rng.random() < 0.5:
            layout.set_width(width)  # laid out before the tokens come: the streaming case
        for _ in range(rng.randint(1, 8)):
            batch = [_token(len(tokens) + i, rng.choice(PIECES + MARKDOWN), rng) for i in range(rng.randint(1, 5))]
            tokens += batch
            layout.append([token_display(t) for t in batch])
            layout.set_width(width)
            assert _segments(_incremental(layout, tokens, width, cursor, heat)) == \
                _segments(_reference(tokens, width, cursor, heat))
        width = rng.randint(1, 14)
        layout.set_width(width)
        assert _segments(_incremental(layout, tokens, width, cursor, heat)) == \
            _segments(_reference(tokens, width, cursor, heat))


def test_lines_of_a_token_cover_every_line_showing_it() -> None:
    rng = random.Random(3)
    for _ in range(300):
        texts = [rng.choice(PIECES) for _ in range(rng.randint(1, 30))]
        layout = TokenLayout()
        layout.append(texts)
        layout.set_width(rng.randint(1, 14))
        for token in range(len(texts)):
            shown = {y for y in range(layout.height) if any(t == token for _, _, t in layout.line(y).spans)}
            assert shown <= set(layout.lines_of(token))


def test_appending_to_a_long_paragraph_rewraps_only_its_last_word(monkeypatch: pytest.MonkeyPatch) -> None:
    """O(new text) per flush: a 5,000-token line is not divided again."""
    layout = TokenLayout()
    layout.set_width(60)
    layout.append([f" w{i}" for i in range(5000)])
    height = layout.height
    placed: list[str] = []
    real_place = token_layout._place

    def counting(word: str, *args: Any) -> int:
        placed.append(word)
        return real_place(word, *args)

    monkeypatch.setattr(token_layout, "_place", counting)
    changed = layout.append([" more", " words"])
    assert len(placed) <= 3  # the old last word and the two new ones
    assert changed >= height - 1 and layout.height >= height


def _one_line_reply(count: int, tabs: bool = False) -> list[str]:
    """` w0 w1 ...`, or with a tab before every seventh word (code, a table, a model's noise)."""
    return [f"\tw{i}" if tabs and i % 7 == 3 else f" w{i}" for i in range(count)]


@pytest.mark.parametrize("tabs", [False, True], ids=["spaces", "tabs"])
async def test_streamed_chunk_draws_what_textual_would(make_app: Any, tabs: bool) -> None:
    """In the app (theme colours, widget style, heat, a cursor): every line of a reply built
    flush by flush equals Textual's render of the same Text, tabs expanded as Textual does."""
    app = make_app(ScriptedEngine([_one_line_reply(1200, tabs)], token_delay=1e-6))
    async with app.run_test(size=SIZE) as pilot:
        app.chat_screen.param_actions.set_params(app.controller.params.with_changes(max_tokens=1300))
        await send(app, pilot, "go")
        await pilot.press("f3", "escape", "left", "left")  # heatmap on, first key selects the last token, then one left: 1198
        await pilot.pause()
        view = app.screen.query_one(AssistantView)
        assert view.cursor == 1198 and view.heat is not None
        chunk = view._chunks[0]
        assert len(view._chunks) == 1  # no newline: one chunk, wrapped as one paragraph
        width = chunk.size.width
        expected = Visual.to_strips(chunk, chunk._render(), width, None, chunk.visual_style)
        drawn = [chunk.render_line(y) for y in range(chunk.size.height)]
        assert chunk.size.height == len(expected) > 50
        assert _segments(drawn) == _segments(expected)


@pytest.mark.parametrize("tabs", [False, True], ids=["spaces", "tabs"])
async def test_stream_flush_renders_only_new_lines(make_app: Any, monkeypatch: pytest.MonkeyPatch, tabs: bool) -> None:
    """Drawing a streaming reply costs O(its lines), not O(lines x flushes), with tabs in it too
    (they fell back to rendering the whole chunk at every flush: #31.3)."""
    drawn: list[int] = []
    whole: list[int] = []
    monkeypatch.setattr(token_chunk.TokenChunk, "render", lambda chunk: whole.append(1) or Text(""))
    real = token_chunk.line_strip

    def counting(line: Any, *args: Any) -> Strip:
        drawn.append(line.y)
        return real(line, *args)

    monkeypatch.setattr(token_chunk, "line_strip", counting)
    seen: list[Any] = []
    app = make_app(ScriptedEngine([_one_line_reply(3000, tabs)], token_delay=1e-6))  # one token per loop turn
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        app.chat_screen.param_actions.set_params(app.controller.params.with_changes(max_tokens=3100))
        await send(app, pilot, "go")
        flushes = sum(isinstance(m, msg.ReplyGrew) for m in seen)
        lines = app.screen.query_one(AssistantView)._chunks[0]._layout.height
        assert flushes >= 5 and lines > 100
        assert len(drawn) <= lines + 3 * flushes  # each line once, plus the changing last lines per flush
        assert not whole  # never the whole chunk again


async def test_cursor_deep_in_a_tall_chunk_is_scrolled_into_view(make_app: Any) -> None:
    """A chunk taller than the screen: the transcript scrolls to the cursor's line, not the chunk's top."""
    app = make_app(ScriptedEngine([_one_line_reply(3000)]))
    async with app.run_test(size=SIZE) as pilot:
        app.chat_screen.param_actions.set_params(app.controller.params.with_changes(max_tokens=3100))
        await send(app, pilot, "go")
        transcript = app.screen.query_one(Transcript)
        node = app.controller.conversation.path()[-1]
        for index in (1500, 20, 2990):
            transcript.select_token(node, index)
            await pilot.pause()
            await pilot.pause()
            box = transcript.region
            shown = [row[box.x:box.right] for row in screen_text(app).splitlines()[box.y:box.bottom]]
            assert f" w{index} " in " ".join(shown) + " "
