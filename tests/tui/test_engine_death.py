"""#19.5: the engine thread dying mid-chat is one line in the app, and the chat stays."""

from __future__ import annotations

from pathlib import Path

import pytest
from tui_helpers import SIZE, send, wait_idle, wait_until

from engine.local.client import Engine
from engine.core.settings.config import load_config
from engine.local.worker import EngineWorker
from tui.app.application import LogitscopeApp


def _dies(self: EngineWorker, command: object, session: object) -> None:
    raise RuntimeError("a bug on the engine thread")


async def test_the_app_says_the_engine_stopped_and_keeps_the_chat(chatml_model: Path, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    engine = Engine()
    app = LogitscopeApp(engine, load_config(tmp_path / "config.toml"), model=str(chatml_model),
                        config_dir=tmp_path / "cfg", save_dir=tmp_path / "state")
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot, timeout=60)
        app.chat_screen.param_actions.set_params(app.controller.params.with_changes(max_tokens=4, temperature=0.0))
        await send(app, pilot, "hello")
        monkeypatch.setattr(EngineWorker, "_generate", _dies)
        await send(app, pilot, "more")
        await wait_until(pilot, lambda: any("The engine stopped" in n.message for n in app._notifications), 10)
        told = [n.message for n in app._notifications if "The engine stopped" in n.message]
        assert told == ["The engine stopped: a bug on the engine thread"]
        texts = [n.version.text for n in app.controller.conversation.path()]
        assert texts[0] == "hello" and texts[1] and texts[2] == "more"  # the chat so far is all there
        await pilot.press("ctrl+q")
