"""The user's chat survives every mistake: a model switch that fails, a message too long for the
context, a long chat reaching the limit; and the ways out every chat app has (delete a message
and what follows, edit any earlier message and resend from there)."""

from __future__ import annotations

from typing import Any

import pytest

from engine.core.api import Message
from engine.scripted import ScriptedEngine
from tui.app.widgets.chat_input import ChatInput
from tui.app.widgets.status_bar import StatusBar
from tui_helpers import SIZE, send, wait_idle, store_chat, wait_until


def _notes(app: Any) -> list[str]:
    return [n.message for n in app._notifications]


def _texts(app: Any) -> list[str]:
    return [n.version.reply_text() for n in app.controller.conversation.path()]


async def test_a_failed_switch_keeps_the_model_the_chat_and_its_cache(make_app: Any) -> None:
    engine = ScriptedEngine()
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        before = _texts(app)
        engine.load_error = "no model folder at /nowhere"
        app.switch_model("/nowhere")
        await wait_until(pilot, lambda: any("no model folder" in n for n in _notes(app)))
        await wait_idle(app, pilot)
        assert engine.model is not None and engine.model.name == "scripted-demo"
        assert _texts(app) == before and "hi" in before
        bar = app.screen.query_one(StatusBar)
        assert bar.model == "scripted-demo" and bar.state == "ready"
        note = next(n for n in _notes(app) if "no model folder" in n)
        assert note == "no model folder at /nowhere Still using scripted-demo." and "\n" not in note
        await send(app, pilot, "and then?")
        stats = app.controller.conversation.path()[-1].version.stats
        assert stats is not None and stats.reused_tokens > 0  # the cache survived the failed load
        assert engine.requests[-1].messages[1].token_ids is not None  # the same model: exact ids


async def test_a_successful_switch_keeps_the_conversation_as_text(make_app: Any) -> None:
    engine = ScriptedEngine()
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        before = _texts(app)
        app.switch_model("other")
        await wait_until(pilot, lambda: engine.model is not None and engine.model.name == "other")
        await wait_idle(app, pilot)
        assert _texts(app) == before
        assert any("replies so far continue as text" in n for n in _notes(app))
        await send(app, pilot, "more")
        sent = engine.requests[-1].messages
        assert [m.role for m in sent] == ["user", "assistant", "user"]
        assert sent[1].token_ids is None and sent[1].text == before[1]  # another model's ids: as text


# --- the context limit. The scripted engine counts a role marker per message plus its words.

LIMIT = 40


async def _app_with_history(make_app: Any, config: str = "") -> tuple[Any, ScriptedEngine, Any]:
    engine = ScriptedEngine([["ok", " then"]], context_limit=LIMIT)
    app = make_app(engine, config_text=config)
    return app, engine, app.run_test(size=SIZE)


def _words(n: int) -> str:
    return " ".join(f"w{i}" for i in range(n))


async def _fill_to(app: Any, engine: ScriptedEngine, total: int) -> str:
    """A message that makes the next prompt exactly `total` tokens long."""
    history = app.controller.conversation.messages(model=app.controller.model_folder)
    base = await engine.count_tokens(history + (Message("user", ""),))
    return _words(total - base)


async def _type_and_send(app: Any, pilot: Any, text: str) -> None:
    chat_input = app.screen.query_one(ChatInput)
    chat_input.load_text(text)
    chat_input.focus()
    await pilot.press("enter")
    await pilot.pause()
    await wait_idle(app, pilot)


@pytest.mark.parametrize("strategy", ["refuse", "drop_oldest"])
@pytest.mark.parametrize("over", [0, 1, 500], ids=["at-the-limit", "one-over", "far-over"])
async def test_a_message_too_long_is_refused_and_stays_in_the_input(make_app: Any, strategy: str,
                                                                    over: int) -> None:
    app, engine, running = await _app_with_history(make_app, f'[chat]\ncontext_strategy = "{strategy}"\n')
    async with running as pilot:
        await wait_idle(app, pilot)
        text = await _fill_to(app, engine, LIMIT - 1 + over)  # LIMIT - 1 tokens: the most that fit
        await _type_and_send(app, pilot, text)
        if over == 0:
            assert _texts(app)[0] == text and len(engine.requests) == 1
            return
        assert app.controller.conversation.root is None and engine.requests == []
        assert app.screen.query_one(ChatInput).text == text
        note = next(n for n in _notes(app) if "over the context" in n)
        assert f"is {over} token{'s' if over > 1 else ''} over the context" in note and "\n" not in note
        assert app.screen.query_one(StatusBar).state == "not sent"
        await _type_and_send(app, pilot, "short")  # the chat is not bricked
        assert _texts(app)[0] == "short"


