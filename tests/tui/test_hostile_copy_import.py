"""Issue #29 items 2-3 in the TUI: what y / Y put on the clipboard is defused as the screen is,
and an imported chat with out-of-range numbers never reaches the heatmap."""

from __future__ import annotations

from typing import Any

from tui_helpers import SIZE, send, wait_until

from engine.scripted import ScriptedEngine, ScriptedToken

ESCAPES = "\x1b]52;c;aGk=\x07\x1b]0;T\x07\x9b2J"


async def test_copies_hold_no_raw_control_characters(make_app: Any) -> None:
    tokens = [ScriptedToken("line one\n", 0.5), ScriptedToken(ESCAPES, 0.5), ScriptedToken("\tend", 0.5)]
    app = make_app(ScriptedEngine([tokens]))
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        await pilot.press("escape", "home", "right")
        await pilot.pause()
        await pilot.press("Y")
        await wait_until(pilot, lambda: app.clipboard != "")
        assert app.clipboard == "line one\n␛]52;c;aGk=␇␛]0;T␇\\x9b2J\tend"  # newline and tab kept
        await pilot.press("y")
        await wait_until(pilot, lambda: app.clipboard == "␛]52;c;aGk=␇␛]0;T␇\\x9b2J")
