"""A long chat opens and closes like a short one (issue #29, item 19): the transcript mounts the
newest messages only, and earlier ones as the view scrolls up to them or the token cursor goes
there. A 2,000-message chat mounted 2,000 views: 19-25 s to open, 8-11 s to quit. The tests count
mounted views (what the cost grows with), not seconds, which a busy machine would blur."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from engine.core.api import Candidate, SamplingParams, TokenEvent
from engine.core.chat.conversation import Conversation, Node, Version
from engine.scripted import ScriptedEngine
from tui.app.widgets.message_views import AssistantView, UserView
from tui.app.widgets.transcript import EarlierMessages, Transcript
from tui.app.widgets.transcript_window import BATCH, MOST, WINDOW, plan, window_for
from tui_helpers import SIZE, screen_text, store_chat, wait_idle, wait_until


def _token(i: int, text: str) -> TokenEvent:
    cands = (Candidate(10 + i, text, math.log(0.5), 0.6), Candidate(99, " alt", math.log(0.2), 0.0))
    return TokenEvent(i, 10 + i, text, text, math.log(0.5), 0.6, 1, 1.2, cands)


def _chat(exchanges: int) -> Conversation:
    """`exchanges` questions and replies, linked directly (appending walks the path each time)."""
    nodes: list[Node] = []
    for n in range(exchanges):
        nodes.append(Node("user", [Version(f"q{n}")]))
        tokens = [_token(0, f"a{n}"), _token(1, " end")]
        nodes.append(Node("assistant", [Version(f"a{n} end", tokens, SamplingParams(), "stop")]))
    for before, after in zip(nodes, nodes[1:]):
        before.version.child = after
    return Conversation("", nodes[0])


def _views(app: Any) -> int:
    transcript = app.screen.query_one(Transcript)
    return len(transcript.query_children(UserView)) + len(transcript.query_children(AssistantView))


async def _resume(app: Any, pilot: Any, messages: int) -> None:
    await wait_idle(app, pilot)
    await pilot.press("ctrl+l")
    await wait_until(pilot, lambda: len(app.controller.conversation.path()) == messages, timeout=60)
    await pilot.pause()


async def test_a_2000_message_chat_mounts_only_its_newest_messages(make_app: Any, tmp_path: Path) -> None:
    app = make_app(ScriptedEngine())
    store_chat(app.library.path, _chat(1000))
    async with app.run_test(size=SIZE) as pilot:
        await _resume(app, pilot, 2000)
        assert _views(app) <= 2 * WINDOW  # not 2,000
        assert "a999 end" in screen_text(app)
        line = app.screen.query_one(EarlierMessages)
        hidden = 2000 - _views(app)
        assert f"{hidden:,} earlier messages" in str(line.render())


async def test_a_chat_of_short_messages_opens_in_one_round_of_mounting(make_app: Any, tmp_path: Path,
                                                                       monkeypatch: Any) -> None:
    """Each round of mounting costs a whole layout (0.2-0.5 s here with 2,000 messages): the
    opening mounts enough short messages to fill two screens at once, not a window and then more."""
    rounds: list[int] = []
    monkeypatch.setattr(Transcript, "_mount_earlier", lambda self, start: rounds.append(start))
    app = make_app(ScriptedEngine())
    store_chat(app.library.path, _chat(1000))
    async with app.run_test(size=SIZE) as pilot:
        await _resume(app, pilot, 2000)
        await pilot.pause()
        transcript = app.screen.query_one(Transcript)
        assert rounds == [] and transcript.virtual_size.height >= 2 * transcript.size.height


def test_the_window_is_sized_by_the_messages_text() -> None:
    short = [Node("user", [Version("hi")]) for _ in range(300)]
    long = [Node("user", [Version("word " * 400)]) for _ in range(300)]
    assert window_for(short, 72, 120) > WINDOW > window_for(long, 72, 120) >= 2
    assert window_for(short, 72, 120) <= MOST and window_for(short, 0, 0) == WINDOW


async def test_scrolling_up_mounts_earlier_messages_until_the_first(make_app: Any, tmp_path: Path) -> None:
    app = make_app(ScriptedEngine())
    store_chat(app.library.path, _chat(40))
    async with app.run_test(size=SIZE) as pilot:
        await _resume(app, pilot, 80)
        transcript = app.screen.query_one(Transcript)
        before = _views(app)
        assert before < 80
        transcript.focus()
        for _ in range(80 // BATCH + 2):
            shown = _views(app)
            transcript.scroll_to(y=0, animate=False, immediate=True)
            if shown < 80:
                await wait_until(pilot, lambda shown=shown: _views(app) > shown)
                assert _views(app) <= shown + BATCH
            await pilot.pause()
        assert _views(app) == 80 and not transcript.query_children(EarlierMessages)
        transcript.scroll_to(y=0, animate=False, immediate=True)
        await pilot.pause()
        assert "q0" in screen_text(app)


async def test_the_cursor_reaches_replies_not_yet_mounted(make_app: Any, tmp_path: Path) -> None:
    app = make_app(ScriptedEngine(scoring=False))  # the questions stay text: down goes reply to reply
    store_chat(app.library.path, _chat(200))
    async with app.run_test(size=SIZE) as pilot:
        await _resume(app, pilot, 400)
        transcript = app.screen.query_one(Transcript)
        first_reply = app.controller.conversation.path()[1]
        assert transcript.view_of(first_reply) is None  # far above the mounted messages
        transcript.select_token(first_reply, 1)
        await wait_until(pilot, lambda: transcript.cursor == (first_reply, 1))
        # mounted from it down (and the first question too once the view sits at the top)
        assert transcript.view_of(first_reply) is not None and _views(app) >= 399
        transcript.focus()
        await pilot.press("down")  # the next reply, by its node
        await wait_until(pilot, lambda: transcript.cursor is not None
                         and transcript.cursor[0] is app.controller.conversation.path()[3])


def test_the_window_keeps_what_still_matches_and_restarts_when_a_chat_opens() -> None:
    path = [Node("user", [Version(str(n))]) for n in range(100)]
    opened = plan([], 0, 0, path)
    assert (opened.keep, opened.first, opened.mount_from) == (0, 100 - WINDOW, 100 - WINDOW)
    grown = plan(path, 100 - WINDOW, WINDOW, [*path, Node("user", [Version("new")])])
    assert (grown.keep, grown.first, grown.mount_from) == (WINDOW, 100 - WINDOW, 100)
    branched = plan(path, 90, 10, [*path[:95], Node("user", [Version("other")])])
    assert (branched.keep, branched.first, branched.mount_from) == (5, 90, 95)
    edited_above = plan(path, 90, 10, [Node("user", [Version("x")]), *path[1:]])
    assert (edited_above.keep, edited_above.first) == (0, 100 - WINDOW)
    emptied = plan(path, 90, 10, [])
    assert (emptied.keep, emptied.first, emptied.mount_from) == (0, 0, 0)


async def test_views_removed_in_the_tick_they_were_mounted_in_do_not_crash_the_app(make_app: Any) -> None:
    """A chat replaced while it opens: its views get Mount without their children (Textual), which
    crashed the app (NoMatches '#header') about once in four when a long chat was opened."""
    app = make_app(ScriptedEngine())
    async with app.run_test(size=SIZE) as pilot:
        await wait_idle(app, pilot)
        transcript = app.screen.query_one(Transcript)
        for _ in range(3):
            transcript.show(_chat(30))
            transcript.clear()
        transcript.show(_chat(3))
        await pilot.pause()
        await wait_until(pilot, lambda: "a2 end" in screen_text(app))
    assert app.return_code in (None, 0) and app._exception is None
