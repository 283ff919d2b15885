"""What sending a message costs the main thread, which on a two-core machine is CPU taken from
the engine while it computes the first token: the engine is asked before anything is mounted,
unchanged messages are not redrawn, and the first token fills a line laid out in advance."""

from __future__ import annotations

from typing import Any, AsyncGenerator

import pytest
from textual.screen import Screen
from tui_helpers import SIZE, send, wait_idle, wait_until

from engine.core.api import EngineEvent, GenerateRequest
from engine.scripted import ScriptedEngine
from tui.app.widgets.message_views import AssistantView, UserView
from tui.app.widgets.token_chunk import TokenChunk
from tui.app.widgets.transcript import Transcript


async def test_the_engine_is_asked_before_the_new_messages_are_mounted(
    make_app: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    order: list[str] = []
    engine = ScriptedEngine()
    original_generate, original_show = engine.generate, Transcript.show

    def generate(request: GenerateRequest) -> AsyncGenerator[EngineEvent, None]:
        order.append("engine")
        return original_generate(request)

    def show(self: Transcript, conversation: Any) -> None:
        order.append("mount")
        original_show(self, conversation)

    monkeypatch.setattr(engine, "generate", generate)
    monkeypatch.setattr(Transcript, "show", show)
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        order.clear()
        await send(app, pilot, "hi")
        assert order[:2] == ["engine", "mount"]


async def test_a_send_redraws_only_the_new_user_message(make_app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(ScriptedEngine(token_delay=0.0))
    async with app.run_test(size=SIZE) as pilot:
        for text in ("one", "two", "three"):
            await send(app, pilot, text)
        await wait_until(pilot, lambda: all(v.tokens for v in app.screen.query(UserView)))  # scored (#33.1)
        drawn: list[str] = []
        original = UserView.draw

        def draw(self: UserView, *args: Any, **kwargs: Any) -> None:
            drawn.append(self.node.version.text)
            original(self, *args, **kwargs)

        monkeypatch.setattr(UserView, "draw", draw)
        await send(app, pilot, "four")
        await wait_until(pilot, lambda: all(v.tokens for v in app.screen.query(UserView)))
        assert drawn == ["four", "four"]  # as text when sent, then as its tokens once scored; no other
        assert [v.node.version.text for v in app.screen.query(UserView)] == ["one", "two", "three", "four"]


async def test_the_first_token_lands_without_a_layout_pass(make_app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(ScriptedEngine([["Hello", " there"]], token_delay=0.4))
    layouts: list[str] = []
    original = Screen._refresh_layout
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        await pilot.press("h", "i", "enter")
        await wait_until(pilot, lambda: bool(app.screen.query(AssistantView)))
        view = app.screen.query(AssistantView).last()
        await wait_until(pilot, lambda: view.region.height >= 1)
        await pilot.pause(0.1)  # the new messages are laid out; the first token is ~0.3 s away
        assert not app.controller.conversation.path()[-1].version.tokens
        height = view.region.height

        def counting(self: Screen[Any], *args: Any, **kwargs: Any) -> None:
            layouts.append("pass")
            original(self, *args, **kwargs)

        monkeypatch.setattr(Screen, "_refresh_layout", counting)
        await wait_until(pilot, lambda: bool(app.controller.conversation.path()[-1].version.tokens))
        await pilot.pause(0.05)
        assert "Hello" in view.query_one(TokenChunk).render().plain
        assert layouts == [] and view.region.height == height
        app.controller.stop()
        await wait_idle(app, pilot)


class SilentUntilStopped(ScriptedEngine):
    """Sends no token until stopped, then ends the turn as cancelled: a first token never came."""

    async def _generate(self, request: GenerateRequest) -> AsyncGenerator[EngineEvent, None]:
        self._cancel.clear()
        await self._cancel.wait()
        yield self._finished(request, self._prompt_ids(request), 0, [], "", "cancelled", 0)


async def test_a_reply_stopped_before_its_first_token_keeps_no_blank_line(make_app: Any) -> None:
    app = make_app(SilentUntilStopped())
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        await pilot.press("h", "i", "enter")
        await wait_until(pilot, lambda: bool(app.screen.query(TokenChunk)))
        chunk = app.screen.query_one(TokenChunk)
        await wait_until(pilot, lambda: chunk.region.height == 1)  # the line kept for the first token
        app.controller.stop()
        await wait_idle(app, pilot)
        assert app.controller.conversation.path()[-1].version.finish_reason == "cancelled"
        assert not chunk.is_attached and not app.screen.query(TokenChunk)