async def test_a_long_chat_drops_its_oldest_exchanges_and_says_so(make_app: Any) -> None:
    app, engine, running = await _app_with_history(make_app)
    async with running as pilot:
        await wait_idle(app, pilot)
        app.controller.conversation.system_prompt = "be brief"
        for n in range(6):
            await _type_and_send(app, pilot, f"question {n} {_words(3)}")
        assert len(_texts(app)) == 12  # all kept on screen
        sent = engine.requests[-1].messages
        assert sent[0] == Message("system", "be brief") and sent[1].role == "user"
        assert sent[-1].text.startswith("question 5") and len(sent) < 12
        assert "context full: the oldest" in app.screen.query_one(StatusBar).state
        assert await engine.count_tokens(sent) < LIMIT
        assert engine.prepared[-1][0] == sent[0] and engine.prepared[-1][1] == sent[1]  # warmed as it will be sent


async def test_refuse_strategy_sends_nothing_that_does_not_fit(make_app: Any) -> None:
    app, engine, running = await _app_with_history(make_app, '[chat]\ncontext_strategy = "refuse"\n')
    async with running as pilot:
        await wait_idle(app, pilot)
        for n in range(6):
            await _type_and_send(app, pilot, f"question {n} {_words(3)}")
        for request in engine.requests:  # every request whole (nothing left out) and within the limit
            assert request.messages[0].text == "question 0 w0 w1 w2"
            assert await engine.count_tokens(request.messages) < LIMIT
        assert any("The conversation with this message is" in n for n in _notes(app))
        assert app.screen.query_one(ChatInput).text.startswith("question")
        assert all(m.role != "assistant" or m.text for m in engine.requests[-1].messages)


async def test_delete_a_message_and_what_follows(make_app: Any) -> None:
    engine = ScriptedEngine()
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        for text in ("one", "two", "three"):
            await send(app, pilot, text)
        path = app.controller.conversation.path()
        assert app.controller.delete_from(path[2])
        assert _texts(app)[0] == "one" and len(_texts(app)) == 2
        await send(app, pilot, "again")
        assert [m.text for m in engine.requests[-1].messages if m.role == "user"] == ["one", "again"]


async def test_edit_an_earlier_message_and_resend_from_there(make_app: Any) -> None:
    engine = ScriptedEngine()
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        for text in ("one", "two", "three"):
            await send(app, pilot, text)
        first = app.controller.conversation.path()[0]
        assert app.controller.edit_user(first, "uno")
        await wait_idle(app, pilot)
        assert [n.version.text for n in app.controller.conversation.path() if n.role == "user"] == ["uno"]
        assert [m.text for m in engine.requests[-1].messages] == ["uno"]
        first.flip(-1)  # the old turn, and all that followed it, is a branch
        assert len(app.controller.conversation.path()) == 6


# --- nothing is replaced without keeping it: in the library, or asking when the library cannot


def _lock_library(app: Any) -> Any:
    """Hold the library's write lock, so saving to it fails (after its 1 s busy timeout)."""
    import sqlite3

    from engine.core.library import Library

    Library(app.library.path).close()
    holder = sqlite3.connect(app.library.path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    return holder


async def test_ctrl_n_keeps_the_chat_in_the_library_without_asking(make_app: Any) -> None:
    from engine.core.library import Library
    from tui.app.screens.replace_chat import ReplaceChatDialog

    app = make_app(ScriptedEngine())
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "keep me")
        await pilot.press("ctrl+n")
        await wait_until(pilot, lambda: app.controller.conversation.root is None)
        assert not isinstance(app.screen, ReplaceChatDialog)
        assert any("in the library" in n for n in _notes(app))
        library = Library(app.library.path)
        try:
            assert [e.title for e in library.entries()] == ["keep me"]
        finally:
            library.close()


