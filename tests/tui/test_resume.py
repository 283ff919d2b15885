"""Resuming the conversation saved on quit: it comes back whole, and a reply's token ids are
reused only with the model that produced them (another model's ids would mean other words)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.scripted import ScriptedEngine
from engine.core.chat.store import last_conversation_path
from tui.app.widgets.transcript import Transcript
from tui_helpers import SIZE, chat_and_quit, palette_run, screen_text, send, wait_idle, wait_until


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
        assert any(n.startswith("Resumed the conversation saved on quit (2 messages).") for n in _notes(app))
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
        assert any(n.startswith("Resumed the conversation saved on quit (2 messages).") for n in _notes(app))
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


async def test_nothing_saved_or_a_broken_file_is_one_line(make_app: Any, tmp_path: Path) -> None:
    app = make_app(ScriptedEngine(load_delay=1.0))
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.controller.loading)
        app.screen.action_resume_last()  # whose ids a reply may reuse is unknown until the model is in
        await wait_until(pilot, lambda: any("A model is loading" in n for n in _notes(app)))
        await wait_idle(app, pilot)
        await palette_run(pilot, "Resume last")
        await wait_until(pilot, lambda: any("No saved conversation yet" in n for n in _notes(app)))
        saved = last_conversation_path(app.save_dir)
        saved.parent.mkdir(parents=True, exist_ok=True)
        saved.write_text("{not json", encoding="utf-8")
        await palette_run(pilot, "Resume last")
        await wait_until(pilot, lambda: any(n.startswith(f"Could not read {saved}:") for n in _notes(app)))
        saved.write_text('[{"role": "user"}]', encoding="utf-8")  # JSON, but not a conversation
        await palette_run(pilot, "Resume last")
        await wait_until(pilot, lambda: any("not a saved conversation" in n for n in _notes(app)))
        assert all("\n" not in n for n in _notes(app))
        assert app.controller.conversation.root is None
        assert app.screen.query_one(Transcript).cursor is None


async def test_a_file_holding_a_token_id_the_model_does_not_have_is_refused_whole(make_app: Any) -> None:
    """A saved reply of this model whose ids do not fit its vocabulary (a hostile or damaged file):
    the file is refused before it replaces anything, in one line naming the id, and the live chat
    stays. (The engine would refuse the turn too, but only after the chat had been replaced.)"""
    await chat_and_quit(make_app)
    app = make_app(ScriptedEngine())
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "the live chat")
        live = app.controller.conversation
        saved = last_conversation_path(app.save_dir)
        text = saved.read_text(encoding="utf-8")
        data = json.loads(text)
        reply = next(n for n in data["nodes"] if n["role"] == "assistant")
        reply["versions"][0]["tokens"][-1]["id"] = 999_999  # the scripted model has 32,000
        saved.write_text(json.dumps(data), encoding="utf-8")
        await palette_run(pilot, "Resume last")
        await pilot.pause()
        if app.screen is not app.chat_screen:  # asked what to do with the live chat: go on
            await pilot.press("d")
        await wait_until(pilot, lambda: any("999999" in n for n in _notes(app)))
        assert app.controller.conversation is live
        note = next(n for n in _notes(app) if "999999" in n)
        assert "\n" not in note and "0..31999" in note
