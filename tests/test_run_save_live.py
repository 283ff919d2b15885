"""Issue #29 items 9-10: `run --save` keeps the chat as the app does (the turn when it starts, the
reply as it grows; SIGINT/SIGTERM save and exit non-zero, SIGKILL loses at most about a second),
and two `run --continue` on one chat never lose a turn silently."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.core.chat.fileformat import conversation_from_dict
from engine.core.library import Library

ROOT = Path(__file__).resolve().parent.parent

SLOW_RUN = """
import sys
from engine.scripted import ScriptedEngine
from tui.headless import main
words = [f"w{{n}} " for n in range(400)]
sys.exit(main(["run", "--no-config", "--model", "m", "--prompt", "tell me", "--save"{extra}],
              engine_factory=lambda: ScriptedEngine([words], token_delay={delay})))
"""


def _start(tmp_path: Path, extra: str = "", delay: float = 0.05) -> subprocess.Popen[str]:
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", SLOW_RUN.format(extra=extra, delay=delay)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _stored(tmp_path: Path) -> list[tuple[str, str, int, str | None]]:
    """(role, text, tokens, finish) of the one stored chat's visible branch."""
    library = Library(tmp_path / "data" / "logitscope" / "library.sqlite3")
    try:
        [entry] = library.entries()
        chat = conversation_from_dict(library.load(entry.id).document)
    finally:
        library.close()
    return [(n.role, n.version.text, len(n.version.tokens or ()), n.version.finish_reason) for n in chat.path()]


def _wait_for_output(process: subprocess.Popen[str], seconds: float) -> None:
    """Let the reply stream for a while (its first words are on stdout by then)."""
    assert process.stdout is not None
    os.set_blocking(process.stdout.fileno(), False)
    time.sleep(seconds)


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_mid_reply_saves_the_turn_and_exits_non_zero(tmp_path: Path, sig: int, code: int) -> None:
    process = _start(tmp_path)
    _wait_for_output(process, 4.0)
    process.send_signal(sig)
    _, err = process.communicate(timeout=30)
    assert process.returncode == code, err
    (user, reply) = _stored(tmp_path)
    assert user[:2] == ("user", "tell me")
    assert reply[0] == "assistant" and reply[2] > 5 and reply[3] == "cancelled" and reply[1].startswith("w0 w1 ")


def test_sigkill_mid_reply_loses_at_most_about_a_second(tmp_path: Path) -> None:
    process = _start(tmp_path, delay=0.02)
    _wait_for_output(process, 5.0)
    process.kill()
    process.wait(timeout=10)
    stored = _stored(tmp_path)
    assert stored[0][:2] == ("user", "tell me")  # the turn was saved when it started
    assert len(stored) == 2 and stored[1][2] > 20  # and the reply as it grew
