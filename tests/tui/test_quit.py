"""Quitting never waits on a stuck engine and never loses the chat: Ctrl+Q leaves within ~2 s
(committing the chat to the library first), a reply cut by quitting is saved as cancelled, a
library that cannot take the chat sends it to a rescue file (taken in at the next start), a chat
nothing can take is asked about or said in one line, SIGTERM saves and restores the terminal, a
FIFO at the config path never hangs start-up."""

from __future__ import annotations

import asyncio
import errno
import os
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any, AsyncGenerator

import pytest

from engine.core.api import EngineEvent, GenerateRequest
from engine.core.chat import store
from engine.scripted import ScriptedEngine
from tui.main import after_exit
from tui_helpers import SIZE, send, start_reply, stored_documents, wait_until

ROOT = Path(__file__).resolve().parents[2]


class StuckEngine(ScriptedEngine):
    """An engine whose thread no longer answers: a turn that ignores cancel, a close that hangs
    (a chat template looping for minutes did this)."""

    def generate(self, request: GenerateRequest) -> AsyncGenerator[EngineEvent, None]:
        return self._stuck(request)

    async def _stuck(self, request: GenerateRequest) -> AsyncGenerator[EngineEvent, None]:
        async for event in self._generate(request):
            yield event
            break
        await asyncio.Event().wait()  # never another token, never a TurnFinished
        yield event  # pragma: no cover

    async def close(self) -> None:
        await asyncio.Event().wait()


async def test_ctrl_q_leaves_within_seconds_when_the_engine_is_stuck(make_app: Any, tmp_path: Path) -> None:
    app = make_app(StuckEngine())
    async with app.run_test(size=SIZE) as pilot:
        await start_reply(app, pilot, "tell me")
        started = time.monotonic()
        await asyncio.wait_for(app.action_quit(), 10)
        assert time.monotonic() - started < 4
        await pilot.pause()
    assert app.engine_stuck
    [saved] = stored_documents(app.library.path)
    reply = saved["nodes"][1]["versions"][0]
    assert reply["finish_reason"] == "cancelled" and reply["tokens"]  # not null: "streaming..." forever


async def test_a_reply_cut_by_quitting_is_saved_as_cancelled(make_app: Any, tmp_path: Path) -> None:
    app = make_app(ScriptedEngine(token_delay=0.2))
    async with app.run_test(size=SIZE) as pilot:
        await start_reply(app, pilot, "tell me")
        await pilot.press("ctrl+q")
        await pilot.pause()
    [saved] = stored_documents(app.library.path)
    assert saved["nodes"][1]["versions"][0]["finish_reason"] == "cancelled"
    assert not app.engine_stuck


