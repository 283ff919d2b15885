"""Text that did not come from our code is shown literally and defused, on every route into the TUI.

Each route gets Rich markup (``[/]`` crashed the app, ``[bold]x[/]`` vanished) and terminal
escapes (OSC 52 writes the clipboard, OSC 0 the window title, CSI 2J clears the screen, a bare
ESC starts any of them): the screen must show them as text, with every ESC made visible.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Input
from tui_helpers import SIZE, screen_text, send, wait_idle, store_chat, wait_until

from engine.core.api import EngineError
from engine.scripted import ScriptedEngine, ScriptedToken
from engine.models import hub
from engine.core.settings import printable
from engine.core.chat.conversation import Conversation, Node, Version
from tui.app.screens.model_picker import ModelPicker
from tui.app.widgets.params_panel import ParamsPanel
from tui.app.widgets.status_bar import StatusBar

MARKUP = ("[/]", "[bold]x[/]", "[link=x]y[/link]")
ESCAPES = ("\x1b]52;c;aGk=\x07", "\x1b]0;TITLE\x07", "\x1b[2J", "\x1b")
SHOWN_ESCAPES = ("␛]52;c;aGk=␇", "␛]0;TITLE␇", "␛[2J")
HOSTILE = " ".join(MARKUP + ESCAPES)


def assert_safe(text: str, *, markup: bool = True) -> None:
    """No raw control character reaches the terminal; escapes and (if asked) markup show as text."""
    raw = [hex(ord(ch)) for ch in text if (ord(ch) < 0x20 and ch not in "\n\t") or 0x7F <= ord(ch) < 0xA0]
    assert raw == [], f"raw control characters on screen: {raw}"
    for shown in SHOWN_ESCAPES:
        assert shown in text, f"{shown!r} not shown"
    for piece in MARKUP if markup else ():
        assert piece in text, f"{piece!r} not shown literally"


def test_printable_makes_every_control_visible_but_newline_and_tab() -> None:
    text = "".join(chr(c) for c in range(0xA0))
    shown = printable(text)
    assert [ch for ch in shown if ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0] == ["\t", "\n"]
    assert printable("\x1b]0;T\x07") == "␛]0;T␇" and printable("\x9b2J") == "\\x9b2J"
    assert printable("plain [b]text[/b] ünï €") == "plain [b]text[/b] ünï €"


async def test_token_text_from_a_crafted_tokenizer(make_app: Any) -> None:
    """Both faces of a reply (tokens while inspecting, Markdown when finished) and the panel."""
    tokens = [ScriptedToken(piece + " ", 0.5, (("\x1b[2J", 0.3),)) for piece in MARKUP + ESCAPES]
    app = make_app(ScriptedEngine([tokens]))
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await send(app, pilot, "hi")
        assert_safe(screen_text(app), markup=False)  # Markdown face: markup is Markdown's to read
        await pilot.press("f3")  # heatmap: the token face
        await pilot.pause()
        assert_safe(screen_text(app))
        await pilot.press("escape", "right")  # a token selected: the candidates panel shows it
        await pilot.pause()
        # the panel's row for the candidate (it has percentages) shows ESC as the transcript does
        assert any("␛[2J" in line and "%" in line for line in screen_text(app).splitlines())
        assert_safe(screen_text(app))


async def test_a_resumed_conversation_with_hostile_system_and_user_text(make_app: Any, tmp_path: Path) -> None:
    conversation = Conversation()
    conversation.system_prompt = "sys " + HOSTILE
    conversation.append(Node("user", [Version("user " + HOSTILE)]))
    app = make_app()
    store_chat(app.library.path, conversation)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_idle(app, pilot)
        app.chat_screen.action_resume_last()
        await wait_until(pilot, lambda: "sys " in screen_text(app), timeout=30)
        assert_safe(screen_text(app))
        await pilot.press("f2")  # the system prompt dialog shows it too
        await pilot.pause()
        assert_safe(screen_text(app))


async def test_model_folder_name_in_a_load_error_toast(make_app: Any) -> None:
    engine = ScriptedEngine()
    app = make_app(engine)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_idle(app, pilot)
        engine.load_error = f"no model folder at ~/models/a{HOSTILE}b"
        await pilot.press("ctrl+o")
        await wait_until(pilot, lambda: isinstance(app.screen, ModelPicker))
        await pilot.press(*"~/models/a[/]b", "enter")
        await wait_until(pilot, lambda: not app.controller.loading and not isinstance(app.screen, ModelPicker))
        await pilot.pause()
        assert app.is_running
        assert_safe(screen_text(app))


async def test_model_given_on_the_command_line(tmp_path: Path, make_app: Any) -> None:
    from engine.core.settings import load_config
    from tui.app.application import LogitscopeApp

    engine = ScriptedEngine(load_error="cannot open ~/" + HOSTILE)
    app = LogitscopeApp(engine, load_config(tmp_path / "none.toml"), model="~/[/]x\x1b]0;T\x07",
                        config_dir=tmp_path / "cfg", save_dir=tmp_path / "state")
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_until(pilot, lambda: not app.controller.loading)
        await pilot.pause()
        assert app.is_running
        assert_safe(screen_text(app))


def toml_string(text: str) -> str:
    """`text` as a TOML basic string (control characters as \\u escapes)."""
    body = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + "".join(f"\\u{ord(c):04x}" if ord(c) < 0x20 or ord(c) == 0x7F else c for c in body) + '"'


@pytest.mark.parametrize("piece", MARKUP + ESCAPES)
async def test_a_model_name_in_the_status_bar(make_app: Any, piece: str) -> None:
    """`[model] default` (the scripted engine names the model after it) shows literally."""
    app = make_app(config_text=f"[model]\ndefault = {toml_string('m' + piece + 'z')}\n")
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        assert app.screen.query_one(StatusBar).model == "m" + piece + "z"
        bar = screen_text(app).splitlines()[-2]
        assert f"m{printable(piece)}z" in bar and "\x1b" not in bar


@pytest.mark.parametrize("piece", MARKUP + ESCAPES)
async def test_a_theme_name_in_a_config_problem(make_app: Any, piece: str) -> None:
    app = make_app(config_text=f"[ui]\ntheme = {toml_string('t' + piece)}\n")
    async with app.run_test(size=(160, 40), notifications=True) as pilot:
        await wait_idle(app, pilot)
        text = screen_text(app)
        assert f"theme {'t' + piece!r} not found" in text and "\x1b" not in text


@pytest.mark.parametrize("config_text, expected", [
    ('[ui]\ntheme = "[/]"\n', "theme '[/]' not found"),
    ('[sampling]\ntemperature = "hot"\n', "[sampling] temperature"),
    ('[sampling]\n"[bold]x[/]" = 1\n', "[sampling] [bold]x[/]"),
    ('[model]\ndefault = ""\n[ui]\ntheme = "\\u001b[2J"\n', r"theme '\x1b[2J' not found"),
])
async def test_config_problem_lines_are_literal(make_app: Any, config_text: str, expected: str) -> None:
    app = make_app(config_text=config_text)
    async with app.run_test(size=(160, 40), notifications=True) as pilot:
        await wait_idle(app, pilot)
        assert app.is_running
        text = screen_text(app)
        assert expected in text, text
        assert "\x1b" not in text


async def test_an_engine_error_is_literal(make_app: Any) -> None:
    engine = ScriptedEngine()
    app = make_app(engine)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_idle(app, pilot)
        engine.fail_next = EngineError("template failed: " + HOSTILE)
        await send(app, pilot, "hi")
        await wait_until(pilot, lambda: "template failed" in screen_text(app))
        assert_safe(screen_text(app))


async def test_a_value_dialog_problem_is_literal(make_app: Any) -> None:
    app = make_app()
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_idle(app, pilot)
        app.chat_screen.param_actions.edit("temperature")
        await pilot.pause()
        app.screen.query_one(Input).value = "[/][bold]x[/]"
        await pilot.press("enter")
        await pilot.pause()
        assert app.is_running
        assert "[/][bold]x[/]" in screen_text(app)


async def test_a_preset_name_is_literal(make_app: Any) -> None:
    app = make_app(config_text='[presets."[b]p[/]\\u001b[2J"]\ntemperature = 0.5\n')
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_idle(app, pilot)
        app.chat_screen.param_actions.apply_preset("[b]p[/]\x1b[2J")
        await pilot.pause()
        assert app.is_running
        text = screen_text(app)
        assert "[b]p[/]␛[2J" in text and "\x1b" not in text
        assert app.screen.query_one(ParamsPanel).border_subtitle is not None


async def test_model_picker_rows_are_literal(make_app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    hostile = hub.ModelEntry("org/[bold]x[/]\x1b]0;TITLE\x07", "org/[bold]x[/]\x1b]0;TITLE\x07", "cache",
                             "/hf/x", 1_000_000)
    monkeypatch.setattr(hub, "cached_models", lambda cache_dir=None: [hostile])
    app = make_app()
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_idle(app, pilot)
        await pilot.press("ctrl+o")
        await wait_until(pilot, lambda: isinstance(app.screen, ModelPicker) and app.screen.entries is not None)
        await pilot.pause()
        text = screen_text(app)
        assert "org/[bold]x[/]␛]0;TITLE␇" in text and "\x1b" not in text


async def test_a_preset_name_in_the_command_palette(make_app: Any) -> None:
    from textual.command import CommandPalette

    app = make_app(config_text='[presets."zq[b]p[/]\\u001b[2J"]\ntemperature = 0.5\n')
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_idle(app, pilot)
        await pilot.press("ctrl+p")
        await wait_until(pilot, lambda: isinstance(app.screen, CommandPalette))
        await pilot.press(*"zq")
        await wait_until(pilot, lambda: "zq[b]p[/]" in screen_text(app))
        text = screen_text(app)
        assert "zq[b]p[/]␛[2J" in text and "\x1b" not in text


async def test_pasted_text_in_the_chat_input(make_app: Any) -> None:
    """A paste (a web page, another terminal) is the one way an ESC gets into the input."""
    from textual.events import Paste

    from tui.app.widgets.chat_input import ChatInput

    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        chat_input = app.screen.query_one(ChatInput)
        app.post_message(Paste("paste " + HOSTILE))  # as the terminal delivers it
        await wait_until(pilot, lambda: "paste" in chat_input.text)
        assert chat_input.text == "paste " + printable(HOSTILE)
        assert_safe(screen_text(app))
        chat_input.clear()
        app.post_message(Paste("one\r\ntwo\rthree"))
        await wait_until(pilot, lambda: "three" in chat_input.text)
        assert chat_input.text == "one\ntwo\nthree"


async def test_pasted_text_in_a_dialog_input(make_app: Any) -> None:
    from textual.events import Paste

    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        await pilot.press("ctrl+o")
        await wait_until(pilot, lambda: isinstance(app.screen, ModelPicker))
        app.post_message(Paste("~/m " + HOSTILE))
        await wait_until(pilot, lambda: "~/m" in app.screen.query_one(Input).value)
        assert app.screen.query_one(Input).value == "~/m " + printable(HOSTILE)
        assert_safe(screen_text(app))


@pytest.mark.slow
async def test_a_real_model_with_a_crafted_tokenizer(chatml_model: Path, tmp_path: Path) -> None:
    """The real engine end to end: a reply decoded full of ESC and BEL is drawn defused."""
    from crafted import escaping_tokenizer

    from engine.local.client import Engine
    from engine.core.settings import load_config
    from tui.app.application import LogitscopeApp

    model = escaping_tokenizer(chatml_model, tmp_path / "escaping")
    engine = Engine()
    app = LogitscopeApp(engine, load_config(tmp_path / "none.toml"), model=str(model),
                        config_dir=tmp_path / "cfg", save_dir=tmp_path / "state")
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot, timeout=60)
        app.chat_screen.param_actions.set_params(app.controller.params.with_changes(max_tokens=24, temperature=0.0))
        await send(app, pilot, "hello there")
        reply = app.controller.conversation.path()[-1].version
        assert "\x1b" in reply.reply_text()  # the crafted tokenizer does put escapes in the reply
        text = screen_text(app)
        assert "␛" in text and "\x1b" not in text and "\x07" not in text
        await pilot.press("f3")  # the token face
        await pilot.pause()
        assert "␛" in screen_text(app) and "\x1b" not in screen_text(app)
        await pilot.press("ctrl+q")


async def test_a_huge_echoed_value_is_cut_in_the_toast(make_app: Any) -> None:
    app = make_app(config_text='[sampling]\n"' + "k" * 1_000_000 + '" = 1\n')
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_idle(app, pilot)
        (note,) = [n for n in app._notifications if "unknown sampling parameter" in n.message]
        assert len(note.message) <= 500 and "characters cut" in note.message
        assert note.message.endswith("unknown sampling parameter; ignored")


async def test_the_message_picker_rows_are_literal(make_app: Any) -> None:
    """F6/F7 list the chat's messages: a user's "[/]" crashed the picker (OptionList reads a str
    as markup)."""
    from tui.app.screens.message_picker import MessagePicker

    app = make_app()
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await send(app, pilot, "mine [/] [bold]x[/]")
        await pilot.press("f7")
        await wait_until(pilot, lambda: isinstance(app.screen, MessagePicker))
        await pilot.pause()
        assert app.is_running
        assert "mine [/] [bold]x[/]" in screen_text(app)
