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


CONTINUE = """
import sys
from engine.scripted import ScriptedEngine
from tui.headless import main
words = [f"{name}{{n}} " for n in range(60)]
sys.exit(main(["run", "--no-config", "--model", "m", "--prompt", "from {name}", "--continue", "{chat}"],
              engine_factory=lambda: ScriptedEngine([words], token_delay=0.03)))
"""


def test_two_runs_continuing_one_chat_both_keep_their_turns(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "PYTHONPATH": str(ROOT)}
    first = subprocess.run([sys.executable, "-c", SLOW_RUN.format(extra="", delay=0.0).replace("400", "3")],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert first.returncode == 0, first.stderr
    library = Library(tmp_path / "data" / "logitscope" / "library.sqlite3")
    [entry] = library.entries()
    library.close()
    runs = [subprocess.Popen([sys.executable, "-c", CONTINUE.format(name=name, chat=entry.id)], cwd=ROOT, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for name in ("A", "B")]
    outcomes = [(run.wait(timeout=120), run.communicate()[1]) for run in runs]
    library = Library(tmp_path / "data" / "logitscope" / "library.sqlite3")
    chat = conversation_from_dict(library.load(entry.id).document)
    library.close()
    texts = _all_texts(chat.root)
    for name, (code, err) in zip("AB", outcomes):
        kept = f"from {name}" in texts and any(t.startswith(f"{name}0 {name}1") for t in texts)
        assert kept or (code != 0 and "changed" in err), (name, code, err, texts)  # a branch, or a clear refusal
    assert all(code == 0 for code, _ in outcomes), outcomes


def _all_texts(root: object) -> list[str]:
    """Every version's text in the tree (a loop over an explicit stack)."""
    out: list[str] = []
    stack = [root] if root is not None else []
    while stack:
        node = stack.pop()
        for version in node.versions:  # type: ignore[attr-defined]
            out.append(version.text)
            if version.child is not None:
                stack.append(version.child)
    return out


def test_interleaved_writers_each_keep_their_turn_as_a_branch(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.core.api import TokenEvent, TurnFinished
    from engine.core.api import SamplingParams
    from tui.headless.saved import LinearChat, open_chat

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    seed = LinearChat(Library(), "m")
    seed.user("hello")
    chat_id = seed.save()

    def token(text: str, index: int) -> TokenEvent:
        return TokenEvent(index, 5, text, text, -0.1, 0.9, 1, 0.5, ())

    def finished(text: str) -> TurnFinished:
        return TurnFinished((), 1, 0, 1, 1, (5,), text, 0.1, 1.0, 1.0, "stop", 2, 100)

    a, b = open_chat(chat_id, "m"), open_chat(chat_id, "m")
    a.user("from A")
    b.user("from B")  # changed under it: B's turn becomes a second version of A's message
    a.token(token("a0", 0))
    b.token(token("b0", 0))
    assert a.reply(finished("a0"), SamplingParams(), "f") is None
    assert b.reply(finished("b0"), SamplingParams(), "f") is None
    a.user("A again")
    assert a.reply(finished("a1"), SamplingParams(), "f") is None
    stored = Library().load(chat_id)
    texts = _all_texts(conversation_from_dict(stored.document).root)
    for text in ("hello", "from A", "a0", "from B", "b0", "A again", "a1"):
        assert text in texts, (text, texts)
    assert b.branched and a.branched