async def test_a_chat_nothing_can_take_at_exit_is_one_line(make_app: Any, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """SIGTERM (no one to ask) while neither the library nor a rescue file can take the chat (a
    full disk): one line on exit, no temporary file left."""
    def full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    app = make_app(ScriptedEngine(token_delay=0.2))
    async with app.run_test(size=SIZE) as pilot:
        await start_reply(app, pilot, "tell me")
        monkeypatch.setattr(store, "write_text", full)
        monkeypatch.setattr(app.library, "kept", lambda: False)
        app.terminate()
        await pilot.pause()
    assert after_exit(app) == 128 + 15
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "could not be saved" in err and "No space left on device" in err
    rescue = tmp_path / "state" / "conversations"
    assert not rescue.exists() or not any(p.name.endswith(".tmp") for p in rescue.iterdir())


async def test_a_chat_the_library_cannot_take_goes_to_a_rescue_file_and_into_the_library_next_start(
        make_app: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The library fails at quit (locked, damaged): the chat is written to a file of its own,
    the exit line names it, and the next start takes it into the library (then Ctrl+L has it)."""
    app = make_app(ScriptedEngine())
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "rescue me")
        monkeypatch.setattr(app.library, "kept", lambda: False)
        await pilot.press("ctrl+q")
        await pilot.pause()
    assert after_exit(app) == 0
    [rescued] = (tmp_path / "state" / "conversations").iterdir()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(rescued) in err
    monkeypatch.undo()
    again = make_app(ScriptedEngine())
    async with again.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: any("Took 1 chat" in n.message for n in again._notifications))
        await pilot.press("ctrl+l")
        await wait_until(pilot, lambda: len(again.controller.conversation.path()) == 2)
        assert again.controller.conversation.path()[0].version.text == "rescue me"
    assert not any((tmp_path / "state" / "conversations").iterdir())  # moved to the backup folder
    assert (tmp_path / "state" / "imported-into-library" / "conversations" / rescued.name).is_file()


def test_a_fifo_at_the_config_path_never_hangs_start_up(tmp_path: Path) -> None:
    from engine.core.settings import load_config

    fifo = tmp_path / "config.toml"
    os.mkfifo(fifo)
    result: list[Any] = []
    reader = threading.Thread(target=lambda: result.append(load_config(fifo, explicit=True)), daemon=True)
    reader.start()
    reader.join(10)
    assert result, "load_config blocked on a FIFO"
    assert any("not a regular file" in p for p in result[0].problems)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")
def test_sigterm_mid_reply_saves_restores_the_terminal_and_exits(tmp_path: Path) -> None:
    from test_tmux import Tmux

    tmux = Tmux(tmp_path)
    marker = tmp_path / "exit-code"
    try:
        app = f"echo $$ > {tmp_path / 'pid'}; exec {sys.executable} -m tui.main --fake-engine"
        tmux.start(f"LOGITSCOPE_FAKE_DELAY=0.3 sh -c '{app}'; echo $? > {marker}; echo EXITED; sleep 30")
        tmux.wait_for(lambda s: "scripted-demo" in s and "ready" in s)
        tmux.type_line("tell me")
        tmux.wait_for(lambda s: "streaming" in s)
        os.kill(int((tmp_path / "pid").read_text()), 15)
        screen = tmux.wait_for(lambda s: "EXITED" in s, timeout=15)
        assert "Traceback" not in screen and "scripted-demo" not in screen  # the normal screen is back
        assert marker.read_text().strip() == "143"
        from engine.core.settings.paths import data_dir

        [saved] = stored_documents(data_dir() / "library.sqlite3")
        assert saved["nodes"][0]["versions"][0]["text"] == "tell me"
        assert saved["nodes"][1]["versions"][0]["finish_reason"] == "cancelled"
    finally:
        tmux.kill()


async def test_quitting_asks_first_when_no_save_can_take_the_chat(make_app: Any, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk: the library cannot commit the chat and a rescue file cannot be written. Ctrl+Q
    used to leave at once with one line, the chat gone; now it asks (save elsewhere, discard, or
    stay: free some space and quit again), as replacing the chat does."""
    from tui.app.screens.replace_chat import ReplaceChatDialog

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    app = make_app(ScriptedEngine())
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "keep me")
        monkeypatch.setattr(store, "write_text", full)
        monkeypatch.setattr(app.library, "kept", lambda: False)
        await pilot.press("ctrl+q")
        await pilot.pause()
        assert isinstance(app.screen, ReplaceChatDialog) and app.is_running
        await pilot.press("escape")  # stay: nothing is lost
        await pilot.pause()
        assert app.is_running and not isinstance(app.screen, ReplaceChatDialog)
        monkeypatch.undo()  # space was freed
        await pilot.press("ctrl+q")  # now it saves and leaves without a question
        await pilot.pause()
    assert after_exit(app) == 0
    [saved] = stored_documents(app.library.path)
    assert saved["nodes"][0]["versions"][0]["text"] == "keep me"


async def test_discarding_at_the_question_quits(make_app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    def full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    app = make_app(ScriptedEngine())
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "drop me")
        monkeypatch.setattr(store, "write_text", full)
        monkeypatch.setattr(app.library, "kept", lambda: False)
        await pilot.press("ctrl+q")
        await pilot.pause()
        await pilot.press("d")
        await pilot.pause(0.5)
    assert not app.is_running


async def test_discarding_at_the_question_leaves_without_saying_it_was_not_saved(
        make_app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The user chose D: the exit line said "the conversation could not be saved", as if the
    choice had not been heard (a hostile pass on a full tmpfs saw it)."""
    def full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    app = make_app(ScriptedEngine())
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "drop me")
        monkeypatch.setattr(store, "write_text", full)
        monkeypatch.setattr(app.library, "kept", lambda: False)
        await pilot.press("ctrl+q")
        await pilot.pause()
        await pilot.press("d")
        await pilot.pause(0.5)
    assert not app.is_running
    assert app.exit_note is None
