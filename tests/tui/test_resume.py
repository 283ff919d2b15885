"""Resuming the last chat (Ctrl+L): the library's most recently changed chat but the live one
comes back whole, and a reply's token ids are reused only with the model that produced them
(another model's ids would mean other words). The chat files of older versions are in the
library from the first start on."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

from engine.core.chat.conversation import Conversation, Node, Version
from engine.core.chat.fileformat import conversation_from_dict
from engine.core.chat.store import save_conversation
from engine.core.library import Library
from engine.scripted import ScriptedEngine
from tui.app.widgets.transcript import Transcript
from tui_helpers import (
    SIZE, chat_and_quit, palette_run, screen_text, send, store_chat, stored_documents, wait_idle, wait_until,
)


def _notes(app: Any) -> list[str]:
    return [n.message for n in app._notifications]


async def test_resume_brings_back_the_conversation_with_its_exact_ids(make_app: Any, tmp_path: Path) -> None:
    await chat_and_quit(make_app)
    engine = ScriptedEngine()
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        await palette_run(pilot, "Resume last")
        await wait_until(pilot, lambda: len(app.controller.conversation.path()) == 2)
        await pilot.pause()
        reply = app.controller.conversation.path()[-1].version
        assert reply.model == "/scripted/demo" and reply.tokens
        assert "hi" in screen_text(app) and reply.reply_text()[:10] in screen_text(app)
        assert any(n.startswith("Resumed “hi” (2 messages).") for n in _notes(app))
        await send(app, pilot, "and then?")
        sent = engine.requests[-1].messages
        assert [m.role for m in sent] == ["user", "assistant", "user"]
        assert sent[1].token_ids == reply.token_ids  # the same model: spliced exactly
        await pilot.press("escape", "right", "home")
        await pilot.press("2")  # branching from the resumed reply works too
        await wait_idle(app, pilot)
        assert engine.requests[-1].continue_last


async def test_ctrl_l_resumes_and_the_palette_lists_resume_once(make_app: Any) -> None:
    await chat_and_quit(make_app)
    app = make_app(ScriptedEngine())
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        await pilot.press("ctrl+l")  # from the input, where the focus starts
        await wait_until(pilot, lambda: len(app.controller.conversation.path()) == 2)
        await pilot.pause()
        assert "hi" in screen_text(app)
        assert any(n.startswith("Resumed “hi” (2 messages).") for n in _notes(app))
        await pilot.press("ctrl+p", *"Resume")
        await wait_until(pilot, lambda: _palette_rows(app) != [])
        assert [row for row in _palette_rows(app) if "Resume" in row] == ["Resume last  [^l]"]


async def test_resume_key_is_rebound_by_id(make_app: Any) -> None:
    await chat_and_quit(make_app)
    app = make_app(ScriptedEngine(), config_text='[keys]\n"chat.resume" = "f11"\n')
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        await pilot.press("ctrl+l")
        await pilot.pause()
        assert app.controller.conversation.root is None  # the old key no longer resumes
        await pilot.press("f11")
        await wait_until(pilot, lambda: len(app.controller.conversation.path()) == 2)
        await pilot.press("ctrl+p", *"Resume")
        await wait_until(pilot, lambda: _palette_rows(app) != [])
        assert [row for row in _palette_rows(app) if "Resume" in row] == ["Resume last  [f11]"]


def _palette_rows(app: Any) -> list[str]:
    """The command palette's listed commands, as plain text (first line of each)."""
    from textual.command import CommandList

    lists = app.screen.query(CommandList)
    if not lists:
        return []
    options = lists.first()
    return [str(options.get_option_at_index(i).prompt).splitlines()[0] for i in range(options.option_count)]


async def test_another_models_replies_continue_as_text_and_cannot_be_branched(make_app: Any) -> None:
    await chat_and_quit(make_app)
    engine = ScriptedEngine()
    app = make_app(engine, config_text='[model]\ndefault = "other/model"\n')
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        assert engine.model is not None and engine.model.path == "/scripted/other/model"
        await palette_run(pilot, "Resume last")
        await wait_until(pilot, lambda: len(app.controller.conversation.path()) == 2)
        await pilot.pause()
        assert any("another model: they continue as text" in n for n in _notes(app))
        await pilot.press("escape", "right", "home")
        await pilot.press("2")
        await pilot.pause()
        assert any("came from another model" in n for n in _notes(app))
        assert len(app.controller.conversation.path()[-1].versions) == 1  # no branch was made
        await send(app, pilot, "more")
        old_reply = engine.requests[-1].messages[1]
        assert old_reply.role == "assistant" and old_reply.token_ids is None and old_reply.text


