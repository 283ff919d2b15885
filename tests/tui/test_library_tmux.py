"""The real app, SIGKILLed mid-reply in a real terminal: the chat is in the library with what
was committed before the kill, and the database is sound. Skipped without tmux."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest
from test_tmux import Tmux, pytestmark, tmux  # noqa: F401  (the fixture and the skip)

from engine.core.library import Library
from engine.core.settings.paths import data_dir
from engine.core.chat.fileformat import conversation_from_dict


def _partial_reply(path: Path) -> int:
    """Tokens of the stored reply to "tell me" (0 while there is none yet)."""
    if not path.exists():
        return 0
    library = Library(path)
    try:
        entries = library.entries()
        if not entries:
            return 0
        nodes = conversation_from_dict(library.load(entries[0].id).document).path()
        return len(nodes[1].version.tokens or []) if len(nodes) > 1 else 0
    finally:
        library.close()


@pytest.mark.slow
def test_sigkill_mid_reply_keeps_the_chat(tmux: Tmux) -> None:  # noqa: F811
    path = data_dir() / "library.sqlite3"
    tmux.start(f"LOGITSCOPE_FAKE_DELAY=0.4 {sys.executable} -m tui.main --fake-engine")
    tmux.wait_for(lambda s: "scripted-demo" in s and "ready" in s)
    tmux.type_line("tell me")
    tmux.wait_for(lambda s: "streaming" in s)
    end = time.monotonic() + 20
    while _partial_reply(path) == 0 and time.monotonic() < end:
        time.sleep(0.2)
    assert "streaming" in tmux.screen()  # the reply is still coming when the app dies
    os.kill(int(tmux.run("display", "-p", "-t", "t", "#{pane_pid}").strip()), signal.SIGKILL)
    library = Library(path)
    assert library.integrity() == "ok"
    [entry] = library.entries()
    assert entry.title == "tell me"
    reply = conversation_from_dict(library.load(entry.id).document).path()[1].version
    assert reply.tokens and reply.finish_reason == "cancelled"


@pytest.mark.slow
def test_library_screen_end_to_end(tmux: Tmux) -> None:  # noqa: F811
    """Chat, quit, start again: Ctrl+G lists the chat, typing finds it, Enter reopens it."""
    command = f"LOGITSCOPE_FAKE_DELAY=0.001 {sys.executable} -m tui.main --fake-engine"
    tmux.start(command)
    tmux.wait_for(lambda s: "scripted-demo" in s and "ready" in s)
    tmux.type_line("penguins in winter")
    tmux.wait_for(lambda s: "ready" in s and "reused" in s)
    tmux.run("send-keys", "-t", "t", "C-q")
    tmux.wait_for(lambda s: "ready" not in s)
    tmux.kill()
    tmux.start(command)
    tmux.wait_for(lambda s: "scripted-demo" in s and "ready" in s)
    tmux.run("send-keys", "-t", "t", "C-g")
    tmux.wait_for(lambda s: "Library" in s and "penguins in winter" in s and "2 messages" in s)
    tmux.run("send-keys", "-t", "t", "-l", "winter")
    tmux.wait_for(lambda s: "penguins in winter" in s)
    tmux.run("send-keys", "-t", "t", "Enter")
    tmux.wait_for(lambda s: "Opened" in s and "penguins in winter" in s)


@pytest.mark.slow
def test_two_apps_write_the_same_library(tmp_path: Path) -> None:
    """Two app windows chatting at once: both chats are kept and the database is sound."""
    apps = [Tmux(tmp_path / f"app{n}") for n in range(2)]
    try:
        for tmux_n in apps:
            tmux_n.start(f"LOGITSCOPE_FAKE_DELAY=0.05 {sys.executable} -m tui.main --fake-engine")
        for tmux_n in apps:
            tmux_n.wait_for(lambda s: "scripted-demo" in s and "ready" in s)
        for n, tmux_n in enumerate(apps):
            tmux_n.type_line(f"window {n} speaking")
        for tmux_n in apps:
            tmux_n.wait_for(lambda s: "ready" in s and "reused" in s)
            tmux_n.type_line("more")
        for tmux_n in apps:
            tmux_n.wait_for(lambda s: "ready" in s and "more" in s and "streaming" not in s)
            tmux_n.run("send-keys", "-t", "t", "C-q")
        time.sleep(1)
    finally:
        for tmux_n in apps:
            tmux_n.kill()
    library = Library(data_dir() / "library.sqlite3")
    assert library.integrity() == "ok"
    assert sorted(e.title for e in library.entries()) == ["window 0 speaking", "window 1 speaking"]
    assert all(e.messages == 4 for e in library.entries())
