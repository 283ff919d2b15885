"""Small screens and hints (#30.7): dialogs fit 80 columns, hints come from the keymap, toasts
read as written, the install line is the README's, and the status bar and `n` say what is so."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import AppFactory
from tui_helpers import send, start_reply, wait_idle, wait_until

from engine.scripted import ScriptedEngine
from tui.app.screens.chat import ChatScreen
from tui.app.widgets.key_bar import KeyBar
from tui.app.widgets.status_bar import StatusBar
from tui.app.widgets.transcript import Transcript

SMALL = (80, 24)
README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.mark.parametrize("key", ["ctrl+o", "ctrl+g"], ids=["model picker", "library"])
async def test_no_dialog_is_wider_than_80_columns(make_app: AppFactory, key: str) -> None:
    """Before: the model picker (96 columns) and the library (100) ran off an 80-column terminal."""
    app = make_app()
    async with app.run_test(size=SMALL) as pilot:
        await wait_idle(app, pilot)
        await pilot.press(key)
        await wait_until(pilot, lambda: not isinstance(app.screen, ChatScreen))
        await pilot.pause()
        box = app.screen.query_one("Vertical").region
        assert box.x >= 0 and box.right <= SMALL[0], box


async def test_the_footer_names_rebound_token_keys(make_app: AppFactory) -> None:
    """Before: with ←/→ rebound, the footer still said "←/→ Token"."""
    app = make_app(config_text='[keys]\n"token.prev" = "h"\n"token.next" = "l"\n')
    async with app.run_test(size=SMALL) as pilot:
        await send(app, pilot, "hi")
        await pilot.press("escape")
        await pilot.pause()
        line = app.screen.query_one(KeyBar).render().plain
        assert line.startswith(" h/l Token ") and "←" not in line


async def test_the_welcome_names_resume_and_library_as_bound(make_app: AppFactory) -> None:
    """Before: the welcome named neither Ctrl+L nor Ctrl+G, and its keys were written by hand."""
    app = make_app()
    async with app.run_test(size=SMALL) as pilot:
        await wait_idle(app, pilot)
        text = str(app.screen.query_one("Welcome").render())
        assert "Ctrl+L reopens" in text and "Ctrl+G finds" in text and "Esc, then ←/→" in text
    app = make_app(config_text='[keys]\n"chat.resume" = "f11"\n"token.prev" = "h"\n')
    async with app.run_test(size=SMALL) as pilot:
        await wait_idle(app, pilot)
        text = str(app.screen.query_one("Welcome").render())
        assert "F11 reopens" in text and "h/→" in text and "Ctrl+L" not in text


async def test_the_ctrl_c_toast_has_no_raw_markup(make_app: AppFactory) -> None:
    """Before: "Press [b]ctrl+q[/b] to quit the app" (our notify shows text literally)."""
    app = make_app()
    async with app.run_test(size=SMALL) as pilot:
        await wait_idle(app, pilot)
        app.screen.query_one(Transcript).focus()
        await pilot.press("ctrl+c")
        await wait_until(pilot, lambda: any("quit" in n.message for n in app._notifications))
        note = next(n for n in app._notifications if "quit" in n.message)
        assert "[" not in note.message and "^q" in note.message


def test_the_missing_extra_line_is_the_readme_command() -> None:
    """Before: 'pip install "logitscope[gguf]"', which the README never says (it installs from the folder)."""
    from engine.gguf.load import INSTALL_HINT

    command = re.search(r"(python3 -m )?pip install \S+", INSTALL_HINT)
    assert command is not None and command.group(0) in README.read_text(encoding="utf-8")


async def test_ctx_counts_the_prompt_while_the_first_reply_streams(make_app: AppFactory) -> None:
    """Before: "ctx 0/512" until the first reply ended."""
    app = make_app(ScriptedEngine(token_delay=0.05))
    async with app.run_test(size=(160, 50)) as pilot:
        await start_reply(app, pilot)
        bar = app.screen.query_one(StatusBar)
        await pilot.pause()
        used = re.search(r"ctx (\d+)/", bar.render().plain)
        assert app.controller.busy and used is not None and int(used.group(1)) > 0


async def test_n_with_nothing_selected_finds_the_first_unlikely_token(make_app: AppFactory) -> None:
    """Before: n with no token selected only selected the reply's last token, silently. (An
    engine that does not score: the user's own text has no tokens to stop at; test_scope has
    n in a scored message.)"""
    app = make_app(ScriptedEngine(scoring=False), config_text="[ui]\nlow_prob_threshold = 0.5\n")
    async with app.run_test(size=SMALL) as pilot:
        await send(app, pilot, "hi")
        tokens = app.controller.conversation.path()[-1].version.tokens
        import math
        first_low = next(i for i, t in enumerate(tokens) if t.logprob < math.log(0.5))
        await pilot.press("escape", "n")
        await pilot.pause()
        cursor = app.screen.query_one(Transcript).cursor
        assert cursor is not None and cursor[1] == first_low


async def test_n_with_nothing_below_the_threshold_says_so(make_app: AppFactory) -> None:
    app = make_app(config_text="[ui]\nlow_prob_threshold = 0.000001\n")
    async with app.run_test(size=SMALL) as pilot:
        await send(app, pilot, "hi")
        await pilot.press("escape", "n")
        await wait_until(pilot, lambda: any(n.message == "No token below 0.0001% in this chat."
                                            for n in app._notifications))