async def test_ctrl_n_asks_first_and_esc_keeps_the_chat(make_app: Any) -> None:
    from tui.app.screens.replace_chat import ReplaceChatDialog

    app = make_app(ScriptedEngine())
    _lock = _lock_library(app)
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "keep me")
        live = app.controller.conversation
        await pilot.press("ctrl+n")
        await wait_until(pilot, lambda: isinstance(app.screen, ReplaceChatDialog))
        await pilot.press("escape")
        await pilot.pause()
        assert app.controller.conversation is live and _texts(app)[0] == "keep me"
        await pilot.press("ctrl+n")
        await wait_until(pilot, lambda: isinstance(app.screen, ReplaceChatDialog))
        await pilot.press("d")
        await wait_until(pilot, lambda: app.controller.conversation.root is None)


async def test_save_and_continue_keeps_the_chat_in_a_file_when_the_library_is_locked(make_app: Any,
                                                                                      tmp_path: Any) -> None:
    from engine.core.chat.store import load_conversation
    from tui.app.screens.replace_chat import ReplaceChatDialog

    app = make_app(ScriptedEngine())
    _lock = _lock_library(app)
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "keep me")
        await pilot.press("ctrl+n")
        await wait_until(pilot, lambda: isinstance(app.screen, ReplaceChatDialog))
        await pilot.press("enter")  # "Save and continue" has the focus
        await wait_until(pilot, lambda: app.controller.conversation.root is None)
        kept = list((tmp_path / "state" / "conversations").iterdir())
        assert len(kept) == 1 and load_conversation(kept[0]).path()[0].version.text == "keep me"
        assert any(n.startswith("Saved the chat to ") for n in _notes(app))


async def test_resume_asks_before_replacing_the_live_chat(make_app: Any, tmp_path: Any) -> None:
    """Ctrl+L then Ctrl+Q used to leave the chat that was live in no file."""
    from engine.core.chat.store import load_conversation
    from tui.app.screens.replace_chat import ReplaceChatDialog
    from tui_helpers import chat_and_quit

    await chat_and_quit(make_app)
    app = make_app(ScriptedEngine())
    _lock = _lock_library(app)
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "the live one")
        await pilot.press("ctrl+l")
        await wait_until(pilot, lambda: isinstance(app.screen, ReplaceChatDialog))
        await pilot.press("s")
        await wait_until(pilot, lambda: _texts(app)[0] == "hi")
        kept = list((tmp_path / "state" / "conversations").iterdir())
        assert load_conversation(kept[0]).path()[0].version.text == "the live one"


# --- stale screen state


async def _at_bottom(app: Any, pilot: Any) -> bool:
    from tui.app.widgets.transcript import Transcript

    transcript = app.screen.query_one(Transcript)
    await pilot.pause()
    await pilot.pause()
    return transcript.max_scroll_y > 0 and transcript.scroll_y >= transcript.max_scroll_y


async def _use_the_cursor(app: Any, pilot: Any) -> None:
    from tui.app.widgets.transcript import Transcript

    await pilot.press("escape", "up", "up", "right")  # inspect a token of an earlier reply
    await pilot.pause()
    transcript = app.screen.query_one(Transcript)
    assert transcript.cursor is not None and transcript.scroll_y < transcript.max_scroll_y
    await pilot.press("backspace", "i")  # leave the cursor, back to typing


async def test_after_the_cursor_a_new_reply_is_followed(make_app: Any) -> None:
    app = make_app(ScriptedEngine())
    async with app.run_test(size=(80, 20)) as pilot:
        for n in range(3):
            await send(app, pilot, f"message {n}")
        await _use_the_cursor(app, pilot)
        await send(app, pilot, "and now?")
        assert await _at_bottom(app, pilot)


