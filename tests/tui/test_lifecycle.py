"""Loading and quitting: a failed load, typing while a model loads, quitting mid-reply."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.scripted import ScriptedEngine
from tui_helpers import SIZE, screen_text, start_reply, stored_documents, wait_idle, wait_until
from tui.app.widgets.chat_input import ChatInput


async def test_model_load_error_is_a_notification(make_app: Any) -> None:
    app = make_app(ScriptedEngine(load_error="model 'nope' not found"))
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: "no model loaded" in screen_text(app))
        notes = [n.message for n in app._notifications]
        assert "model 'nope' not found" in notes
        assert "no model loaded" in screen_text(app)
        await pilot.press(*"hi", "enter")
        await pilot.pause()
        assert app.controller.conversation.root is None  # refused politely, no crash


async def test_usable_while_loading(make_app: Any) -> None:
    app = make_app(ScriptedEngine(load_delay=1.0))
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: "loading demo" in screen_text(app))
        await pilot.press(*"typing", "ctrl+t")
        assert app.screen.query_one(ChatInput).text == "typing"
        await wait_idle(app, pilot)
        assert "ready" in screen_text(app)


async def test_quit_mid_stream_closes_engine_and_keeps_conversation(make_app: Any, tmp_path: Path) -> None:
    engine = ScriptedEngine(token_delay=0.2)
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await start_reply(app, pilot)
        assert app.controller.busy
        await pilot.press("ctrl+q")
        await pilot.pause()
    assert engine.closed
    [saved] = stored_documents(app.library.path)
    assert saved["nodes"][0]["versions"][0]["text"] == "hi"

