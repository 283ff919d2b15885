"""The chat reaches the library as it happens: a finished turn at once, a streaming reply every
few seconds, an edit or delete within a poll; a library that cannot be written is one line while
chatting goes on; a resumed chat keeps its row."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from conftest import AppFactory
from tui_helpers import SIZE, send, start_reply, wait_idle, wait_until

from engine.scripted import ScriptedEngine
from engine.core.library import Library
from tui.app import library_sync
from tui.app.application import LogitscopeApp
from engine.core.chat.fileformat import conversation_from_dict


def _library(app: LogitscopeApp) -> Library:
    return Library(app.library.path)


def _entries(app: LogitscopeApp) -> list[str]:
    if not app.library.path.exists():
        return []
    return [e.title for e in _library(app).entries()]


async def test_a_finished_turn_is_in_the_library_at_once(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "What is a token?")
        await wait_until(pilot, lambda: _entries(app) == ["What is a token?"])
        [entry] = _library(app).entries()
        stored = conversation_from_dict(_library(app).load(entry.id).document)
        reply = stored.path()[1].version
        live = app.controller.conversation.path()[1].version
        assert reply.finish_reason == "stop" and reply.token_ids == live.token_ids
        assert reply.tokens is not None and reply.tokens[0].candidates == live.tokens[0].candidates
        app.controller.delete_from(app.controller.conversation.path()[0])  # posts no message: the poll sees it
        await send(app, pilot, "Second question")
        await wait_until(pilot, lambda: _entries(app) == ["Second question"])


async def test_a_streaming_reply_is_committed_every_few_seconds(make_app: AppFactory,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(library_sync, "STREAM_S", 0.2)
    app = make_app(engine=ScriptedEngine([["tok "] * 400], token_delay=0.02))
    async with app.run_test(size=SIZE) as pilot:
        await start_reply(app, pilot, "long one")

        def partial_saved() -> bool:
            if not _entries(app):
                return False
            doc = _library(app).load(_library(app).entries()[0].id).document
            tokens = conversation_from_dict(doc).path()[1].version.tokens or []
            return 5 < len(tokens) < 400

        await wait_until(pilot, partial_saved)
        assert app.controller.busy


async def test_a_locked_library_is_one_line_and_chatting_goes_on(make_app: AppFactory) -> None:
    app = make_app()
    Library(app.library.path).close()
    holder = sqlite3.connect(app.library.path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    notes: list[str] = []
    async with app.run_test(size=SIZE) as pilot:
        app.library._report = notes.append
        await send(app, pilot, "hello")
        await wait_until(pilot, lambda: bool(notes))
        assert len(app.controller.conversation.path()) == 2  # the reply came all the same
        assert len(notes) == 1 and "locked" in notes[0] and "\n" not in notes[0]
        holder.execute("ROLLBACK")
        await send(app, pilot, "again")
        await wait_until(pilot, lambda: _entries(app) == ["hello"])


async def test_a_resumed_chat_keeps_its_row(tmp_path: Path, make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "remember me")
    assert _entries(app) == ["remember me"]
    again = make_app()
    async with again.run_test(size=SIZE) as pilot:
        await wait_idle(again, pilot)
        await pilot.press("ctrl+p")
        await pilot.press(*"resume", "enter")
        await wait_until(pilot, lambda: again.controller.conversation.root is not None)
        await send(again, pilot, "and more")
        await wait_until(pilot, lambda: len(_library(again).entries()) == 1
                         and _library(again).entries()[0].messages == 4)


def test_the_snapshot_is_cheap_and_stays_as_it_was() -> None:
    """The loop hands the writing thread a shallow copy (conversion ran on the loop before: 70 ms
    for a 10,000-token chat); the live chat growing on must not change what is being saved."""
    from engine.core.api import Candidate, SamplingParams, TokenEvent
    from tui.app.library_sync import frozen_copy
    from engine.core.chat.conversation import Conversation, Node, Version
    from engine.core.chat.fileformat import conversation_to_dict

    token = TokenEvent(0, 5, "x", "x", -0.5, 0.5, 1, 1.0, (Candidate(5, "x", -0.5, 0.5),))
    live = Conversation("sys")
    live.append(Node("user", [Version("q")]))
    reply = live.append(Node("assistant", [Version("", [token], SamplingParams())]))
    reply.add_version(Version("b", [token], SamplingParams(), "stop", branched_at=0))
    reply.active = 0
    copy = frozen_copy(live)
    before = conversation_to_dict(live)
    assert conversation_to_dict(copy) == before
    reply.version.tokens.append(token)  # the reply streams on
    live.append(Node("user", [Version("next")]))
    assert conversation_to_dict(copy) == before


async def test_a_damaged_library_is_one_line_and_chatting_goes_on(make_app: AppFactory) -> None:
    app = make_app()
    app.library.path.parent.mkdir(parents=True, exist_ok=True)
    app.library.path.write_bytes(b"not a database, whatever it was" * 200)
    notes: list[str] = []
    app.library._report = notes.append
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: bool(notes))  # said at the start, before a chat is written
        await send(app, pilot, "hello")
        await send(app, pilot, "again")
        await pilot.pause(0.5)
        assert len(app.controller.conversation.path()) == 4
        assert notes == [(f"Chats are not being saved to the library: library {app.library.path}: cannot open: "
                          "it is damaged (not a readable SQLite database)")]
    assert app.library.path.read_bytes().startswith(b"not a database")  # never overwritten