async def test_nothing_stored_or_a_damaged_chat_is_one_line(make_app: Any, tmp_path: Path) -> None:
    app = make_app(ScriptedEngine(load_delay=1.0))
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.controller.loading)
        app.screen.action_resume_last()  # whose ids a reply may reuse is unknown until the model is in
        await wait_until(pilot, lambda: any("A model is loading" in n for n in _notes(app)))
        await wait_idle(app, pilot)
        await palette_run(pilot, "Resume last")
        await wait_until(pilot, lambda: any("No other chat in the library yet" in n for n in _notes(app)))
        chat = Conversation()
        chat.append(Node("user", [Version("damaged")]))
        chat_id = store_chat(app.library.path, chat)
        with sqlite3.connect(app.library.path) as db:  # a row damaged on disk: not a document
            db.execute("UPDATE conversations SET document = '[{\"role\": \"user\"}]' WHERE id = ?", (chat_id,))
        await palette_run(pilot, "Resume last")
        await wait_until(pilot, lambda: any(n.startswith("Could not open the chat:") for n in _notes(app)))
        assert all("\n" not in n for n in _notes(app))
        assert app.controller.conversation.root is None
        assert app.screen.query_one(Transcript).cursor is None


async def test_a_stored_chat_holding_a_token_id_the_model_does_not_have_is_refused_whole(make_app: Any) -> None:
    """A stored reply of this model whose ids do not fit its vocabulary (a hostile or damaged
    chat): refused before it replaces anything, in one line naming the id, and the live chat
    stays. (The engine would refuse the turn too, but only after the chat had been replaced.)"""
    await chat_and_quit(make_app)
    app = make_app(ScriptedEngine())
    [data] = stored_documents(app.library.path)
    reply = next(n for n in data["nodes"] if n["role"] == "assistant")
    reply["versions"][0]["tokens"][-1]["id"] = 999_999  # the scripted model has 32,000
    library = Library(app.library.path)
    library.save(data)  # the newest chat now
    library.close()
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "the live chat")
        live = app.controller.conversation
        await palette_run(pilot, "Resume last")
        await pilot.pause()
        if app.screen is not app.chat_screen:  # asked what to do with the live chat: go on
            await pilot.press("d")
        await wait_until(pilot, lambda: any("999999" in n for n in _notes(app)))
        assert app.controller.conversation is live
        note = next(n for n in _notes(app) if "999999" in n)
        assert "\n" not in note and "0..31999" in note


async def test_resume_opens_the_newest_chat_but_the_live_one(make_app: Any) -> None:
    """Ctrl+N then Ctrl+L brings back the chat just left; from a live chat, Ctrl+L opens the one
    before it (the live one is kept in the library, never reopened over itself)."""
    app = make_app(ScriptedEngine())
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "first chat")
        await pilot.press("ctrl+n")
        await wait_until(pilot, lambda: app.controller.conversation.root is None)
        await send(app, pilot, "second chat")
        await pilot.press("ctrl+l")
        await wait_until(pilot, lambda: app.controller.conversation.path()[0].version.text == "first chat")
        await pilot.press("ctrl+l")
        await wait_until(pilot, lambda: app.controller.conversation.path()[0].version.text == "second chat")
        await send(app, pilot, "more")
    titles = [conversation_from_dict(d).path()[0].version.text for d in stored_documents(app.library.path)]
    assert titles == ["second chat", "first chat"]  # two rows: each chat kept its own


async def test_the_files_of_an_older_version_are_in_the_library_at_the_first_start(make_app: Any,
                                                                                     tmp_path: Path) -> None:
    """Before the library was the one store, logitscope wrote last-conversation.json on quit and
    kept copies in conversations/: the first start takes them in (the newest is what Ctrl+L
    opens), moves the files to a backup folder, and says so in one line; the next start adds
    nothing."""
    state = tmp_path / "state"
    older, last = Conversation(), Conversation()
    older.append(Node("user", [Version("a kept copy")]))
    last.append(Node("user", [Version("the last chat")]))
    last.append(Node("assistant", [Version("its reply", finish_reason="stop")]))
    save_conversation(older, state / "conversations" / "conversation-20250101-120000.json")
    save_conversation(last, state / "last-conversation.json")
    os.utime(state / "conversations" / "conversation-20250101-120000.json", (1000, 1000))
    app = make_app(ScriptedEngine())
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: any(n.startswith("Took 2 chats saved as files into the library")
                                            for n in _notes(app)))
        await pilot.press("ctrl+l")
        await wait_until(pilot, lambda: len(app.controller.conversation.path()) == 2)
        assert app.controller.conversation.path()[0].version.text == "the last chat"
    assert not (state / "last-conversation.json").exists()
    backup = state / "imported-into-library"
    assert (backup / "last-conversation.json").is_file()
    assert (backup / "conversations" / "conversation-20250101-120000.json").is_file()
    again = make_app(ScriptedEngine())
    async with again.run_test(size=SIZE) as pilot:
        await wait_idle(again, pilot)
    assert len(stored_documents(again.library.path)) == 2
