"""#23: a model whose config states no context length is said to once, in a notification, with
the setting that changes the assumed limit (plain text: `[model]` is not markup)."""

from __future__ import annotations

import dataclasses
from typing import Any

from tui_helpers import SIZE, wait_idle

from engine.core.api import ModelInfo
from engine.scripted import ScriptedEngine

NOTE = "the model's config states no context length; assuming 4096 tokens (set [model] max_context to change it)"


class NotedEngine(ScriptedEngine):
    """A scripted engine whose model comes with the engine's note about its context limit."""

    async def load(self, model: str, **options: Any) -> ModelInfo:
        info = await super().load(model, **options)
        self._model = dataclasses.replace(info, notes=(NOTE,))
        return self._model


async def test_the_context_note_is_shown_once(make_app: Any) -> None:
    app = make_app(engine=NotedEngine())
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        notes = [n.message for n in app._notifications]
        assert notes.count(NOTE) == 1
