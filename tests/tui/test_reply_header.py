"""The reply says how it was drawn (#30.6): its seed (a "random" one is drawn by the app and
recorded, so the reply can be reproduced) and any parameter changed while it streamed, where."""

from __future__ import annotations

import re

from conftest import AppFactory
from tui_helpers import SIZE, send, start_reply, wait_idle

from engine.core.chat.fileformat import conversation_from_dict, conversation_to_dict
from engine.scripted import ScriptedEngine
from tui.app.widgets.message_views import AssistantView


def _header(app: object) -> str:
    return app.screen.query(AssistantView).last()._header_text  # type: ignore[attr-defined]


async def test_the_reply_shows_its_seed(make_app: AppFactory) -> None:
    """Before: "assistant · T=0.70 · 6 tok" and no way to know the random seed it drew with."""
    engine = ScriptedEngine()
    app = make_app(engine)
    async with app.run_test(size=(160, 50)) as pilot:
        await send(app, pilot, "hi")
        seed = engine.requests[-1].params.seed
        assert seed is not None and app.controller.params.seed is None  # the panel still says random
        assert f"seed {seed}" in _header(app)
        assert app.controller.conversation.path()[-1].version.params.seed == seed


async def test_a_change_mid_reply_is_shown_where_it_applied(make_app: AppFactory) -> None:
    """Before: t while a reply streamed changed its temperature from some token on, and the
    header still said T=0.70 for the whole reply."""
    app = make_app(ScriptedEngine(token_delay=0.2))
    async with app.run_test(size=(160, 50)) as pilot:
        await start_reply(app, pilot)
        await pilot.press("shift+tab", "t")  # to the transcript (Esc would stop it), temperature down
        await wait_idle(app, pilot)
        version = app.controller.conversation.path()[-1].version
        assert len(version.changes) == 1 and version.changes[0][1].temperature == 0.6
        at = version.changes[0][0]
        assert re.search(rf"at token {at}: temperature 0\.70→0\.60", _header(app)), _header(app)
        again = conversation_from_dict(conversation_to_dict(app.controller.conversation))
        assert again.path()[-1].version.changes == version.changes  # saved and read back


async def test_the_reply_keeps_where_the_engine_applied_a_change(make_app: AppFactory) -> None:
    """The app notes a change at the number of tokens it has seen; a pipelined engine has
    already sampled the next one with the old parameters, and says so at the end of the turn
    (`TurnFinished.params_changes`): the reply keeps the engine's index, which the stage view
    replays (#32.3)."""
    engine = ScriptedEngine(token_delay=0.2)
    engine.change_lag = 1  # as the MLX engine: the change drew from one token later than the app saw
    app = make_app(engine)
    async with app.run_test(size=(160, 50)) as pilot:
        await start_reply(app, pilot)
        await pilot.press("shift+tab", "t")
        await wait_idle(app, pilot)
        version = app.controller.conversation.path()[-1].version
        applied = next(i for i, p in enumerate(engine.params_seen) if p.temperature == 0.6)  # the app's own guess
        assert len(version.changes) == 1 and version.changes[0][0] == applied + 1
        assert re.search(rf"at token {version.changes[0][0]}: temperature", _header(app)), _header(app)
