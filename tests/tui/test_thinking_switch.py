"""The thinking switch in the app (#16.7): Ctrl+K sets it for the next replies where the model's
template has one; each reply keeps the switch it was written under, so later turns render the
history exactly; the status bar shows it only where it does something."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tui.model.fileformat import conversation_from_dict, conversation_to_dict
from tui.widgets.status_bar import StatusBar
from tui_helpers import SIZE, send, wait_idle

from engine.fake import ScriptedEngine


def _bar(app: Any) -> str:
    return app.screen.query_one(StatusBar).render().plain


async def test_ctrl_k_switches_thinking_for_the_next_replies_and_each_keeps_its_own(make_app: Any) -> None:
    engine = ScriptedEngine(supports_thinking=True)
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        assert "think auto" in _bar(app)
        await pilot.press("ctrl+k")  # from the chat input: the key is the screen's
        await pilot.pause()
        assert "think off" in _bar(app)
        await send(app, pilot, "hi")
        assert engine.requests[-1].thinking is False
        await pilot.press("ctrl+k")
        await send(app, pilot, "more")
        request = engine.requests[-1]
        assert request.thinking is True and "think on" in _bar(app)
        assert [m.thinking for m in request.messages if m.role == "assistant"] == [False]


async def test_a_model_without_the_switch_shows_none_and_says_so(make_app: Any) -> None:
    engine = ScriptedEngine()
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        await pilot.press("ctrl+k")
        await pilot.pause()
        assert "think" not in _bar(app) and app.controller.thinking is None
        assert any("no thinking switch" in str(n.message) for n in app._notifications)
        await send(app, pilot, "hi")
        assert engine.requests[-1].thinking is None


async def test_a_saved_chat_keeps_each_replys_switch(make_app: Any, tmp_path: Path) -> None:
    app = make_app(ScriptedEngine(supports_thinking=True))
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        await pilot.press("ctrl+k")
        await send(app, pilot, "hi")
        conversation = app.controller.conversation
    again = conversation_from_dict(json.loads(json.dumps(conversation_to_dict(conversation))))
    assert [m.thinking for m in again.messages() if m.role == "assistant"] == [False]
