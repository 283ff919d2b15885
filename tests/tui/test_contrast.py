"""Visible in every theme and in 256 colours (#16.3), measured on the screen as drawn.

Each theme the app offers (ours and Textual's; not the two ANSI ones, whose colours are the
terminal's) is applied with a reply on screen and the heatmap on; then every cell of the panel
borders and titles must have WCAG 3:1 against what is behind it, and every heatmap token 4.5:1,
in truecolor and after Rich's reduction to 256 colours (tmux's and Terminal.app's default).
Before: unfocused borders were ~1.05:1 (black on near-black in 256 colours), and Textual's light
themes drew our dark heat colours under dark text.
"""

from __future__ import annotations

from typing import Any

from rich.color import Color as RichColor
from rich.style import Style
from textual.color import Color
from textual.widget import Widget

from tui.app.contrast import contrast, reduced
from tui.app.widgets.candidates import CandidatesPanel
from tui.app.widgets.chat_input import ChatInput
from tui.app.widgets.params_panel import ParamsPanel
from tui.app.widgets.transcript import Transcript
from tui_helpers import SIZE, send

Cell = tuple[str, Style]


def _cells(app: Any) -> list[list[Cell]]:
    """The screen as rows of (character, style) cells."""
    rows = []
    for strip in app.screen._compositor.render_strips():
        row: list[Cell] = []
        for segment in strip:
            for char in segment.text:
                row.append((char, segment.style or Style()))
        rows.append(row)
    return rows


def _colour(colour: RichColor | None) -> Color | None:
    if colour is None or colour.triplet is None:
        return None
    return Color(*colour.triplet)


def _ratios(style: Style) -> tuple[float, float] | None:
    """(truecolor, 256-colour) contrast of a cell's text on its background."""
    fg, bg = _colour(style.color), _colour(style.bgcolor)
    if fg is None or bg is None:
        return None
    return contrast(fg, bg), contrast(reduced(fg), reduced(bg))


def _frame_cells(rows: list[list[Cell]], widget: Widget) -> list[Cell]:
    """The top row of a bordered widget (its border and title) and its left edge."""
    region = widget.region
    top = rows[region.y][region.x:region.right]
    left = [rows[y][region.x] for y in range(region.y, region.bottom)]
    return [cell for cell in top + left if not cell[0].isspace()]


def _heat_cells(rows: list[list[Cell]], widget: Widget, bands: set[tuple[int, int, int]]) -> list[Cell]:
    region = widget.region
    return [cell for y in range(region.y, region.bottom) for cell in rows[y][region.x:region.right]
            if not cell[0].isspace() and cell[1].bgcolor is not None
            and cell[1].bgcolor.triplet is not None and tuple(cell[1].bgcolor.triplet) in bands]


async def test_borders_titles_and_heat_are_readable_in_every_theme(make_app: Any) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        await pilot.press("f3")
        themes = [name for name in app.available_themes if not name.startswith("ansi")]
        assert len(themes) >= 20
        failures = []
        for name in themes:
            app.theme = name
            await pilot.pause()
            await pilot.pause()
            rows = _cells(app)
            screen = app.screen
            for widget in (screen.query_one(CandidatesPanel), screen.query_one(ParamsPanel),
                           screen.query_one(ChatInput)):
                for char, style in _frame_cells(rows, widget):
                    ratios = _ratios(style)
                    if ratios is not None and min(ratios) < 3.0:
                        failures.append(f"{name} {type(widget).__name__} {char!r} {ratios[0]:.2f}/{ratios[1]:.2f}")
                        break
            transcript = screen.query_one(Transcript)
            bands = {(c.r, c.g, c.b) for c in transcript.heat.bands} if transcript.heat else set()
            heat_cells = _heat_cells(rows, transcript, bands)
            assert heat_cells, name
            for char, style in heat_cells:
                ratios = _ratios(style)
                if ratios is not None and min(ratios) < 4.5:
                    failures.append(f"{name} heat {char!r} {ratios[0]:.2f}/{ratios[1]:.2f}")
                    break
        assert not failures, "\n".join(failures)
