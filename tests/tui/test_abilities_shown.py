"""The app shows what the loaded model can do from `ModelInfo.abilities` (#27.2), instead of
pretending: an engine that takes new parameters only from the next reply (a server's chat
endpoint) gets no mid-reply change recorded in the reply, and the user is told when it applies."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from engine.core.api import Abilities
from engine.scripted import ScriptedEngine
from tui_helpers import SIZE, wait_idle, wait_until


async def _held_reply(app: Any, pilot: Any) -> None:
    await wait_idle(app, pilot)
    await pilot.press(*"hi", "enter")
    await wait_until(pilot, lambda: app.controller.busy and bool(app.controller.conversation.path()[-1].version.tokens))


async def test_a_change_mid_reply_on_an_engine_without_live_parameters_is_said_and_not_recorded(make_app: Any) -> None:
    engine = ScriptedEngine(hold_after=1)
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        why = "the server's chat endpoint takes new settings from the next reply"
        engine._model = replace(engine.model, abilities=Abilities(live_params=False, why=(("live_params", why),)))
        await _held_reply(app, pilot)
        app.chat_screen.action_step_param("temperature", -1)
        reply = app.controller.conversation.path()[-1].version
        assert reply.changes == []  # it did not apply mid-reply: the header must not say it did
        await wait_until(pilot, lambda: any(why in n.message for n in app._notifications))
        engine.release()
        await wait_idle(app, pilot)
        assert app.controller.params.temperature < 0.7  # kept for the next reply


async def test_a_change_mid_reply_on_a_live_engine_is_recorded(make_app: Any) -> None:
    engine = ScriptedEngine(hold_after=1)
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await _held_reply(app, pilot)
        app.chat_screen.action_step_param("temperature", -1)
        assert len(app.controller.conversation.path()[-1].version.changes) == 1
        engine.release()
        await wait_idle(app, pilot)
