"""The app with its engine in a process of its own (`engine.process`), as `logitscope` runs it:
chosen by default, a chat through it, a death of that process told in one line with the chat
kept, and quitting that ends it."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from engine.local.client import Engine
from engine.process import ProcessEngine, ScriptedSetup
from engine.scripted import ScriptedEngine
from tui.launch import build_app, parse_args
from tui_helpers import screen_text, send, wait_idle, wait_until


@pytest.fixture
def private_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("XDG_CONFIG_HOME", "XDG_STATE_HOME"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))


@pytest.mark.parametrize("setting, kind", [("", ProcessEngine), ("1", ProcessEngine), ("0", Engine),
                                           ("off", Engine)])
async def test_logitscope_runs_a_local_engine_in_its_own_process(private_dirs: None, monkeypatch: pytest.MonkeyPatch,
                                                                setting: str, kind: type) -> None:
    """By default (LOGITSCOPE_ENGINE_PROCESS=0 keeps it on a thread of the app's process); the
    scripted engine of the tests and screenshots stays in-process."""
    monkeypatch.setenv("LOGITSCOPE_ENGINE_PROCESS", setting)
    app: Any = build_app(parse_args(["--model", "demo"]))
    try:
        assert isinstance(app.engine, kind)
    finally:
        await app.engine.close()
    fake: Any = build_app(parse_args(["--model", "demo", "--fake-engine"]))
    assert isinstance(fake.engine, ScriptedEngine)


async def test_a_chat_through_the_engine_process(make_app: Any) -> None:
    """A reply streams onto the screen from the other process; quitting ends that process."""
    engine = ProcessEngine(ScriptedSetup({"token_delay": 0.001}))
    app = make_app(engine)
    async with app.run_test(size=(100, 30)) as pilot:
        await send(app, pilot, "hello")
        reply = app.controller.conversation.path()[-1].version
        assert reply.tokens and reply.text and reply.text.split()[0] in screen_text(app)
        pid = engine.pid
        assert pid is not None
        await app.action_quit()
    await asyncio.sleep(0.1)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_a_dead_engine_process_is_one_line_and_the_chat_stays(make_app: Any) -> None:
    """Killed mid-reply (the OOM killer on a big model): the reply keeps its tokens, the screen
    says what happened in one line, and loading the model again answers the next message."""
    engine = ProcessEngine(ScriptedSetup({"replies": [[f"w{i} " for i in range(500)]], "token_delay": 0.01}))
    app = make_app(engine)
    notes: list[str] = []
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_idle(app, pilot)
        real_notify = app.notify
        app.notify = lambda message, **kw: (notes.append(str(message)), real_notify(message, **kw))[1]
        app.screen.query_one("ChatInput").focus()
        await pilot.press(*"tell me", "enter")
        await wait_until(pilot, lambda: len(app.controller.conversation.path()[-1].version.tokens or ()) > 3)
        os.kill(engine.pid, signal.SIGKILL)  # type: ignore[arg-type]
        await wait_until(pilot, lambda: not app.controller.busy)
        shown = screen_text(app) + "\n".join(notes)
        assert "engine process ended" in shown
        assert "Traceback" not in shown
        path = app.controller.conversation.path()
        assert path[0].version.text == "tell me" and len(path[-1].version.tokens or ()) > 3
        assert engine.model is None
        assert "no model loaded" in screen_text(app)  # the status bar no longer names the lost model
        app.switch_model("demo")  # as the model picker does
        await wait_until(pilot, lambda: engine.model is not None)
        await send(app, pilot, "again")
        assert app.controller.conversation.path()[-1].version.tokens
        await app.action_quit()


async def test_an_engine_process_lost_while_idle_shows_at_the_next_send(make_app: Any) -> None:
    """Killed between replies: the next message is given back to the input with one line, and the
    status bar stops naming a model that is gone."""
    engine = ProcessEngine(ScriptedSetup())
    app = make_app(engine)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_idle(app, pilot)
        os.kill(engine.pid, signal.SIGKILL)  # type: ignore[arg-type]
        await wait_until(pilot, lambda: engine.model is None)
        app.screen.query_one("ChatInput").focus()
        await pilot.press(*"still there?", "enter")
        await pilot.pause()
        assert app.screen.query_one("ChatInput").text == "still there?"
        assert "no model loaded" in screen_text(app)
        await app.action_quit()


async def test_an_engine_process_lost_while_idle_is_said_at_once_and_why(make_app: Any) -> None:
    """Killed between replies (the OOM killer while the user reads): the screen says so at once,
    in one line with the reason, and the status bar stops naming the model; a message sent then
    is given back with that reason, not a bare "no model is loaded"; a new load clears it."""
    engine = ProcessEngine(ScriptedSetup())
    app = make_app(engine)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_idle(app, pilot)
        os.kill(engine.pid, signal.SIGKILL)  # type: ignore[arg-type]
        await wait_until(pilot, lambda: any("engine process ended" in n.message for n in app._notifications))
        await wait_until(pilot, lambda: "no model loaded" in screen_text(app))  # nothing sent yet
        told = [n.message for n in app._notifications if "engine process ended" in n.message]
        assert len(told) == 1 and "killed by signal 9" in told[0] and "\n" not in told[0]
        app.screen.query_one("ChatInput").focus()
        await pilot.press(*"still there?", "enter")
        await pilot.pause()
        assert app.screen.query_one("ChatInput").text == "still there?"
        because = [n for n in app._notifications if "killed by signal 9" in n.message]
        assert len(because) == 2 and because[-1].severity == "warning"  # the send's own line says why
        app.switch_model("demo")
        await wait_until(pilot, lambda: engine.model is not None)
        assert engine.lost == ""
        await app.action_quit()
