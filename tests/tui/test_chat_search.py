"""`/` searches the current chat, every branch (#30.6); n / N move between the matches."""

from __future__ import annotations

from conftest import AppFactory
from tui_helpers import SIZE, send, wait_idle, wait_until

from engine.core.chat.search import find
from engine.scripted import ScriptedEngine
from tui.app.screens.chat import ChatScreen
from tui.app.widgets.transcript import Transcript


async def _search(app, pilot, text: str) -> None:  # type: ignore[no-untyped-def]
    await pilot.press("slash")
    await wait_until(pilot, lambda: not isinstance(app.screen, ChatScreen))
    await pilot.press(*text, "enter")
    await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen))
    await pilot.pause()


async def test_slash_finds_text_in_a_branch_not_shown(make_app: AppFactory) -> None:
    """Before: no search; a word in another version of a reply could only be found by flipping."""
    app = make_app(ScriptedEngine([["Alpha", " one"], ["Beta", " two"]]))
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        await pilot.press("ctrl+r")
        await wait_idle(app, pilot)
        reply = app.controller.conversation.path()[-1]
        assert reply.version.reply_text() == "Beta two"
        await pilot.press("escape")
        await _search(app, pilot, "ALPHA")
        assert reply.active == 0 and reply.version.reply_text() == "Alpha one"  # that branch is shown
        transcript = app.screen.query_one(Transcript)
        assert transcript.cursor is not None and transcript.cursor[1] == 0 and app.focused is transcript
        await _search(app, pilot, "o")  # "one", "two" and the user's "hi"? no: "one", "two"
        matches = find(app.controller.conversation, "o")
        assert len(matches) == 2
        first = (reply.active, transcript.cursor)
        await pilot.press("n")
        await pilot.pause()
        assert (reply.active, transcript.cursor) != first and reply.version.reply_text() == "Beta two"
        await pilot.press("N")
        await pilot.pause()
        assert reply.active == first[0]


async def test_an_empty_search_gives_n_back_to_unlikely_tokens(make_app: AppFactory) -> None:
    app = make_app(ScriptedEngine([["Alpha", " one"]]))
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        await pilot.press("escape")
        await _search(app, pilot, "one")
        assert app.screen.query_one(Transcript).searching
        from tui.app.widgets.key_bar import KeyBar

        await wait_until(pilot, lambda: " n Match " in app.screen.query_one(KeyBar).render().plain)
        await pilot.press("escape", "slash")
        await wait_until(pilot, lambda: not isinstance(app.screen, ChatScreen))
        await pilot.press("ctrl+u", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen))
        assert not app.screen.query_one(Transcript).searching
        app.screen.query_one(Transcript).focus()
        await wait_until(pilot, lambda: " n Unlikely " in app.screen.query_one(KeyBar).render().plain)


async def test_a_match_in_the_users_scored_text_selects_its_token(make_app: AppFactory) -> None:
    """Before (#33.1): a match in the user's message only scrolled to it, though its tokens can
    now be inspected like a reply's."""
    app = make_app(ScriptedEngine([["Alpha", " one"]]))
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "the cat sat")
        user = app.controller.conversation.path()[0]
        from tui.app.widgets.user_view import UserView

        await wait_until(pilot, lambda: bool(app.screen.query_one(UserView).tokens))
        await pilot.press("escape")
        await _search(app, pilot, "sat")
        await wait_until(pilot, lambda: app.screen.query_one(Transcript).cursor == (user, 2))
