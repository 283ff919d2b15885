"""Keys that never trap (#16.4): one test per trap a new user fell into."""

from __future__ import annotations

from typing import Any

import pytest

from tui.app.screens.help import HelpScreen
from tui.app.widgets.candidates import CandidatesPanel
from tui.app.widgets.chat_input import ChatInput
from tui.app.widgets.params_panel import ParamsPanel
from tui.app.widgets.transcript import Transcript
from tui_helpers import SIZE, send, wait_idle, wait_until


@pytest.mark.parametrize("panel", [CandidatesPanel, ParamsPanel], ids=lambda p: p.__name__)
@pytest.mark.parametrize("key", ["i", "escape"])
async def test_i_and_esc_leave_a_panel_for_the_input(make_app: Any, panel: type, key: str) -> None:
    """Before: neither did anything there, and what one typed next changed parameters."""
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        app.screen.query_one(panel).focus()
        await pilot.press(key)
        await pilot.pause()
        assert isinstance(app.focused, ChatInput)


async def test_a_digit_in_the_candidates_panel_branches(make_app: Any) -> None:
    """Before: digits did nothing in the panel that prints them."""
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        await pilot.press("escape", "right", "home")  # the first token, "Hello": candidates Hello, Hi, ...
        app.screen.query_one(CandidatesPanel).focus()
        await pilot.press("2")
        await wait_until(pilot, lambda: len(app.engine.requests) == 2)
        await wait_idle(app, pilot)
        request = app.engine.requests[-1]
        assert request.continue_last and request.messages[-1].text == "Hi"


async def test_a_digit_without_a_selected_token_uses_the_list_on_screen(make_app: Any) -> None:
    """Before: after a reply the panel shows its last token's numbered list, but a digit failed
    silently because no token was selected."""
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        panel = app.screen.query_one(CandidatesPanel)
        assert panel.token is not None and app.screen.query_one(Transcript).cursor is None
        app.screen.query_one(Transcript).focus()
        await pilot.press("1")
        await wait_until(pilot, lambda: len(app.engine.requests) == 2)
        assert app.engine.requests[-1].continue_last


async def test_letters_are_parameters_not_cursor_keys(make_app: Any) -> None:
    """Before: h/l moved the cursor while k changed top-k; now arrows move, letters step params."""
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        transcript = app.screen.query_one(Transcript)
        await pilot.press("escape", "right", "home")
        before = transcript.cursor
        await pilot.press("l")
        await pilot.pause()
        assert transcript.cursor == before and before is not None and before[1] == 0


async def test_help_shows_keys_as_the_footer_does(make_app: Any) -> None:
    """Before: F1 said left_square_bracket and shift+enter,ctrl+j where the footer says ^q."""
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f1")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.pause()
        rows = [" ".join(str(cell) for cell in app.screen.query_one("DataTable").get_row_at(i))
                for i in range(app.screen.query_one("DataTable").row_count)]
        text = "\n".join(rows)
        assert "left_square_bracket" not in text and "ctrl+" not in text
        assert any(row.startswith("[ Previous branch") for row in rows)
        assert any(row.startswith("^j / shift+⏎ Newline") for row in rows)
        assert any(row.startswith("^q Quit") for row in rows)


async def test_brackets_keep_the_token_cursor(make_app: Any) -> None:
    """[ and ] show another version of the selected reply; the cursor stays on its token."""
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        await pilot.press("ctrl+r")
        await wait_idle(app, pilot)
        await pilot.press("escape", "right", "home", "right", "right")
        transcript = app.screen.query_one(Transcript)
        assert transcript.cursor is not None and transcript.cursor[1] == 2
        for key in ("left_square_bracket", "right_square_bracket"):
            await pilot.press(key)
            await pilot.pause()
            assert transcript.cursor is not None and transcript.cursor[1] == 2


async def test_shift_tab_inspects_a_streaming_reply_without_stopping_it(make_app: Any) -> None:
    """Esc stops a streaming reply; Shift+Tab reaches the transcript and leaves it running."""
    from engine.scripted import ScriptedEngine
    from tui_helpers import start_reply

    app = make_app(ScriptedEngine(token_delay=0.05, hold_after=2))  # streaming until Esc, however slow the CPU
    async with app.run_test(size=SIZE) as pilot:
        await start_reply(app, pilot)
        await pilot.press("shift+tab")
        await pilot.pause()
        assert isinstance(app.focused, Transcript) and app.controller.busy
        await pilot.press("left")
        await pilot.pause()
        assert app.screen.query_one(Transcript).cursor is not None and app.controller.busy
        await pilot.press("escape")  # now it stops
        await wait_idle(app, pilot)


async def test_the_footer_follows_focus_and_state(make_app: Any) -> None:
    """Before: the footer never showed the core interaction (arrows, digits, n; Esc to stop)."""
    from engine.scripted import ScriptedEngine
    from tui.app.widgets.key_bar import KeyBar
    from tui_helpers import start_reply

    app = make_app(ScriptedEngine(token_delay=0.05))
    async with app.run_test(size=(80, 24)) as pilot:
        bar = app.screen.query_one(KeyBar)
        await start_reply(app, pilot)
        await wait_until(pilot, lambda: "esc Stop" in bar.render().plain)
        await pilot.press("escape")
        await wait_idle(app, pilot)
        await wait_until(pilot, lambda: "esc Inspect" in bar.render().plain)
        await pilot.press("escape")
        await pilot.pause()
        line = bar.render().plain
        assert line.startswith(" ←/→ Token  1-0 Branch  n Unlikely  f Fork  i Type") and "Commands" in line
        assert "…" not in line  # hints that do not fit are left out whole


async def test_a_parameter_key_is_never_silent(make_app: Any) -> None:
    """Before: with the parameters panel out of sight, t/m/r changed parameters unseen."""
    app = make_app()
    async with app.run_test(size=(60, 20)) as pilot:  # one panel: the candidates
        await send(app, pilot, "hi")
        app.screen.query_one(Transcript).focus()
        await pilot.press("t")
        await wait_until(pilot, lambda: any(n.message == "temperature 0.60" for n in app._notifications))
