"""The unsent message is kept across quitting (#30.6): typed, not sent, Ctrl+Q; the next start
has it in the input. An empty input leaves nothing behind; a hostile file there is data."""

from __future__ import annotations

from conftest import AppFactory
from tui_helpers import SIZE, wait_idle

from engine.core.chat.draft import draft_path
from tui.app.widgets.chat_input import ChatInput


async def test_a_draft_survives_quit_and_start(make_app: AppFactory) -> None:
    """Before: the half-written message was gone after Ctrl+Q."""
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        await pilot.press(*"half a thought")
        await pilot.press("ctrl+q")
        await pilot.pause()
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        chat_input = app.screen.query_one(ChatInput)
        assert chat_input.text == "half a thought" and app.focused is chat_input
        await pilot.press("ctrl+u")  # TextArea: delete to the line start
        chat_input.clear()
        await pilot.press("ctrl+q")
        await pilot.pause()
    assert not draft_path(app.save_dir).exists()


async def test_a_hostile_draft_file_is_shown_as_data(make_app: AppFactory) -> None:
    app = make_app()
    path = draft_path(app.save_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("hi \x1b[2J there", encoding="utf-8")
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        assert "\x1b" not in app.screen.query_one(ChatInput).text
        assert app.screen.query_one(ChatInput).text.startswith("hi ")
