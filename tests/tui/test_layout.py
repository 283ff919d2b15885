"""Any terminal size (#16.2): the chat keeps its width, the panels move under it or give way,
the candidates list scrolls with its cursor, and reply headers never cut a word.

Before: a fixed 46-column side column left the chat 32 columns at 80x24 and none at 40x12, and
the candidates panel showed 5 of 10 rows at 80x24 with no way to see the rest.
"""

from __future__ import annotations

from typing import Any

import pytest

from engine.scripted import ScriptedEngine, ScriptedToken
from tui.app.widgets.candidates import CandidatesPanel
from tui.app.widgets.chat_input import ChatInput
from tui.app.widgets.message_views import AssistantView, fit_parts
from tui.app.widgets.params_panel import ParamsPanel
from tui.app.widgets.transcript import Transcript
from tui_helpers import screen_text, send, wait_until

TEN = ScriptedToken(" a", 0.3, tuple((f" alt{n}", 0.07) for n in range(1, 10)))


@pytest.mark.parametrize("size", [(80, 24), (60, 20), (40, 12), (100, 30), (160, 50)])
async def test_the_chat_keeps_its_width_and_nothing_overlaps(make_app: Any, size: tuple[int, int]) -> None:
    app = make_app()
    async with app.run_test(size=size) as pilot:
        await send(app, pilot, "hi")
        screen = app.screen
        transcript = screen.query_one(Transcript).region
        assert transcript.width >= min(size[0] - 46, 54) and transcript.width >= 38 and transcript.height >= 4
        shown = [w.region for w in (screen.query_one(CandidatesPanel), screen.query_one(ParamsPanel),
                                     screen.query_one(ChatInput), screen.query_one(Transcript))
                 if w.region.area]
        for i, a in enumerate(shown):
            assert all(not a.overlaps(b) for b in shown[i + 1:]), (size, a, shown)
        if size[0] < 100 and size[1] >= 18:  # the panels sit under the chat, full width
            assert screen.query_one(CandidatesPanel).region.y > transcript.bottom


async def test_f9_and_f10_reach_every_panel_in_a_small_terminal(make_app: Any) -> None:
    app = make_app()
    async with app.run_test(size=(40, 12)) as pilot:
        await send(app, pilot, "hi")
        screen = app.screen
        candidates, params = screen.query_one(CandidatesPanel), screen.query_one(ParamsPanel)
        assert not candidates.region.area and not params.region.area  # the chat needs the rows
        await pilot.press("f10")
        await pilot.pause()
        assert params.region.area and not candidates.region.area
        await pilot.press("f9")
        await pilot.pause()
        assert candidates.region.area and not params.region.area
        assert "#19" in screen_text(app)
        await pilot.press("f9")
        await pilot.pause()
        assert not candidates.region.area and screen.query_one(Transcript).region.area


async def test_tight_terminal_shows_one_panel_and_f10_swaps(make_app: Any) -> None:
    app = make_app()
    async with app.run_test(size=(60, 20)) as pilot:
        await send(app, pilot, "hi")
        screen = app.screen
        candidates, params = screen.query_one(CandidatesPanel), screen.query_one(ParamsPanel)
        assert candidates.region.area and not params.region.area
        await pilot.press("f10")
        await pilot.pause()
        assert params.region.area and not candidates.region.area
        await pilot.press("f10")  # and F10 again hides it: the chat gets the rows
        await pilot.pause()
        assert not params.region.area and not candidates.region.area


async def test_the_candidates_list_scrolls_with_its_cursor(make_app: Any) -> None:
    app = make_app(ScriptedEngine([[TEN]]))
    async with app.run_test(size=(80, 24)) as pilot:
        await send(app, pilot, "hi")
        panel = app.screen.query_one(CandidatesPanel)
        await wait_until(pilot, lambda: panel.token is not None)
        text = screen_text(app)
        assert "▼6" in text and " alt9" not in text  # four of ten rows fit: the rest is announced
        panel.focus()
        for _ in range(9):
            await pilot.press("down")
        await pilot.pause()
        text = screen_text(app)
        assert "0  ␣alt9" in text and "▲6" in text and "▼" not in text
        await pilot.press("down")  # wraps to the first
        await pilot.pause()
        assert "1▶ ␣a" in screen_text(app)


def test_headers_drop_whole_details_never_a_word_cut() -> None:
    parts = [("assistant", 0), ("‹branch 2/3›", 0), ("from token 12", 2), ("T=0.7", 3), ("20 tok", 1),
             ("length", 0)]
    assert fit_parts(parts, 200) == "assistant · ‹branch 2/3› · from token 12 · T=0.7 · 20 tok · length"
    assert fit_parts(parts, 50) == "assistant · ‹branch 2/3› · 20 tok · length"
    assert fit_parts(parts, 20) == "assistant"


async def test_a_reply_header_fits_a_narrow_screen(make_app: Any) -> None:
    app = make_app()
    async with app.run_test(size=(40, 12)) as pilot:
        await send(app, pilot, "hi")
        await pilot.press("ctrl+r")  # a second version: the header gains "‹branch 2/2›"
        await wait_until(pilot, lambda: len(app.controller.conversation.path()[-1].versions) == 2)
        await pilot.pause()
        view = app.screen.query_one(AssistantView)
        header = view.query_one("#header")
        shown = str(header.render())
        assert shown.startswith("assistant · ‹branch 2/2›") and len(shown) <= header.size.width


@pytest.mark.parametrize("size", [(120, 36), (80, 24)])
async def test_notifications_never_cover_the_panels(make_app: Any, size: tuple[int, int]) -> None:
    """Before: toasts sat bottom right, over the parameters panel one was just changing."""
    from textual.widgets._toast import Toast

    app = make_app()
    async with app.run_test(size=size, notifications=True) as pilot:
        await send(app, pilot, "hi")
        app.screen.query_one(Transcript).focus()
        await pilot.press("f5")  # "Preset: precise"
        await wait_until(pilot, lambda: bool(app.screen.query(Toast)) and app.screen.query(Toast).first().region.area)
        toast = app.screen.query(Toast).first().region
        for panel in (app.screen.query_one(CandidatesPanel), app.screen.query_one(ParamsPanel)):
            assert not toast.overlaps(panel.region), (panel, toast)


@pytest.mark.parametrize("size", [(80, 24), (99, 30), (100, 30)])
async def test_previews_never_squeeze_the_candidates_panel(make_app: Any, size: tuple[int, int]) -> None:
    """Found in tmux at 80x24: the "what if" panel took the row under the chat, leaving the
    candidates panel 4 columns and the parameters none (its narrow-layout rule was scoped to the
    widget, so it never matched). Under the chat there is no room for it; beside the chat there is."""
    from tui.app.widgets.previews import PreviewsPanel

    app = make_app()
    async with app.run_test(size=size) as pilot:
        await send(app, pilot, "hi")
        app.screen.query_one(PreviewsPanel).rows = (("a", " b c", True), ("x", " y", False))
        await pilot.pause()
        candidates = app.screen.query_one(CandidatesPanel).region
        previews = app.screen.query_one(PreviewsPanel).region
        assert candidates.width >= 40
        assert bool(previews.area) == (size[0] >= 100)
        if previews.area:
            assert not previews.overlaps(candidates)
