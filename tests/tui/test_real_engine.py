"""End to end: the app on the real `engine.local.client.Engine` with a tiny random model (offline)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from engine.core.settings.config import load_config
from tui.app.application import LogitscopeApp
from tui.app.widgets.candidates import CandidatesPanel
from tui_helpers import SIZE, send, wait_idle

client = pytest.importorskip("engine.local.client", reason="engine.local.client is not there yet")


async def test_chat_inspect_branch_and_quit_on_a_tiny_model(chatml_model: Path, tmp_path: Path) -> None:
    engine = client.Engine()
    app = LogitscopeApp(engine, load_config(tmp_path / "config.toml"), model=str(chatml_model),
                        config_dir=tmp_path / "cfg", save_dir=tmp_path / "state")
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot, timeout=60)
        assert engine.model is not None, [n.message for n in app._notifications]
        app.chat_screen.param_actions.set_params(app.controller.params.with_changes(max_tokens=12, temperature=0.0))
        await send(app, pilot, "hello")
        node = app.controller.conversation.path()[-1]
        first = node.version
        assert first.finish_reason in ("stop", "length") and first.tokens
        assert first.stats is not None and first.stats.generated_tokens == len(first.tokens)
        token = first.tokens[0]
        assert token.rank == 1 and len(token.candidates) == 10  # greedy: the chosen is the favourite
        await pilot.press("escape", "right", "home")
        assert app.screen.query_one(CandidatesPanel).token == token
        await pilot.press("2")  # continue from the runner-up
        await wait_idle(app, pilot, timeout=60)
        branch = node.version
        assert len(node.versions) == 2 and branch.tokens is not None
        assert branch.tokens[0].id == token.candidates[1].id
        assert branch.stats is not None and branch.stats.reused_tokens > 0  # the prompt came from the cache
        thread_id = engine.engine_thread_id
        await pilot.press("ctrl+q")
    assert thread_id is not None
    assert all(t.ident != thread_id for t in threading.enumerate())  # stopped and joined
