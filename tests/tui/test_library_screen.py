"""The library screen (Ctrl+G, or the palette): newest first, type to filter by any word, Enter
reopens a chat exactly as it was (branches, tokens, candidates, parameters) and keeps saving to
its row; rename, delete with undo, fork. Titles are data, never markup."""

from __future__ import annotations

import math
from typing import Any

from conftest import AppFactory
from tui_helpers import SIZE, palette_run, screen_text, send, wait_idle, wait_until

from engine.core.api import Candidate, SamplingParams, TokenEvent
from engine.core.library import Library
from engine.core.chat.conversation import Conversation, Node, Version
from engine.core.chat.fileformat import conversation_to_dict
from tui.app.screens.library import LibraryScreen


def _chat(question: str, answer: str) -> Conversation:
    conv = Conversation("sys")
    conv.append(Node("user", [Version(question)]))
    cands = (Candidate(7, answer, math.log(0.6), 0.7), Candidate(8, " other", math.log(0.3), 0.3))
    token = TokenEvent(0, 7, answer, answer, math.log(0.6), 0.7, 1, 0.9, cands)
    reply = conv.append(Node("assistant", [Version(answer, [token], SamplingParams(temperature=0.5, seed=3), "stop")]))
    reply.add_version(Version("second try", [token], SamplingParams(seed=4), "stop", branched_at=0))
    return conv


def _fill(app: Any) -> dict[str, str]:
    library = Library(app.library.path)
    ids = {}
    for q, a in (("About penguins", "They swim"), ("About volcanoes", "Lava"), ("Evil [/] \x1b[31m title", "x")):
        ids[q] = library.save(conversation_to_dict(_chat(q, a)), model_spec="demo")
    library.close()
    return ids


def _rows(app: Any) -> list[str]:
    return [e.title for e in app.screen.entries] if isinstance(app.screen, LibraryScreen) else []


async def test_find_and_reopen_a_chat_exactly(make_app: AppFactory) -> None:
    app = make_app()
    ids = _fill(app)
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        await pilot.press("ctrl+g")
        await wait_until(pilot, lambda: len(_rows(app)) == 3)
        assert _rows(app)[0].startswith("Evil")  # newest first
        assert "Evil [/] ^[[31m title" in screen_text(app) or "Evil [/]" in screen_text(app)
        await pilot.press(*"penguin")
        await wait_until(pilot, lambda: _rows(app) == ["About penguins"])
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.controller.conversation.root is not None)
        assert conversation_to_dict(app.controller.conversation) == conversation_to_dict(_chat("About penguins", "They swim"))
        assert app.library.conversation_id == ids["About penguins"]
        await send(app, pilot, "and more")
        library = Library(app.library.path)
        await wait_until(pilot, lambda: library.load(ids["About penguins"]).entry.messages == 4)
        assert len(library.entries()) == 3  # continued in its own row, no copy


async def test_rename_delete_undo_fork(make_app: AppFactory) -> None:
    app = make_app()
    _fill(app)
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        await palette_run(pilot, "Library")
        await wait_until(pilot, lambda: len(_rows(app)) == 3)
        await pilot.press(*"volcano")
        await wait_until(pilot, lambda: _rows(app) == ["About volcanoes"])
        await pilot.press("ctrl+r")
        await pilot.pause()
        await pilot.press("ctrl+u", *"Hot rocks", "enter")
        await wait_until(pilot, lambda: _rows(app) == ["Hot rocks"])
        await pilot.press("ctrl+d")
        await wait_until(pilot, lambda: _rows(app) == [])
        assert "Ctrl+Z" in screen_text(app)
        await pilot.press("ctrl+z")
        await wait_until(pilot, lambda: _rows(app) == ["Hot rocks"])
        await pilot.press("ctrl+f")
        await wait_until(pilot, lambda: sorted(_rows(app)) == ["Hot rocks", "Hot rocks (copy)"])
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, LibraryScreen))


async def test_undo_survives_closing_the_library(make_app: AppFactory) -> None:
    """Before (#30.6): the undo stack lived in the dialog; closed and reopened, Ctrl+Z rang the bell."""
    app = make_app()
    _fill(app)
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        await pilot.press("ctrl+g")
        await wait_until(pilot, lambda: len(_rows(app)) == 3)
        await pilot.press(*"penguin")
        await wait_until(pilot, lambda: _rows(app) == ["About penguins"])
        await pilot.press("ctrl+d")
        await wait_until(pilot, lambda: _rows(app) == [])
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, LibraryScreen))
        await pilot.press("ctrl+g")
        await wait_until(pilot, lambda: len(_rows(app)) == 2)
        await pilot.press("ctrl+z")
        await wait_until(pilot, lambda: len(_rows(app)) == 3)
        assert "About penguins" in _rows(app)
