"""The app in a real terminal: tmux runs `python -m tui.main --fake-engine`, keys go in with
send-keys, the screen comes back with capture-pane. Skipped when tmux is not installed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Callable

import pytest

from engine.core.settings.paths import data_dir
from tui_helpers import stored_documents

pytestmark = [pytest.mark.tmux, pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")]

ROOT = Path(__file__).resolve().parents[2]


class Tmux:
    """One tmux server on a private socket, so nothing touches the user's sessions."""

    def __init__(self, tmp: Path) -> None:
        self.socket = f"logitscope-test-{uuid.uuid4().hex[:8]}"
        self.tmp = tmp

    def run(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=10)
        return done.stdout

    def start(self, command: str) -> None:
        env = {**os.environ, "XDG_CONFIG_HOME": str(self.tmp / "cfg"), "XDG_STATE_HOME": str(self.tmp / "state"),
               "TERM": "xterm-256color", "LOGITSCOPE_FAKE_DELAY": "0.01"}
        for attempt in range(5):  # right after `kill`, the old server may still be exiting on the socket
            done = subprocess.run(["tmux", "-L", self.socket, "new-session", "-d", "-s", "t", "-x", "120", "-y", "36",
                                   command], env=env, cwd=ROOT, capture_output=True, text=True, timeout=10)
            if done.returncode == 0:
                return
            time.sleep(0.2 * (attempt + 1))
        raise AssertionError(f"tmux could not start a session: {done.stderr.strip()}")

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", "t")

    def wait_for(self, check: Callable[[str], bool], timeout: float = 30.0) -> str:
        end = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < end:
            screen = self.screen()
            if check(screen):
                return screen
            time.sleep(0.2)
        raise AssertionError(f"timed out; the screen was:\n{screen}")

    def type_line(self, text: str) -> None:
        """Type into the chat input, wait until it shows, then press Enter (as a person would)."""
        self.run("send-keys", "-t", "t", "-l", text)
        self.wait_for(lambda s: text in s)
        self.run("send-keys", "-t", "t", "Enter")

    def kill(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=10)


@pytest.fixture
def tmux(tmp_path: Path) -> Tmux:
    session = Tmux(tmp_path)
    yield session  # type: ignore[misc]
    session.kill()


def test_chat_in_a_real_terminal_then_quit(tmux: Tmux, tmp_path: Path) -> None:
    marker = tmp_path / "exit-code"
    tmux.start(f"{sys.executable} -m tui.main --fake-engine; echo $? > {marker}; echo EXITED; sleep 30")
    tmux.wait_for(lambda s: "scripted-demo" in s and "ready" in s)
    tmux.type_line("hello there")
    screen = tmux.wait_for(lambda s: "and branches." in s and "decode" in s)
    assert "hello there" in screen and "Hello! I am a scripted model." in screen
    tmux.run("send-keys", "-t", "t", "Escape")
    tmux.run("send-keys", "-t", "t", "Right")
    tmux.run("send-keys", "-t", "t", "Home")
    screen = tmux.wait_for(lambda s: "Greetings" in s)  # the candidates of the first token
    assert "rank 1" in screen
    tmux.run("send-keys", "-t", "t", "C-q")
    end = time.monotonic() + 20
    while not marker.exists() and time.monotonic() < end:
        time.sleep(0.2)
    assert marker.read_text().strip() == "0"
    screen = tmux.wait_for(lambda s: "EXITED" in s)
    assert "Traceback" not in screen and "Error" not in screen
    [saved] = stored_documents(data_dir() / "library.sqlite3")
    assert saved["nodes"][0]["versions"][0]["text"] == "hello there"


def test_terminal_closed_mid_reply_exits_cleanly(tmux: Tmux, tmp_path: Path) -> None:
    """Closing the terminal (SIGHUP) mid-stream: exit status 0 and the conversation is saved.

    A wrapper stands in for the user's shell: it gets the hangup and forwards it to the app, as
    a shell does to its jobs, and then reports the app's exit status (the terminal is gone)."""
    marker = tmp_path / "exit-code"
    wrapper = (
        "import signal, subprocess, sys; "
        "p = subprocess.Popen([sys.executable, '-m', 'tui.main', '--fake-engine']); "
        "signal.signal(signal.SIGHUP, lambda *_: p.send_signal(signal.SIGHUP)); "
        f"open({str(marker)!r}, 'w').write(str(p.wait()))"
    )
    tmux.start(f"LOGITSCOPE_FAKE_DELAY=0.3 {sys.executable} -c \"{wrapper}\"")
    tmux.wait_for(lambda s: "scripted-demo" in s and "ready" in s)
    tmux.type_line("tell me")
    tmux.wait_for(lambda s: "streaming" in s)
    tmux.kill()
    end = time.monotonic() + 20
    while not (marker.exists() and marker.read_text()) and time.monotonic() < end:
        time.sleep(0.2)
    assert marker.read_text() == "0"
    [saved] = stored_documents(data_dir() / "library.sqlite3")
    assert saved["nodes"][0]["versions"][0]["text"] == "tell me"


def test_a_line_typed_in_one_burst_with_enter_is_sent_whole(tmux: Tmux) -> None:
    """Text and Enter arriving in one read (fast typing, tmux, a pasted line without bracketed
    paste) must send the whole text: Enter's priority binding may not overtake the characters."""
    tmux.start(f"{sys.executable} -m tui.main --fake-engine; sleep 30")
    tmux.wait_for(lambda s: "scripted-demo" in s and "ready" in s)
    tmux.run("send-keys", "-t", "t", "quick burst line", "Enter")
    screen = tmux.wait_for(lambda s: "and branches." in s and "decode" in s)
    assert "quick burst line" in screen


def test_text_typed_fast_after_esc_and_ctrl_n_is_a_message(tmux: Tmux) -> None:
    """#30.1, seen in a real terminal: after Esc, Ctrl+N and a question typed at once, nothing was
    sent and the letters stepped the parameters ("unfinished question" came out "fhed qeo")."""
    tmux.start(f"{sys.executable} -m tui.main --fake-engine")
    tmux.wait_for(lambda s: "scripted-demo" in s and "ready" in s)
    tmux.type_line("hi")
    tmux.wait_for(lambda s: "and branches." in s and "decode" in s)
    tmux.run("send-keys", "-t", "t", "Escape")
    time.sleep(0.5)
    tmux.run("send-keys", "-t", "t", "C-n")
    tmux.run("send-keys", "-t", "t", "-l", "What is 2 plus 3? unfinished question")  # one burst, no pause
    tmux.wait_for(lambda s: "What is 2 plus 3? unfinished question" in s)
    tmux.run("send-keys", "-t", "t", "Enter")
    screen = tmux.wait_for(lambda s: "█ What is 2 plus 3? unfinished question" in s and "█ assistant ·" in s)
    assert "█ assistant · T=0.70" in screen  # the reply runs at the temperature it had: no t stepped it