async def test_after_the_cursor_a_flip_shows_the_newest_message(make_app: Any) -> None:
    app = make_app(ScriptedEngine())
    async with app.run_test(size=(80, 20)) as pilot:
        for n in range(4):
            await send(app, pilot, f"message {n}")
        await pilot.press("ctrl+r")  # the last reply gets a second (shorter) version
        await wait_idle(app, pilot)
        await _use_the_cursor(app, pilot)
        await pilot.press("escape", "left_square_bracket")  # flip back to the longer version
        await pilot.pause()
        await pilot.press("right_square_bracket")  # and to the shorter one
        assert await _at_bottom(app, pilot)


async def test_after_the_cursor_a_resumed_chat_shows_its_end(make_app: Any, tmp_path: Any) -> None:
    from engine.core.chat.conversation import Conversation, Node, Version

    saved = Conversation()
    for n in range(12):  # taller than the live chat: its end was left below the view
        saved.append(Node("user", [Version(f"old question {n}")]))
        saved.append(Node("assistant", [Version(f"old answer {n}", finish_reason="stop")]))
    app = make_app(ScriptedEngine())
    store_chat(app.library.path, saved)
    async with app.run_test(size=(80, 20)) as pilot:
        await wait_idle(app, pilot)
        for n in range(3):
            await _type_and_send(app, pilot, f"message {n}")
        await _use_the_cursor(app, pilot)
        await pilot.press("ctrl+l")
        await pilot.pause()
        await pilot.press("d")
        await wait_until(pilot, lambda: len(app.controller.conversation.path()) == 24)
        assert await _at_bottom(app, pilot)


async def test_new_chat_clears_the_candidates_panel_and_the_status(make_app: Any) -> None:
    from tui.app.widgets.candidates import CandidatesPanel

    app = make_app(ScriptedEngine(token_delay=0.05))
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        await pilot.press(*"again", "enter")
        await wait_until(pilot, lambda: app.controller.busy)
        await pilot.press("escape")
        await wait_idle(app, pilot)
        panel = app.screen.query_one(CandidatesPanel)
        assert panel.token is not None and app.screen.query_one(StatusBar).state == "stopped"
        await pilot.press("ctrl+n", "d")
        await wait_until(pilot, lambda: app.controller.conversation.root is None)
        await pilot.pause()
        assert panel.token is None and app.screen.query_one(StatusBar).state == "ready"


async def test_f7_deletes_a_chosen_message_and_f6_edits_an_earlier_one(make_app: Any) -> None:
    from tui.app.screens.dialogs import TextDialog
    from tui.app.screens.message_picker import MessagePicker
    from tui.app.screens.replace_chat import ReplaceChatDialog

    engine = ScriptedEngine()
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        for text in ("one", "two", "three"):
            await send(app, pilot, text)
        await pilot.press("f7")
        await wait_until(pilot, lambda: isinstance(app.screen, MessagePicker))
        await pilot.press("up", "up", "up", "enter")  # message 3 of 6: "two"
        await wait_until(pilot, lambda: isinstance(app.screen, ReplaceChatDialog))
        await pilot.press("d")
        await wait_until(pilot, lambda: len(_texts(app)) == 2)
        await send(app, pilot, "four")
        await pilot.press("f6")
        await wait_until(pilot, lambda: isinstance(app.screen, MessagePicker))
        await pilot.press("home", "enter")  # "one"
        await wait_until(pilot, lambda: isinstance(app.screen, TextDialog))
        app.screen.query_one("#text").text = "uno"  # type: ignore[attr-defined]
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: engine.requests[-1].messages[-1].text == "uno")
        await wait_idle(app, pilot)
        assert [m.text for m in engine.requests[-1].messages] == ["uno"]
        assert _texts(app)[0] == "uno" and len(_texts(app)) == 2


