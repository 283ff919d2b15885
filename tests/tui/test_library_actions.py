"""Copy a token (y) or a message (Y) to the clipboard, and export the chat (palette) as Markdown
or as JSON that reads back whole."""

from __future__ import annotations

import json

from conftest import AppFactory
from tui_helpers import SIZE, palette_run, send, wait_until

from engine.core.settings import data_dir
from tui.app.library_actions import EXPORT_FOLDER
from engine.core.chat.fileformat import conversation_from_dict, conversation_to_dict


async def test_copy_the_selected_token_and_the_message(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "hi")
        reply = app.controller.conversation.path()[1].version
        await pilot.press("escape", "home", "right")
        await pilot.pause()
        await pilot.press("y")
        await wait_until(pilot, lambda: app.clipboard == reply.tokens[1].text)
        await pilot.press("Y")
        await wait_until(pilot, lambda: app.clipboard == reply.reply_text())


async def test_export_markdown_and_json(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "Tell me")
        await palette_run(pilot, "Export chat as Markdown")
        await palette_run(pilot, "Export chat as JSON")
        folder = data_dir() / EXPORT_FOLDER
        await wait_until(pilot, lambda: len(list(folder.glob("*"))) == 2)
        md = next(folder.glob("*.md")).read_text()
        assert md.startswith("# Tell me") and "## Assistant" in md
        data = json.loads(next(folder.glob("*.json")).read_text())
        assert data["title"] == "Tell me"
        live = conversation_to_dict(app.controller.conversation)
        assert conversation_to_dict(conversation_from_dict(data)) == live
