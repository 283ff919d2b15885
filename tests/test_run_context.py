"""`logitscope run` fits each turn into the context as the app does (issue #29, item 22): with
``[chat] context_strategy = "drop_oldest"`` (the default) a continued chat longer than the
context leaves its oldest exchanges out of the request, and says so; with ``"refuse"`` it is
refused in one line before any turn runs. The library keeps every message either way."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_cli import Recorder, isolated_config  # noqa: F401 - the fixture keeps the user's config out

from engine.core.library import Library
from tui.headless import main as headless

WORDS = " ".join(f"w{n}" for n in range(40))  # 40 scripted tokens a message


def _long_chat(capsys: pytest.CaptureFixture[str]) -> str:
    """A saved chat of 4 exchanges, each prompt 40 words: ~200 scripted tokens in all."""
    argv = ["run", "--no-config", "--model", "m", "--save"]
    for n in range(4):
        argv += ["--prompt", f"{n} {WORDS}"]
    assert headless(argv, engine_factory=Recorder()) == 0
    capsys.readouterr()
    [entry] = Library().entries()
    return entry.id


def _config(tmp_path: Path, strategy: str) -> str:
    path = tmp_path / f"{strategy}.toml"
    path.write_text(f'[chat]\ncontext_strategy = "{strategy}"\n', encoding="utf-8")
    return str(path)


def test_continue_drops_the_oldest_to_fit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    chat_id = _long_chat(capsys)
    factory = Recorder(context_limit=120)
    assert headless(["run", "--config", _config(tmp_path, "drop_oldest"), "--model", "m", "--prompt", "next",
                     "--continue", chat_id], engine_factory=factory) == 0
    err = capsys.readouterr().err
    [request] = factory.engine.requests
    assert request.messages[-1].text == "next" and request.messages[0].role == "user"
    assert not request.messages[0].text.startswith("0 ")  # the oldest exchange was left out
    assert "left out" in err and "oldest" in err
    assert Library().load(chat_id).entry.messages == 10  # nothing left the library


def test_continue_refuses_in_one_line_when_told_to(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    chat_id = _long_chat(capsys)
    factory = Recorder(context_limit=120)
    assert headless(["run", "--config", _config(tmp_path, "refuse"), "--model", "m", "--prompt", "next",
                     "--continue", chat_id], engine_factory=factory) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "over the context" in err
    assert factory.engine.requests == []
    assert Library().load(chat_id).entry.messages == 8  # the refused prompt did not enter the chat