async def test_keeping_a_chat_before_a_delete_puts_a_copy_in_the_library(make_app: Any) -> None:
    """The library is the one store: "keep it" in the delete question stores the whole chat as a
    chat of its own there (no file), and the live chat's row follows the cut."""
    from tui.app.screens.message_picker import MessagePicker
    from tui.app.screens.replace_chat import ReplaceChatDialog
    from tui_helpers import stored_documents

    app = make_app(ScriptedEngine())
    async with app.run_test(size=SIZE) as pilot:
        for text in ("one", "two"):
            await send(app, pilot, text)
        await pilot.press("f7")
        await wait_until(pilot, lambda: isinstance(app.screen, MessagePicker))
        await pilot.press("up", "enter")  # message 3 of 4: "two"
        await wait_until(pilot, lambda: isinstance(app.screen, ReplaceChatDialog))
        await pilot.press("s")
        await wait_until(pilot, lambda: len(_texts(app)) == 2)
        assert any(n.startswith("Kept a copy of the chat in the library") for n in _notes(app))
        await send(app, pilot, "three")
    lengths = sorted(len(d["nodes"]) for d in stored_documents(app.library.path))
    assert lengths == [4, 4]  # the copy (one, two) and the live chat (one, three)
    assert not (app.save_dir / "conversations").exists()


async def test_a_message_sent_while_busy_stays_in_the_input(make_app: Any) -> None:
    """Found by the sweep: Enter during a stream cleared the input and refused the text."""
    from tui_helpers import start_reply

    app = make_app(ScriptedEngine(token_delay=0.2))
    async with app.run_test(size=SIZE) as pilot:
        await start_reply(app, pilot, "first")
        await pilot.press(*"second", "enter")
        await pilot.pause()
        assert app.screen.query_one(ChatInput).text == "second"
        assert any("still streaming" in n for n in _notes(app))
        await pilot.press("escape")


async def test_dropping_keeps_the_start_of_the_prompt_while_it_fits() -> None:
    """The same oldest messages are left out turn after turn (the cache's prefix stays), and when
    more must go, a quarter of the context goes, so the next turns fit again."""
    from engine.core.chat.context import fit

    async def count(messages: Any) -> int:
        return sum(1 + len(m.text.split()) for m in messages)

    chat: list[Message] = [Message("system", "s")]
    dropped, history = 0, []
    for n in range(12):
        chat.append(Message("user", _words(8)))
        fitted = await fit(count, chat, 60, "drop_oldest", 10, dropped)
        assert fitted.refusal is None and await count(fitted.messages) < 60
        assert fitted.messages[0] == chat[0] and fitted.messages[1].role == "user"
        history.append(fitted.dropped)
        dropped = fitted.dropped
        chat.append(Message("assistant", _words(3)))
    assert history == sorted(history) and history[-1] > 0
    assert len(set(history)) < len(history) - 4  # most turns left out the same as the one before


async def test_an_engine_that_fails_to_count_gives_the_message_back(make_app: Any) -> None:
    engine = ScriptedEngine()

    async def broken(messages: Any, thinking: Any = None) -> int:
        raise RuntimeError("tokenizer exploded")

    engine.count_tokens = broken  # type: ignore[method-assign]
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        await _type_and_send(app, pilot, "keep me")
        assert app.screen.query_one(ChatInput).text == "keep me" and app.controller.conversation.root is None
        assert any("could not count this message: RuntimeError: tokenizer exploded" in n for n in _notes(app))


async def test_an_engine_bug_mid_reply_is_one_line_and_the_chat_goes_on(make_app: Any) -> None:
    from engine.core.api import GenerateRequest

    class Buggy(ScriptedEngine):
        async def _generate(self, request: GenerateRequest) -> Any:  # type: ignore[override]
            async for event in super()._generate(request):
                yield event
                raise KeyError("oops")

    engine = Buggy()
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        assert any(n == "The engine failed: KeyError: 'oops'" for n in _notes(app))
        assert app.screen.query_one(StatusBar).state == "error" and not app.controller.busy
        assert app.controller.conversation.path()[-1].version.finish_reason == "error"


async def test_an_engine_bug_in_a_load_is_one_line_and_keeps_the_chat(make_app: Any) -> None:
    engine = ScriptedEngine()
    app = make_app(engine)
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        real_load = engine.load

        async def broken(model: str, **kwargs: Any) -> Any:
            raise ValueError("bad config.json")

        engine.load = broken  # type: ignore[method-assign]
        app.switch_model("other")
        await wait_until(pilot, lambda: any("bad config.json" in n for n in _notes(app)))
        await pilot.pause()
        assert app.is_running and _texts(app)[0] == "hi"
        engine.load = real_load  # type: ignore[method-assign]
        await send(app, pilot, "still here")
        assert len(_texts(app)) == 4
