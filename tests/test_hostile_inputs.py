"""Hostile command lines, second pass (issue #29, items 14-17 and 20): an empty chat id, an empty
server URL, negative numbers in scientific notation, unknown flags on every command, and a
10 MB title in `list`. Each refusal is one line starting ``logitscope``; nothing runs that the
user did not ask for."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_cli import Recorder, isolated_config  # noqa: F401 - the fixture keeps the user's config out

from engine.core.library import Library, LibraryError
from engine.scripted import ScriptedEngine
from tui.headless import main as headless
from tui.main import main as logitscope


def _one_line(err: str) -> str:
    assert err.count("\n") == 1 and err.startswith("logitscope"), err
    return err.strip()


def _saved_chat(capsys: pytest.CaptureFixture[str]) -> str:
    assert headless(["run", "--no-config", "--model", "m", "--prompt", "hi", "--save"],
                    engine_factory=ScriptedEngine) == 0
    capsys.readouterr()
    [entry] = Library().entries()
    return entry.id


# --- 14: an empty id names no chat, even when the library holds only one


@pytest.mark.parametrize("reference", ["", " ", "\t"])
def test_a_blank_id_names_no_chat(reference: str, capsys: pytest.CaptureFixture[str]) -> None:
    chat_id = _saved_chat(capsys)
    with pytest.raises(LibraryError, match="empty"):
        Library().resolve(reference)
    assert logitscope(["export", reference]) != 0
    assert "empty" in _one_line(capsys.readouterr().err)
    factory = Recorder()
    assert headless(["run", "--no-config", "--model", "m", "--prompt", "more", "--continue", reference],
                    engine_factory=factory) == 2
    assert "empty" in _one_line(capsys.readouterr().err) and factory.engines == []
    assert Library().load(chat_id).entry.messages == 2  # the chat was not continued


# --- 15: an empty --server is refused, never the local model instead


@pytest.mark.parametrize("url", ["", "  "])
def test_an_empty_server_is_refused_by_run(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    factory = Recorder()
    assert headless(["run", "--model", "m", "--prompt", "hi", "--server", url], engine_factory=factory) == 2
    assert "--server" in _one_line(capsys.readouterr().err) and factory.engines == []


@pytest.mark.parametrize("url", ["", "  "])
def test_an_empty_server_is_refused_by_the_app(url: str, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    import engine.factory

    def no_engine(*_args: object) -> None:
        raise AssertionError("an engine (the local model) was started for --server ''")

    monkeypatch.setattr(engine.factory, "build_engine", no_engine)
    assert logitscope(["--server", url]) == 2
    assert "--server" in _one_line(capsys.readouterr().err)


# --- 16: negative numbers in scientific notation are numbers, for every numeric flag


@pytest.mark.parametrize("value", ["-1e-1", "-1E-1", "-.1e0", "-1.e-1"])
def test_a_negative_number_in_scientific_notation_is_a_value(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert headless(["run", "--model", "m", "--prompt", "a", "--presence-penalty", value, "--json"],
                    engine_factory=Recorder()) == 0
    turn = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"turn"' in line][-1]
    assert turn["params"]["presence_penalty"] == pytest.approx(-0.1)


def test_an_out_of_range_negative_number_is_a_range_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert headless(["run", "--model", "m", "--prompt", "a", "--temp", "-1e-3"], engine_factory=Recorder()) == 2
    assert "temperature must be between" in _one_line(capsys.readouterr().err)


# --- 17: an unknown flag is one line and a hint, on every command


@pytest.mark.parametrize("argv", [["--bogus"], ["bench", "--bogus"], ["run", "--prompt", "a", "--bogus"],
                                  ["list", "--bogus"], ["export"], ["--gguf-threads"]])
def test_an_unknown_flag_is_one_line_with_a_hint(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    try:
        code = logitscope(argv)
    except SystemExit as done:  # argparse's own exit: the bug this test is for
        code = done.code
    assert code == 2
    captured = capsys.readouterr()
    line = _one_line(captured.err)
    assert captured.out == "" and "--help" in line and "usage:" not in line


@pytest.mark.parametrize(("argv", "hint"), [(["run", "--prompt", "a", "--bogus"], "logitscope run --help"),
                                            (["bench", "--bogus"], "logitscope bench --help"),
                                            (["list", "--bogus"], "logitscope list --help"),
                                            (["--bogus"], "logitscope --help")])
def test_the_hint_names_the_commands_own_help(argv: list[str], hint: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert logitscope(argv) == 2
    assert capsys.readouterr().err.rstrip().endswith(f"(see '{hint}')")


def test_help_still_prints_the_usage(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--help"], ["bench", "--help"], ["run", "--help"], ["list", "--help"]):
        try:
            code = logitscope(argv)
        except SystemExit as done:
            code = done.code
        assert code == 0 and "usage:" in capsys.readouterr().out


# --- 20: a title is shortened where chats are listed


def test_a_huge_title_is_listed_short_on_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    chat_id = _saved_chat(capsys)
    huge = "title \x1b[31m" + "x" * 10_000_000 + "\nsecond line"
    Library().rename(chat_id, huge)
    assert logitscope(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and len(lines[0]) < 200 and lines[0].startswith(chat_id)
    assert "\x1b" not in lines[0] and "title ␛[31mxxx" in lines[0]
    assert len(Library().load(chat_id).entry.title) > 10_000_000  # shortened where shown, kept whole
