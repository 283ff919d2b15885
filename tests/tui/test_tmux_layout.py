"""The narrow layout in a real terminal (#16.2): tmux shrinks the window under the running app,
which must move its panels under the chat, keep the chat full width, and give F10 the room."""

from __future__ import annotations

import shutil
import sys

import pytest

from test_tmux import Tmux, tmux  # noqa: F401  (the fixture)

pytestmark = [pytest.mark.tmux, pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")]


def _rows(screen: str) -> list[str]:
    return screen.splitlines()


def test_shrinking_the_terminal_moves_the_panels_under_the_chat(tmux: Tmux) -> None:  # noqa: F811
    tmux.start(f"{sys.executable} -m tui.main --fake-engine; sleep 30")
    tmux.wait_for(lambda s: "scripted-demo" in s and "ready" in s)
    tmux.type_line("hello there")
    tmux.wait_for(lambda s: "and branches." in s and "decode" in s)
    tmux.run("resize-window", "-t", "t", "-x", "60", "-y", "20")
    screen = tmux.wait_for(lambda s: any(r.startswith("╭─ candidates") for r in _rows(s)))
    rows = _rows(screen)
    top = next(i for i, r in enumerate(rows) if r.startswith("╭─ candidates"))
    assert any("Hello! I am a scripted model." in r for r in rows[:top])  # the chat, above, full width
    assert "parameters" not in screen and max(len(r) for r in rows) <= 60
    tmux.run("send-keys", "-t", "t", "F10")
    screen = tmux.wait_for(lambda s: any(r.startswith("╭─ parameters") for r in _rows(s)))
    assert "temperature" in screen and "╭─ candidates" not in screen
    tmux.run("resize-window", "-t", "t", "-x", "40", "-y", "12")
    screen = tmux.wait_for(lambda s: "parameters" not in s and "scripted model" in s)
    assert "Traceback" not in screen
