"""Keys typed as text never change settings (#30.1).

The rule: a new chat, a resumed or reopened chat and every closed dialog put the focus in the
input; outside the input, a printable key that nothing there is bound to goes to the input
(which takes the focus) instead of vanishing; and a parameter stepped from the keyboard always
shows where it changed (its row flashes in the panel, or a toast when the panel is out of sight).
"""

from __future__ import annotations

from typing import Any

import pytest

from conftest import AppFactory
from tui_helpers import SIZE, chat_and_quit, palette_run, send, wait_idle, wait_until

from tui.app.screens.chat import ChatScreen
from tui.app.widgets.chat_input import ChatInput
from tui.app.widgets.params_panel import ParamsPanel
from tui.app.widgets.transcript import Transcript


def _focused_input(app: Any) -> bool:
    return isinstance(app.screen, ChatScreen) and isinstance(app.focused, ChatInput)


async def test_after_esc_and_a_new_chat_typing_is_a_message(make_app: AppFactory) -> None:
    """Before: focus stayed in the transcript, nothing was sent, and every t lowered the temperature."""
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        before = app.controller.params
        await pilot.press("escape", "ctrl+n")
        await wait_until(pilot, lambda: app.controller.conversation.root is None)
        await pilot.pause()
        await pilot.press(*"What is 2 plus 3?", "enter")
        await wait_idle(app, pilot)
        assert app.controller.params == before
        assert app.controller.conversation.path()[0].version.text == "What is 2 plus 3?"


# (the key that opens it, from the transcript; what must be on screen first)
DIALOGS = {
    "help": "f1",
    "library": "ctrl+g",
    "model picker": "ctrl+o",
    "system prompt": "f2",
    "edit a message": "f6",
    "delete a message": "f7",
    "palette": "ctrl+p",
    "theme picker": "f8",
}


@pytest.mark.parametrize("key", DIALOGS.values(), ids=DIALOGS.keys())
async def test_a_closed_dialog_gives_the_input_the_focus(make_app: AppFactory, key: str) -> None:
    """Before: Esc out of a dialog opened from the transcript left the focus there, and the next
    letters typed stepped parameters."""
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.focused, Transcript)
        await pilot.press(key)
        await wait_until(pilot, lambda: not isinstance(app.screen, ChatScreen))
        await pilot.pause()
        await pilot.press("escape")
        await wait_until(pilot, lambda: _focused_input(app))
        before = app.controller.params
        await pilot.press(*"tskm")
        await pilot.pause()
        assert app.controller.params == before and app.screen.query_one(ChatInput).text == "tskm"


async def test_a_value_dialog_from_the_palette_gives_the_input_the_focus(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        await pilot.press("escape")
        await palette_run(pilot, "Set temperature")
        await wait_until(pilot, lambda: not isinstance(app.screen, ChatScreen))
        await pilot.press("escape")
        await wait_until(pilot, lambda: _focused_input(app))


async def test_a_resumed_chat_gives_the_input_the_focus(make_app: AppFactory) -> None:
    await chat_and_quit(make_app)
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        app.screen.query_one(Transcript).focus()
        await pilot.press("ctrl+l")
        await wait_until(pilot, lambda: app.controller.conversation.root is not None)
        await wait_until(pilot, lambda: _focused_input(app))


async def test_a_chat_reopened_from_the_library_gives_the_input_the_focus(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "first chat")
        await pilot.press("ctrl+n")  # the first chat goes to the library
        await wait_until(pilot, lambda: app.controller.conversation.root is None)
        app.screen.query_one(Transcript).focus()
        await pilot.press("ctrl+g")
        await wait_until(pilot, lambda: not isinstance(app.screen, ChatScreen))
        await wait_until(pilot, lambda: bool(getattr(app.screen, "entries", None)))
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.controller.conversation.root is not None)
        await wait_until(pilot, lambda: _focused_input(app))


async def test_an_unbound_letter_in_the_transcript_goes_to_the_input(make_app: AppFactory) -> None:
    """Before: keys with no binding in the transcript vanished (the message was lost)."""
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        await pilot.press("escape")
        await pilot.pause()
        before = app.controller.params
        await pilot.press(*"What is 2 plus 3?")
        await pilot.pause()
        assert _focused_input(app)
        assert app.screen.query_one(ChatInput).text == "What is 2 plus 3?"
        assert app.controller.params == before


async def test_a_parameter_key_flashes_its_row(make_app: AppFactory) -> None:
    """Before: with the panel on screen, t changed the temperature with nothing drawing the eye."""
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        panel = app.screen.query_one(ParamsPanel)
        assert panel.region.area
        await pilot.press("escape", "t")
        await pilot.pause()
        assert panel.flashed == {"temperature"}
        await wait_until(pilot, lambda: not panel.flashed, timeout=5)


async def test_fast_typing_into_the_transcript_keeps_every_letter(make_app: AppFactory) -> None:
    """Seen in tmux: "unfinished question" typed fast after Esc became "fhed qeo" in the input:
    the letters queued for the transcript before the input took the focus still stepped the
    parameters (n, i, s, t...). Every key after the first unbound one is text."""
    from textual import events

    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        await pilot.press("escape")
        await pilot.pause()
        before = app.controller.params
        # one burst, as a fast typist or tmux send-keys delivers it; "h" is unbound, and the bound
        # letters after it (f: next fork, u: units, n: next unlikely, t, i, m, s) are text too
        for char in "hi fun times":
            key = "space" if char == " " else char
            app.post_message(events.Key(key, char))
        await wait_until(pilot, lambda: app.screen.query_one(ChatInput).text == "hi fun times")
        assert app.controller.params == before


async def test_fast_typing_after_a_new_chat_is_a_message(make_app: AppFactory) -> None:
    from textual import events

    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        await pilot.press("escape")
        await pilot.pause()
        before = app.controller.params
        app.post_message(events.Key("ctrl+n", None))
        for char in "test":
            app.post_message(events.Key(char, char))
        await wait_until(pilot, lambda: app.screen.query_one(ChatInput).text == "test")
        assert app.controller.params == before


async def test_the_keep_it_question_gives_the_input_the_focus(make_app: AppFactory) -> None:
    """The replace-chat question (the library could not keep the chat): Esc keeps the chat and
    the input has the focus; what is typed next is text."""
    from test_never_lose_work import _lock_library

    from tui.app.screens.replace_chat import ReplaceChatDialog

    app = make_app()
    _lock = _lock_library(app)
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "keep me")
        await pilot.press("escape", "ctrl+n")
        await wait_until(pilot, lambda: isinstance(app.screen, ReplaceChatDialog))
        await pilot.press("escape")
        await wait_until(pilot, lambda: _focused_input(app))
        before = app.controller.params
        await pilot.press(*"tk")
        await pilot.pause()
        assert app.controller.params == before and app.screen.query_one(ChatInput).text == "tk"
    del _lock
