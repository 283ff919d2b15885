"""Helpers for the TUI tests: read the screen as text, wait for the scripted engine."""

from __future__ import annotations

import asyncio
from typing import Any

from textual.app import App

from engine.scripted import ScriptedEngine

SIZE = (120, 36)  # every headless test and snapshot uses this terminal size


def screen_text(app: App[Any]) -> str:
    """The whole screen as text, one line per row (what a user would read)."""
    strips = app.screen._compositor.render_strips()
    return "\n".join(strip.text.rstrip() for strip in strips)


async def wait_idle(app: Any, pilot: Any, timeout: float = 10.0) -> None:
    """Until the model is loaded and no reply is streaming (then let messages settle)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while (app.engine.model is None or app.controller.busy) and loop.time() < end:
        await asyncio.sleep(0.01)
    await pilot.pause()
    await pilot.pause()


async def wait_until(pilot: Any, check: Any, timeout: float = 10.0) -> None:
    """Until `check()` is true (a condition, not a fixed sleep: the suite may run on a busy CPU)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not check() and loop.time() < end:
        await pilot.pause(0.02)
    assert check(), "timed out waiting for the app"


async def start_reply(app: Any, pilot: Any, text: str = "hi") -> None:
    """Send `text` and return once the reply is streaming (its first token is in).

    A scripted reply is held after its first token until this has seen it, then let go: on a
    busy CPU a whole fast reply can end between two polls, and "streaming" would never be seen.
    """
    await wait_idle(app, pilot)
    engine = app.engine
    holds = isinstance(engine, ScriptedEngine) and engine.hold_after is None
    if holds:
        engine.hold_after = 1
    await pilot.press(*text, "enter")

    def streaming() -> bool:
        node = app.controller.conversation.path()
        return app.controller.busy and bool(node) and bool(node[-1].version.tokens)

    await wait_until(pilot, streaming)
    if holds:
        engine.release()


async def send(app: Any, pilot: Any, text: str) -> None:
    """Type `text` into the chat input, press Enter and wait for the whole reply."""
    await wait_idle(app, pilot)
    app.screen.query_one("ChatInput").focus()
    await pilot.press(*text, "enter")
    await wait_idle(app, pilot)


async def wait_scored(app: Any, pilot: Any) -> None:
    """Until the chat shown has been scored (#33.1: its perplexity in the headers), so a test that
    compares two pictures does not see the numbers arrive in between."""
    await wait_until(pilot, lambda: app.chat_screen.scope.scores.perplexity is not None)
    await pilot.pause()


async def palette_run(pilot: Any, query: str) -> None:
    """Open the command palette, type `query`, wait until a matching command is listed, run it."""
    from textual.command import CommandList, CommandPalette

    await pilot.press("ctrl+p")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, CommandPalette))
    await pilot.press(*query)

    def listed() -> bool:
        commands = pilot.app.screen.query(CommandList)
        if not commands:
            return False
        options = commands.first()
        return options.option_count > 0 and query.lower() in str(options.get_option_at_index(0).prompt).lower()

    await wait_until(pilot, listed)
    await pilot.press("enter")
    await pilot.pause()


async def chat_and_quit(make_app: Any) -> None:
    """One exchange with a scripted engine, then quit: the chat is in the library for "resume"."""
    app = make_app(ScriptedEngine())
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        await pilot.press("ctrl+q")
        await pilot.pause()


def store_chat(path: Any, conversation: Any) -> str:
    """Put `conversation` into the library at `path` (the one store of chats), as the app would
    have kept it; returns its id. The newest stored chat is what "resume" (Ctrl+L) opens."""
    from engine.core.chat.fileformat import conversation_to_dict
    from engine.core.library import Library

    library = Library(path)
    try:
        return library.save(conversation_to_dict(conversation))
    finally:
        library.close()


def stored_documents(path: Any) -> list[dict[str, Any]]:
    """Every chat in the library at `path`, newest first, as its format-2 document."""
    from engine.core.library import Library

    library = Library(path)
    try:
        return [library.load(entry.id).document for entry in library.entries()]
    finally:
        library.close()
